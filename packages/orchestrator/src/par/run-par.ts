import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { basename, extname, relative } from 'node:path';
import { promisify } from 'node:util';
import { createActor, fromPromise, toPromise, type InspectionEvent, type Observer } from 'xstate';
import { SpanStatusCode, context as otelContext, trace, type Context } from '@opentelemetry/api';
import {
  ParActionSchema,
  ParCheckpointSchema,
  ParCommandResultSchema,
  ParPlanSchema,
  PolishError,
  parReviewSchemaFor,
  type ParCheckpoint,
  type ParFinalStatus,
  type ParTaskFile,
  type PayloadOf,
  type PolicyDecision,
  type RunEvent,
  type TaskRole,
} from '@polish/protocol';
import { inWaveSpan, inspectable } from '../wave-actors.js';
import type { z } from 'zod';
import type { Dispatcher } from '../dispatcher.js';
import { evaluatePolicy } from './policy-engine.js';
import { canonicalJson } from './canonical-json.js';
import {
  coordPaths,
  readJsonFile,
  readTaskFile,
  readWorkspace,
  resolveRef,
  writeChanges,
  writeFileAtomic,
  writeTaskFile,
  ParInputError,
} from './coord-files.js';
import { renderFinalReport } from './final-report.js';
import {
  parMachine,
  pendingActionHash,
  pendingGates,
  type CritiqueInput,
  type CycleToRecord,
  type ParStep,
} from './par-machine.js';
import type { CritiqueAnswer } from './critique.js';

const run = promisify(execFile);

/** No-op unless an OpenTelemetry SDK is registered. */
const tracer = trace.getTracer('@polish/orchestrator');

/** How to run (or resume) one PAR task whose files are in a workspace. */
export interface ParRunOptions {
  workspace: string;
  topic: string;
  dispatcher: Dispatcher;
  /** AGENT_COLLAB_HUMAN_KEYS_JSON, parsed: key id → secret. Used only to verify signatures. */
  humanKeys?: Record<string, string>;
  /** Commit each cycle as `par(iter-N): <plan_summary>`. The workspace must be a git work tree. */
  git?: boolean;
  /** Aborting stops the run at once; the last persisted checkpoint stands and can be resumed. */
  signal?: AbortSignal;
  /** One line per step, for progress output. */
  onProgress?: (line: string) => void;
  inspect?: Observer<InspectionEvent> | ((event: InspectionEvent) => void);
  /** Identifies this run (or resume) in its events; default `par-<topic>-<uuid>`. */
  runId?: string;
  /** Called with every run event, in order (for `polish.v1.events.<runId>` and the inspector). */
  onEvent?: (event: RunEvent) => void;
}

type Report = (event: DistributiveOmit<RunEvent, 'runId' | 'at'>) => void;
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** Where a dispatch reports to: the run's events, the models seen, and the cycle it belongs to. */
interface DispatchContext {
  signal: AbortSignal;
  models: Set<string>;
  report: Report;
  cycle: () => number;
  /** The run's `polish.par` span: each dispatch's `polish.wave <role>` span is its child. */
  trace: Context;
}

/** How a PAR run ended, and where its files are. */
export interface ParRunResult {
  run_id: string;
  topic: string;
  final_status: ParFinalStatus;
  reason: string;
  decision: PolicyDecision | null;
  cycles: number;
  /** True when the run was interrupted (the checkpoint on disk is the last completed cycle's). */
  interrupted: boolean;
  pending_gates: string[];
  /** The models that answered in this run, e.g. `scripted:script.yaml (scripted)`. */
  models: string[];
  files: { task: string; checkpoint: string; final: string };
}

/** Bytes that crossed the wire for one task: its payload and its answer. */
const wireBytes = (payload: unknown, result: unknown) =>
  Buffer.byteLength(JSON.stringify(payload)) + Buffer.byteLength(JSON.stringify(result ?? null));

/** Sends a task (in its wave span) and validates its answer, re-sending once if the answer breaks the contract. */
function dispatchValidated<R extends TaskRole, T>(
  dispatcher: Dispatcher,
  role: R,
  payload: PayloadOf<R>,
  schema: z.ZodType<T>,
  context: DispatchContext,
  once?: { timeoutMs: number },
): Promise<ParStep<T>> {
  return inWaveSpan(role, context.cycle(), context.trace, () =>
    dispatchValidatedUntraced(dispatcher, role, payload, schema, context, once),
  );
}

