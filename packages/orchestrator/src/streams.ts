import type { JetStreamManager, StreamConfig, StreamInfo } from '@nats-io/jetstream';
import { RetentionPolicy, StorageType, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  DEFAULT_SUBJECT_PREFIX,
  LANE_ROLES,
  crashSubject,
  laneQueueNames,
  inspectSubject,
  progressSubject,
  runServiceSubject,
  unavailable,
  wireNames,
} from '@polish/protocol';

// Every JetStream stream polish uses, with the configuration it needs, made or checked in one
// place. A stream that exists with other subjects or another retention was made for something
// else (or by someone else): polish refuses it, naming each difference, rather than take it over.

const NANOS = 1_000_000;

/** A stream polish needs: what must be so (else refuse), and what it sets (limits it may bring to its values). */
export interface StreamSpec {
  name: string;
  must: Partial<StreamConfig>;
  settable?: Partial<StreamConfig>;
}

/** Each field of `want` that `have` does not match, as `field: have ≠ want`. */
export function configDifferences(have: object, want: object): string[] {
  const current = have as Record<string, unknown>;
  return Object.entries(want)
    .filter(([key, value]) => JSON.stringify(current[key]) !== JSON.stringify(value))
    .map(([key, value]) => `${key}: ${JSON.stringify(current[key])} ≠ ${JSON.stringify(value)}`);
}

const isNotFound = (error: unknown) =>
  (error as Error)?.name === 'StreamNotFoundError' ||
  (error as { code?: unknown })?.code === 10059 ||
  /stream not found/i.test(String((error as Error)?.message));

/**
 * Makes the stream when it is missing (with `replicas` copies), or checks the one there: a
 * difference in what it must be refuses (UNAVAILABLE, exit 6, naming it); its limits are
 * brought to polish's; its copies are raised to `replicas`, never lowered.
 */
export async function ensureStream(
  manager: JetStreamManager,
  spec: StreamSpec,
  replicas: number,
  options: { create?: boolean } = {},
): Promise<StreamInfo> {
  const info = await manager.streams.info(spec.name).catch((error: unknown) => {
    if (options.create !== false && isNotFound(error)) return undefined;
    throw error;
  });
  if (!info) return manager.streams.add({ name: spec.name, ...spec.must, ...spec.settable, num_replicas: replicas });
  const differences = configDifferences(info.config, spec.must);
  if (differences.length > 0) {
    throw unavailable(
      `stream ${spec.name} exists with another configuration (${differences.join('; ')}): ` +
        'it was not made by polish, or by another version; remove it (nats stream rm) or use another subject prefix',
    );
  }
  const update = {
    ...(configDifferences(info.config, spec.settable ?? {}).length > 0 ? spec.settable : {}),
    ...(info.config.num_replicas < replicas ? { num_replicas: replicas } : {}),
  };
  return Object.keys(update).length > 0 ? manager.streams.update(spec.name, { ...info.config, ...update }) : info;
}

/** The event stream: every run's events, bounded (they carry payloads): a week and 1 GiB at most. */
export function eventStreamSpec(prefix: string): StreamSpec {
  const names = wireNames(prefix);
  return {
    name: names.events,
    must: { subjects: [names.allEvents], retention: RetentionPolicy.Limits },
    settable: { duplicate_window: 10 * 60_000 * NANOS, max_age: 7 * 24 * 3_600_000 * NANOS, max_bytes: 1024 ** 3 },
  };
}

/** A re-published task (same idempotency key) within this window is not a second task. */
export const TASK_DEDUPE_WINDOW_MS = 60 * 60_000;
/** Replies are kept this long: an orchestrator down for less finds the answers paid for meanwhile. */
export const REPLY_RETENTION_MS = 24 * 60 * 60_000;

/** The task queue's streams: the work queue of tasks, each lane role's work queue of lanes, and the replies. */
export function queueStreamSpecs(prefix: string): StreamSpec[] {
  const names = wireNames(prefix);
  const workQueue = (name: string, subjects: string): StreamSpec => ({
    name,
    must: { subjects: [subjects], retention: RetentionPolicy.Workqueue, storage: StorageType.File },
    settable: { duplicate_window: TASK_DEDUPE_WINDOW_MS * NANOS },
  });
  return [
    workQueue(names.tasksStream, names.allTasks),
    ...LANE_ROLES.map((role) => {
      const lanes = laneQueueNames(role, prefix);
      return workQueue(lanes.stream, lanes.subjects);
    }),
    {
      name: names.repliesStream,
      must: { subjects: [names.allReplies], retention: RetentionPolicy.Limits, storage: StorageType.File },
      settable: { max_age: REPLY_RETENTION_MS * NANOS },
    },
  ];
}

/** The streams behind the runs bucket and the artifacts store, as JetStream names them. */
export function storeStreamSpecs(prefix: string): StreamSpec[] {
  const names = wireNames(prefix);
  return [
    { name: names.runsStream, must: { subjects: [names.runsBucketSubjects] } },
    { name: names.artifactsStream, must: { subjects: names.artifactStreamSubjects } },
  ];
}

/**
 * Checks that no stream captures the subjects polish uses for requests and live messages: a
 * stream on the run service's subjects answers its requests with JetStream acks, so every call
 * would fail. Refuses (UNAVAILABLE) naming the stream and the subject.
 */
export async function checkNoStrayStreams(manager: JetStreamManager, prefix: string): Promise<void> {
  const role = 'evaluate';
  const key = 'a'.repeat(64);
  const live = [
    runServiceSubject('submit', prefix),
    inspectSubject('run', prefix),
    progressSubject(role, key, prefix),
    crashSubject(role, prefix),
  ];
  for (const subject of live) {
    const stream = await manager.streams.find(subject).catch(() => undefined);
    if (stream)
      throw unavailable(
        `stream ${stream} captures ${subject}, which polish uses for live messages: remove it or change its subjects`,
      );
  }
}

/** Makes (or checks) the event stream, so a run's events can be replayed: for orchestrators without a run store. */
export async function ensureEventStream(
  connection: NatsConnection,
  prefix = DEFAULT_SUBJECT_PREFIX,
  replicas = 1,
): Promise<void> {
  await ensureStream(await jetstreamManager(connection), eventStreamSpec(prefix), replicas);
}
