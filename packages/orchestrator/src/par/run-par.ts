import { randomUUID } from 'node:crypto';
import { relative } from 'node:path';
import { createActor, toPromise, type InspectionEvent, type Observer } from 'xstate';
import { SpanStatusCode, context as otelContext, trace, type Context } from '@opentelemetry/api';
import {
  PolishError,
  type AnyPolicyDecision,
  type ParCheckpoint,
  type ParFinalStatus,
  type ParTaskFile,
  type PriceTable,
  type RunEvent,
} from '@polish/protocol';
import type { Dispatcher } from '../dispatch/dispatcher.js';
import type { UnstampedEvent } from '../dispatch/validated-dispatch.js';
import { writeFileAtomic } from '../write-file-atomic.js';
import { evaluatePolicy } from './evaluate-policy.js';
import { resolveRef, writeTaskFile } from './coord-files.js';
import { renderFinalReport } from './final-report.js';
import { parMachine, pendingGates } from './par-machine.js';
import { createParActors } from './par-actors.js';
import { checkGitWorkspace, commitWorkspace } from './git-workspace.js';
import { pendingActionHash } from './task-spec.js';
import { advanceCheckpoint } from './goal-slices.js';
import { documentOf, parStateOf, type GoalEnvelope, type ParState } from './par-state.js';
import { loadTask, prepareRun } from './par-start.js';

/** No-op unless an OpenTelemetry SDK is registered. */
const tracer = trace.getTracer('@polish/orchestrator');

/** A PAR run's id: `par-<topic>-<uuid>`, so events and the inspector name the topic. */
export const newParRunId = (topic: string) => `par-${topic}-${randomUUID()}`;

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
  /** Identifies this run (or resume) in its events; default `newParRunId(topic)`. */
  runId?: string;
  /** Called with every run event, in order (for `polish.v1.events.<runId>` and the inspector). */
  onEvent?: (event: RunEvent) => void;
  /** Re-sends of a task whose answer breaks the contract, as in the polish loop. Default 1. */
  maxContractRedispatch?: number;
  /** Prices (US dollars per million tokens) for each call's cost; without them cost is unknown (null). */
  prices?: PriceTable;
}

/** How a PAR run ended, and where its files are. */
export interface ParRunResult {
  run_id: string;
  topic: string;
  final_status: ParFinalStatus;
  reason: string;
  decision: AnyPolicyDecision | null;
  cycles: number;
  /** True when the run was interrupted (the checkpoint on disk is the last completed cycle's). */
  interrupted: boolean;
  pending_gates: string[];
  /** The models that answered in this run, e.g. `scripted:script.yaml (scripted)`. */
  models: string[];
  files: { task: string; checkpoint: string; final: string };
}

/** A task file reference as a workspace path (what an agent's change would name), or '' when it is outside. */
function workspacePathOf(workspace: string, ref: string): string {
  const path = relative(workspace, resolveRef(workspace, ref)).split('\\').join('/');
  return path.startsWith('..') ? '' : path;
}

/** The status a stopped checkpoint records, from the policy's first reason (or the spawn refusal). */
function stoppedStatus(checkpoint: ParCheckpoint, reasons: readonly string[]): ParCheckpoint['status'] {
  const first = reasons[0] ?? '';
  if (/^human_gate:.*:decline$/.test(first)) return 'declined';
  if (/^human_gate:.*:revise$/.test(first)) return 'blocked';
  if (/^(limit_|goal_limit:|spawn_not_allowed:)/.test(first)) return 'budget_exhausted';
  return checkpoint.status;
}

/**
 * Runs a PAR task from its `.coord/` files to a hand-back: PASS, checkpoint, stop, error or
 * needs-human. Each cycle is persisted (evidence, workspace changes, task file, then the
 * checkpoint) before the policy's decision is obeyed; the final report is written at the end.
 * Resuming is the same call: it continues from the checkpoint.
 */