async function dispatchValidatedUntraced<R extends TaskRole, T>(
  dispatcher: Dispatcher,
  role: R,
  payload: PayloadOf<R>,
  schema: z.ZodType<T>,
  context: DispatchContext,
  once?: { timeoutMs: number },
): Promise<ParStep<T>> {
  let problem = '';
  const started = Date.now();
  context.report({ type: 'wave.started', role, iteration: context.cycle(), ...inspectable('payload', payload) });
  // A command critique runs once, with its own timeout: re-running it is not the critique's call.
  const sends = once ? 1 : 2;
  for (let attempt = 1; attempt <= sends; attempt += 1) {
    const outcome = await dispatcher.dispatch(role, payload, {
      signal: context.signal,
      ...(once ? { timeoutMs: once.timeoutMs, maxAttempts: 1 } : {}),
    });
    if (outcome.model.provider !== 'none')
      context.models.add(`${outcome.model.model}${outcome.model.scripted ? ' (scripted, not an LLM)' : ''}`);
    const parsed = schema.safeParse(outcome.result);
    if (parsed.success) {
      context.report({
        type: 'wave.finished',
        role,
        iteration: context.cycle(),
        duration_ms: Date.now() - started,
        usage: outcome.usage,
        model: outcome.model,
        worker: outcome.worker,
        attempts: outcome.attempts + attempt - 1,
        ...inspectable('result', outcome.result),
      });
      return { value: parsed.data, bytes: wireBytes(payload, outcome.result) };
    }
    problem = parsed.error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`).join('; ');
  }
  throw new PolishError(
    'CONTRACT_VIOLATION',
    `${role} broke the contract (${sends} answer${sends === 1 ? '' : 's'}): ${problem}`,
  );
}

async function git(workspace: string, args: string[]): Promise<string> {
  const { stdout } = await run('git', ['-C', workspace, ...args]);
  return stdout.trim();
}

/** Checks before a `--git` run that the workspace is a work tree, so no cycle is left uncommitted. */
export async function checkGitWorkspace(workspace: string): Promise<void> {
  try {
    if ((await git(workspace, ['rev-parse', '--is-inside-work-tree'])) !== 'true') throw new Error('not a work tree');
  } catch {
    throw new ParInputError(`--git: ${workspace} is not a git work tree (run \`git init\` there, or drop --git)`);
  }
}

async function commit(workspace: string, message: string): Promise<void> {
  // Only the workspace: a workspace inside a larger repository never commits the rest of it.
  await git(workspace, ['add', '-A', '--', '.']);
  // An identity of our own only where none is configured, so a user's own stays theirs.
  const configured = await git(workspace, ['config', 'user.email']).catch(() => '');
  const identity = configured ? [] : ['-c', 'user.name=polish', '-c', 'user.email=polish@localhost'];
  await git(workspace, [...identity, 'commit', '--allow-empty', '--no-verify', '-q', '-m', message, '--', '.']);
}

/** A task file reference as a workspace path (what an agent's change would name), or '' when it is outside. */
function workspacePathOf(workspace: string, ref: string): string {
  const path = relative(workspace, resolveRef(workspace, ref)).split('\\').join('/');
  return path.startsWith('..') ? '' : path;
}

/** The status a stopped checkpoint records, from the policy's first reason. */
function stoppedStatus(checkpoint: ParCheckpoint, reasons: readonly string[]): ParCheckpoint['status'] {
  const first = reasons[0] ?? '';
  if (/^human_gate:.*:decline$/.test(first)) return 'declined';
  if (/^human_gate:.*:revise$/.test(first)) return 'blocked';
  if (first.startsWith('limit_')) return 'budget_exhausted';
  return checkpoint.status;
}

/** The task's files, loaded and checked. Throws `ParInputError` naming what is wrong. */
function loadTask(workspace: string, topic: string) {
  const paths = coordPaths(workspace, topic);
  if (!existsSync(paths.task))
    throw new ParInputError(`topic ${topic}: ${paths.task} does not exist (start it with \`polish par run\`)`);
  const task = readTaskFile(paths.task);
  if (task.topic !== topic)
    throw new ParInputError(`task file: ${paths.task} is for topic ${task.topic}, not ${topic}`);
  const policyPath = resolveRef(workspace, task.policy_ref);
  const checkpointPath = resolveRef(workspace, task.checkpoint_ref);
  return {
    paths: { ...paths, checkpoint: checkpointPath },
    task,
    policyName: basename(policyPath, extname(policyPath)),
    policy: readJsonFile(policyPath, 'policy'),
    checkpoint: readJsonFile(checkpointPath, 'checkpoint'),
  };
}

