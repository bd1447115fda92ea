import { assign, fromPromise, setup } from 'xstate';
import {
  PolishError,
  type CycleMemory,
  type ParAction,
  type ParActPayload,
  type ParCheckpoint,
  type ParCycleRecord,
  type ParFiles,
  type ParFinalStatus,
  type ParPlan,
  type ParPlanPayload,
  type ParTaskFile,
  type PolicyDecision,
} from '@polish/protocol';
import { canonicalJson } from './canonical-json.js';
import { sha256 } from '../hash.js';
import {
  artifactDigest,
  judgeCritique,
  type CritiqueAnswer,
  type CritiqueJudgement,
  type EvidenceDocument,
} from './critique.js';
import { classifyCycle } from './classify-cycle.js';

/** Bumped whenever the PAR machine's states change shape. */
export const PAR_MACHINE_VERSION = 1;

/** An agent's answer, and the bytes that crossed the wire for it (payload and result). */
export interface ParStep<T> {
  value: T;
  bytes: number;
}

/** What the critique actor is given: the source, the artifact after the action, and the criteria it may judge. */
export interface CritiqueInput {
  task: ParTaskFile;
  artifact: ParFiles;
  action: ParAction;
}

/** A finished cycle, handed to the `record` actor to persist before anything else happens. */
export interface CycleToRecord {
  record: ParCycleRecord;
  checkpoint: ParCheckpoint;
  task: ParTaskFile;
  artifact: ParFiles;
  changes: ParAction['changes'];
  evidence: EvidenceDocument[];
}

/** Everything a PAR run knows. Human keys are not here: the `decide` actor holds them. */
export interface ParContext {
  task: ParTaskFile;
  checkpoint: ParCheckpoint;
  artifact: ParFiles;
  decision: PolicyDecision | null;
  /** The cycle in progress. */
  cycle: {
    started: number;
    plan: ParPlan | null;
    action: ParAction | null;
    judgement: CritiqueJudgement | null;
    bytes: number;
    toolCalls: number;
    error: string | null;
  } | null;
  /** A classified cycle not yet persisted. */
  pending: CycleToRecord | null;
  final: { status: ParFinalStatus; reason: string } | null;
}

export interface ParInput {
  task: ParTaskFile;
  checkpoint: ParCheckpoint;
  artifact: ParFiles;
}

export type ParEvent = { type: 'CANCEL'; reason?: string };

const notProvided = (name: string) =>
  fromPromise<never, unknown>(async () => {
    throw new Error(`actor ${name} was not provided: use machine.provide({ actors })`);
  });

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

/** The action a human decision is about: this task, at this cycle, with this artifact. */
export function pendingActionHash(task: ParTaskFile, checkpoint: ParCheckpoint, artifact: ParFiles): string {
  return sha256(
    canonicalJson({
      task_id: checkpoint.task_id,
      topic: task.topic,
      cycle: checkpoint.cycle,
      artifact_sha256: artifactDigest(artifact),
    }),
  );
}

/** The artifact after an action's whole-file writes. */
export const applyChanges = (artifact: ParFiles, changes: ParAction['changes']): ParFiles => ({
  ...artifact,
  ...Object.fromEntries(changes.map((change) => [change.path, change.content])),
});

const round3 = (seconds: number) => Math.round(seconds * 1000) / 1000;

/** Classifies the cycle in progress (pure given the clock) into the record to persist. */
function classify(context: ParContext, now: number): CycleToRecord {
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
  const previous = context.task.cycles.at(-1);
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
      toolCalls: cycle.toolCalls,
      elapsedSeconds: round3((now - cycle.started) / 1000),
      transcriptBytes: cycle.bytes,
    },
    previous?.failure_signature ?? undefined,
    new Date(now),
  );
  let checkpoint = classification.checkpoint;
  let recordVerdict: ParCycleRecord['verdict'] = classification.status;
  if (classification.status === 'pass') {
    // Acceptance by the agent's critique never passes a human gate: the run waits for a signed decision.
    const gates = pendingGates(context.task, checkpoint);
    if (gates.length > 0) {
      recordVerdict = 'needs-human';
      checkpoint = { ...checkpoint, status: 'waiting_for_human' };
      // Signed records name the pending action they concern: it is not renamed under them.
      if (checkpoint.decisions.length + checkpoint.overrides.length === 0) {
        checkpoint = { ...checkpoint, pending_action_hash: pendingActionHash(context.task, checkpoint, artifact) };
      }
    }
  }
  if (classification.status === 'error')
    checkpoint = { ...checkpoint, stop_reason: `infrastructure error: ${cycle.error ?? 'the critique failed'}` };
  const record: ParCycleRecord = {
    cycle: checkpoint.cycle,
    plan_summary: cycle.plan?.plan_summary ?? '(no plan)',
    artifact_refs: changed,
    evidence_refs:
      classification.status === 'pass' ? classification.acceptanceEvidence : evidence.map((document) => document.ref),
    verdict: recordVerdict,
    next_action: 'continue',
    critique: cycle.error ? `infrastructure error: ${cycle.error}` : (judgement?.summary ?? ''),
    failure_signature: judgement?.failureSignature ?? null,
    policy_reasons: [],
  };
  return { record, checkpoint, task: context.task, artifact, changes: cycle.action?.changes ?? [], evidence };
}

