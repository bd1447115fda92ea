import { PolishError } from '@polish/protocol';
import type { RunStore } from './run-store.js';

/** Saves a run's record after every transition, and says when the latest one is stored. */
export interface RecordSaver {
  /** Queues this record as the run's latest; writes are coalesced and strictly ordered. */
  save(record: unknown): void;
  /** Resolves once the latest record queued so far is stored; rejects once a save has failed. */
  persisted(): Promise<void>;
  /** The failure that stopped the saves, if one did. */
  failure(): Error | undefined;
}

/**
 * Coalesced, ordered writes of one KV key: while a write is in flight, newer records replace
 * each other and only the newest is written next. A failed write (after the store's own retries)
 * is final: the run must not go on unsaved, so every wave waiting on `persisted()` fails.
 */
export function createRecordSaver(store: RunStore, key: string): RecordSaver {
  let version = 0;
  let written = 0;
  let latest: unknown;
  let writing: Promise<void> | undefined;
  let waiters: { version: number; resolve: () => void; reject: (error: Error) => void }[] = [];
  let failure: Error | undefined;
  const pump = async () => {
    try {
      while (version > written) {
        const target = version;
        await store.put(key, latest);
        written = target;
        waiters = waiters.filter((waiter) => (waiter.version <= written ? (waiter.resolve(), false) : true));
      }
    } catch (error) {
      failure = new PolishError('INTERNAL', `${key} could not be saved: ${(error as Error).message}`, { cause: error });
      for (const waiter of waiters) waiter.reject(failure);
      waiters = [];
    }
    writing = undefined;
  };
  return {
    save(record) {
      if (failure) return;
      latest = record;
      version += 1;
      writing ??= pump();
    },
    persisted() {
      if (failure) return Promise.reject(failure);
      if (written >= version) return Promise.resolve();
      return new Promise<void>((resolve, reject) => waiters.push({ version, resolve, reject }));
    },
    failure: () => failure,
  };
}
