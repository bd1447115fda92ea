import type { NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, type JetStreamClient } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import { Objm, type ObjectStore } from '@nats-io/obj';
import {
  DEFAULT_SUBJECT_PREFIX,
  PolishError,
  eventsSubject,
  storeNames,
  wireNames,
  type RunEvent,
} from '@polish/protocol';
import { sha256 } from '../hash.js';
import { retrying } from '../nats-retry.js';
import { checkNoStrayStreams, ensureStream, eventStreamSpec, storeStreamSpecs } from '../streams.js';

/** The field of the error for a stored value that does not parse: the record is corrupt. Its `cause` is the text. */
export const CORRUPT_FIELD = 'record';

/** Strings longer than this are kept in the Object Store and referenced from KV records. */
export const INLINE_LIMIT = 64 * 1024;
const REF = '$polish_object';

/** How the JetStream resources are created. */
export interface RunStoreOptions {
  /**
   * Copies of the KV bucket, the Object Store and the event stream kept by a NATS cluster
   * (JetStream's R1..R5; default 1, all a single nats-server can do). 3 survives losing any one
   * node of a 3-node cluster. Applied when a resource is created; one that exists with fewer
   * copies is raised to this many (never lowered).
   */
  replicas?: number;
}

/** The durable side of runs: KV for records and wave results, Object Store for large text, a stream for events. */
export interface RunStore {
  put(key: string, value: unknown): Promise<void>;
  get<T>(key: string): Promise<T | undefined>;
  delete(key: string): Promise<void>;
  keys(prefix: string): Promise<string[]>;
  publishEvent(event: RunEvent, dedupeId?: string): Promise<void>;
  /** Every stored event of a run, in order. */
  events(runId: string): Promise<RunEvent[]>;
  /** Moves strings over INLINE_LIMIT to the Object Store, leaving references (for messages too). */
  externalize(value: unknown): Promise<unknown>;
}

/**
 * Opens (creating if needed) the KV bucket, Object Store and event stream. Large strings are
 * moved out of KV values into the Object Store under their SHA-256, so a record stays small
 * however large the artifact; reading puts them back.
 */
export async function openRunStore(
  connection: NatsConnection,
  prefix = DEFAULT_SUBJECT_PREFIX,
  options: RunStoreOptions = {},
): Promise<RunStore> {
  const replicas = options.replicas ?? 1;
  if (!Number.isInteger(replicas) || replicas < 1 || replicas > 5)
    throw new Error(`replicas must be a whole number from 1 to 5, got ${replicas}`);
  const names = wireNames(prefix);
  const closing = () => connection.isClosed() || connection.isDraining();
  const retry = <T>(what: () => Promise<T>) => retrying(what, closing);
  const js: JetStreamClient = jetstream(connection);
  const manager = await jetstreamManager(connection);
  await ensureStream(manager, eventStreamSpec(prefix), replicas);
  // Both create their stream with these replicas, or open an existing one as it is.
  const kv: KV = await new Kvm(js).create(names.runs, { history: 1, replicas });
  const objects: ObjectStore = await new Objm(js).create(names.artifacts, { replicas });
  // Checked, and raised to `replicas` copies when made earlier with fewer (before the NATS became a cluster).
  for (const spec of storeStreamSpecs(prefix)) await ensureStream(manager, spec, replicas, { create: false });
  await checkNoStrayStreams(manager, prefix);

  const externalize = async (value: unknown): Promise<unknown> => {
    if (typeof value === 'string' && value.length > INLINE_LIMIT) {
      const name = sha256(value);
      if (!(await objects.info(name))) await objects.putBlob({ name }, new TextEncoder().encode(value));
      return { [REF]: name };
    }
    if (Array.isArray(value)) return Promise.all(value.map(externalize));
    if (value && typeof value === 'object') {
      const entries = await Promise.all(
        Object.entries(value).map(async ([key, inner]) => [key, await externalize(inner)] as const),
      );
      return Object.fromEntries(entries);
    }
    return value;
  };
  const internalize = async (value: unknown): Promise<unknown> => {
    if (Array.isArray(value)) return Promise.all(value.map(internalize));
    if (value && typeof value === 'object') {
      const reference = (value as Record<string, unknown>)[REF];
      if (typeof reference === 'string') {
        const bytes = await objects.getBlob(reference);
        if (!bytes) throw new Error(`stored artifact ${reference} is missing from ${names.artifacts}`);
        return new TextDecoder().decode(bytes);
      }
      const entries = await Promise.all(
        Object.entries(value).map(async ([key, inner]) => [key, await internalize(inner)] as const),
      );
      return Object.fromEntries(entries);
    }
    return value;
  };

  return {
    externalize: (value) => retry(() => externalize(value)),
    async put(key, value) {
      const stored = JSON.stringify(await retry(() => externalize(value)));
      await retry(() => kv.put(key, stored));
    },
    async get(key) {
      const entry = await retry(() => kv.get(key));
      if (!entry || entry.operation !== 'PUT' || entry.length === 0) return undefined;
      let value: unknown;
      try {
        value = entry.json();
      } catch (error) {
        throw new PolishError('INVALID_INPUT', `the value is not JSON (${(error as Error).message})`, {
          field: CORRUPT_FIELD,
          cause: entry.string(),
        });
      }
      return (await internalize(value)) as never;
    },
    async delete(key) {
      await retry(() => kv.delete(key));
    },
    async keys(prefixOfKeys) {
      const found: string[] = [];
      for await (const key of await retry(() => kv.keys(`${prefixOfKeys}>`))) found.push(key);
      return found;
    },
    async publishEvent(event, dedupeId) {
      const text = JSON.stringify(await externalize(event));
      await retry(() => js.publish(eventsSubject(event.runId, prefix), text, dedupeId ? { msgID: dedupeId } : {}));
    },
    async events(runId) {
      // Creating a consumer needs a JetStream meta leader, which a cluster may be electing.
      const consumer = await retry(() =>
        js.consumers.get(names.events, { filter_subjects: eventsSubject(runId, prefix) }),
      );
      const info = await retry(() =>
        manager.streams.info(names.events, { subjects_filter: eventsSubject(runId, prefix) }),
      );
      const total = Object.values(info.state.subjects ?? {}).reduce((sum, count) => sum + count, 0);
      const found: RunEvent[] = [];
      if (total === 0) return found;
      for await (const message of await consumer.consume()) {
        found.push((await internalize(message.json())) as RunEvent);
        if (found.length >= total) break;
      }
      return found;
    },
  };
}

/**
 * Replaces Object Store references in a message (see RunStore.externalize) with their text,
 * opening the Object Store only if a reference is there: for clients of the run service.
 */
export async function resolveArtifacts<T>(
  connection: NatsConnection,
  value: T,
  prefix = DEFAULT_SUBJECT_PREFIX,
): Promise<T> {
  let objects: ObjectStore | undefined;
  const resolve = async (inner: unknown): Promise<unknown> => {
    if (Array.isArray(inner)) return Promise.all(inner.map(resolve));
    if (inner && typeof inner === 'object') {
      const reference = (inner as Record<string, unknown>)[REF];
      if (typeof reference === 'string') {
        objects ??= await new Objm(jetstream(connection)).open(storeNames(prefix).artifacts);
        const bytes = await objects.getBlob(reference);
        if (!bytes) throw new Error(`stored artifact ${reference} is missing`);
        return new TextDecoder().decode(bytes);
      }
      return Object.fromEntries(
        await Promise.all(Object.entries(inner).map(async ([key, value]) => [key, await resolve(value)] as const)),
      );
    }
    return inner;
  };
  return (await resolve(value)) as T;
}
