import { assign, emit, fromPromise, setup } from 'xstate';
import {
  PolishError,
  addUsage,
  requiredPasses,
  type Criterion,
  type IterationRecord,
  type Judgement,
} from '@polish/protocol';
import type { EvaluateInput, ReviseInput, WaveInput, WaveOutput } from './wave-actors.js';
import type { AppliedRevision } from './revise-contract.js';
import type { BudgetPlan } from './budget.js';
import {
  accounted,
  evaluatePayload,
  evaluated,
  failed,
  initialContext,
  lastRecord,
  reAskUpdates,
  revisePayload,
  shortfall,
  shouldReAsk,
  stopped,
  waveBudget,
  type PolishContext,
} from './loop-context.js';

export type { PolishContext } from './loop-context.js';

/** Bumped whenever a persisted snapshot of this machine could no longer be restored. */
export const POLISH_MACHINE_VERSION = 2;

/**
 * What a run starts from: a spec (and its budget, priced), and for `extend` the state of a run
 * that reached its cap (it continues by revising its last evaluated version, criteria unchanged).
 */
export interface PolishInput {
  spec: PolishContext['spec'];
  budget?: BudgetPlan | null;
  resume?: Omit<PolishContext, 'spec' | 'failure'>;
}

/** Events the machine accepts from outside. */
export type PolishEvent = { type: 'CANCEL'; reason?: string };

/** Events the machine emits for observers (see `actor.on`). */
export type PolishEmitted =
  | { type: 'criteria.locked'; criteria: Criterion[]; extracted: boolean }
  | { type: 'iteration.evaluated'; record: IterationRecord }
  | { type: 'iteration.revised'; record: IterationRecord }
  | { type: 'iteration.finished'; record: IterationRecord }
  | { type: 'regression.re_ask'; record: IterationRecord; from: number }
  | { type: 'budget.exhausted'; context: PolishContext };

const notProvided = (name: string) =>
  fromPromise<never, unknown>(async () => {
    throw new Error(`actor ${name} was not provided: use machine.provide({ actors })`);
  });

const isBudgetStop = (error: unknown) => PolishError.from(error).code === 'BUDGET_EXHAUSTED';

/**
 * The polish loop (DESIGN §1): Wave 1 locks criteria (skipped when given), Wave 2 scores (one
 * judge, or a quorum), Wave 3 revises from the blocking gaps, until the threshold passes, the
 * cap is reached or the budget cannot cover the next wave. A revision that breaks a criterion
 * that passed is asked again once, from the version it broke. Wave actors are referenced by
 * name and supplied with `machine.provide`.
 */
