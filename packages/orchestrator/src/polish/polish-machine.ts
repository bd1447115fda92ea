import { assign, emit, fromPromise, setup } from 'xstate';
import {
  PolishError,
  ZERO_USAGE,
  addUsage,
  requiredPasses,
  type Criterion,
  type ErrorCode,
  type IterationRecord,
  type ModelInfo,
  type UsageByWave,
  modelKey,
  type RunSpec,
  type Score,
  type Usage,
} from '@polish/protocol';
import { computeVerdict } from './verdict.js';
import type { ReviseInput, WaveInput, WaveOutput } from './wave-actors.js';
import type { AppliedRevision } from './revise-contract.js';

/** Bumped whenever a persisted snapshot of this machine could no longer be restored. */
export const POLISH_MACHINE_VERSION = 2;

/** Everything the polish loop knows; the artifact only ever changes to a Wave 3 answer. */
export interface PolishContext {
  spec: RunSpec;
  criteria: Criterion[] | null;
  criteriaExtracted: boolean;
  artifact: string;
  iteration: number;
  history: IterationRecord[];
  usage: Usage;
  usageByWave: UsageByWave;
  usageByModel: Record<string, Usage>;
  models: ModelInfo[];
  failure: { code: ErrorCode; reason: string } | null;
}

/**
 * What a run starts from: a spec, and for `extend` the state of a run that reached its cap
 * (it continues by revising its last evaluated version, criteria unchanged).
 */
export interface PolishInput {
  spec: RunSpec;
  resume?: Omit<PolishContext, 'spec' | 'failure'>;
}

/** Events the machine accepts from outside. */
export type PolishEvent = { type: 'CANCEL'; reason?: string };

/** Events the machine emits for observers (see `actor.on`). */
export type PolishEmitted =
  | { type: 'criteria.locked'; criteria: Criterion[]; extracted: boolean }
  | { type: 'iteration.evaluated'; record: IterationRecord }
  | { type: 'iteration.revised'; record: IterationRecord }
  | { type: 'iteration.finished'; record: IterationRecord };

const notProvided = (name: string) =>
  fromPromise<never, unknown>(async () => {
    throw new Error(`actor ${name} was not provided: use machine.provide({ actors })`);
  });

function withModel(models: ModelInfo[], model: ModelInfo): ModelInfo[] {
  const known = models.some((entry) => entry.provider === model.provider && entry.model === model.model);
  return known ? models : [...models, model];
}

/** Context updates that account one wave's answer: run total, per wave, per model. */
function accounted(context: PolishContext, wave: keyof UsageByWave, output: WaveOutput<unknown>) {
  const key = modelKey(output.model);
  return {
    usage: addUsage(context.usage, output.usage),
    usageByWave: { ...context.usageByWave, [wave]: addUsage(context.usageByWave[wave], output.usage) },
    usageByModel: { ...context.usageByModel, [key]: addUsage(context.usageByModel[key] ?? ZERO_USAGE, output.usage) },
    models: withModel(context.models, output.model),
  };
}

function failureOf(error: unknown): { code: ErrorCode; reason: string } {
  const polishError = PolishError.from(error);
  return { code: polishError.code, reason: polishError.message };
}

/** Context updates for a wave that failed: its reason, and the usage it spent all the same. */
function failed(context: PolishContext, wave: keyof UsageByWave, error: unknown) {
  const polishError = PolishError.from(error);
  const spent =
    polishError.usage && polishError.usage.model_calls > 0
      ? accounted(context, wave, {
          value: undefined,
          usage: polishError.usage,
          model: polishError.model ?? { provider: 'unknown', model: 'unknown', scripted: false },
        })
      : {};
  return { ...spent, failure: failureOf(error) };
}

const lastRecord = (context: PolishContext): IterationRecord => {
  const record = context.history.at(-1);
  if (!record) throw new Error('no evaluation recorded yet');
  return record;
};

/**
 * The polish loop (DESIGN §1): Wave 1 locks criteria (skipped when given), Wave 2 scores,
 * Wave 3 revises from the blocking gaps, until the threshold passes or the cap is reached.
 * Wave actors are referenced by name and supplied with `machine.provide`.
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
      typeof fromPromise<WaveOutput<{ scores: Score[] }>, WaveInput<'evaluate'>>
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
  },
}).createMachine({
  id: 'polish',
  context: ({ input }) =>
    input.resume
      ? { ...input.resume, spec: input.spec, failure: null }
      : {
          spec: input.spec,
          criteria: input.spec.criteria ?? null,
          criteriaExtracted: false,
          artifact: input.spec.artifact,
          iteration: 0,
          history: [],
          usage: ZERO_USAGE,
          usageByWave: { criteria: ZERO_USAGE, evaluate: ZERO_USAGE, revise: ZERO_USAGE },
          usageByModel: {},
          models: [],
          failure: null,
        },
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
        { guard: 'resuming', target: 'revising' },
        {
          guard: 'criteriaGiven',
          target: 'evaluating',
          actions: emit(({ context }) => ({
            type: 'criteria.locked' as const,
            criteria: context.criteria ?? [],
            extracted: false,
          })),
        },
        { target: 'extracting' },
      ],
    },
    extracting: {
      invoke: {
        src: 'extractCriteria',
        input: ({ context }) => ({ payload: { artifact: context.artifact, goal: context.spec.goal }, iteration: 0 }),
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
            target: 'evaluating',
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
        onError: {
          target: 'failed',
          actions: assign(({ context, event }) => failed(context, 'criteria', event.error)),
        },
      },
    },
    evaluating: {
      entry: assign({ iteration: ({ context }) => context.iteration + 1 }),
      invoke: {
        src: 'evaluate',
        input: ({ context }) => ({
          payload: { artifact: context.artifact, criteria: context.criteria ?? [] },
          iteration: context.iteration,
        }),
        onDone: {
          target: 'judging',
          actions: [
            assign(({ context, event }) => ({
              ...accounted(context, 'evaluate', event.output),
              history: [
                ...context.history,
                computeVerdict({
                  iteration: context.iteration,
                  artifact: context.artifact,
                  criteria: context.criteria ?? [],
                  scores: event.output.value.scores,
                  threshold: context.spec.threshold,
                  usage: event.output.usage,
                }),
              ],
            })),
            emit(({ context }) => ({ type: 'iteration.evaluated' as const, record: lastRecord(context) })),
          ],
        },
        onError: {
          target: 'failed',
          actions: assign(({ context, event }) => failed(context, 'evaluate', event.error)),
        },
      },
    },
    judging: {
      always: [
        { guard: 'thresholdMet', target: 'converged' },
        { guard: 'capReached', target: 'capReached' },
        { target: 'revising' },
      ],
    },
    revising: {
      invoke: {
        src: 'revise',
        input: ({ context }) => ({
          payload: {
            artifact: context.artifact,
            blocking_gaps: lastRecord(context).blocking_gaps,
            goal: context.spec.goal,
          },
          iteration: context.iteration,
          mode: context.spec.revise_mode,
        }),
        onDone: {
          target: 'evaluating',
          actions: [
            assign(({ context, event }) => ({
              ...accounted(context, 'revise', event.output),
              artifact: event.output.value.artifact,
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
        onError: { target: 'failed', actions: assign(({ context, event }) => failed(context, 'revise', event.error)) },
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
    failed: { type: 'final' },
    cancelled: { type: 'final' },
  },
});
