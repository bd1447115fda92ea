import { fromPromise } from 'xstate';
import { SpanStatusCode, context, trace, type Context, type Span } from '@opentelemetry/api';
import {
  CriteriaResultSchema,
  EVENT_PAYLOAD_LIMIT,
  PolishError,
  RevisionSchema,
  ZERO_USAGE,
  addUsage,
  evaluationSchemaFor,
  type Criterion,
  type ModelInfo,
  type PayloadOf,
  type Role,
  type TaskRole,
  type RunEvent,
  type Usage,
} from '@polish/protocol';
import type { z } from 'zod';
import type { Dispatcher } from './dispatcher.js';

/** A wave's validated answer with what it cost and who gave it. */
export interface WaveOutput<T> {
  value: T;
  usage: Usage;
  model: ModelInfo;
}

/** Settings shared by the wave actors of one run. */
export interface WaveActorOptions {
  dispatcher: Dispatcher;
  /**
   * How many times a task is re-dispatched when its answer breaks the contract
   * (agents repair model output themselves first; this guards foreign workers).
   */
  maxContractRedispatch?: number;
  report?: (event: DistributiveOmit<RunEvent, 'runId' | 'at'>) => void;
  /**
   * Durable runs: finished waves are recorded under an idempotency key (run, wave, iteration),
   * and a wave whose result is recorded is never dispatched again (XState re-runs in-flight
   * invoked promises when a snapshot is restored).
   */
  ledger?: WaveLedger;
  /**
   * The OpenTelemetry context of the run (its `polish.run` span): each wave's `polish.wave <role>`
   * span is its child. Default: the context active when the wave starts.
   */
  traceContext?: Context;
}

/** No-op unless an OpenTelemetry SDK is registered. */
const tracer = trace.getTracer('@polish/orchestrator');

