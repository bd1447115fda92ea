import {
  PolishError,
  type CycleMemory,
  type GoalCheckpointInput,
  type ParAction,
  type ParCheckpoint,
  type ParCycleMetrics,
  type ParCycleRecord,
  type ParFiles,
  type ParLesson,
  type ParPlan,
  type ParRoleUsage,
  type ParTaskFile,
} from '@polish/protocol';
import { sha256 } from '../hash.js';
import { artifactDigest, type CritiqueJudgement, type EvidenceDocument } from './critique.js';
import { classifyCycle } from './classify-cycle.js';
import { pendingActionHash } from './task-spec.js';
import { addRoleUsage, cycleUsage, documentOf, parStateOf, withUsage, type GoalEnvelope } from './par-state.js';
import { recordFailure } from './goal-failures.js';
import { canonicalJson } from './canonical-json.js';

// A cycle in progress, what each step adds to it, and how it is classified into the record and
// checkpoint to persist (pure given the clock). What the cycle used is measured here: usage per
// role, dispatched tasks, child tasks, time, bytes, and the sizes of what the agent was given.

/** An agent's (or a child's) answer and what it cost. */
export interface ParStep<T> {
  value: T;
  /** Bytes that crossed the wire: payload and answer. */
  bytes: number;
  /** Bytes of the payload alone: the task packet. */
  packetBytes: number;
  role: string;
  /** Model usage of the call (cost null when no price is known). */
  usage: Omit<ParRoleUsage, 'calls'>;
  /** Whether it was a child task (a reviewer or a command critique). */
  child: boolean;
}

/** The cycle being run. */
export interface CycleInProgress {
  started: number;
  plan: ParPlan | null;
  action: ParAction | null;
  judgement: CritiqueJudgement | null;
  bytes: number;
  toolCalls: number;
  children: number;
  largestPacket: number;
  byRole: Record<string, ParRoleUsage>;
  error: string | null;
}

/** A finished cycle, handed to the `record` actor to persist before anything else happens. */
export interface CycleToRecord {
  record: ParCycleRecord;
  checkpoint: ParCheckpoint;
  goal: GoalEnvelope | null;
  task: ParTaskFile;
  artifact: ParFiles;
  changes: ParAction['changes'];
  evidence: EvidenceDocument[];
}

/** What classifying a cycle needs to know of the run. */
export interface CycleContext {
  task: ParTaskFile;
  checkpoint: ParCheckpoint;
  goal: GoalEnvelope | null;
  artifact: ParFiles;
  lessons: ParLesson[];
  cycle: CycleInProgress | null;
}

export const newCycle = (now: number): CycleInProgress => ({
  started: now,
  plan: null,
  action: null,
  judgement: null,
  bytes: 0,
  toolCalls: 0,
  children: 0,
  largestPacket: 0,
  byRole: {},
  error: null,
});

/** The cycle after one of its steps answered: the answer kept, its bytes, calls, children and usage counted. */
export const afterStep = (
  cycle: CycleInProgress | null,
  answer: Partial<Pick<CycleInProgress, 'plan' | 'action' | 'judgement'>>,
  step: Omit<ParStep<unknown>, 'value'> | null,
): CycleInProgress | null =>
  cycle && {
    ...cycle,
    ...answer,
    ...(step
      ? {
          bytes: cycle.bytes + step.bytes,
          toolCalls: cycle.toolCalls + 1,
          children: cycle.children + (step.child ? 1 : 0),
          largestPacket: Math.max(cycle.largestPacket, step.packetBytes),
          byRole: { ...cycle.byRole, [step.role]: addRoleUsage(cycle.byRole[step.role], step.usage) },
        }
      : {}),
  };

/** A step that failed after its task was sent: what it used was paid for, and is counted. */
export class FailedStep extends Error {
  constructor(
    readonly failure: unknown,
    readonly step: Omit<ParStep<unknown>, 'value'>,
  ) {
    super(PolishError.from(failure).message);
  }
}