const nextAction = (record: ParCycleRecord, decision: PolicyDecision): ParCycleRecord['next_action'] => {
  if (record.verdict === 'pass') return 'done';
  if (record.verdict === 'needs-human') return 'wait-for-human';
  return decision.decision;
};

const errorText = (error: unknown) => PolishError.from(error).message;

type CycleInProgress = NonNullable<ParContext['cycle']>;

/** The cycle after one of its steps answered: the answer kept, its bytes and calls counted. */
const afterStep = (
  cycle: ParContext['cycle'],
  answer: Partial<Pick<CycleInProgress, 'plan' | 'action' | 'judgement'>>,
  output: { bytes: number; toolCalls?: number },
): ParContext['cycle'] =>
  cycle && {
    ...cycle,
    ...answer,
    bytes: cycle.bytes + output.bytes,
    toolCalls: cycle.toolCalls + (output.toolCalls ?? 1),
  };

/** The cycle after one of its steps failed: it is classified as an error naming the step. */
const afterFailure = (cycle: ParContext['cycle'], step: string, error: unknown): ParContext['cycle'] =>
  cycle && { ...cycle, error: `${step}: ${errorText(error)}` };

/**
 * The plan-act-reflect loop (DESIGN §2). Before every cycle the policy decides (the `decide`
 * actor validates the policy and checkpoint and evaluates it); `continue` plans, acts and runs
 * the critique source; the cycle is classified into the checkpoint, the policy decides again,
 * and the cycle is persisted (`record`) before the decision is obeyed. An infrastructure error
 * ends the cycle as `error`, and the policy then stops the run: it is never a licence to retry.
 */
