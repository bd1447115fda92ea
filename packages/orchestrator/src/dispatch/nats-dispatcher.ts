import { randomUUID } from 'node:crypto';
import { sha256 } from '../hash.js';
import { setTimeout as delay } from 'node:timers/promises';
import { RequestError, TimeoutError, headers, type MsgHdrs, type NatsConnection } from '@nats-io/transport-node';
import { context, propagation, type Context } from '@opentelemetry/api';
import {
  DEFAULT_SUBJECT_PREFIX,
  PROTOCOL_VERSION,
  PolishError,
  TaskEnvelopeSchema,
  TaskReplySchema,
  taskSubject,
  type TaskRole,
} from '@polish/protocol';
import type { DispatchOptions, Dispatcher, DispatchOutcome } from './dispatcher.js';

/** Settings of the NATS dispatcher; every bound is finite, so a run can never hang. */
export interface NatsDispatcherOptions {
  connection: NatsConnection;
  prefix?: string;
  /**
   * How long one dispatch waits for its reply. Default 300 s: above a provider's own budget
   * (60 s per attempt, 3 attempts, backoff), so a slow API ends as the provider's MODEL_ERROR
   * naming the role rather than as a re-dispatch.
   */
  taskTimeoutMs?: number;
  /** Dispatches of one task (timeouts and retryable errors) before the run fails. Default 3. */
  maxAttempts?: number;
  /** How long to keep retrying while no worker serves the role at all. Default 30 s. */
  workerWaitMs?: number;
  /** First backoff between retries; doubles up to 1 s. Default 20 ms. */
  backoffMs?: number;
}

const seconds = (ms: number) => `${Number((ms / 1000).toFixed(1))} s`;

function isNoResponders(error: unknown): boolean {
  return error instanceof RequestError && error.isNoResponders();
}

function isTimeout(error: unknown): boolean {
  return error instanceof TimeoutError || (error instanceof Error && error.cause instanceof TimeoutError);
}

/**
 * The W3C trace context (`traceparent`) of the active span as NATS headers, so that the worker's
 * spans join the orchestrator's trace. None when no propagator is registered (tracing off): the
 * message then goes out exactly as before.
 */
function traceHeadersOf(active: Context): MsgHdrs | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(active, carrier);
  const entries = Object.entries(carrier);
  if (entries.length === 0) return undefined;
  const traceHeaders = headers();
  for (const [key, value] of entries) traceHeaders.set(key, value);
  return traceHeaders;
}

/**
 * Sends each task as a NATS request to `polish.v1.task.<role>` (served by the queue group
 * `<role>`) and waits for the reply. "No responders" is retried with backoff until no worker
 * has appeared for `workerWaitMs`; a reply missing its deadline, or a retryable error reply
 * (the host reports a worker that died holding the task as WORKER_CRASHED), is dispatched
 * again, `maxAttempts` dispatches at most. After that the task fails with a reason naming the
 * role. Note: any plain subscriber on a task subject (say a `>` monitor) counts as a responder
 * for NATS, so "no responders" then becomes a timeout.
 */
export function createNatsDispatcher(options: NatsDispatcherOptions): Dispatcher {
  const prefix = options.prefix ?? DEFAULT_SUBJECT_PREFIX;
  const taskTimeoutMs = options.taskTimeoutMs ?? 300_000;
  const maxAttempts = options.maxAttempts ?? 3;
  const workerWaitMs = options.workerWaitMs ?? 30_000;
  const firstBackoffMs = options.backoffMs ?? 20;

  /** One request, raced against the caller's abort so a cancelled run stops waiting at once. */
  function request(subject: string, task: string, timeoutMs: number, signal?: AbortSignal, traceHeaders?: MsgHdrs) {
    const pending = options.connection.request(subject, task, {
      timeout: timeoutMs,
      ...(traceHeaders ? { headers: traceHeaders } : {}),
    });
    if (!signal) return pending;
    return new Promise<Awaited<typeof pending>>((resolve, reject) => {
      const onAbort = () => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      pending.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
    });
  }

  async function dispatch(
    role: TaskRole,
    payload: unknown,
    dispatchOptions: DispatchOptions = {},
  ): Promise<DispatchOutcome> {
    const { signal, idempotencyKey } = dispatchOptions;
    const timeoutMs = dispatchOptions.timeoutMs ?? taskTimeoutMs;
    const attemptsAllowed = dispatchOptions.maxAttempts ?? maxAttempts;
    const subject = taskSubject(role, prefix);
    const taskId = randomUUID();
    // Taken when the dispatch starts: the caller's active span (a wave) is the parent of every attempt.
    const traceHeaders = traceHeadersOf(context.active());
    let backoffMs = firstBackoffMs;
    // The worker-wait window starts when "no responders" starts, not when the task did.
    let noRespondersSince: number | undefined;
    // An attempt is a dispatch that reached a worker; waiting out "no responders" is not one.
    let attempt = 1;
    for (;;) {
      signal?.throwIfAborted();
      const task = TaskEnvelopeSchema.parse({
        v: PROTOCOL_VERSION,
        taskId,
        role,
        attempt,
        deadline: Date.now() + timeoutMs,
        ...(idempotencyKey ? { idempotencyKey: sha256(`${idempotencyKey}/${attempt}`) } : {}),
        payload,
      });
      let failure: PolishError;
      try {
        const message = await request(subject, JSON.stringify(task), timeoutMs, signal, traceHeaders);
        const reply = TaskReplySchema.parse(message.json());
        if (reply.taskId !== taskId)
          throw new PolishError('INTERNAL', `${role} reply is for task ${reply.taskId}, not ${taskId}`);
        if (reply.ok)
          return {
            result: reply.result,
            usage: reply.usage,
            model: reply.model,
            worker: reply.worker,
            attempts: attempt,
          };
        failure = PolishError.fromWire(reply.error, reply.usage, reply.model);
      } catch (error) {
        signal?.throwIfAborted();
        if (isNoResponders(error)) {
          noRespondersSince ??= Date.now();
          const waited = Date.now() - noRespondersSince;
          if (waited >= workerWaitMs) {
            throw new PolishError(
              'NO_RESPONDERS',
              `no ${role} workers answered within ${seconds(workerWaitMs)} (nobody serves ${subject})`,
              {
                cause: error,
              },
            );
          }
          await delay(Math.min(backoffMs, workerWaitMs - waited), undefined, signal ? { signal } : {});
          backoffMs = Math.min(backoffMs * 2, 1_000);
          continue;
        }
        failure = isTimeout(error)
          ? new PolishError('TIMEOUT', `no ${role} worker replied within ${seconds(timeoutMs)}`, { cause: error })
          : error instanceof PolishError
            ? error
            : new PolishError('INTERNAL', `${role} dispatch failed: ${String(error)}`, { cause: error });
      }
      // A timeout or a crashed worker (retryable) is dispatched again, within bounds; anything else is final.
      noRespondersSince = undefined;
      if (!failure.retryable) throw failure;
      if (attempt >= attemptsAllowed) {
        throw new PolishError(failure.code, `${failure.message} (${attempt} attempt${attempt === 1 ? '' : 's'})`, {
          cause: failure,
          retryable: false,
        });
      }
      attempt += 1;
      await delay(backoffMs, undefined, signal ? { signal } : {});
      backoffMs = Math.min(backoffMs * 2, 1_000);
    }
  }

  return {
    dispatch: (role, payload, dispatchOptions) => dispatch(role, payload, dispatchOptions),
  };
}
