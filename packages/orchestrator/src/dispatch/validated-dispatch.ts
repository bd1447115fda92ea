import { SpanStatusCode, context, trace, type Context, type Span } from '@opentelemetry/api';
import {
  EVENT_PAYLOAD_LIMIT,
  PolishError,
  ZERO_USAGE,
  addUsage,
  describeIssues,
  readTolerantly,
  type ModelInfo,
  type PayloadOf,
  type RunEvent,
  type TaskRole,
  type Usage,
  type WorkerInfo,
} from '@polish/protocol';
import type { z } from 'zod';
import type { DispatchProgress, Dispatcher } from './dispatcher.js';

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** A run event before the driver stamps it with the run id and the time. */
export type UnstampedEvent = DistributiveOmit<RunEvent, 'runId' | 'at'>;

/** A task's validated answer with what it cost, who gave it, and how many bytes crossed the wire. */
export interface ValidatedOutput<T> {
  value: T;
  usage: Usage;
  model: ModelInfo;
  worker: WorkerInfo;
  /** Dispatches it took, re-sends after a broken contract included. */
  attempts: number;
  /** Bytes of the payload and the answer. */
  bytes: number;
  /** Fields of the answer the contract does not know, dropped before validation. */
  dropped: string[];
}

/** How one validated dispatch is made and reported. */
export interface ValidatedDispatch {
  dispatcher: Dispatcher;
  signal: AbortSignal;
  /** The polish iteration or PAR cycle the task belongs to: for events and spans, never sent to the worker. */
  iteration: number;
  /** Which judge of a quorum sends this task (1..k): for events only, never sent to the worker. */
  judge?: number;
  report?: (event: UnstampedEvent) => void;
  /** The run's span: this wave's `polish.wave <role>` span is its child. Default: the active context. */
  traceContext?: Context;
  /**
   * Re-sends after an answer that breaks the contract (agents repair model output themselves
   * first; this guards against foreign workers). Default 1.
   */
  maxContractRedispatch?: number;
  /** Durable runs: the wave's idempotency key (run, wave, iteration); each re-send gets its own. */
  idempotencyKey?: string;
  /** Send once with this reply timeout, never again (a command critique is not re-run). */
  once?: { timeoutMs: number };
  /** Before each send (1, 2, …): may throw to send nothing more (a budget that cannot cover it). */
  beforeSend?: (send: number) => void;
  /** After each send, with what it cost (answered, rejected or failed). */
  afterSend?: (usage: Usage) => void;
}

/** A dispatcher's word on a task as a run event. */
function progressEvent(
  role: TaskRole,
  iteration: number,
  judge: number | undefined,
  progress: DispatchProgress,
): UnstampedEvent {
  const where = { role, iteration, ...(judge === undefined ? {} : { judge }) };
  switch (progress.type) {
    case 'queued':
      return { type: 'task.queued', ...where, ahead: progress.ahead };
    case 'waiting': {
      const { queued, pulling, inFlight, waitedMs } = progress;
      return { type: 'task.waiting', ...where, queued, pulling, in_flight: inFlight, waited_ms: waitedMs };
    }
    case 'taken':
      return {
        type: 'task.taken',
        ...where,
        worker: progress.worker,
        delivery: progress.delivery,
        queued_ms: progress.queuedMs,
      };
    case 'released':
      return {
        type: 'task.released',
        ...where,
        worker: progress.worker,
        delivery: progress.delivery,
        reason: progress.reason,
      };
  }
}

/** The schema an answer must satisfy, or a function choosing it by the answer's form (edits or full text). */
export type Contract<T> = z.ZodType<T> | ((answer: unknown) => z.ZodType<T>);

/** No-op unless an OpenTelemetry SDK is registered. */
const tracer = trace.getTracer('@polish/orchestrator');

/** A payload or result for an event: the value and its size, the value left out when it is large. */
export function inspectable<K extends 'payload' | 'result'>(
  key: K,
  value: unknown,
): { [P in K]?: unknown } & { [P in `${K}_bytes`]: number } {
  const bytes = Buffer.byteLength(JSON.stringify(value ?? null));
  return { [key]: bytes <= EVENT_PAYLOAD_LIMIT ? value : undefined, [`${key}_bytes`]: bytes } as never;
}

/**
 * Runs a wave inside its span, `polish.wave <role>`, a child of `parent`: the dispatcher carries
 * the span's context to the worker in the message headers. A failure marks the span with its
 * code (never its reason, which may quote a provider's error text).
 */
