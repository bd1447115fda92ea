import type { NatsConnection } from '@nats-io/transport-node';
import {
  AckPolicy,
  DeliverPolicy,
  jetstream,
  jetstreamManager,
  type ConsumerConfig,
  type ConsumerInfo,
  type JetStreamClient,
  type JetStreamManager,
} from '@nats-io/jetstream';
import { configDifferences, ensureStream, queueStreamSpecs } from '../streams.js';
import {
  DEFAULT_SUBJECT_PREFIX,
  TaskRoleSchema,
  isLaneRole,
  laneQueueNames,
  taskQueueOf,
  unavailable,
  wireNames,
  type QueueStats,
  type TaskRole,
} from '@polish/protocol';

/** How the task queue is set up; every orchestrator of a deployment should agree. */
export interface TaskQueueOptions {
  prefix?: string;
  /** Copies a NATS cluster keeps of the task and reply streams (1..5). Default 1. */
  replicas?: number;
  /**
   * How long a worker may go silent (no progress signal) before its task is handed to another
   * worker. Workers signal every third of it while they work. Default 30 s.
   */
  leaseMs?: number;
  /** Deliveries of a task before it fails (a command critique is delivered once). Default 3. */
  maxDeliver?: number;
  /**
   * How long a model lane may go with no worker pulling from it before NATS removes its
   * consumer (lanes come and go with the judge models runs name; the next task of a removed lane
   * makes it again). Default 24 h.
   */
  laneIdleMs?: number;
}

/** The task queue of a deployment: its streams and one durable pull consumer per role. */
export interface TaskQueue {
  js: JetStreamClient;
  manager: JetStreamManager;
  names: ReturnType<typeof wireNames>;
  /** The subject prefix its names are built with. */
  prefix: string;
  leaseMs: number;
  /** Deliveries a task of this role gets before it fails. */
  maxDeliverOf(role: TaskRole): number;
  /** Each role's figures: waiting tasks, the oldest's age, workers pulling, tasks in hand. */
  stats(roles?: readonly TaskRole[]): Promise<QueueStats[]>;
  /** Makes a model lane of a role ready for a task: its consumer, made when missing (checked for each task). */
  openLane(role: TaskRole, lane: string): Promise<void>;
  /** The same figures for queues that may be lanes. */
  statsOf(queues: readonly QueueRef[]): Promise<QueueStats[]>;
}

/** A role's queue, or one of its model lanes. */
export interface QueueRef {
  role: TaskRole;
  lane?: string | undefined;
}

const NANOS = 1_000_000;
const DEFAULT_LEASE_MS = 30_000;
const DEFAULT_LANE_IDLE_MS = 24 * 3_600_000;

/** The configuration of a role's consumer, or of one of its lanes'. */
export function consumerConfig(
  role: TaskRole,
  prefix: string,
  leaseMs: number,
  maxDeliver: number,
  lane?: string,
  laneIdleMs = DEFAULT_LANE_IDLE_MS,
): Partial<ConsumerConfig> {
  const queue = taskQueueOf(role, lane, prefix);
  return {
    // A role's own consumer stays; a lane's goes once nobody has pulled from it for a while.
    ...(lane === undefined ? {} : { inactive_threshold: laneIdleMs * NANOS }),
    durable_name: queue.consumer,
    filter_subject: queue.subject,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: leaseMs * NANOS,
    // A command critique is never run twice: what it did to the world is the critique's call.
    max_deliver: role === 'par.command' ? 1 : maxDeliver,
    max_ack_pending: -1,
  };
}

/**
 * Opens the task queue, creating its streams and consumers when missing. A stream that exists
 * with another configuration (another retention, other subjects) is refused, naming each
 * difference (see streams.ts). A consumer's lease and delivery bound are brought to these
 * settings; one filtering other tasks is refused.
 */