export const parMachine = setup({
  types: {
    context: {} as ParContext,
    input: {} as ParInput,
    events: {} as ParEvent,
  },
  actors: {
    decide: notProvided('decide') as unknown as ReturnType<typeof fromPromise<PolicyDecision, ParCheckpoint>>,
    plan: notProvided('plan') as unknown as ReturnType<typeof fromPromise<ParStep<ParPlan>, ParPlanPayload>>,
    act: notProvided('act') as unknown as ReturnType<typeof fromPromise<ParStep<ParAction>, ParActPayload>>,
    critique: notProvided('critique') as unknown as ReturnType<
      typeof fromPromise<ParStep<CritiqueAnswer> & { toolCalls: number }, CritiqueInput>
    >,
    record: notProvided('record') as unknown as ReturnType<typeof fromPromise<void, CycleToRecord>>,
  },
  guards: {
    failedClosed: ({ context }) => context.decision?.policy_hash === null,
    completed: ({ context }) => context.checkpoint.status === 'completed',
    errored: ({ context }) => context.checkpoint.status === 'error',
    waiting: ({ context }) => context.checkpoint.status === 'waiting_for_human',
    // A cycle passed earlier and waited for gates that have all been approved since.
    gatesApproved: ({ context }) =>
      context.decision?.decision === 'continue' &&
      context.task.cycles.at(-1)?.verdict === 'needs-human' &&
      pendingGates(context.task, context.checkpoint).length === 0,
    stop: ({ context }) => context.decision?.decision === 'stop',
    checkpoint: ({ context }) => context.decision?.decision === 'checkpoint',
    hasPending: ({ context }) => context.pending !== null,
  },
}).createMachine({
  id: 'par',
  context: ({ input }) => ({ ...input, decision: null, cycle: null, pending: null, final: null }),
  initial: 'deciding',
  on: {
    CANCEL: {
      target: '.cancelled',
      actions: assign({
        final: ({ event }) => ({ status: 'checkpoint' as const, reason: event.reason ?? 'interrupted' }),
      }),
    },
  },
  states: {
    deciding: {
      invoke: {
        src: 'decide',
        input: ({ context }) => context.pending?.checkpoint ?? context.checkpoint,
        onDone: [
          {
            // Invalid input fails closed: the cycle in hand is not recorded, nothing invalid is written.
            guard: ({ event }) => event.output.policy_hash === null,
            target: 'judging',
            actions: assign({ decision: ({ event }) => event.output, pending: null }),
          },
          {
            guard: 'hasPending',
            target: 'recording',
            actions: assign(({ context, event }) => {
              const pending = context.pending as CycleToRecord;
              const record = {
                ...pending.record,
                next_action: nextAction(pending.record, event.output),
                policy_reasons: event.output.reasons,
              };
              return {
                decision: event.output,
                pending: { ...pending, record, task: { ...pending.task, cycles: [...pending.task.cycles, record] } },
              };
            }),
          },
          { target: 'judging', actions: assign({ decision: ({ event }) => event.output }) },
        ],
        onError: {
          target: 'failed',
          actions: assign({
            final: ({ event }) => ({
              status: 'error' as const,
              reason: `policy evaluation failed: ${errorText(event.error)}`,
            }),
          }),
        },
      },
    },
    recording: {
      invoke: {
        src: 'record',
        input: ({ context }) => context.pending as CycleToRecord,
        onDone: {
          target: 'judging',
          actions: assign(({ context }) => {
            const pending = context.pending as CycleToRecord;
            return {
              task: pending.task,
              checkpoint: pending.checkpoint,
              artifact: pending.artifact,
              pending: null,
              cycle: null,
            };
          }),
        },
        onError: {
          target: 'failed',
          actions: assign({
            final: ({ event }) => ({
              status: 'error' as const,
              reason: `could not record the cycle: ${errorText(event.error)}`,
            }),
          }),
        },
      },
    },
    judging: {
      always: [
        { guard: 'failedClosed', target: 'stopped' },
        { guard: 'completed', target: 'passed' },
        { guard: 'errored', target: 'errored' },
        { guard: 'waiting', target: 'waitingForHuman' },
        { guard: 'gatesApproved', target: 'passed' },
        { guard: 'stop', target: 'stopped' },
        { guard: 'checkpoint', target: 'handedBack' },
        { target: 'planning' },
      ],
    },
    planning: {
      entry: assign({
        cycle: () => ({
          started: Date.now(),
          plan: null,
          action: null,
          judgement: null,
          bytes: 0,
          toolCalls: 0,
          error: null,
        }),
      }),
      invoke: {
        src: 'plan',
        input: ({ context }) => ({
          goal: context.task.goal,
          acceptance_criteria: context.task.acceptance_criteria,
          artifact: context.artifact,
          history: historyOf(context.task),
        }),
        onDone: {
          target: 'acting',
          actions: assign({
            cycle: ({ context, event }) => afterStep(context.cycle, { plan: event.output.value }, event.output),
          }),
        },
        onError: {
          target: 'classifying',
          actions: assign({ cycle: ({ context, event }) => afterFailure(context.cycle, 'plan', event.error) }),
        },
      },
    },
    acting: {
      invoke: {
        src: 'act',
        input: ({ context }) => ({
          goal: context.task.goal,
          acceptance_criteria: context.task.acceptance_criteria,
          artifact: context.artifact,
          history: historyOf(context.task),
          plan: context.cycle?.plan as ParPlan,
        }),
        onDone: {
          target: 'critiquing',
          actions: assign({
            cycle: ({ context, event }) => afterStep(context.cycle, { action: event.output.value }, event.output),
          }),
        },
        onError: {
          target: 'classifying',
          actions: assign({ cycle: ({ context, event }) => afterFailure(context.cycle, 'act', event.error) }),
        },
      },
    },
    critiquing: {
      invoke: {
        src: 'critique',
        input: ({ context }) => {
          const action = context.cycle?.action as ParAction;
          return { task: context.task, artifact: applyChanges(context.artifact, action.changes), action };
        },
        onDone: {
          target: 'classifying',
          actions: assign({
            cycle: ({ context, event }) =>
              afterStep(
                context.cycle,
                { judgement: judgeCritique(context.task.critique_source, event.output.value) },
                event.output,
              ),
          }),
        },
        onError: {
          target: 'classifying',
          actions: assign({ cycle: ({ context, event }) => afterFailure(context.cycle, 'critique', event.error) }),
        },
      },
    },
    classifying: {
      entry: assign({ pending: ({ context }) => classify(context, Date.now()) }),
      always: { target: 'deciding' },
    },
    passed: {
      type: 'final',
      entry: assign({ final: () => ({ status: 'pass' as const, reason: 'acceptance satisfied' }) }),
    },
    waitingForHuman: {
      type: 'final',
      entry: assign({
        final: ({ context }) => ({
          status: 'needs-human' as const,
          reason: `waiting for a human decision on ${pendingGates(context.task, context.checkpoint).join(', ')}`,
        }),
      }),
    },
    stopped: {
      type: 'final',
      entry: assign({
        final: ({ context }) => ({
          status: 'stop' as const,
          reason: context.decision?.reasons.join('; ') || 'the policy stopped the run',
        }),
      }),
    },
    handedBack: {
      type: 'final',
      entry: assign({
        final: ({ context }) => ({
          status: 'checkpoint' as const,
          reason: context.decision?.reasons.join('; ') || 'checkpoint',
        }),
      }),
    },
    errored: {
      type: 'final',
      entry: assign({
        final: ({ context }) => ({
          status: 'error' as const,
          reason: context.checkpoint.stop_reason ?? 'infrastructure error',
        }),
      }),
    },
    failed: { type: 'final' },
    cancelled: { type: 'final' },
  },
});
