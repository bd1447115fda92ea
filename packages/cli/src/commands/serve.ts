import { PolishError, invalidInput, unavailable, wireNames } from '@polish/protocol';
import { hostname } from 'node:os';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  acquireOwnerLease,
  createNatsDispatcher,
  createRunManager,
  openRunStore,
  openTaskQueue,
  startRunService,
} from '@polish/orchestrator';
import { connectAs, readCredentials, type NatsAccessFlags } from '../nats-auth.js';
import { createNatsStatelyInspector } from '@polish/inspector';
import { DEFAULT_PRICES } from '../default-prices.js';
import { parseSeconds, parseWholeNumber } from '../numbers.js';

/** Flags of `polish serve`. */
export interface ServeFlags extends NatsAccessFlags {
  nats?: string;
  id?: string;
  taskTimeout?: string;
  workerWait?: string;
  queueWait?: string;
  taskLease?: string;
  replicas?: string;
  grace?: string;
}

const log = (line: string) => process.stderr.write(`${line}\n`);

/**
 * `polish serve`: a long-running orchestrator. Takes runs through the run service, persists
 * every transition to JetStream, and on start resumes every unfinished run it owns (by --id).
 * SIGTERM/SIGINT stop it; its unfinished runs stay resumable.
 */
export async function serveCommand(flags: ServeFlags): Promise<number> {
  const natsUrl = flags.nats ?? process.env.NATS_URL;
  if (!natsUrl) throw invalidInput('nats', 'required: pass --nats nats://host:4222 or set NATS_URL');
  const owner = flags.id ?? hostname();
  if (!/^[A-Za-z0-9_.-]{1,100}$/.test(owner)) throw invalidInput('id', 'letters, digits, ., - or _ (1-100)');
  const taskTimeoutMs = parseSeconds('task-timeout', flags.taskTimeout);
  const workerWaitMs = parseSeconds('worker-wait', flags.workerWait);
  const queueWaitMs = parseSeconds('queue-wait', flags.queueWait);
  const leaseMs = parseSeconds('task-lease', flags.taskLease);
  const graceMs = parseSeconds('grace', flags.grace) ?? 10_000;
  const replicas = parseWholeNumber('replicas', flags.replicas, 1, 5) ?? 1;
  // Keep trying while NATS restarts: runs wait rather than fail. In a cluster the client also
  // learns the other servers from the one it reached, and moves to one of them if it goes.
  const credentials = readCredentials(flags);
  const connection = await connectAs(natsUrl, `polish-serve-${owner}`, credentials?.orchestrator, {
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
  });
  void logConnectionChanges(connection);
  try {
    return await serveOn(connection, natsUrl, owner, {
      taskTimeoutMs,
      workerWaitMs,
      queueWaitMs,
      leaseMs,
      replicas,
      graceMs,
    });
  } catch (error) {
    // Leave nothing open on the way out: an open connection would keep the process alive.
    await connection.close().catch(() => undefined);
    throw error;
  }
}

/** Logs losing and regaining NATS (e.g. the cluster node it used went away), until the connection closes. */
async function logConnectionChanges(connection: NatsConnection): Promise<void> {
  for await (const status of connection.status()) {
    if (status.type === 'disconnect') log(`polish serve: lost NATS at ${status.server}; reconnecting`);
    if (status.type === 'reconnect') log(`polish serve: reconnected to NATS at ${status.server}`);
  }
}

async function serveOn(
  connection: NatsConnection,
  natsUrl: string,
  owner: string,
  settings: {
    taskTimeoutMs: number | undefined;
    workerWaitMs: number | undefined;
    queueWaitMs: number | undefined;
    leaseMs: number | undefined;
    replicas: number;
    graceMs: number;
  },
): Promise<number> {
  const { taskTimeoutMs, workerWaitMs, queueWaitMs, leaseMs, replicas, graceMs } = settings;
  const store = await openRunStore(connection, undefined, { replicas }).catch((error: Error) => {
    const hint =
      replicas > 1
        ? `is JetStream enabled, in a cluster of at least ${replicas} servers?`
        : 'is JetStream enabled? nats-server -js';
    throw unavailable(`cannot open the JetStream run store on ${natsUrl} (${hint}): ${error.message}`);
  });
  // One process per orchestrator name: it alone resumes that name's runs.
  const lease = await acquireOwnerLease(store, owner, log).catch((error: Error) => {
    throw unavailable(error.message);
  });
  const queue = await openTaskQueue(connection, { replicas, ...(leaseMs === undefined ? {} : { leaseMs }) }).catch(
    (error: Error) => {
      throw error instanceof PolishError
        ? error
        : unavailable(`cannot open the task queue on ${natsUrl}: ${error.message}`);
    },
  );
  const dispatcher = createNatsDispatcher({
    connection,
    queue,
    ...(taskTimeoutMs === undefined ? {} : { taskTimeoutMs }),
    ...(workerWaitMs === undefined ? {} : { workerWaitMs }),
    ...(queueWaitMs === undefined ? {} : { queueWaitMs }),
  });
  const manager = createRunManager({
    store,
    dispatcher,
    owner,
    prices: DEFAULT_PRICES,
    inspect: (runId) => createNatsStatelyInspector(connection, runId).inspect,
    onEvent: (event) => {
      if (event.type === 'run.started') log(`run ${event.runId}: started`);
      if (event.type === 'iteration.evaluated')
        log(`run ${event.runId}: iteration ${event.iteration}: ${event.passed}/${event.total} pass`);
      if (event.type === 'run.finished')
        log(`run ${event.runId}: ${event.status} after ${event.iterations} iterations`);
    },
  });
  // Resume first, then take requests: a cancel or resume must not race with the resuming.
  const { resumed, refused } = await manager.resumeOwned();
  if (resumed.length) log(`polish serve: resumed ${resumed.length} unfinished run(s): ${resumed.join(', ')}`);
  for (const { runId, problem } of refused) log(`polish serve: cannot resume ${runId}: ${problem}`);
  const service = await startRunService(connection, manager, store, { queues: () => queue.stats() });
  log(
    `polish serve: orchestrator "${owner}" on ${natsUrl}${replicas > 1 ? ` (JetStream replicas ${replicas})` : ''}, run service ready (${wireNames().allRunService})`,
  );
  log('polish serve: ready');
  const signal = await new Promise<string>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
  log(`polish serve: ${signal}: stopping; unfinished runs stay resumable`);
  // Whatever NATS does (it may be gone, and every step below waits on it), serve ends within its grace.
  const deadline = setTimeout(() => {
    log(
      `polish serve: not stopped cleanly within ${graceMs / 1000} s (is NATS reachable?); exiting, unfinished runs stay resumable`,
    );
    process.exit(0);
  }, graceMs);
  await service.stop().catch(() => undefined);
  await manager.close();
  await dispatcher.close?.();
  await lease.release();
  await connection.drain().catch(() => undefined);
  clearTimeout(deadline);
  // Work of stopped runs may still be settling (a late answer, a save that can no longer
  // happen): it must not keep a stopped orchestrator alive. Unref'd, so it only fires if so.
  setTimeout(() => process.exit(0), 2_000).unref();
  return 0;
}