/**
 * Runs a PAR task from its `.coord/` files to a hand-back: PASS, checkpoint, stop, error or
 * needs-human. Each cycle is persisted (evidence, workspace changes, task file, then the
 * checkpoint) before the policy's decision is obeyed; the final report is written at the end.
 * Resuming is the same call: it continues from the checkpoint.
 */
export async function runPar(options: ParRunOptions): Promise<ParRunResult> {
  const runId = options.runId ?? `par-${options.topic}-${randomUUID()}`;
  // The run's trace: this span is the root (or a child of the caller's active span), each dispatch a child.
  return tracer.startActiveSpan(
    'polish.par',
    { attributes: { 'polish.run_id': runId, 'polish.topic': options.topic } },
    async (span) => {
      try {
        const result = await runParIn({ ...options, runId }, trace.setSpan(otelContext.active(), span));
        span.setAttributes({ 'polish.status': result.final_status, 'polish.cycles': result.cycles });
        if (result.final_status === 'error') span.setStatus({ code: SpanStatusCode.ERROR, message: 'error' });
        return result;
      } catch (error) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: PolishError.from(error).code });
        throw error;
      } finally {
        span.end();
      }
    },
  );
}

async function runParIn(options: ParRunOptions, traceContext: Context): Promise<ParRunResult> {
  const { workspace, topic } = options;
  const loaded = loadTask(workspace, topic);
  const { paths, policyName } = loaded;
  const humanKeys = options.humanKeys ?? {};
  const progress = options.onProgress ?? (() => undefined);
  const models = new Set<string>();
  const runId = options.runId ?? `par-${topic}-${randomUUID()}`;
  const report: Report = (event) => options.onEvent?.({ ...event, runId, at: Date.now() } as RunEvent);
  if (options.git) await checkGitWorkspace(workspace);

  const finish = (
    task: ParTaskFile,
    status: ParFinalStatus,
    reason: string,
    decision: PolicyDecision | null,
    checkpoint: ParCheckpoint | null,
    interrupted = false,
  ): ParRunResult => {
    const gates = checkpoint ? pendingGates(task, checkpoint) : [];
    const finalTask = { ...task, final_status: status };
    writeTaskFile(paths.task, finalTask);
    const pending = status === 'needs-human' ? gates : [];
    report({ type: 'par.finished', final_status: status, reason, cycles: task.cycles.length });
    writeFileAtomic(
      paths.final,
      renderFinalReport({
        workspace,
        task: finalTask,
        status,
        reason,
        decision,
        checkpoint,
        pendingGates: pending,
        models: [...models],
      }),
    );
    return {
      run_id: runId,
      topic,
      final_status: status,
      reason,
      decision,
      cycles: task.cycles.length,
      interrupted,
      pending_gates: pending,
      models: [...models],
      files: { task: paths.task, checkpoint: paths.checkpoint, final: paths.final },
    };
  };

  report({
    type: 'par.started',
    topic,
    goal: loaded.task.goal,
    acceptance_criteria: loaded.task.acceptance_criteria,
    critique_source: loaded.task.critique_source,
    cycles_before: loaded.task.cycles.length,
  });
  // Validate policy and checkpoint first: invalid input fails closed, and the checkpoint on disk is left as it is.
  const first = evaluatePolicy({ policy: loaded.policy, checkpoint: loaded.checkpoint, policyName, humanKeys });
  if (first.policy_hash === null) {
    progress(`par: policy: stop (${first.reasons.join('; ')})`);
    report({ type: 'par.decision', decision: first });
    return finish(loaded.task, 'stop', first.reasons.join('; '), first, null);
  }
  let checkpoint = ParCheckpointSchema.parse(loaded.checkpoint);
  const artifact = readWorkspace(workspace);
  // A run that waited for humans goes on once every gate has a signed decision; the policy weighs
  // them. The decisions are about the artifact as it was when the run asked: not another one.
  if (checkpoint.status === 'waiting_for_human') {
    const undecided = loaded.task.acceptance_criteria.filter(
      (criterion) => criterion.human_gate && !checkpoint.decisions.some((record) => record.gate === criterion.id),
    );
    if (undecided.length === 0) {
      if (checkpoint.pending_action_hash !== pendingActionHash(loaded.task, checkpoint, artifact)) {
        const reason =
          'the workspace changed after the run asked for a human decision: the decisions recorded do not cover it';
        progress(`par: ${reason}`);
        return finish(loaded.task, 'stop', reason, first, checkpoint);
      }
      checkpoint = { ...checkpoint, status: 'running' };
    }
  }
  // A run stopped at a limit is weighed again: a signed override may have raised it since.
  if (checkpoint.status === 'budget_exhausted') checkpoint = { ...checkpoint, status: 'running', stop_reason: null };

  // The agent's writes never reach the files that govern it.
  const protectedPaths = new Set([
    workspacePathOf(workspace, loaded.task.policy_ref),
    workspacePathOf(workspace, loaded.task.checkpoint_ref),
  ]);
  const controller = new AbortController();
  const onAbort = () => controller.abort(options.signal?.reason);
  options.signal?.addEventListener('abort', onAbort, { once: true });
  const decide = (candidate: ParCheckpoint) =>
    evaluatePolicy({ policy: loaded.policy, checkpoint: candidate, policyName, humanKeys });
  const dispatchContext: DispatchContext = {
    signal: controller.signal,
    models,
    report,
    cycle: () => checkpoint.cycle + 1,
    trace: traceContext,
  };

  const machine = parMachine.provide({
    actors: {
      decide: fromPromise<PolicyDecision, ParCheckpoint>(async ({ input }) => {
        const decision = decide(input);
        progress(
          `par: policy: ${decision.decision}${decision.reasons.length > 0 ? ` (${decision.reasons.join('; ')})` : ''}`,
        );
        report({ type: 'par.decision', decision });
        return decision;
      }),
      plan: fromPromise(async ({ input }) => {
        progress(`par: cycle ${checkpoint.cycle + 1}: planning`);
        const step = await dispatchValidated(options.dispatcher, 'par.plan', input, ParPlanSchema, dispatchContext);
        progress(`par: plan: ${step.value.plan_summary}`);
        return step;
      }),
      act: fromPromise(async ({ input }) => {
        const step = await dispatchValidated(options.dispatcher, 'par.act', input, ParActionSchema, dispatchContext);
        const forbidden = step.value.changes
          .filter((change) => protectedPaths.has(change.path))
          .map((change) => change.path);
        if (forbidden.length > 0)
          throw new PolishError(
            'CONTRACT_VIOLATION',
            `the agent may not write the policy or the checkpoint (${forbidden.join(', ')})`,
          );
        progress(
          `par: act: ${step.value.changes.length} file${step.value.changes.length === 1 ? '' : 's'} written${step.value.changes.length > 0 ? ` (${step.value.changes.map((change) => change.path).join(', ')})` : ''}`,
        );
        return step;
      }),
      critique: fromPromise<ParStep<CritiqueAnswer> & { toolCalls: number }, CritiqueInput>(async ({ input }) => {
        const source = input.task.critique_source;
        if (source.kind === 'self')
          return { value: { kind: 'self', result: input.action.self_assessment }, bytes: 0, toolCalls: 0 };
        if (source.kind === 'review') {
          const criteria = input.task.acceptance_criteria.filter((criterion) => !criterion.human_gate);
          const step = await dispatchValidated(
            options.dispatcher,
            'par.review',
            { artifact: input.artifact, acceptance_criteria: criteria },
            parReviewSchemaFor(criteria),
            dispatchContext,
          );
          progress(
            `par: review: ${step.value.results.filter((result) => result.passed).length}/${step.value.results.length} criteria pass`,
          );
          return { value: { kind: 'review', result: step.value }, bytes: step.bytes, toolCalls: 1 };
        }
        const payload = {
          artifact: input.artifact,
          command: source.command,
          timeout_ms: Math.round(source.timeout_seconds * 1000),
        };
        // The worker kills the command at its timeout; the margin covers writing the files and replying.
        const step = await dispatchValidated(
          options.dispatcher,
          'par.command',
          payload,
          ParCommandResultSchema,
          dispatchContext,
          { timeoutMs: payload.timeout_ms + 30_000 },
        );
        progress(
          `par: ${source.kind} critique: \`${source.command}\` ${step.value.timed_out ? 'timed out' : `exit ${step.value.exit_code}`}`,
        );
        return { value: { kind: source.kind, result: step.value }, bytes: step.bytes, toolCalls: 1 };
      }),
      record: fromPromise<void, CycleToRecord>(async ({ input }) => {
        // Evidence and workspace first, the checkpoint last: the checkpoint never names what is not on disk.
        for (const document of input.evidence) writeFileAtomic(resolveRef(workspace, document.ref), document.content);
        writeChanges(workspace, input.changes);
        writeTaskFile(paths.task, input.task);
        writeFileAtomic(paths.checkpoint, `${JSON.stringify(input.checkpoint, null, 2)}\n`);
        checkpoint = input.checkpoint;
        report({ type: 'par.cycle', record: input.record, checkpoint_status: input.checkpoint.status });
        progress(`par: cycle ${input.record.cycle}: ${input.record.verdict}; next: ${input.record.next_action}`);
        if (options.git) await commit(workspace, `par(iter-${input.record.cycle}): ${input.record.plan_summary}`);
      }),
    },
  });

  const actor = createActor(machine, {
    input: { task: loaded.task, checkpoint, artifact },
    ...(options.inspect ? { inspect: options.inspect } : {}),
  });
  let lastState = '';
  actor.subscribe((snapshot) => {
    const state = String(snapshot.value);
    if (state !== lastState) report({ type: 'state.entered', state });
    lastState = state;
  });
  const cancel = () =>
    actor.send({ type: 'CANCEL', reason: `interrupted (${String(controller.signal.reason ?? 'aborted')})` });
  controller.signal.addEventListener('abort', cancel, { once: true });
  actor.start();
  if (options.signal?.aborted) onAbort();
  await toPromise(actor);
  options.signal?.removeEventListener('abort', onAbort);
  const snapshot = actor.getSnapshot();
  const { task, decision, final } = snapshot.context;
  let finalCheckpoint = snapshot.context.checkpoint;
  const status = final?.status ?? 'error';
  const reason = final?.reason ?? 'the run ended without a status';

  if (snapshot.value === 'cancelled')
    return finish(task, 'checkpoint', `${reason}: resume from the last checkpoint`, decision, finalCheckpoint, true);
  if (snapshot.value === 'failed' || (snapshot.value === 'stopped' && decision?.policy_hash === null)) {
    // Nothing trustworthy to write into the checkpoint: leave it as it is.
    return finish(task, status, reason, decision, finalCheckpoint);
  }
  // A later decision may concern the next action: name it, unless signed records already concern another.
  const withPending = (candidate: ParCheckpoint): ParCheckpoint =>
    candidate.decisions.length + candidate.overrides.length > 0
      ? candidate
      : { ...candidate, pending_action_hash: pendingActionHash(task, candidate, snapshot.context.artifact) };
  let lastDecision = decision;
  if (snapshot.value === 'passed') {
    finalCheckpoint = { ...finalCheckpoint, status: 'completed', stop_reason: null };
    lastDecision = decide(finalCheckpoint);
  } else if (snapshot.value === 'stopped') {
    finalCheckpoint = withPending({
      ...finalCheckpoint,
      status: stoppedStatus(finalCheckpoint, decision?.reasons ?? []),
      stop_reason: decision?.reasons[0] ?? 'stopped by the policy',
    });
  } else if (snapshot.value === 'handedBack') {
    finalCheckpoint = withPending({
      ...finalCheckpoint,
      last_checkpoint_transcript_bytes: finalCheckpoint.transcript_bytes,
      stop_reason: null,
    });
  }
  finalCheckpoint = { ...finalCheckpoint, updated_at: new Date().toISOString() };
  writeFileAtomic(paths.checkpoint, `${JSON.stringify(finalCheckpoint, null, 2)}\n`);
  const result = finish(task, status, reason, lastDecision, finalCheckpoint);
  if (options.git) await commit(workspace, `par(final): ${status}: ${reason}`.slice(0, 200));
  return result;
}

/** Canonical JSON of a value: exported for callers that hash records the way the policy engine does. */
export { canonicalJson };
