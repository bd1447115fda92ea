import { fromPromise } from 'xstate';
import type { Context } from '@opentelemetry/api';
import { z } from 'zod';
import {
  CriteriaResultSchema,
  RevisionReportSchema,
  evaluationSchemaFor,
  type Criterion,
  type ModelInfo,
  type PayloadOf,
  type ReviseMode,
  type Role,
  type Score,
  type Usage,
} from '@polish/protocol';
import type { Dispatcher } from '../dispatch/dispatcher.js';
import { dispatchValidated, type Contract, type UnstampedEvent } from '../dispatch/validated-dispatch.js';
import { reviseContract, type AppliedRevision } from './revise-contract.js';

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

/** Input of the revise actor: also how this run takes Wave 3 answers (never sent to the worker). */
export interface ReviseInput extends WaveInput<'revise'> {
  mode: ReviseMode;
}

/** A revision as recorded in the wave ledger: the applied result, not the raw answer. */
const AppliedRevisionSchema = z.strictObject({ artifact: z.string(), revision: RevisionReportSchema });

async function runWave<R extends Role, T>(
  options: WaveActorOptions,
  role: R,
  input: WaveInput<R>,
  contract: Contract<T>,
  recordedSchema: z.ZodType<T>,
  signal: AbortSignal,
): Promise<WaveOutput<T>> {
  const { ledger } = options;
  const key = ledger?.keyOf(role, input.iteration);
  if (ledger && key) {
    const recorded = await ledger.load(key);
    if (recorded) {
      // Finished before a restart: its result stands, and it is not paid for again.
      const parsed = recordedSchema.safeParse(recorded.value);
      if (parsed.success) return { ...recorded, value: parsed.data };
    }
    // A run must not go on unsaved: the transition that started this wave is stored first.
    await ledger.persisted();
  }
  const output = await dispatchValidated(role, input.payload, contract, {
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
      runWave(options, 'criteria', input, CriteriaResultSchema, CriteriaResultSchema, signal),
    ),
    evaluate: fromPromise<WaveOutput<{ scores: Score[] }>, WaveInput<'evaluate'>>(({ input, signal }) => {
      const schema = evaluationSchemaFor(input.payload.criteria);
      return runWave(options, 'evaluate', input, schema, schema, signal);
    }),
    revise: fromPromise<WaveOutput<AppliedRevision>, ReviseInput>(({ input, signal }) =>
      runWave(options, 'revise', input, reviseContract(input.payload, input.mode), AppliedRevisionSchema, signal),
    ),
  };
}
