import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { RequestError, TimeoutError, type NatsConnection } from '@nats-io/transport-node';
import {
  DEFAULT_SUBJECT_PREFIX,
  PROTOCOL_VERSION,
  PolishError,
  TaskEnvelopeSchema,
  TaskReplySchema,
  taskSubject,
  type Role,
} from '@polish/protocol';
import type { Dispatcher, DispatchOutcome } from './dispatcher.js';

/** Settings of the NATS dispatcher; every bound is finite, so a run can never hang. */
export interface NatsDispatcherOptions {
  connection: NatsConnection;
  prefix?: string;
  /** How long one dispatch waits for its reply (a model call can be slow). Default 120 s. */
  taskTimeoutMs?: number;
  /** Dispatches of one task that time out before the run fails. Default 3. */
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
 * Sends each task as a NATS request to `polish.v1.task.<role>` (served by the queue group
 * `<role>`) and waits for the reply. No responders is retried with backoff for
 * `workerWaitMs`; a reply missing its deadline (e.g. the worker was killed) is retried up to
 * `maxAttempts` dispatches. After that the task fails with a reason naming the role.
 */
export function createNatsDispatcher(options: NatsDispatcherOptions): Dispatcher {
  const prefix = options.prefix ?? DEFAULT_SUBJECT_PREFIX;
  const taskTimeoutMs = options.taskTimeoutMs ?? 120_000;
  const maxAttempts = options.maxAttempts ?? 3;
  const workerWaitMs = options.workerWaitMs ?? 30_000;
  const firstBackoffMs = options.backoffMs ?? 20;

  async function dispatch(role: Role, payload: unknown, signal?: AbortSignal): Promise<DispatchOutcome> {
    const subject = taskSubject(role, prefix);
    const taskId = randomUUID();
    const started = Date.now();
    let backoffMs = firstBackoffMs;
    let timeouts = 0;
    // An attempt is a dispatch that reached a worker; waiting out "no responders" is not one.
    let attempt = 1;
    for (;;) {
      signal?.throwIfAborted();
      const task = TaskEnvelopeSchema.parse({ v: PROTOCOL_VERSION, taskId, role, attempt, deadline: Date.now() + taskTimeoutMs, payload });
      try {
        const message = await options.connection.request(subject, JSON.stringify(task), { timeout: taskTimeoutMs });
        const reply = TaskReplySchema.parse(message.json());
        if (reply.taskId !== taskId) throw new PolishError('INTERNAL', `${role} reply is for task ${reply.taskId}, not ${taskId}`);
        if (!reply.ok) throw PolishError.fromWire(reply.error);
        return { result: reply.result, usage: reply.usage, model: reply.model, worker: reply.worker, attempts: attempt };
      } catch (error) {
        if (isNoResponders(error)) {
          if (Date.now() - started + backoffMs > workerWaitMs) {
            throw new PolishError('NO_RESPONDERS', `no ${role} workers answered within ${seconds(workerWaitMs)} (nobody serves ${subject})`, {
              cause: error,
            });
          }
        } else if (isTimeout(error)) {
          timeouts += 1;
          attempt += 1;
          if (timeouts >= maxAttempts) {
            throw new PolishError('TIMEOUT', `no ${role} worker replied within ${seconds(taskTimeoutMs)}, ${timeouts} attempts`, {
              cause: error,
            });
          }
        } else {
          throw error instanceof PolishError ? error : new PolishError('INTERNAL', `${role} dispatch failed: ${String(error)}`, { cause: error });
        }
      }
      await delay(backoffMs, undefined, signal ? { signal } : {});
      backoffMs = Math.min(backoffMs * 2, 1_000);
    }
  }

  return {
    dispatch: (role, payload, dispatchOptions) => dispatch(role, payload, dispatchOptions?.signal),
  };
}
