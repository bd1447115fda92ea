import { randomUUID } from 'node:crypto';
import {
  PROTOCOL_VERSION,
  PolishError,
  TaskEnvelopeSchema,
  TaskReplySchema,
  type TaskEnvelope,
  type TaskReply,
} from '@polish/protocol';
import type { Dispatcher } from './dispatcher.js';

/** Answers one task envelope; `@polish/agents` provides `handleTask` for this. */
export type TaskHandler = (task: TaskEnvelope) => Promise<TaskReply>;

/**
 * A dispatcher that calls a task handler in this process. Tasks still go through the
 * wire schemas in both directions, so what works here works over NATS.
 */
export function createInProcessDispatcher(handler: TaskHandler, options: { taskTimeoutMs?: number } = {}): Dispatcher {
  return {
    async dispatch(role, payload, dispatchOptions) {
      const timeoutMs = dispatchOptions?.timeoutMs ?? options.taskTimeoutMs ?? 120_000;
      dispatchOptions?.signal?.throwIfAborted();
      const task = TaskEnvelopeSchema.parse({
        v: PROTOCOL_VERSION,
        taskId: randomUUID(),
        role,
        attempt: 1,
        deadline: Date.now() + timeoutMs,
        payload,
      });
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_resolve, reject) => {
        timer = setTimeout(
          () => reject(new PolishError('TIMEOUT', `the ${role} handler did not answer within ${timeoutMs / 1000} s`)),
          timeoutMs,
        );
      });
      const reply = TaskReplySchema.parse(
        await Promise.race([handler(task), timeout]).finally(() => clearTimeout(timer)),
      );
      if (!reply.ok) throw PolishError.fromWire(reply.error, reply.usage, reply.model);
      return { result: reply.result, usage: reply.usage, model: reply.model, worker: reply.worker, attempts: 1 };
    },
  };
}
