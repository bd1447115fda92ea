import { hostname } from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';
import { PolishError } from '@polish/protocol';
import type { RunStore } from './run-store.js';

/** A live orchestrator renews its lease this often… */
export const LEASE_BEAT_MS = 2_000;
/** …and is taken for gone when its lease is older than this. */
export const LEASE_TTL_MS = 10_000;

interface Lease {
  pid: number;
  hostname: string;
  at: number;
}

const leaseKey = (owner: string) => `owner.${owner}`;

/** Whether an orchestrator of this name is alive (renewed its lease recently). */
export async function ownerAlive(store: RunStore, owner: string, now = Date.now): Promise<boolean> {
  const lease = await store.get<Lease>(leaseKey(owner));
  return Boolean(lease && now() - lease.at < LEASE_TTL_MS);
}

/**
 * Takes the lease of an orchestrator name, so two processes never resume the same runs. If a
 * lease of that name is fresh, waits for it to expire (a crashed predecessor), and fails with a
 * clear error if it keeps being renewed (another live process has the name).
 */
export async function acquireOwnerLease(store: RunStore, owner: string, log: (line: string) => void = () => undefined) {
  // A crashed predecessor's lease lapses within the TTL; one still renewed after that is alive.
  const deadline = Date.now() + LEASE_TTL_MS + 2 * LEASE_BEAT_MS;
  for (let waited = false; await ownerAlive(store, owner); waited = true) {
    const lease = await store.get<Lease>(leaseKey(owner));
    if (Date.now() > deadline) {
      throw new PolishError(
        'INVALID_INPUT',
        `orchestrator "${owner}" is already running (pid ${lease?.pid} on ${lease?.hostname}); give this one another --id`,
      );
    }
    if (!waited)
      log(`polish serve: waiting for the lease of "${owner}" to expire (a previous orchestrator of that name)`);
    await delay(LEASE_BEAT_MS / 2);
  }
  const renew = () =>
    store.put(leaseKey(owner), { pid: process.pid, hostname: hostname(), at: Date.now() } satisfies Lease);
  await renew();
  const timer = setInterval(() => void renew().catch(() => undefined), LEASE_BEAT_MS);
  timer.unref();
  return {
    async release() {
      clearInterval(timer);
      await store.delete(leaseKey(owner)).catch(() => undefined);
    },
  };
}