function inWaveSpan<T>(
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

/**
 * The one way a task is sent (DESIGN §1, "sub-agent contract"): dispatch it in its wave span,
 * validate the answer against the role's schema, re-send only this task when the answer breaks
 * the contract (within bounds), report `wave.started` / `wave.finished`, and fail with
 * CONTRACT_VIOLATION naming the role and the problem. Usage of discarded answers is counted in
 * the failure: it was paid for.
 */
export function dispatchValidated<R extends TaskRole, T>(
  role: R,
  payload: PayloadOf<R>,
  schema: Contract<T>,
  options: ValidatedDispatch,
): Promise<ValidatedOutput<T>> {
  const parent = options.traceContext ?? context.active();
  return inWaveSpan(role, options.iteration, parent, (span, spanContext) =>
    sendUntilValid(role, payload, schema, options, span, spanContext),
  );
}

async function sendUntilValid<R extends TaskRole, T>(
  role: R,
  payload: PayloadOf<R>,
  schema: Contract<T>,
  options: ValidatedDispatch,
  span: Span,
  spanContext: Context,
): Promise<ValidatedOutput<T>> {
  const { signal, iteration, idempotencyKey, once } = options;
  const sends = once ? 1 : 1 + (options.maxContractRedispatch ?? 1);
  const started = Date.now();
  const judged = options.judge === undefined ? {} : { judge: options.judge };
  options.report?.({ type: 'wave.started', role, iteration, ...judged, ...inspectable('payload', payload) });
  let problem = '';
  let dispatches = 0;
  // Answers that were discarded or failed were paid for: counted in the failure.
  let spent = ZERO_USAGE;
  let spentModel: ModelInfo | undefined;
  for (let send = 1; send <= sends; send += 1) {
    try {
      options.beforeSend?.(send);
    } catch (error) {
      throw PolishError.from(error).withUsage(spent, spentModel);
    }
    let outcome;
    try {
      // Inside the wave span's context: the dispatcher puts it in the message headers.
      outcome = await context.with(spanContext, () =>
        options.dispatcher.dispatch(role, payload, {
          signal,
          // A re-send is a new task: its key differs, so no cache replays the rejected answer.
          ...(idempotencyKey
            ? { idempotencyKey: send === 1 ? idempotencyKey : `${idempotencyKey}#resend-${send}` }
            : {}),
          ...(once ? { timeoutMs: once.timeoutMs, maxAttempts: 1 } : {}),
          ...(options.report
            ? { onProgress: (progress) => options.report?.(progressEvent(role, iteration, options.judge, progress)) }
            : {}),
        }),
      );
    } catch (error) {
      const failure = PolishError.from(error);
      options.afterSend?.(failure.usage ?? ZERO_USAGE);
      throw failure.withUsage(addUsage(spent, failure.usage ?? ZERO_USAGE), failure.model ?? spentModel);
    }
    options.afterSend?.(outcome.usage);
    dispatches += outcome.attempts;
    span.setAttributes({ 'polish.attempts': dispatches, 'polish.worker.pid': outcome.worker.pid });
    // Unknown fields are dropped, counted and reported, not refused (a model's `overall`, say).
    const parsed = readTolerantly(typeof schema === 'function' ? schema(outcome.result) : schema, outcome.result);
    if (parsed.success) {
      options.report?.({
        type: 'wave.finished',
        role,
        iteration,
        ...judged,
        ...(parsed.dropped.length > 0 ? { dropped_fields: parsed.dropped } : {}),
        duration_ms: Date.now() - started,
        usage: outcome.usage,
        model: outcome.model,
        worker: outcome.worker,
        attempts: dispatches,
        ...inspectable('result', outcome.result),
        ...(outcome.queuedMs === undefined ? {} : { queued_ms: outcome.queuedMs }),
        ...(outcome.workMs === undefined ? {} : { work_ms: outcome.workMs }),
      });
      signal.throwIfAborted();
      const bytes =
        Buffer.byteLength(JSON.stringify(payload)) + Buffer.byteLength(JSON.stringify(outcome.result ?? null));
      return {
        value: parsed.data,
        usage: outcome.usage,
        model: outcome.model,
        worker: outcome.worker,
        attempts: dispatches,
        bytes,
        dropped: parsed.dropped,
      };
    }
    problem = describeIssues(parsed.error);
    spent = addUsage(spent, outcome.usage);
    spentModel = outcome.model;
  }
  throw new PolishError(
    'CONTRACT_VIOLATION',
    `${role} agent broke the contract ${sends} time${sends === 1 ? '' : 's'}: ${problem}`,
    {
      usage: spent,
      ...(spentModel ? { model: spentModel } : {}),
    },
  );
}
