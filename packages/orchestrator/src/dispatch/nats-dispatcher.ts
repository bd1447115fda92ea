import { randomUUID } from 'node:crypto';
import { headers, type MsgHdrs, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import { context, propagation, type Context } from '@opentelemetry/api';
import {
  CrashNoticeSchema,
  DEFAULT_SUBJECT_PREFIX,
  PROTOCOL_VERSION,
  PolishError,
  TaskEnvelopeSchema,
  TaskProgressSchema,
  TaskReplySchema,
  jetStreamApi,
  maxDeliveriesAdvisory,
  replySubject,
  taskQueueOf,
  type TaskRole,
} from '@polish/protocol';
import { sha256 } from '../hash.js';
import { retrying } from '../nats-retry.js';
import type { DispatchOptions, Dispatcher, DispatchOutcome, DispatchProgress, TaskLane } from './dispatcher.js';
import { openTaskQueue, type TaskQueue, type TaskQueueOptions } from './task-queue.js';
import { createQueueWatch, type QueueWatch } from './queue-watch.js';

/** Settings of the NATS dispatcher; every bound is finite unless said otherwise, so a run never hangs. */
export interface NatsDispatcherOptions {
  connection: NatsConnection;
  prefix?: string;
  /** The task queue, or how to open it (created when missing). */
  queue?: TaskQueue | TaskQueueOptions;
  /**
   * How long a worker may work on one task (start to close). Default 300 s: above a provider's
   * own budget (60 s per attempt, 3 attempts, backoff), so a slow API ends as the provider's
   * MODEL_ERROR naming the role rather than as a redelivery.
   */
  taskTimeoutMs?: number;
  /** How long a task may wait while no worker pulls from its role's queue at all. Default 30 s. */
  workerWaitMs?: number;
  /** How long a task may wait in the queue while workers are busy (schedule to start). Default: no limit. */
  queueWaitMs?: number;
  /** How often a waiting task reports that it still waits. Default 5 s. */
  progressIntervalMs?: number;
}

const seconds = (ms: number) => `${Number((ms / 1000).toFixed(1))} s`;
const plural = (count: number, noun: string) => `${count} ${noun}${count === 1 ? '' : 's'}`;

/**
 * The W3C trace context (`traceparent`) of the active span as NATS headers, so that the worker's
 * spans join the orchestrator's trace. None when no propagator is registered (tracing off).
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

/** A task this dispatcher waits for, by its idempotency key. */
interface PendingTask {
  role: TaskRole;
  /** The model lane it waits in, if not its role's queue. */
  lane: TaskLane | undefined;
  /** The stream it waits in (the tasks stream, or its role's lanes stream). */
  stream: string;
  key: string;
  /** Its sequence in that stream, once published. */
  seq: number | undefined;
  queuedAt: number;
  /** When its current delivery was taken; undefined while it waits in the queue. */
  takenAt: number | undefined;
  /** Whether task.queued has been reported (it is, once, before anything else). */
  queuedReported: boolean;
  deliveries: number;
  maxAttempts: number;
  timeoutMs: number;
  lastCause: string | undefined;
  safety: NodeJS.Timeout | undefined;
  onProgress: ((progress: DispatchProgress) => void) | undefined;
  settle(outcome: { ok: true; value: DispatchOutcome } | { ok: false; error: PolishError }): void;
}

/**
 * Sends each task through the task queue (DESIGN §4): a JetStream work-queue stream with one
 * durable pull consumer per role. A task is published once, with its idempotency key as the
 * message id (a re-publish is not a second task), and waits in order until a worker with
 * capacity takes it. Its answer comes on `polish.v1.reply.<role>.<key>`, kept in the replies
 * stream, so a restarted orchestrator finds the answers of tasks finished while it was down. A
 * worker that dies or runs out of time gives the task back (its host says so at once; else its
 * lease runs out) and the queue hands it to another, within the consumer's delivery bound. "Nobody
 * serves this role" (no worker pulling for `workerWaitMs`) fails the task; busy workers do not.
 */
export function createNatsDispatcher(options: NatsDispatcherOptions): Dispatcher {
  const prefix = options.prefix ?? DEFAULT_SUBJECT_PREFIX;
  const taskTimeoutMs = options.taskTimeoutMs ?? 300_000;
  const connection = options.connection;
  const pending = new Map<string, PendingTask>();
  // By stream and sequence: a role's lanes have a stream of their own, with its own sequence.
  const bySeq = new Map<string, PendingTask>();
  const seqKey = (stream: string, seq: number) => `${stream} ${seq}`;
  let subscriptions: Subscription[] = [];
  let watch: QueueWatch | undefined;

  const opened = (async () => {
    const queue =
      options.queue && 'js' in options.queue
        ? options.queue
        : await openTaskQueue(connection, { prefix, ...(options.queue as TaskQueueOptions | undefined) });
    const { names } = queue;
    const route = (key: string | undefined, handle: (task: PendingTask) => void) => {
      const task = key ? pending.get(key) : undefined;
      if (task) handle(task);
    };
    subscriptions = [
      connection.subscribe(names.allReplies, {
        callback: (error, message) => {
          if (!error) route(message.subject.split('.').at(-1), (task) => answer(task, message.data));
        },
      }),
      connection.subscribe(names.allProgress, {
        callback: (error, message) => {
          if (error) return;
          const progress = TaskProgressSchema.safeParse(json(message.data));
          if (progress.success) route(message.subject.split('.').at(-1), (task) => onTaskProgress(task, progress.data));
        },
      }),
      connection.subscribe(names.allCrashes, {
        callback: (error, message) => {
          if (error) return;
          const notice = CrashNoticeSchema.safeParse(json(message.data));
          if (notice.success) route(notice.data.key, (task) => onCrash(task, notice.data));
        },
      }),
      ...[names.tasksStream, ...names.laneStreams].map((stream) =>
        connection.subscribe(maxDeliveriesAdvisory(stream), {
          callback: (error, message) => {
            if (error) return;
            const seq = Number((json(message.data) as { stream_seq?: unknown } | undefined)?.stream_seq);
            const task = bySeq.get(seqKey(stream, seq));
            if (task) fail(task, exhausted(task));
          },
        }),
      ),
    ];
    await connection.flush();
    watch = createQueueWatch({
      queue,
      pending: () => [...pending.values()],
      workerWaitMs: options.workerWaitMs ?? 30_000,
      ...(options.queueWaitMs === undefined ? {} : { queueWaitMs: options.queueWaitMs }),
      progressIntervalMs: options.progressIntervalMs ?? 5_000,
      fail: (task, error) => fail(task as PendingTask, error),
    });
    return queue;
  })();
  opened.catch(() => undefined);

  const json = (data: Uint8Array): unknown => {
    try {
      return JSON.parse(new TextDecoder().decode(data));
    } catch {
      return undefined;
    }
  };

  /** Why a task that was handed out as often as allowed failed, naming the role. */
  const exhausted = (task: PendingTask) => {
    const cause = task.lastCause ?? `no answer within ${seconds(task.timeoutMs)} or its lease`;
    return new PolishError(
      task.lastCause?.includes('died') ? 'WORKER_CRASHED' : 'TIMEOUT',
      `${task.role} task handed out ${plural(task.deliveries, 'time')} without an answer; last: ${cause}`,
      { retryable: false },
    );
  };

  /** The task is done with here: forget it, and take it out of the queue so no worker pays for it later. */
  const withdraw = (task: PendingTask, remove: boolean) => {
    clearTimeout(task.safety);
    pending.delete(task.key);
    if (task.seq !== undefined) bySeq.delete(seqKey(task.stream, task.seq));
    if (remove && task.seq !== undefined) {
      void opened
        .then((queue) => queue.manager.streams.deleteMessage(task.stream, task.seq as number, false))
        .catch(() => undefined);
    }
  };
  const fail = (task: PendingTask, error: PolishError) => {
    withdraw(task, true);
    task.settle({ ok: false, error });
  };

  const answer = (task: PendingTask, data: Uint8Array) => {
    const reply = TaskReplySchema.safeParse(json(data));
    if (!reply.success)
      return fail(
        task,
        new PolishError('INTERNAL', `${task.role} reply is not a task reply: ${reply.error.issues[0]?.message}`),
      );
    withdraw(task, false);
    const now = Date.now();
    const workMs = task.takenAt === undefined ? undefined : now - task.takenAt;
    if (!reply.data.ok) {
      task.settle({
        ok: false,
        error: PolishError.fromWire({ ...reply.data.error, retryable: false }, reply.data.usage, reply.data.model),
      });
      return;
    }
    const { result, usage, model, worker } = reply.data;
    task.settle({
      ok: true,
      value: {
        result,
        usage,
        model,
        worker,
        attempts: Math.max(1, task.deliveries),
        ...(task.takenAt === undefined ? {} : { queuedMs: task.takenAt - task.queuedAt }),
        ...(workMs === undefined ? {} : { workMs }),
      },
    });
  };

  /** While a delivery is in hand: if nothing at all is heard of it for its time plus a lease, it counts as given back. */
  const armSafety = (task: PendingTask) => {
    clearTimeout(task.safety);
    task.safety = setTimeout(
      () => {
        task.takenAt = undefined;
        task.lastCause = `no word from the worker within ${seconds(task.timeoutMs)}`;
        if (task.deliveries >= task.maxAttempts) fail(task, exhausted(task));
      },
      task.timeoutMs + 2 * (watch?.leaseMs ?? 30_000),
    );
    task.safety.unref?.();
  };

  // A worker's "taken" can arrive before the stream's publish ack: "queued" is then said first,
  // once, so every task reads queued → taken in its events.
  const reportQueued = (task: PendingTask, ahead: number) => {
    if (task.queuedReported) return;
    task.queuedReported = true;
    task.onProgress?.({ type: 'queued', ahead });
  };

  const onTaskProgress = (task: PendingTask, progress: ReturnType<typeof TaskProgressSchema.parse>) => {
    if (progress.state === 'taken') {
      reportQueued(task, 0);
      task.deliveries = Math.max(task.deliveries, progress.delivery);
      task.takenAt = Date.now();
      task.onProgress?.({
        type: 'taken',
        worker: progress.worker,
        delivery: progress.delivery,
        queuedMs: task.takenAt - task.queuedAt,
      });
      armSafety(task);
      return;
    }
    task.takenAt = undefined;
    task.lastCause = `worker ${progress.worker.pid} gave it back (${progress.reason ?? 'released'})`;
    task.onProgress?.({
      type: 'released',
      worker: progress.worker,
      delivery: progress.delivery,
      reason: progress.reason ?? 'released',
    });
    if (progress.delivery >= task.maxAttempts) fail(task, exhausted(task));
  };

  const onCrash = (task: PendingTask, notice: ReturnType<typeof CrashNoticeSchema.parse>) => {
    if (notice.role !== task.role) return;
    void opened.then(() => {
      // Only an ack subject of the task's own queue: a notice cannot touch another queue.
      const own = taskQueueOf(task.role, task.lane?.name, prefix);
      if (!notice.ack.startsWith(jetStreamApi.ackPrefix(own.stream, own.consumer))) return;
      task.takenAt = undefined;
      task.lastCause = `worker ${notice.worker.pid} on ${notice.worker.hostname} died holding it (${notice.reason})`;
      task.onProgress?.({ type: 'released', worker: notice.worker, delivery: notice.delivery, reason: notice.reason });
      if (notice.delivery >= task.maxAttempts) return fail(task, exhausted(task));
      // Hand it out again at once, instead of after the lease.
      connection.publish(notice.ack, '-NAK');
    });
  };

  async function dispatch(
    role: TaskRole,
    payload: unknown,
    dispatchOptions: DispatchOptions = {},
  ): Promise<DispatchOutcome> {
    const { signal } = dispatchOptions;
    signal?.throwIfAborted();
    const queue = await opened;
    const key = sha256(dispatchOptions.idempotencyKey ?? randomUUID());
    const timeoutMs = dispatchOptions.timeoutMs ?? taskTimeoutMs;
    const maxAttempts = Math.min(dispatchOptions.maxAttempts ?? Infinity, queue.maxDeliverOf(role));
    const lane = dispatchOptions.lane;
    const address = taskQueueOf(role, lane?.name, prefix);
    // Taken when the dispatch starts: the caller's active span (a wave) is the parent of the task.
    const traceHeaders = traceHeadersOf(context.active());
    const envelope = TaskEnvelopeSchema.parse({
      v: PROTOCOL_VERSION,
      taskId: randomUUID(),
      role,
      attempt: 1,
      deadline: 0,
      timeoutMs,
      idempotencyKey: key,
      payload,
    });
    return new Promise<DispatchOutcome>((resolve, reject) => {
      const onAbort = () => {
        const task = pending.get(key);
        if (task) withdraw(task, true);
        reject(signal?.reason);
      };
      const task: PendingTask = {
        role,
        lane,
        stream: address.stream,
        key,
        seq: undefined,
        queuedAt: Date.now(),
        takenAt: undefined,
        queuedReported: false,
        deliveries: 0,
        maxAttempts,
        timeoutMs,
        lastCause: undefined,
        safety: undefined,
        onProgress: dispatchOptions.onProgress,
        settle: (outcome) => {
          signal?.removeEventListener('abort', onAbort);
          if (outcome.ok) resolve(outcome.value);
          else reject(outcome.error);
        },
      };
      pending.set(key, task);
      signal?.addEventListener('abort', onAbort, { once: true });
      void (async () => {
        // Answered while this orchestrator was away (a restart)? Then it is not sent again.
        if (dispatchOptions.idempotencyKey) {
          const kept = await queue.manager.streams
            .getMessage(queue.names.repliesStream, { last_by_subj: replySubject(role, key, prefix) })
            .catch(() => null);
          if (kept) return answer(task, kept.data);
        }
        // A lane's consumer exists before its first task, so that its workers find it.
        if (lane) await queue.openLane(role, lane.name);
        // A cluster electing a stream leader answers 503 for a while: the same message id is
        // published again (deduplicated by the stream) rather than failing the run.
        const ack = await retrying(
          () =>
            queue.js.publish(address.subject, JSON.stringify(envelope), {
              msgID: key,
              ...(traceHeaders ? { headers: traceHeaders } : {}),
            }),
          () => connection.isClosed() || !pending.has(key),
        );
        task.seq = ack.seq;
        bySeq.set(seqKey(task.stream, ack.seq), task);
        if (!pending.has(key)) {
          // Settled meanwhile (cancelled): the task must not wait in the queue for a worker to pay for it.
          await queue.manager.streams.deleteMessage(task.stream, ack.seq, false).catch(() => undefined);
          return;
        }
        reportQueued(task, watch?.queuedAhead(task) ?? 0);
        watch?.wake();
      })().catch((error: unknown) => {
        if (!pending.has(key)) return;
        // A server configured before lanes existed refuses them: say how to mend it.
        const refused = /permissions violation/i.test((error as Error).message)
          ? '; the server does not allow this principal that queue: its authorization predates it? ' +
            'regenerate it with `polish nats-config`'
          : '';
        fail(
          task,
          new PolishError(
            'UNAVAILABLE',
            `${address.label} task could not be queued: ${(error as Error).message}${refused}`,
            { cause: error },
          ),
        );
      });
    });
  }

  return {
    dispatch: (role, payload, dispatchOptions) => dispatch(role, payload, dispatchOptions),
    async close() {
      watch?.stop();
      for (const subscription of subscriptions) subscription.unsubscribe();
    },
  };
}
