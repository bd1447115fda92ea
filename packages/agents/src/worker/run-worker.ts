import { connect } from '@nats-io/transport-node';
import { PROTOCOL_VERSION, PolishError, ZERO_USAGE, taskSubject } from '@polish/protocol';
import { handleTask, currentWorker } from '../handle-task.js';
import { createModel } from '../providers/model-settings.js';
import type { WorkerConfig, WorkerNotice } from './worker-config.js';
import { warmUp } from './warm-up.js';

/**
 * One worker process's life: connect, take at most `reuse` tasks of one role from the role's
 * queue group (`max` on the subscription, so the server itself stops delivering), answer each,
 * then drain and return. `stop` resolves the same way early: no new tasks, the one in hand
 * finishes and is answered.
 */
export async function runWorker(config: WorkerConfig, notify: (notice: WorkerNotice) => void, stop: AbortSignal): Promise<void> {
  const model = await createModel(config.model);
  const worker = currentWorker();
  const connection = await connect({ servers: config.natsUrl, name: `polish-${config.role}-${worker.pid}` });
  await warmUp(config.role, connection);
  // Stopped while booting (the abort event has already fired): leave without taking a task.
  if (stop.aborted) return connection.drain();
  const subscription = connection.subscribe(taskSubject(config.role, config.prefix), { queue: config.role, max: config.reuse });
  // drain() rejects once the subscription has already closed (max reached): nothing to stop then.
  const onStop = () => void subscription.drain().catch(() => undefined);
  stop.addEventListener('abort', onStop, { once: true });
  await connection.flush();
  notify({ type: 'ready' });
  for await (const message of subscription) {
    let raw: unknown;
    try {
      raw = message.json();
    } catch {
      const error = new PolishError('INVALID_INPUT', 'task rejected before any model call: the message is not JSON');
      message.respond(JSON.stringify({ v: PROTOCOL_VERSION, taskId: 'unknown', ok: false, error: error.toWire(), usage: ZERO_USAGE, worker }));
      continue;
    }
    const taskId = String((raw as { taskId?: unknown } | null)?.taskId ?? 'unknown');
    notify({ type: 'task.taken', taskId });
    const reply = await handleTask(raw, model, worker);
    message.respond(JSON.stringify(reply));
    notify({ type: 'task.done', taskId, ok: reply.ok });
  }
  stop.removeEventListener('abort', onStop);
  await connection.drain();
}
