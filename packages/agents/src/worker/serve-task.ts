import type { JetStreamClient, JsMsg } from '@nats-io/jetstream';
import type { MsgHdrs, NatsConnection } from '@nats-io/transport-node';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, propagation, trace, type TextMapGetter } from '@opentelemetry/api';
import {
  PROTOCOL_VERSION,
  PolishError,
  ZERO_USAGE,
  progressSubject,
  replySubject,
  type TaskProgress,
  type TaskReply,
  type TaskRole,
  type WorkerInfo,
} from '@polish/protocol';
import { handleTask } from '../handle-task.js';
import type { CommandSettings } from '../handlers/critique-command.js';
import type { ModelProvider } from '../providers/model-provider.js';
import type { WorkerNotice } from './worker-config.js';

/** What a worker brings to each task it serves. */
export interface TaskContext {
  role: TaskRole;
  prefix: string;
  model: ModelProvider;
  worker: WorkerInfo;
  connection: NatsConnection;
  js: JetStreamClient;
  /** How long the queue waits for a sign of life before it hands the task to another worker. */
  leaseMs: number;
  /** What the host's operator allows critique commands. */
  command: CommandSettings;
  notify: (notice: WorkerNotice) => Promise<void>;
}

/** No-op unless an OpenTelemetry SDK is registered (see telemetry.ts). */
const tracer = trace.getTracer('@polish/agents');

/** Reads the trace context (`traceparent`) the orchestrator put in the message headers. */
const headerGetter: TextMapGetter<MsgHdrs | undefined> = {
  get: (headers, key) => headers?.get(key) || undefined,
  keys: (headers) => headers?.keys() ?? [],
};

const envelopeField = (raw: unknown, field: string): unknown => (raw as Record<string, unknown> | null)?.[field];

/**
 * Resolves with the handler's reply, or with `undefined` once the task's time is up: past it
 * the orchestrator counts on another worker, so this one gives the task back (and, single use,
 * ends, which also ends the model call nobody would read).
 */
function withinTime(handling: Promise<TaskReply>, raw: unknown, takenAt: number): Promise<TaskReply | undefined> {
  const timeoutMs = Number(envelopeField(raw, 'timeoutMs'));
  const deadline = Number(envelopeField(raw, 'deadline'));
  const limits = [
    Number.isFinite(timeoutMs) && timeoutMs > 0 ? takenAt + timeoutMs : Infinity,
    Number.isFinite(deadline) && deadline > 0 ? deadline : Infinity,
  ];
  const giveUpAt = Math.min(...limits);
  if (giveUpAt === Infinity) return handling;
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), Math.max(0, giveUpAt - Date.now()));
  });
  return Promise.race([handling, expired]).finally(() => clearTimeout(timer));
}

/**
 * Serves one task taken from the queue inside a `polish.task <role>` span (a child of the
 * orchestrator's wave span when the message carries its trace context): says it took it,
 * keeps its lease alive while the handler works, publishes the reply to
 * `polish.v1.reply.<role>.<key>` (stored in the replies stream) and only then acks the task.
 * Out of time, it gives the task back to the queue instead. Never throws.
 */