export async function openTaskQueue(connection: NatsConnection, options: TaskQueueOptions = {}): Promise<TaskQueue> {
  const prefix = options.prefix ?? DEFAULT_SUBJECT_PREFIX;
  const replicas = options.replicas ?? 1;
  const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
  const maxDeliver = options.maxDeliver ?? 3;
  const laneIdleMs = options.laneIdleMs ?? DEFAULT_LANE_IDLE_MS;
  const names = wireNames(prefix);
  const manager = await jetstreamManager(connection);
  for (const spec of queueStreamSpecs(prefix)) await ensureStream(manager, spec, replicas);
  const ensureConsumer = async (role: TaskRole, lane?: string) => {
    const stream = taskQueueOf(role, lane, prefix).stream;
    const config = consumerConfig(role, prefix, leaseMs, maxDeliver, lane, laneIdleMs);
    const name = config.durable_name as string;
    const info = await manager.consumers.info(stream, name).catch((error: unknown) => {
      if (/not found/i.test(String((error as Error)?.message)) || (error as { code?: unknown })?.code === 10014)
        return undefined;
      throw error;
    });
    if (!info) await manager.consumers.add(stream, config);
    else if (configDifferences(info.config, config).length > 0) {
      // Lease and delivery bound may change (an operator raised them); the filter may not.
      if (info.config.filter_subject !== config.filter_subject) {
        throw unavailable(
          `consumer ${name} of ${stream} filters ${info.config.filter_subject}, not ${config.filter_subject}`,
        );
      }
      await manager.consumers.update(stream, name, {
        ack_wait: config.ack_wait,
        max_deliver: config.max_deliver,
        ...(config.inactive_threshold === undefined ? {} : { inactive_threshold: config.inactive_threshold }),
      });
    }
  };
  for (const role of TaskRoleSchema.options) await ensureConsumer(role);
  // A lane's consumer is made when its first task is sent (lanes are not known in advance), and
  // checked again for each task (NATS removes an idle one); its workers wait for it until then.
  // Tasks of one lane sent at once share one check.
  const checking = new Map<string, Promise<void>>();
  return {
    js: jetstream(connection),
    manager,
    names,
    prefix,
    leaseMs,
    maxDeliverOf: (role) => (role === 'par.command' ? 1 : maxDeliver),
    stats: (roles = TaskRoleSchema.options) => readQueueStats(manager, prefix, roles),
    openLane(role, lane) {
      const key = taskQueueOf(role, lane, prefix).subject;
      let check = checking.get(key);
      if (!check) {
        check = ensureConsumer(role, lane).finally(() => checking.delete(key));
        checking.set(key, check);
      }
      return check;
    },
    statsOf: (queues) => Promise.all(queues.map((queue) => readOneQueue(manager, prefix, queue))),
  };
}

/**
 * Each role's queue figures, from its consumer (waiting tasks, open pull requests, tasks in
 * hand) and the oldest waiting task's time in the stream.
 */
export async function readQueueStats(
  manager: JetStreamManager,
  prefix: string,
  roles: readonly TaskRole[] = TaskRoleSchema.options,
  now = Date.now,
): Promise<QueueStats[]> {
  // A lane role's queues are its own and each of its model lanes (a consumer of the lanes'
  // stream, named as the lane), so a judge waiting for its model's workers shows too.
  const lanes = await Promise.all(
    roles.filter(isLaneRole).map(async (role) => {
      const names: QueueRef[] = [];
      const lister = manager.consumers.list(laneQueueNames(role, prefix).stream);
      for await (const info of lister) names.push({ role, lane: info.name });
      return names;
    }),
  ).catch(() => []);
  const queues: QueueRef[] = [...roles.map((role) => ({ role })), ...lanes.flat()];
  return Promise.all(queues.map((queue) => readOneQueue(manager, prefix, queue, now)));
}

/** One queue's figures (a role's, or one of its lanes'). */
async function readOneQueue(
  manager: JetStreamManager,
  prefix: string,
  { role, lane }: QueueRef,
  now = Date.now,
): Promise<QueueStats> {
  const queue = taskQueueOf(role, lane, prefix);
  const info = await manager.consumers.info(queue.stream, queue.consumer).catch(() => undefined);
  const named = lane === undefined ? { role } : { role, lane };
  if (!info) return { ...named, queued: 0, oldest_ms: null, pulling: 0, in_flight: 0, idle_ms: null };
  let oldest: number | null = null;
  if (info.num_pending > 0) {
    // The first message of the queue past what the consumer has handed out waits longest.
    const message = await manager.streams
      // STREAM.MSG.GET takes next_by_subj (nats-server 2.9+); the client's type does not list it.
      .getMessage(queue.stream, {
        seq: info.delivered.stream_seq + 1,
        next_by_subj: queue.subject,
      } as never)
      .catch(() => null);
    if (message) oldest = Math.max(0, Math.round(now() - message.time.getTime()));
  }
  return {
    ...named,
    queued: info.num_pending,
    oldest_ms: oldest,
    pulling: info.num_waiting,
    in_flight: info.num_ack_pending,
    idle_ms: idleFor(info, now()),
  };
}

/** Time since the consumer last handed out or had acknowledged a task; null if it never did. */
function idleFor(info: ConsumerInfo, now: number): number | null {
  // The server sends an RFC 3339 time, whatever the client's type says (Nanos).
  const times = [info.delivered.last_active, info.ack_floor.last_active]
    .map((time: unknown) => (typeof time === 'string' ? Date.parse(time) : NaN))
    .filter((time) => Number.isFinite(time) && time > 0);
  return times.length ? Math.max(0, Math.round(now - Math.max(...times))) : null;
}