/** The cycle after one of its steps failed: an error naming the step; what the failed call used still counts. */
export function afterFailure(cycle: CycleInProgress | null, name: string, error: unknown): CycleInProgress | null {
  const counted = error instanceof FailedStep ? afterStep(cycle, {}, error.step) : cycle;
  const failure = error instanceof FailedStep ? error.failure : error;
  return counted && { ...counted, error: `${name}: ${PolishError.from(failure).message}` };
}

/** The agent's memory of its own earlier cycles: plan summaries and critique results. */
export const historyOf = (task: ParTaskFile): CycleMemory[] =>
  task.cycles.map((cycle) => ({
    cycle: cycle.cycle,
    plan_summary: cycle.plan_summary,
    verdict: cycle.verdict,
    critique: cycle.critique,
  }));

/** The human gates whose latest signed decision is not yet an approval. */
export function pendingGates(task: ParTaskFile, checkpoint: ParCheckpoint): string[] {
  const latest = new Map<string, { at: number; decision: string }>();
  for (const decision of checkpoint.decisions) {
    const at = Date.parse(decision.timestamp);
    const known = latest.get(decision.gate);
    if (!known || at > known.at) latest.set(decision.gate, { at, decision: decision.decision });
  }
  return task.acceptance_criteria
    .filter((criterion) => criterion.human_gate && latest.get(criterion.id)?.decision !== 'approve')
    .map((criterion) => criterion.id);
}

/** The artifact after an action's whole-file writes. */
export const applyChanges = (artifact: ParFiles, changes: ParAction['changes']): ParFiles => ({
  ...artifact,
  ...Object.fromEntries(changes.map((change) => [change.path, change.content])),
});

const round3 = (seconds: number) => Math.round(seconds * 1000) / 1000;
/** Tokens of a text, estimated as ⌈UTF-8 bytes / 4⌉ (the same for every model; no tokenizer). */
export const estimatedTokens = (text: string) => Math.ceil(Buffer.byteLength(text) / 4);
const words = (text: string) => text.split(/\s+/).filter(Boolean).length;

/** What the cycle used, measured. */
function metricsOf(context: CycleContext, cycle: CycleInProgress, now: number): ParCycleMetrics {
  return {
    by_role: cycle.byRole,
    tool_calls: cycle.toolCalls,
    children_spawned: cycle.children,
    elapsed_seconds: round3((now - cycle.started) / 1000),
    transcript_bytes: cycle.bytes,
    task_packet_tokens: Math.ceil(cycle.largestPacket / 4),
    parent_summary_tokens: estimatedTokens(JSON.stringify(historyOf(context.task))),
    memory_digest_tokens: context.lessons.length > 0 ? estimatedTokens(JSON.stringify(context.lessons)) : 0,
    child_result_words: words(cycle.judgement?.summary ?? ''),
  };
}

/**
 * Classifies the cycle in progress into the record and the checkpoint to persist: progress
 * (classifyCycle), what it used, human gates, and for a goal its usage, next step and whether
 * it now waits on something outside.
 */