/** Where a durable run records each finished wave. */
export interface WaveLedger {
  /** The key of a wave: e.g. `<runId>.evaluate.2`. */
  keyOf(role: Role, iteration: number): string;
  load(key: string): Promise<WaveOutput<unknown> | undefined>;
  save(key: string, output: WaveOutput<unknown>): Promise<void>;
  /** Resolves once every state transition so far is persisted: nothing is sent before that. */
  persisted(): Promise<void>;
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** A payload or result for an event: the value and its size, the value left out when it is large. */
export function inspectable<K extends 'payload' | 'result'>(
  key: K,
  value: unknown,
): { [P in K]?: unknown } & { [P in `${K}_bytes`]: number } {
  const bytes = Buffer.byteLength(JSON.stringify(value ?? null));
  return { [key]: bytes <= EVENT_PAYLOAD_LIMIT ? value : undefined, [`${key}_bytes`]: bytes } as never;
}

/**
 * Runs a wave's dispatches inside its span, `polish.wave <role>`, a child of `parent`: the
 * dispatcher carries the span's context to the worker in the message headers. A failure marks
 * the span with its code (never its reason, which may quote a provider's error text).
 */
export function inWaveSpan<T>(
  role: TaskRole,
  iteration: number,
  parent: Context,
  run: (span: Span, spanContext: Context) => Promise<T>,
): Promise<T> {
  const attributes = { 'polish.role': role, 'polish.iteration': iteration };
  return tracer.startActiveSpan(`polish.wave ${role}`, { attributes }, parent, async (span) => {
    const spanContext = trace.setSpan(parent, span);
    try {
      return await context.with(spanContext, () => run(span, spanContext));
    } catch (error) {
      const code = PolishError.from(error).code;
      span.setAttribute('error.type', code);
      span.setStatus({ code: SpanStatusCode.ERROR, message: code });
      throw error;
    } finally {
      span.end();
    }
  });
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
  const attempts = 1 + (options.maxContractRedispatch ?? 1);
  const started = Date.now();
  const key = options.ledger?.keyOf(role, input.iteration);
  if (options.ledger && key) {
    const recorded = await options.ledger.load(key);
    if (recorded) {
      // Finished before a restart: its result stands, and it is not paid for again.
      const parsed = schema.safeParse(recorded.value);
      if (parsed.success) return { ...recorded, value: parsed.data };
    }
    await options.ledger.persisted();
  }
  // One span per wave dispatched: a wave replayed from the ledger sent nothing, so has none.
  return inWaveSpan(role, input.iteration, options.traceContext ?? context.active(), (span, spanContext) =>
    dispatchWave(options, role, input, schema, signal, { attempts, started, key, span, context: spanContext }),
  );
}

/** Dispatches a wave until its answer meets the contract, within bounds, and reports it. */
async function dispatchWave<R extends Role, T>(
  options: WaveActorOptions,
  role: R,
  input: WaveInput<R>,
  schema: z.ZodType<T>,
  signal: AbortSignal,
  wave: { attempts: number; started: number; key: string | undefined; span: Span; context: Context },
): Promise<WaveOutput<T>> {
  const { attempts, started, key, span } = wave;
  options.report?.({
    type: 'wave.started',
    role,
    iteration: input.iteration,
    ...inspectable('payload', input.payload),
  });
  let lastProblem = '';
  let dispatches = 0;
  // Usage of answers that were discarded or failed: paid for, so counted in the failure.
  let spent = ZERO_USAGE;
  let spentModel: ModelInfo | undefined;
  for (let attempt = 1; attempt <= attempts; attempt += 1) {
    let outcome;
    try {
      outcome = await context.with(wave.context, () =>
        // A re-send after a rejected answer is a new task: its key differs, so no cache replays the rejected answer.
        options.dispatcher.dispatch(role, input.payload, {
          signal,
          ...(key ? { idempotencyKey: attempt === 1 ? key : `${key}#resend-${attempt}` } : {}),
        }),
      );
    } catch (error) {
      const failure = PolishError.from(error);
      throw failure.withUsage(addUsage(spent, failure.usage ?? ZERO_USAGE), failure.model ?? spentModel);
    }
    dispatches += outcome.attempts;
    span.setAttributes({ 'polish.attempts': dispatches, 'polish.worker.pid': outcome.worker.pid });
    const parsed = schema.safeParse(outcome.result);
    if (parsed.success) {
      options.report?.({
        type: 'wave.finished',
        role,
        iteration: input.iteration,
        duration_ms: Date.now() - started,
        usage: outcome.usage,
        model: outcome.model,
        worker: outcome.worker,
        attempts: dispatches,
        ...inspectable('result', outcome.result),
      });
      const output = { value: parsed.data, usage: outcome.usage, model: outcome.model };
      signal.throwIfAborted();
      if (options.ledger && key) await options.ledger.save(key, output);
      return output;
    }
    lastProblem = parsed.error.issues
      .map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`)
      .join('; ');
    spent = addUsage(spent, outcome.usage);
    spentModel = outcome.model;
  }
  throw new PolishError('CONTRACT_VIOLATION', `${role} agent broke the contract ${attempts} times: ${lastProblem}`, {
    usage: spent,
    ...(spentModel ? { model: spentModel } : {}),
  });
}

/** The three wave actors of the polish machine, each going through the dispatcher. */
export function createWaveActors(options: WaveActorOptions) {
  return {
    extractCriteria: fromPromise<WaveOutput<{ criteria: Criterion[] }>, WaveInput<'criteria'>>(({ input, signal }) =>
      runWave(options, 'criteria', input, CriteriaResultSchema, signal),
    ),
    evaluate: fromPromise<
      WaveOutput<{ scores: z.infer<ReturnType<typeof evaluationSchemaFor>>['scores'] }>,
      WaveInput<'evaluate'>
    >(({ input, signal }) => runWave(options, 'evaluate', input, evaluationSchemaFor(input.payload.criteria), signal)),
    revise: fromPromise<WaveOutput<{ artifact: string }>, WaveInput<'revise'>>(({ input, signal }) =>
      runWave(options, 'revise', input, RevisionSchema, signal),
    ),
  };
}
