import { fromPromise } from 'xstate';
import type { Context } from '@opentelemetry/api';
import {
  CriteriaResultSchema,
  RevisionSchema,
  evaluationSchemaFor,
  type Criterion,
  type ModelInfo,
  type PayloadOf,
  type Role,
  type Score,
  type Usage,
} from '@polish/protocol';
import type { z } from 'zod';
import type { Dispatcher } from '../dispatch/dispatcher.js';
import { dispatchValidated, type UnstampedEvent } from '../dispatch/validated-dispatch.js';

/** A wave's validated answer with what it cost and who gave it. */
export interface WaveOutput<T> {
  value: T;
  usage: Usage;
  model: ModelInfo;
}

/** Where a durable run records each finished wave. */
export interface WaveLedger {
  /** The key of a wave: e.g. `result.<runId>.evaluate.2`. */
  keyOf(role: Role, iteration: number): string;
  load(key: string): Promise<WaveOutput<unknown> | undefined>;
  save(key: string, output: WaveOutput<unknown>): Promise<void>;
  /** Resolves once every state transition so far is persisted: nothing is sent before that. */
  persisted(): Promise<void>;
}

/** Settings shared by the wave actors of one run. */
export interface WaveActorOptions {
  dispatcher: Dispatcher;
  /** Re-sends of a task whose answer breaks the contract (see `dispatchValidated`). Default 1. */
  maxContractRedispatch?: number;
  report?: (event: UnstampedEvent) => void;
  /**
   * Durable runs: finished waves are recorded under an idempotency key (run, wave, iteration),
   * and a wave whose result is recorded is never dispatched again (XState re-runs in-flight
   * invoked promises when a snapshot is restored).
   */
  ledger?: WaveLedger;
  /** The run's `polish.run` span context: each wave's span is its child. */
  traceContext?: Context;
}

/** Input of a wave actor: the payload that crosses the wire, plus the iteration for reporting only. */
export interface WaveInput<R extends Role> {
  payload: PayloadOf<R>;
  iteration: number;
}

async function runWave<R extends Role, T>(
  options: WaveActorOptions,
  role: R,
  input: WaveInput<R>,
  schema: z.ZodType<T>,
  signal: AbortSignal,
): Promise<WaveOutput<T>> {
  const { ledger } = options;
  const key = ledger?.keyOf(role, input.iteration);
  if (ledger && key) {
    const recorded = await ledger.load(key);
    if (recorded) {
      // Finished before a restart: its result stands, and it is not paid for again.
      const parsed = schema.safeParse(recorded.value);
      if (parsed.success) return { ...recorded, value: parsed.data };
    }
    // A run must not go on unsaved: the transition that started this wave is stored first.
    await ledger.persisted();
  }
  const output = await dispatchValidated(role, input.payload, schema, {
    dispatcher: options.dispatcher,
    signal,
    iteration: input.iteration,
    ...(options.report ? { report: options.report } : {}),
    ...(options.traceContext ? { traceContext: options.traceContext } : {}),
    ...(options.maxContractRedispatch === undefined ? {} : { maxContractRedispatch: options.maxContractRedispatch }),
    ...(key ? { idempotencyKey: key } : {}),
  });
  const wave = { value: output.value, usage: output.usage, model: output.model };
  if (ledger && key) await ledger.save(key, wave);
  return wave;
}

/** The three wave actors of the polish machine (xstate's `fromPromise`), each going through the one dispatch. */
export function createWaveActors(options: WaveActorOptions) {
  return {
    extractCriteria: fromPromise<WaveOutput<{ criteria: Criterion[] }>, WaveInput<'criteria'>>(({ input, signal }) =>
      runWave(options, 'criteria', input, CriteriaResultSchema, signal),
    ),
    evaluate: fromPromise<WaveOutput<{ scores: Score[] }>, WaveInput<'evaluate'>>(({ input, signal }) =>
      runWave(options, 'evaluate', input, evaluationSchemaFor(input.payload.criteria), signal),
    ),
    revise: fromPromise<WaveOutput<{ artifact: string }>, WaveInput<'revise'>>(({ input, signal }) =>
      runWave(options, 'revise', input, RevisionSchema, signal),
    ),
  };
}