export function classifyInProgress(context: CycleContext, now: number): CycleToRecord {
  const cycle = context.cycle;
  if (!cycle) throw new Error('no cycle in progress');
  const artifact = cycle.action ? applyChanges(context.artifact, cycle.action.changes) : context.artifact;
  const judgement = cycle.judgement;
  const verdict = cycle.error || !judgement ? 'error' : judgement.verdict;
  const evidence = judgement?.evidence ?? [];
  const changed = cycle.action
    ? cycle.action.changes.map((change) => `${change.path}@sha256:${sha256(change.content).slice(0, 16)}`)
    : [];
  const artifactRef = `artifact:sha256:${artifactDigest(artifact)}`;
  const metrics = metricsOf(context, cycle, now);
  const classification = classifyCycle(
    context.checkpoint,
    {
      critique: judgement?.source ?? context.task.critique_source.kind,
      verdict,
      ...(judgement?.failureSignature ? { failureSignature: judgement.failureSignature } : {}),
      // An artifact, a test result, a review: anything new counts as evidence of progress.
      evidenceRefs: cycle.action
        ? [artifactRef, ...evidence.map((document) => document.ref)]
        : evidence.map((document) => document.ref),
      toolCalls: metrics.tool_calls,
      elapsedSeconds: metrics.elapsed_seconds,
      transcriptBytes: metrics.transcript_bytes,
      childrenSpawned: metrics.children_spawned,
      context: {
        task_packet_tokens: metrics.task_packet_tokens,
        parent_summary_tokens: metrics.parent_summary_tokens,
        memory_digest_tokens: metrics.memory_digest_tokens,
        child_result_words: metrics.child_result_words,
      },
    },
    context.task.cycles.at(-1)?.failure_signature ?? undefined,
    new Date(now),
  );
  let checkpoint = classification.checkpoint;
  let goal = context.goal && withUsage(context.goal, cycleUsage(metrics));
  let recordVerdict: ParCycleRecord['verdict'] = classification.status;
  if (classification.status === 'pass') {
    if (goal) goal = { ...goal, next_step: '' };
    // Acceptance by the agent's critique never passes a human gate: the run waits for a signed decision.
    const gates = pendingGates(context.task, checkpoint);
    if (gates.length > 0) {
      recordVerdict = 'needs-human';
      checkpoint = { ...checkpoint, status: 'waiting_for_human' };
      if (goal) goal = { ...goal, requires_human: true };
      // Signed records name the pending action they concern: it is not renamed under them.
      if (checkpoint.decisions.length + checkpoint.overrides.length === 0)
        checkpoint = { ...checkpoint, pending_action_hash: pendingActionHash(context.task, checkpoint, artifact) };
    }
  }
  if (classification.status === 'error') {
    checkpoint = { ...checkpoint, stop_reason: `infrastructure error: ${cycle.error ?? 'the critique failed'}` };
    // Waiting on a service that failed is not a failed retry: the goal waits, nothing is recorded as a failure.
    if (goal) goal = { ...goal, action_kind: 'wait' };
  }
  // The failure the goal is retrying is this cycle's, if any: the one before is no longer current.
  if (goal && classification.status !== 'error') goal = { ...goal, active_failure: null };
  if (goal && classification.status === 'fail' && judgement?.failureSignature) {
    // The failure's identity: what was checked (the critique, against the criteria) and how it failed.
    const state = recordFailure(documentOf({ checkpoint, goal }) as GoalCheckpointInput, {
      operation: `critique:${context.task.critique_source.kind}`,
      target: 'command' in context.task.critique_source ? context.task.critique_source.command : 'acceptance criteria',
      inputSha256: sha256(
        canonicalJson({
          critique_source: context.task.critique_source,
          acceptance_criteria: context.task.acceptance_criteria,
        }),
      ),
      errorClass: judgement.failureSignature,
      evidenceRef: evidence[0]?.ref ?? artifactRef,
    });
    ({ checkpoint, goal } = parStateOf(state));
  }
  const lessonRefs = context.lessons.map((lesson) => `memory:${lesson.id}`);
  const record: ParCycleRecord = {
    // Counted over the whole goal: a v2 slice starts its own count again.
    cycle: (goal?.baseline.cycle ?? 0) + checkpoint.cycle,
    plan_summary: cycle.plan?.plan_summary ?? '(no plan)',
    artifact_refs: changed,
    evidence_refs: [
      ...(classification.status === 'pass'
        ? classification.acceptanceEvidence
        : evidence.map((document) => document.ref)),
      ...lessonRefs,
    ],
    verdict: recordVerdict,
    next_action: 'continue',
    critique: cycle.error ? `infrastructure error: ${cycle.error}` : (judgement?.summary ?? ''),
    failure_signature: judgement?.failureSignature ?? null,
    policy_reasons: [],
    metrics,
    ...(context.lessons.length > 0 ? { lessons: context.lessons.map((lesson) => lesson.id) } : {}),
  };
  return { record, checkpoint, goal, task: context.task, artifact, changes: cycle.action?.changes ?? [], evidence };
}
