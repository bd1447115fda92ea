import { connect, type Msg, type MsgHdrs } from '@nats-io/transport-node';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, propagation, trace, type TextMapGetter } from '@opentelemetry/api';
import {
  PROTOCOL_VERSION,
  PolishError,
  ZERO_USAGE,
  taskSubject,
  type TaskReply,
  type TaskRole,
  type WorkerInfo,
  natsServers,
} from '@polish/protocol';
import { handleTask, currentWorker } from '../handle-task.js';
import { createModel } from '../providers/model-settings.js';
import type { ModelProvider } from '../providers/model-provider.js';
import type { WorkerConfig, WorkerNotice } from './worker-config.js';
import { warmUp } from './warm-up.js';

/** Grace for clock skew between the orchestrator's machine and this one. */
const DEADLINE_GRACE_MS = 1_000;

/**
 * Past the task's deadline the orchestrator has stopped waiting (and sent the task again):
 * answer TIMEOUT and let this single-use process end, which also ends the model call in flight
 * instead of paying for an answer nobody reads.
 */
function withinDeadline(
  handling: Promise<TaskReply>,
  raw: unknown,
  taskId: string,
  worker: WorkerInfo,
): Promise<TaskReply> {
  const deadline = Number((raw as { deadline?: unknown } | null)?.deadline);
  if (!Number.isFinite(deadline) || deadline <= 0) return handling;
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<TaskReply>((resolve) => {
    timer = setTimeout(
      () => {
        const error = new PolishError(
          'TIMEOUT',
          'the task passed its deadline in the worker; its answer would not be read',
        );
        resolve({ v: PROTOCOL_VERSION, taskId, ok: false, error: error.toWire(), usage: ZERO_USAGE, worker });
      },
      Math.max(0, deadline + DEADLINE_GRACE_MS - Date.now()),
    );
  });
  return Promise.race([handling, expired]).finally(() => clearTimeout(timer));
}

/** No-op unless an OpenTelemetry SDK is registered (see telemetry.ts). */
const tracer = trace.getTracer('@polish/agents');

/** Reads the trace context (`traceparent`) the orchestrator put in the message headers. */
const headerGetter: TextMapGetter<MsgHdrs | undefined> = {
  get: (headers, key) => headers?.get(key) || undefined,
  keys: (headers) => headers?.keys() ?? [],
};

/**
 * Answers one task message inside a `polish.task <role>` span, a child of the orchestrator's
 * wave span when the message carries its trace context; the model-call spans of the handler
 * nest under it through the active context. Never throws (failures become error replies).
 */
function serve(
  message: Msg,
  role: TaskRole,
  model: ModelProvider,
  worker: WorkerInfo,
  notify: (notice: WorkerNotice) => Promise<void>,
) {
  const parent = propagation.extract(ROOT_CONTEXT, message.headers, headerGetter);
  const attributes = {
    'polish.role': role,
    'messaging.system': 'nats',
    'messaging.destination.name': message.subject,
    'process.pid': worker.pid,
  };
  return tracer.startActiveSpan(
    `polish.task ${role}`,
    { kind: SpanKind.CONSUMER, attributes },
    parent,
    async (span) => {
      try {
        const reply = await answer(message, model, worker, notify);
        if (reply) {
          span.setAttributes({ 'polish.task_id': reply.taskId, 'polish.ok': reply.ok });
          if (!reply.ok) {
            span.setAttribute('error.type', reply.error.code);
            span.setStatus({ code: SpanStatusCode.ERROR, message: reply.error.code });
          }
        }
      } finally {
        span.end();
      }
    },
  );
}

/** Answers one task message and returns the reply sent; never throws (failures become error replies). */
async function answer(
  message: Msg,
  model: ModelProvider,
  worker: WorkerInfo,
  notify: (notice: WorkerNotice) => Promise<void>,
): Promise<TaskReply | undefined> {
  let raw: unknown;
  try {
    raw = message.json();
  } catch {
    const error = new PolishError('INVALID_INPUT', 'task rejected before any model call: the message is not JSON');
    const reply: TaskReply = {
      v: PROTOCOL_VERSION,
      taskId: 'unknown',
      ok: false,
      error: error.toWire(),
      usage: ZERO_USAGE,
      worker,
    };
    message.respond(JSON.stringify(reply));
    return reply;
  }
  const taskId = String((raw as { taskId?: unknown } | null)?.taskId ?? 'unknown');
  // The host learns where the reply goes, so it can answer WORKER_CRASHED if this process dies.
  await notify({ type: 'task.taken', taskId, ...(message.reply ? { reply: message.reply } : {}) });
  const reply = await withinDeadline(handleTask(raw, model, worker), raw, taskId, worker);
  message.respond(JSON.stringify(reply));
  await notify({ type: 'task.done', taskId, ok: reply.ok });
  return reply;
}

/**
 * One worker process's life: connect, warm up, then take at most `reuse` tasks of one role
 * from the role's queue group, one at a time (each subscription has `max: 1`, so the server
 * never hands a busy worker a second task), answer each, then drain and return. `stop` ends it
 * early the same way: no new task, the one in hand finishes and is answered.
 */
export async function runWorker(
  config: WorkerConfig,
  notify: (notice: WorkerNotice) => Promise<void>,
  stop: AbortSignal,
): Promise<void> {
  const model = await createModel(config.model);
  const worker = currentWorker();
  const connection = await connect({
    servers: natsServers(config.natsUrl),
    name: `polish-${config.role}-${worker.pid}`,
    ...config.auth,
  });
  await warmUp(config.role, connection, config.auth?.inboxPrefix);
  for (let served = 0; served < config.reuse && !stop.aborted; served += 1) {
    const subscription = connection.subscribe(taskSubject(config.role, config.prefix), { queue: config.role, max: 1 });
    // drain() rejects once the subscription has already closed (its one message taken): nothing to stop then.
    const onStop = () => void subscription.drain().catch(() => undefined);
    stop.addEventListener('abort', onStop, { once: true });
    await connection.flush();
    if (served === 0) await notify({ type: 'ready' });
    for await (const message of subscription) await serve(message, config.role, model, worker, notify);
    stop.removeEventListener('abort', onStop);
  }
  await connection.drain();
}
