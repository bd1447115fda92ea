import { assign, fromPromise, setup } from 'xstate';
import {
  PolishError,
  type AnyPolicyDecision,
  type ParAction,
  type ParActPayload,
  type ParCheckpoint,
  type ParCycleRecord,
  type ParFiles,
  type ParFinalStatus,
  type ParLesson,
  type ParPlan,
  type ParPlanPayload,
  type ParTaskFile,
} from '@polish/protocol';
import { judgeCritique, type CritiqueAnswer } from './critique.js';
import {
  afterFailure,
  afterStep,
  applyChanges,
  classifyInProgress,
  historyOf,
  newCycle,
  pendingGates,
  type CycleInProgress,
  type CycleToRecord,
  type ParStep,
} from './cycle-record.js';
import type { GoalEnvelope, ParState } from './par-state.js';

/** Bumped whenever the PAR machine's states change shape. */
export const PAR_MACHINE_VERSION = 2;

export type { CycleToRecord, ParStep } from './cycle-record.js';

/** What the critique actor is given: the source, the artifact after the action, and the criteria it may judge. */
export interface CritiqueInput {
  task: ParTaskFile;
  artifact: ParFiles;
  action: ParAction;
}

/** Everything a PAR run knows. Human keys are not here: the `decide` actor holds them. */
export interface ParContext {
  task: ParTaskFile;
  checkpoint: ParCheckpoint;
  /** The goal around the checkpoint (v2 files), or null. */
  goal: GoalEnvelope | null;
  artifact: ParFiles;
  /** Approved lessons of this topic, given to the planner. */
  lessons: ParLesson[];
  decision: AnyPolicyDecision | null;
  /** The cycle in progress. */
  cycle: CycleInProgress | null;
  /** A classified cycle not yet persisted. */
  pending: CycleToRecord | null;
  final: { status: ParFinalStatus; reason: string } | null;
}

export interface ParInput {
  task: ParTaskFile;
  checkpoint: ParCheckpoint;
  goal: GoalEnvelope | null;
  artifact: ParFiles;
  lessons: ParLesson[];
}

export type ParEvent = { type: 'CANCEL'; reason?: string };

const notProvided = (name: string) =>
  fromPromise<never, unknown>(async () => {
    throw new Error(`actor ${name} was not provided: use machine.provide({ actors })`);
  });

export { historyOf, pendingGates, applyChanges };

const nextAction = (record: ParCycleRecord, decision: AnyPolicyDecision): ParCycleRecord['next_action'] => {
  if (record.verdict === 'pass') return 'done';
  if (record.verdict === 'needs-human') return 'wait-for-human';
  return decision.decision;
};

const errorText = (error: unknown) => PolishError.from(error).message;

/** Whether the critique source runs as a child task (a reviewer or a command). */
const spawnsChild = (task: ParTaskFile) => task.critique_source.kind !== 'self';

/** Why a child may not be spawned now, in the words of the limits that forbid it. */
export function spawnRefusal(
  decision: AnyPolicyDecision,
  checkpoint: ParCheckpoint,
  goal: GoalEnvelope | null,
): string {
  const limits = decision.effective_limits;
  const children = `children_spawned=${checkpoint.children_spawned}:max_children_per_parent=${limits.max_children_per_parent}`;
  if (goal?.action_kind === 'wait') return 'spawn_not_allowed:action_kind=wait';
  if (checkpoint.active_children >= (limits.max_concurrency ?? 0))
    return `spawn_not_allowed:active_children=${checkpoint.active_children}:max_concurrency=${limits.max_concurrency}`;
  if (goal?.review_required && checkpoint.children_spawned < (limits.max_children_per_parent ?? 0))
    return `spawn_not_allowed:${children}:reviewer_reserve`;
  return `spawn_not_allowed:${children}`;
}

/**
 * The plan-act-reflect loop (DESIGN §2). Before every cycle the policy decides (the `decide`
 * actor validates the policy and checkpoint and evaluates it); `continue` plans, acts and runs
 * the critique source (a child task, spawned only when the decision allows it); the cycle is
 * classified into the checkpoint, the policy decides again, and the cycle is persisted
 * (`record`) before the decision is obeyed. A goal slice whose decision allows it is advanced
 * (`advance`) and the loop goes on. An infrastructure error ends the cycle as `error`, and the
 * policy then stops the run: it is never a licence to retry.
 */
export const parMachine = setup({
  types: {
    context: {} as ParContext,
    input: {} as ParInput,
    events: {} as ParEvent,
  },
  actors: {
    decide: notProvided('decide') as unknown as ReturnType<typeof fromPromise<AnyPolicyDecision, ParState>>,
    advance: notProvided('advance') as unknown as ReturnType<typeof fromPromise<ParState, ParState>>,
    plan: notProvided('plan') as unknown as ReturnType<typeof fromPromise<ParStep<ParPlan>, ParPlanPayload>>,
    act: notProvided('act') as unknown as ReturnType<typeof fromPromise<ParStep<ParAction>, ParActPayload>>,
    critique: notProvided('critique') as unknown as ReturnType<
      typeof fromPromise<ParStep<CritiqueAnswer> | { value: CritiqueAnswer; step: null }, CritiqueInput>
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
    // A goal slice reached its quota with new evidence and a next step: advance it, do not hand back.
    advanceSlice: ({ context }) =>
      context.decision?.decision === 'checkpoint' &&
      'auto_continue' in context.decision &&
      context.decision.auto_continue,
    checkpoint: ({ context }) => context.decision?.decision === 'checkpoint',
    spawnRefused: ({ context }) => spawnsChild(context.task) && context.decision?.spawn_allowed === false,
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
        input: ({ context }) =>
          context.pending
            ? { checkpoint: context.pending.checkpoint, goal: context.pending.goal }
            : { checkpoint: context.checkpoint, goal: context.goal },
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
              goal: pending.goal,
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
        { guard: 'advanceSlice', target: 'advancing' },
        { guard: 'checkpoint', target: 'handedBack' },
        { guard: 'spawnRefused', target: 'spawnRefused' },
        { target: 'planning' },
      ],
    },
    advancing: {
      invoke: {
        src: 'advance',
        input: ({ context }) => ({ checkpoint: context.checkpoint, goal: context.goal }),
        onDone: {
          target: 'deciding',
          actions: assign({
            checkpoint: ({ event }) => event.output.checkpoint,
            goal: ({ event }) => event.output.goal,
          }),
        },
        onError: {
          target: 'failed',
          actions: assign({
            final: ({ event }) => ({
              status: 'error' as const,
              reason: `could not advance the goal slice: ${errorText(event.error)}`,
            }),
          }),
        },
      },
    },
    planning: {
      entry: assign({ cycle: () => newCycle(Date.now()) }),
      invoke: {
        src: 'plan',
        input: ({ context }) => ({
          goal: context.task.goal,
          acceptance_criteria: context.task.acceptance_criteria,
          artifact: context.artifact,
          history: historyOf(context.task),
          ...(context.lessons.length > 0 ? { lessons: context.lessons } : {}),
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
                'step' in event.output ? null : event.output,
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
      entry: assign({ pending: ({ context }) => classifyInProgress(context, Date.now()) }),
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
    spawnRefused: {
      type: 'final',
      entry: assign({
        final: ({ context }) => ({
          status: 'stop' as const,
          reason: spawnRefusal(context.decision as AnyPolicyDecision, context.checkpoint, context.goal),
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