export function serveTask(message: JsMsg, context: TaskContext): Promise<void> {
  const parent = propagation.extract(ROOT_CONTEXT, message.headers, headerGetter);
  const attributes = {
    'polish.role': context.role,
    'messaging.system': 'nats',
    'messaging.destination.name': message.subject,
    'process.pid': context.worker.pid,
  };
  return tracer.startActiveSpan(
    `polish.task ${context.role}`,
    { kind: SpanKind.CONSUMER, attributes },
    parent,
    async (span) => {
      try {
        const reply = await answer(message, context);
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

/**
 * The reply as it can travel: one larger than the server's max_payload (a huge revision) becomes
 * a final error naming the sizes, with the usage paid for it, rather than a publish that fails,
 * a crashed worker and the same model calls paid again on every redelivery.
 */
function deliverable(reply: TaskReply, maxPayload: number | undefined, role: TaskRole): TaskReply {
  const bytes = Buffer.byteLength(JSON.stringify(reply));
  // Headroom for the message's own framing.
  if (!maxPayload || bytes <= maxPayload - 1024) return reply;
  const error = new PolishError(
    'CONTRACT_VIOLATION',
    `${role} answer is ${bytes} bytes, over this NATS server's max_payload of ${maxPayload}: it cannot be delivered`,
    { retryable: false },
  );
  const { v, taskId, usage, worker } = reply;
  return { v, taskId, ok: false, error: error.toWire(), usage, worker, ...(reply.model ? { model: reply.model } : {}) };
}

async function answer(message: JsMsg, context: TaskContext): Promise<TaskReply | undefined> {
  const { role, prefix, worker } = context;
  let raw: unknown;
  try {
    raw = message.json();
  } catch {
    // Not a task at all: nobody could be told, so it leaves the queue for good.
    message.term('not JSON');
    return undefined;
  }
  const taskId = String(envelopeField(raw, 'taskId') ?? 'unknown');
  const idempotencyKey = envelopeField(raw, 'idempotencyKey');
  const key = typeof idempotencyKey === 'string' && /^[a-f0-9]{64}$/.test(idempotencyKey) ? idempotencyKey : undefined;
  if (!key) {
    message.term('no idempotency key: no reply subject');
    return undefined;
  }
  const takenAt = Date.now();
  const { deliveryCount, streamSequence, deliverySequence } = message.info;
  const progress = (state: TaskProgress['state'], reason?: string) =>
    context.connection.publish(
      progressSubject(role, key, prefix),
      JSON.stringify({
        v: PROTOCOL_VERSION,
        taskId,
        state,
        delivery: deliveryCount,
        queue_seq: streamSequence,
        delivery_seq: deliverySequence,
        worker,
        ...(reason ? { reason } : {}),
      } satisfies TaskProgress),
    );
  progress('taken');
  // The host learns how to give the task back at once should this process die holding it.
  const ack = (message as JsMsg & { reply?: string }).reply ?? '';
  await context.notify({
    type: 'task.taken',
    taskId,
    key,
    ack,
    delivery: deliveryCount,
    queueSeq: streamSequence,
    deliverySeq: deliverySequence,
  });
  // The lease is renewed while the handler works, so a long model call is not handed to another worker.
  const lease = setInterval(() => message.working(), Math.max(1_000, Math.floor(context.leaseMs / 3)));
  try {
    const handling = handleTask(raw, context.model, worker, context.command);
    // Still at work a turn of the event loop later, the handler waits on I/O (its model, a command):
    // the host may now boot this worker's successor without slowing the answer.
    let settled = false;
    const markSettled = () => {
      settled = true;
    };
    void handling.then(markSettled, markSettled);
    setImmediate(() => {
      if (!settled) void context.notify({ type: 'task.waiting', taskId });
    });
    const reply = await withinTime(handling, raw, takenAt);
    if (!reply) {
      const reason = `its time ran out in the worker after ${Math.round((Date.now() - takenAt) / 1000)} s`;
      progress('released', reason);
      message.nak();
      await context.notify({ type: 'task.done', taskId, ok: false });
      return {
        v: PROTOCOL_VERSION,
        taskId,
        ok: false,
        error: new PolishError('TIMEOUT', reason).toWire(),
        usage: ZERO_USAGE,
        worker,
      };
    }
    const delivered = deliverable(reply, context.connection.info?.max_payload, role);
    // The reply is stored before the task leaves the queue: a crash in between redelivers a paid task, never loses one.
    await context.js.publish(replySubject(role, key, prefix), JSON.stringify(delivered));
    await message.ackAck().catch(() => message.ack());
    await context.notify({ type: 'task.done', taskId, ok: delivered.ok });
    return delivered;
  } finally {
    clearInterval(lease);
  }
}
