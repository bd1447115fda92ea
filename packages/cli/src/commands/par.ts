import { resolve } from 'node:path';
import { statSync } from 'node:fs';
import {
  DEFAULT_CHECKPOINT_REF,
  newParRunId,
  checkGitWorkspace,
  coordPaths,
  createParTask,
  PolicyFailedClosed,
  humanKeysFrom,
  readTaskFile,
  recordHumanDecision,
  runPar,
  type ParRunResult,
} from '@polish/orchestrator';
import { invalidInput, type CritiqueSourceSpec, type ParTaskFileInput, type TaskRole } from '@polish/protocol';
import { PAR_EXIT } from '../exit-codes.js';
import { commandSettingsOf } from './worker.js';
import { planSandbox } from '@polish/agents';
import { describeModels, resolveModels, resolvePrices, type ModelFlags } from '../models.js';
import { openRuntime } from '../runtime.js';
import { readTopology, type TopologyFlags } from './run.js';
import { abortOnInterrupt } from '../interrupts.js';
import { inspectModeOf, observeRun, type InspectFlags } from '../inspection.js';

const log = (line: string) => process.stderr.write(`${line}\n`);

/** Flags shared by `par run` and `par resume`. */
export interface ParCommonFlags extends ModelFlags, TopologyFlags, InspectFlags {
  allowUnsandboxed?: boolean;
  commandEnv?: string;
  topic?: string;
  workspace?: string;
  git?: boolean;
  json?: boolean;
}

/** Flags of `polish par run`. */
export interface ParRunFlags extends ParCommonFlags {
  goal?: string;
  acceptance?: string[];
  humanGate?: string[];
  critique?: string;
  command?: string;
  threshold?: string;
  critiqueTimeout?: string;
  policy?: string;
  checkpoint?: string;
  keyId?: string;
}

function workspaceOf(flags: ParCommonFlags): string {
  const workspace = resolve(flags.workspace ?? '.');
  let isDirectory = false;
  try {
    isDirectory = statSync(workspace).isDirectory();
  } catch {
    // Reported below.
  }
  if (!isDirectory) throw invalidInput('workspace', `${workspace} is not a folder`);
  return workspace;
}

function topicOf(flags: ParCommonFlags): string {
  if (!flags.topic) throw invalidInput('topic', 'required: --topic name (lower-case letters, digits, - and _)');
  if (!/^[a-z0-9][a-z0-9_-]{0,63}$/.test(flags.topic))
    throw invalidInput('topic', `"${flags.topic}" is not a topic: lower-case letters, digits, - and _ (at most 64)`);
  return flags.topic;
}

function critiqueOf(flags: ParRunFlags): CritiqueSourceSpec {
  const timeout = flags.critiqueTimeout === undefined ? 300 : Number(flags.critiqueTimeout);
  if (!Number.isFinite(timeout) || timeout <= 0 || timeout > 3600)
    throw invalidInput('critique-timeout', `must be seconds from 0 to 3600, got "${flags.critiqueTimeout}"`);
  switch (flags.critique) {
    case 'command':
      if (!flags.command)
        throw invalidInput(
          'command',
          'required with --critique command: the shell command that checks the artifact (e.g. "npm test")',
        );
      return { kind: 'command', command: flags.command, timeout_seconds: timeout };
    case 'score': {
      if (!flags.command)
        throw invalidInput('command', 'required with --critique score: a command that prints a number');
      const threshold = Number(flags.threshold);
      if (flags.threshold === undefined || !Number.isFinite(threshold))
        throw invalidInput('threshold', 'required with --critique score: the lowest passing score');
      return { kind: 'score', command: flags.command, threshold, timeout_seconds: timeout };
    }
    case 'review':
    case 'self':
      return { kind: flags.critique };
    default:
      throw invalidInput(
        'critique',
        `required: command, review, score or self (got ${flags.critique === undefined ? 'nothing' : `"${flags.critique}"`})`,
      );
  }
}

/** The task file `par run` writes from its flags, or null when the flags name none (a hand-written file is used). */
function taskInputOf(flags: ParRunFlags, topic: string): ParTaskFileInput | null {
  if (!flags.goal && !flags.acceptance && !flags.critique && !flags.policy) return null;
  if (!flags.goal) throw invalidInput('goal', 'required: --goal "what the task must achieve"');
  if (!flags.acceptance?.length) throw invalidInput('acceptance', 'required: at least one --acceptance "criterion"');
  if (!flags.policy) throw invalidInput('policy', 'required: --policy file.json (agent-policy-1 or -2)');
  return {
    schema_version: 2,
    topic,
    goal: flags.goal,
    policy_ref: flags.policy,
    checkpoint_ref: flags.checkpoint ?? DEFAULT_CHECKPOINT_REF,
    acceptance_criteria: [
      ...flags.acceptance.map((text, index) => ({ id: `A${index + 1}`, text })),
      ...(flags.humanGate ?? []).map((text, index) => ({ id: `H${index + 1}`, text, human_gate: true })),
    ],
    critique_source: critiqueOf(flags),
    cycles: [],
    final_status: null,
  };
}

/** The roles a task needs workers for: the agent, and its critique source's role. */
function rolesFor(critique: CritiqueSourceSpec): TaskRole[] {
  const critiqueRole: TaskRole[] =
    critique.kind === 'review' ? ['par.review'] : critique.kind === 'self' ? [] : ['par.command'];
  return ['par.plan', 'par.act', ...critiqueRole];
}

