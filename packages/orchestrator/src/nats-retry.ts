import { setTimeout as delay } from 'node:timers/promises';

/** How long a JetStream operation is retried while NATS is unreachable before the run gives up on it. */
const JETSTREAM_RETRY_MS = 120_000;

/** Errors that pass when NATS or JetStream comes back; anything else (too large, no permission, …) is final. */
function isTransient(error: unknown): boolean {
  const name = (error as Error)?.name ?? '';
  const text = String((error as Error)?.message ?? error);
  // A stream or the JetStream API with no leader at the moment (a cluster electing one after losing
  // a node) answers 503, or nobody answers: nats.js reports a publish that no one acknowledged as
  // "jetstream is not enabled". The store opened, so JetStream is there: it is a matter of time.
  if ((error as { status?: unknown })?.status === 503) return true;
  return (
    /Timeout|ConnectionError|NoResponders|Disconnect|JetStreamNotEnabled/i.test(name) ||
    /timeout|disconnect|no responders|503|closed|reconnect|temporarily unavailable|jetstream is not enabled/i.test(text)
  );
}

/** `what`, again with backoff while it fails transiently (not once `closed()`: nothing would come of it). */
export async function retrying<T>(what: () => Promise<T>, closed: () => boolean = () => false): Promise<T> {
  // NATS may be restarting: keep trying with backoff for a while; the run waits meanwhile.
  // Not once this process has closed its connection (shutting down): nothing would come of it.
  const started = Date.now();
  for (let backoff = 100; ; backoff = Math.min(backoff * 2, 5_000)) {
    try {
      return await what();
    } catch (error) {
      if (closed() || !isTransient(error) || Date.now() - started > JETSTREAM_RETRY_MS) throw error;
      await delay(backoff);
    }
  }
}
