import { setTimeout as delay } from 'node:timers/promises';
import { PolishError, taskQueueOf, type QueueStats, type TaskRole } from '@polish/protocol';
import type { DispatchProgress, TaskLane } from './dispatcher.js';
import type { TaskQueue } from './task-queue.js';

/** What the watch needs of a task that waits for an answer. */
export interface WatchedTask {
  role: TaskRole;
  /** The model lane it waits in, if not its role's queue. */
  lane: TaskLane | undefined;
  queuedAt: number;
  /** Undefined while the task waits in the queue. */
  takenAt: number | undefined;
  /** Undefined until the task is in the stream. */
  seq: number | undefined;
  onProgress: ((progress: DispatchProgress) => void) | undefined;
}

/** Watches the queues of the roles that have tasks waiting, while any do. */
export interface QueueWatch {
  leaseMs: number;
  /** A task was queued: make sure the watch runs. */
  wake(): void;
  /** Tasks of the task's queue that were waiting at the last look. */
  queuedAhead(task: WatchedTask): number;
  stop(): void;
}

const TICK_MS = 1_000;
const seconds = (ms: number) => `${Number((ms / 1000).toFixed(1))} s`;
/** A task's queue, as the watch keys it: the role, or the role and its lane. */
const queueKey = (task: WatchedTask) => (task.lane ? `${task.role} ${task.lane.name}` : task.role);

/** "Nobody serves it", naming the queue, and for a lane the model and how to serve it. */
function nobodyServes(task: WatchedTask, waitedMs: number, prefix: string): PolishError {
  const queue = taskQueueOf(task.role, task.lane?.name, prefix);
  if (!task.lane)
    return new PolishError(
      'NO_RESPONDERS',
      `no ${task.role} workers pulled tasks within ${seconds(waitedMs)} (nobody serves ${queue.subject})`,
    );
  // The lane's model is named without where it is reached: the worker's spec needs that back.
  return new PolishError(
    'NO_RESPONDERS',
    `no ${task.role} workers of lane ${task.lane.name} (model ${task.lane.model}) pulled tasks within ` +
      `${seconds(waitedMs)} (nobody serves ${queue.subject}); start one where that model is reachable: ` +
      `polish worker --roles ${task.role} --evaluator-model SPEC --lane, SPEC being ${task.lane.model} ` +
      'as that worker reaches it (with its @baseURL, or for a script its path)',
  );
}

/**
 * Tells "nobody serves this role" from "the workers are busy" (DESIGN §4): once a second, while
 * tasks wait, it reads each such role's consumer. No worker pulling, none working and none
 * served for `workerWaitMs` fails the role's waiting tasks (NO_RESPONDERS); busy workers never do. A task
 * that waited `queueWaitMs` (schedule to start, when set) fails with TIMEOUT. Every
 * `progressIntervalMs` each waiting task hears how long the queue is.
 */
export function createQueueWatch(options: {
  queue: TaskQueue;
  pending: () => WatchedTask[];
  workerWaitMs: number;
  queueWaitMs?: number;
  progressIntervalMs: number;
  fail(task: WatchedTask, error: PolishError): void;
}): QueueWatch {
  const nobodySince = new Map<string, number>();
  const lastStats = new Map<string, QueueStats>();
  const lastReported = new WeakMap<WatchedTask, number>();
  let running = false;
  let stopped = false;

  const waiting = () => options.pending().filter((task) => task.seq !== undefined && task.takenAt === undefined);

  const tick = async () => {
    const queues = [...new Map(waiting().map((task) => [queueKey(task), task])).entries()];
    const stats = await options.queue
      .statsOf(queues.map(([, task]) => ({ role: task.role, lane: task.lane?.name })))
      .catch(() => undefined);
    if (!stats) return; // NATS is away: judge again at the next look.
    const now = Date.now();
    stats.forEach((stat, index) => {
      const key = queues[index]?.[0] as string;
      lastStats.set(key, stat);
      if (stat.pulling > 0 || stat.in_flight > 0) nobodySince.delete(key);
      else {
        // Counted from the first look with nobody, or from the queue's last task if later: between
        // single-use workers (one answered and left, the next still booting) nobody pulls for a while.
        const lastServed = stat.idle_ms === null ? -Infinity : now - stat.idle_ms;
        nobodySince.set(key, Math.max(nobodySince.get(key) ?? now, lastServed));
      }
    });
    for (const task of waiting()) {
      const since = nobodySince.get(queueKey(task));
      if (since !== undefined && now - since >= options.workerWaitMs) {
        options.fail(task, nobodyServes(task, options.workerWaitMs, options.queue.prefix));
      } else if (options.queueWaitMs !== undefined && now - task.queuedAt >= options.queueWaitMs) {
        options.fail(
          task,
          new PolishError(
            'TIMEOUT',
            `${task.role} task waited ${seconds(now - task.queuedAt)} in the queue for a worker (queue wait limit)`,
            {
              retryable: false,
            },
          ),
        );
      } else if (now - (lastReported.get(task) ?? task.queuedAt) >= options.progressIntervalMs) {
        lastReported.set(task, now);
        const stat = lastStats.get(queueKey(task));
        task.onProgress?.({
          type: 'waiting',
          queued: stat?.queued ?? 0,
          pulling: stat?.pulling ?? 0,
          inFlight: stat?.in_flight ?? 0,
          waitedMs: now - task.queuedAt,
        });
      }
    }
  };

  // Runs while tasks wait; the check and the end are one synchronous step, so a task queued
  // meanwhile either keeps it running or wakes a new one.
  const run = async () => {
    while (!stopped && waiting().length > 0) {
      await delay(TICK_MS, undefined, { ref: false });
      if (!stopped) await tick();
    }
    nobodySince.clear();
    running = false;
  };

  return {
    leaseMs: options.queue.leaseMs,
    wake() {
      if (running || stopped) return;
      running = true;
      void run();
    },
    queuedAhead: (task) => lastStats.get(queueKey(task))?.queued ?? 0,
    stop() {
      stopped = true;
    },
  };
}