export const polishMachine = setup({
  types: {
    context: {} as PolishContext,
    input: {} as PolishInput,
    events: {} as PolishEvent,
    emitted: {} as PolishEmitted,
  },
  actors: {
    extractCriteria: notProvided('extractCriteria') as unknown as ReturnType<
      typeof fromPromise<WaveOutput<{ criteria: Criterion[] }>, WaveInput<'criteria'>>
    >,
    evaluate: notProvided('evaluate') as unknown as ReturnType<
      typeof fromPromise<WaveOutput<{ judges: Judgement[] }>, EvaluateInput>
    >,
    revise: notProvided('revise') as unknown as ReturnType<
      typeof fromPromise<WaveOutput<AppliedRevision>, ReviseInput>
    >,
  },
  guards: {
    criteriaGiven: ({ context }) => context.criteria !== null,
    resuming: ({ context }) => context.history.length > 0,
    thresholdMet: ({ context }) => lastRecord(context).overall === 'pass',
    capReached: ({ context }) => context.iteration >= context.spec.cap,
    affordsCriteria: ({ context }) => shortfall(context, 'criteria') === null,
    affordsEvaluation: ({ context }) => shortfall(context, 'evaluate') === null,
    regressed: ({ context }) => shouldReAsk(context),
    budgetStop: ({ event }) => isBudgetStop((event as { error?: unknown }).error),
  },
}).createMachine({
  id: 'polish',
  context: ({ input }) =>
    input.resume
      ? { ...input.resume, budgetStop: null, spec: input.spec, failure: null }
      : initialContext(input.spec, input.budget ?? null),
  initial: 'starting',
  on: {
    CANCEL: {
      target: '.cancelled',
      actions: assign({
        failure: ({ event }) => ({ code: 'CANCELLED' as const, reason: event.reason ?? 'cancelled by the caller' }),
      }),
    },
  },
  states: {
    starting: {
      always: [
        // Extend: the capped run goes on from its last verdict (a revision next, budget permitting).
        { guard: 'resuming', target: 'judging' },
        {
          guard: 'criteriaGiven',
          target: 'affording',
          actions: emit(({ context }) => ({
            type: 'criteria.locked' as const,
            criteria: context.criteria ?? [],
            extracted: false,
          })),
        },
        { guard: 'affordsCriteria', target: 'extracting' },
        { target: 'budgetExhausted', actions: assign(({ context }) => stopped(context, 'criteria')) },
      ],
    },
    extracting: {
      invoke: {
        src: 'extractCriteria',
        input: ({ context }) => ({
          payload: { artifact: context.artifact, goal: context.spec.goal },
          iteration: 0,
          ...waveBudget(context),
        }),
        onDone: [
          {
            // pass_N with more criteria than Wave 1 locked can never be met: stop with a reason.
            guard: ({ context, event }) =>
              requiredPasses(context.spec.threshold, event.output.value.criteria.length) >
              event.output.value.criteria.length,
            target: 'failed',
            actions: assign(({ context, event }) => ({
              ...accounted(context, 'criteria', event.output),
              failure: {
                code: 'INVALID_INPUT' as const,
                reason: `threshold ${context.spec.threshold} needs more criteria than the ${event.output.value.criteria.length} Wave 1 locked`,
              },
            })),
          },
          {
            target: 'affording',
            actions: [
              assign(({ context, event }) => ({
                ...accounted(context, 'criteria', event.output),
                criteria: event.output.value.criteria,
                criteriaExtracted: true,
              })),
              emit(({ event }) => ({
                type: 'criteria.locked' as const,
                criteria: event.output.value.criteria,
                extracted: true,
              })),
            ],
          },
        ],
        onError: [
          {
            guard: 'budgetStop',
            target: 'budgetExhausted',
            actions: assign(({ context, event }) => failed(context, 'criteria', event.error)),
          },
          { target: 'failed', actions: assign(({ context, event }) => failed(context, 'criteria', event.error)) },
        ],
      },
    },
    // Before every evaluation: the budget must cover every judge's task at worst.
    affording: {
      always: [
        { guard: 'affordsEvaluation', target: 'evaluating' },
        { target: 'budgetExhausted', actions: assign(({ context }) => stopped(context, 'evaluate')) },
      ],
    },
    evaluating: {
      entry: assign({ iteration: ({ context }) => context.iteration + 1 }),
      invoke: {
        src: 'evaluate',
        input: ({ context }) => ({
          payload: evaluatePayload(context),
          iteration: context.iteration,
          judges: context.spec.judges,
          evidence: context.spec.evidence,
          ...waveBudget(context),
        }),
        onDone: {
          target: 'judging',
          actions: [
            assign(({ context, event }) => ({
              ...accounted(context, 'evaluate', event.output),
              ...evaluated(context, event.output),
            })),
            emit(({ context }) => ({ type: 'iteration.evaluated' as const, record: lastRecord(context) })),
          ],
        },
        onError: [
          {
            guard: 'budgetStop',
            target: 'budgetExhausted',
            actions: assign(({ context, event }) => failed(context, 'evaluate', event.error)),
          },
          { target: 'failed', actions: assign(({ context, event }) => failed(context, 'evaluate', event.error)) },
        ],
      },
    },
    judging: {
      always: [
        { guard: 'thresholdMet', target: 'converged' },
        { guard: 'capReached', target: 'capReached' },
        // A revision is only worth its cost with the evaluation after it: both must be covered.
        {
          guard: ({ context }) => shortfall(context, 'revise') !== null,
          target: 'budgetExhausted',
          actions: assign(({ context }) => stopped(context, 'revise')),
        },
        {
          guard: 'regressed',
          target: 'revising',
          actions: [
            assign(({ context }) => reAskUpdates(context)),
            emit(({ context }) => ({
              type: 'regression.re_ask' as const,
              record: lastRecord(context),
              from: context.pending?.from ?? 0,
            })),
          ],
        },
        {
          target: 'revising',
          actions: assign(({ context }) => ({ pending: { from: lastRecord(context).iteration, regressions: [] } })),
        },
      ],
    },
    revising: {
      invoke: {
        src: 'revise',
        input: ({ context }) => ({
          payload: revisePayload(context),
          iteration: context.iteration,
          mode: context.spec.revise_mode,
          ...waveBudget(context),
        }),
        onDone: {
          target: 'affording',
          actions: [
            assign(({ context, event }) => ({
              ...accounted(context, 'revise', event.output),
              artifact: event.output.value.artifact,
              revisedFrom: context.pending?.from ?? lastRecord(context).iteration,
              pending: null,
              // The revision belongs to the iteration whose gaps it closes.
              history: context.history.map((record, index) =>
                index === context.history.length - 1
                  ? {
                      ...record,
                      usage: addUsage(record.usage, event.output.usage),
                      revision: event.output.value.revision,
                    }
                  : record,
              ),
            })),
            emit(({ context }) => ({ type: 'iteration.revised' as const, record: lastRecord(context) })),
            emit(({ context }) => ({ type: 'iteration.finished' as const, record: lastRecord(context) })),
          ],
        },
        onError: [
          {
            guard: 'budgetStop',
            target: 'budgetExhausted',
            actions: assign(({ context, event }) => failed(context, 'revise', event.error)),
          },
          { target: 'failed', actions: assign(({ context, event }) => failed(context, 'revise', event.error)) },
        ],
      },
    },
    converged: {
      type: 'final',
      entry: emit(({ context }) => ({ type: 'iteration.finished' as const, record: lastRecord(context) })),
    },
    capReached: {
      type: 'final',
      entry: emit(({ context }) => ({ type: 'iteration.finished' as const, record: lastRecord(context) })),
    },
    budgetExhausted: {
      type: 'final',
      entry: emit(({ context }) => ({ type: 'budget.exhausted' as const, context })),
    },
    failed: { type: 'final' },
    cancelled: { type: 'final' },
  },
});