export async function runPar(options: ParRunOptions): Promise<ParRunResult> {
  const runId = options.runId ?? newParRunId(options.topic);
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

async function runParIn(options: ParRunOptions & { runId: string }, traceContext: Context): Promise<ParRunResult> {
  const { workspace, topic } = options;
  const loaded = loadTask(workspace, topic);
  const { paths, policyName } = loaded;
  const humanKeys = options.humanKeys ?? {};
  const progress = options.onProgress ?? (() => undefined);
  const models = new Set<string>();
  const { runId } = options;
  const report = (event: UnstampedEvent) => options.onEvent?.({ ...event, runId, at: Date.now() } as RunEvent);
  if (options.git) await checkGitWorkspace(workspace);

  const finish = (
    task: ParTaskFile,
    status: ParFinalStatus,
    reason: string,
    decision: AnyPolicyDecision | null,
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
  // Policy, checkpoint, task spec and signed decisions first: anything invalid fails closed, and the
  // checkpoint on disk is left as it is.
  const prepared = prepareRun(workspace, loaded, humanKeys);
  if (!prepared.ready) {
    progress(`par: policy: stop (${prepared.reason})`);
    report({ type: 'par.decision', decision: prepared.decision });
    return finish(loaded.task, 'stop', prepared.reason, prepared.decision, null);
  }
  if (prepared.note) progress(`par: ${prepared.note}`);
  if (prepared.lessons.length > 0)
    progress(
      `par: ${prepared.lessons.length} approved lesson(s) for the planner: ${prepared.lessons.map((lesson) => lesson.id).join(', ')}`,
    );
  let state: ParState = prepared.state;
  const { artifact } = prepared;

  // The agent's writes never reach the files that govern it.
  const protectedPaths = new Set([
    workspacePathOf(workspace, loaded.task.policy_ref),
    workspacePathOf(workspace, loaded.task.checkpoint_ref),
  ]);
  const controller = new AbortController();
  const onAbort = () => controller.abort(options.signal?.reason);
  options.signal?.addEventListener('abort', onAbort, { once: true });
  const decide = (candidate: ParState) =>
    evaluatePolicy({ policy: loaded.policy, checkpoint: documentOf(candidate), policyName, humanKeys });
  // One request id per slice: advancing again after a restart changes nothing.
  const advance = (candidate: ParState) =>
    parStateOf(
      advanceCheckpoint(
        documentOf(candidate),
        loaded.policy,
        `par-${topic}-slice-${candidate.goal?.slice_id ?? 0}`,
        humanKeys,
      ),
    );
  const machine = parMachine.provide({
    actors: createParActors({
      dispatcher: options.dispatcher,
      workspace,
      paths,
      protectedPaths,
      decide,
      advance,
      secrets: Object.values(humanKeys),
      cycle: () => (state.goal?.baseline.cycle ?? 0) + state.checkpoint.cycle + 1,
      recorded: (recorded) => (state = recorded),
      answeredBy: (model) => models.add(model),
      signal: controller.signal,
      report,
      progress,
      traceContext,
      ...(options.prices ? { prices: options.prices } : {}),
      ...(options.maxContractRedispatch === undefined ? {} : { maxContractRedispatch: options.maxContractRedispatch }),
      ...(options.git ? { git: true } : {}),
    }),
  });

  const actor = createActor(machine, {
    input: { task: loaded.task, ...state, artifact, lessons: prepared.lessons },
    ...(options.inspect ? { inspect: options.inspect } : {}),
  });
  let lastState = '';
  actor.subscribe((snapshot) => {
    const value = String(snapshot.value);
    if (value !== lastState) report({ type: 'state.entered', state: value });
    lastState = value;
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
  let finalGoal: GoalEnvelope | null = snapshot.context.goal;
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
    if (finalGoal) finalGoal = { ...finalGoal, next_step: '', requires_human: false };
    lastDecision = decide({ checkpoint: finalCheckpoint, goal: finalGoal });
  } else if (snapshot.value === 'stopped' || snapshot.value === 'spawnRefused') {
    const reasons = snapshot.value === 'spawnRefused' ? [reason] : (decision?.reasons ?? []);
    finalCheckpoint = withPending({
      ...finalCheckpoint,
      status: stoppedStatus(finalCheckpoint, reasons),
      stop_reason: reasons[0] ?? 'stopped by the policy',
    });
  } else if (snapshot.value === 'handedBack') {
    finalCheckpoint = withPending({
      ...finalCheckpoint,
      last_checkpoint_transcript_bytes: finalCheckpoint.transcript_bytes,
      stop_reason: null,
    });
  }
  finalCheckpoint = { ...finalCheckpoint, updated_at: new Date().toISOString() };
  writeFileAtomic(
    paths.checkpoint,
    `${JSON.stringify(documentOf({ checkpoint: finalCheckpoint, goal: finalGoal }), null, 2)}\n`,
  );
  const result = finish(task, status, reason, lastDecision, finalCheckpoint);
  if (options.git) await commitWorkspace(workspace, `par(final): ${status}: ${reason}`.slice(0, 200));
  return result;
}