/** Runs (or resumes) a topic over NATS and reports how it ended. */
async function execute(workspace: string, topic: string, flags: ParCommonFlags): Promise<number> {
  const task = readTaskFile(coordPaths(workspace, topic).task);
  const humanKeys = humanKeysFrom();
  if (flags.git) await checkGitWorkspace(workspace);
  const roles = rolesFor(task.critique_source);
  const topology = readTopology(flags);
  const command = commandSettingsOf(flags);
  // Embedded: this machine runs the critique commands, and refuses to run them unsandboxed unless told.
  if (
    !topology.natsUrl &&
    roles.includes('par.command') &&
    !command.allowUnsandboxed &&
    planSandbox().kind === 'none'
  ) {
    throw invalidInput(
      'critique',
      'critique commands run code the model wrote, and this machine cannot sandbox them (no user and PID namespaces: ' +
        'install util-linux, or allow unprivileged user namespaces); pass --allow-unsandboxed to run them anyway',
    );
  }
  const models = topology.natsUrl ? undefined : resolveModels(flags, process.env, roles);
  const prices = models?.prices ?? resolvePrices(flags);
  if (models) for (const line of describeModels(models.byRole)) log(`polish: model for ${line}`);
  const mode = inspectModeOf(flags);
  const interrupt = abortOnInterrupt();
  let result: ParRunResult;
  try {
    const runtime = await openRuntime({ ...topology, roles, command, ...(models ? { models: models.byRole } : {}) });
    try {
      const runId = newParRunId(topic);
      const observed = await observeRun(runtime, runId, mode, flags, interrupt.signal);
      result = await runPar({
        workspace,
        topic,
        runId,
        dispatcher: runtime.dispatcher,
        humanKeys,
        prices,
        signal: interrupt.signal,
        onProgress: log,
        onEvent: observed.onEvent,
        inspect: observed.inspect,
        ...(flags.git ? { git: true } : {}),
      });
      report(result, flags);
      interrupt.dispose();
      await observed.finish();
    } finally {
      await runtime.close({ abandon: interrupt.signal.aborted });
    }
  } finally {
    interrupt.dispose();
  }
  return PAR_EXIT[result.final_status];
}

/** Prints how a PAR run ended and what to do next. */
function report(result: ParRunResult, flags: ParCommonFlags): void {
  const topic = result.topic;
  if (flags.json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  log(
    `polish: par ${topic}: ${result.final_status.toUpperCase()} after ${result.cycles} cycle${result.cycles === 1 ? '' : 's'}: ${result.reason}`,
  );
  if (result.final_status === 'needs-human') {
    for (const gate of result.pending_gates)
      log(
        `polish: waiting for a human decision: polish par decide --topic ${topic} --gate ${gate} --approve|--decline|--revise --key-id <key> --rationale "…"`,
      );
  }
  if (result.final_status === 'checkpoint') log(`polish: continue with: polish par resume --topic ${topic}`);
  log(`polish: report: ${result.files.final}`);
}

/** `polish par run --topic T …`: writes the task's files, then runs it. */
export async function parRunCommand(flags: ParRunFlags): Promise<number> {
  const workspace = workspaceOf(flags);
  const topic = topicOf(flags);
  const input = taskInputOf(flags, topic);
  try {
    createParTask(workspace, input, topic, new Date(), {
      secrets: humanKeysFrom(),
      ...(flags.keyId ? { keyId: flags.keyId } : {}),
    });
  } catch (error) {
    if (!(error instanceof PolicyFailedClosed)) throw error;
    // The policy engine's answer to an invalid policy is `stop`: exit 4, as for any run it stops.
    if (flags.json)
      process.stdout.write(
        `${JSON.stringify({ topic, final_status: 'stop', reason: error.message, decision: error.decision, cycles: 0 }, null, 2)}\n`,
      );
    log(`polish: par ${topic}: STOP before any cycle (nothing written): ${error.message}`);
    return PAR_EXIT.stop;
  }
  return execute(workspace, topic, flags);
}

/** `polish par resume --topic T`: continues from the checkpoint. */
export function parResumeCommand(flags: ParCommonFlags): Promise<number> {
  return execute(workspaceOf(flags), topicOf(flags), flags);
}

/** Flags of `polish par decide`. */
export interface ParDecideFlags {
  topic?: string;
  workspace?: string;
  gate?: string;
  approve?: boolean;
  decline?: boolean;
  revise?: boolean;
  keyId?: string;
  rationale?: string;
}

/** `polish par decide`: signs a human decision on a gate into the checkpoint. */
export function parDecideCommand(flags: ParDecideFlags): number {
  const workspace = workspaceOf(flags);
  const topic = topicOf(flags);
  const chosen = (['approve', 'decline', 'revise'] as const).filter((decision) => flags[decision]);
  if (chosen.length !== 1) throw invalidInput('decision', 'pass exactly one of --approve, --decline, --revise');
  if (!flags.gate) throw invalidInput('gate', 'required: --gate <criterion id>');
  if (!flags.keyId)
    throw invalidInput('key-id', 'required: --key-id <id> (its secret is read from AGENT_COLLAB_HUMAN_KEYS_JSON)');
  if (!flags.rationale?.trim()) throw invalidInput('rationale', 'required: --rationale "why"');
  const record = recordHumanDecision(
    workspace,
    topic,
    { gate: flags.gate, decision: chosen[0] as 'approve', keyId: flags.keyId, rationale: flags.rationale },
    humanKeysFrom(),
    new Date(),
  );
  log(
    `polish: recorded ${record.decision} of gate ${record.gate} by ${record.actor}; continue with: polish par resume --topic ${topic}`,
  );
  return 0;
}
