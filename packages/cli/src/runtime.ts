import { PolishError, unavailable, type TaskRole } from '@polish/protocol';
import { rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import { createAgentHost, type AgentHost, type ModelSettings } from '@polish/agents';
import { createNatsDispatcher, ensureEventStream, openTaskQueue, type Dispatcher } from '@polish/orchestrator';
import { startNatsServer, type EmbeddedNats } from './embedded-nats.js';
import { makeStoreDir } from './state-dir.js';
import { connectAs, credentialsOf, generatePasswords, hostAuthOf, type NatsCredentials } from './nats-auth.js';

/** How `polish run` and `polish demo` reach their workers. */
export interface RuntimeOptions {
  /** A running NATS with workers started elsewhere (`polish worker`); else everything is embedded. */
  natsUrl?: string;
  /** Each role's model, for the embedded host's workers (unused with natsUrl). */
  models?: Partial<Record<TaskRole, ModelSettings>>;
  /** How each principal connects (`polish nats-config`: identities, TLS files); embedded servers make their own users. */
  credentials?: NatsCredentials;
  /** The roles the embedded host serves (default: the polish loop's three). */
  roles?: readonly TaskRole[];
  pool?: number;
  maxWorkers?: number;
  reuse?: number;
  stateDir?: string;
  taskTimeoutMs?: number;
  workerWaitMs?: number;
  queueWaitMs?: number;
  /** How long a worker may go silent before its task is handed to another (the queue's consumers). */
  leaseMs?: number;
  /** Embedded par.command workers: run critique commands unsandboxed where no sandbox exists, and the variables they may see. */
  command?: { allowUnsandboxed?: boolean; env?: string[] };
  log?: (line: string) => void;
}

/** A connected runtime: a NATS dispatcher, and what to stop afterwards. */
export interface Runtime {
  dispatcher: Dispatcher;
  /** The orchestrator's connection: run events are published on it. */
  connection: NatsConnection;
  natsUrl: string;
  /** The users of this NATS, when it enforces per-role permissions (the embedded one always does). */
  credentials: NatsCredentials | undefined;
  embedded: boolean;
  /** Largest message the NATS server accepts, in bytes. */
  maxPayload: number;
  /** Stops what was started. `abandon`: the run was cancelled, so tasks in hand are killed, not awaited. */
  close(options?: { abandon?: boolean }): Promise<void>;
}

const ROLES: readonly TaskRole[] = ['criteria', 'evaluate', 'revise'];

/** The default state folder: `$XDG_STATE_HOME/polish`, else `~/.local/state/polish`. */
export function defaultStateDir(): string {
  return join(process.env.XDG_STATE_HOME ?? join(homedir(), '.local', 'state'), 'polish');
}

/**
 * Opens the real topology: with `natsUrl`, a connection to it; without, a local nats-server
 * (JetStream on, free port on 127.0.0.1, store under the state folder) and a local agent host
 * of worker processes. `close` stops whatever was started, in order.
 */
export async function openRuntime(options: RuntimeOptions): Promise<Runtime> {
  /** The task queue (created when missing) and a dispatcher on it. */
  const dispatcherOn = async (connection: NatsConnection) => {
    // The event stream too: the inspector only reads it, and a run's events stay replayable.
    await ensureEventStream(connection);
    const queue = await openTaskQueue(connection, {
      ...(options.leaseMs === undefined ? {} : { leaseMs: options.leaseMs }),
    }).catch((error: Error) => {
      throw error instanceof PolishError
        ? error
        : unavailable(`cannot open the task queue (is JetStream enabled? nats-server -js): ${error.message}`);
    });
    return createNatsDispatcher({
      connection,
      queue,
      ...(options.taskTimeoutMs === undefined ? {} : { taskTimeoutMs: options.taskTimeoutMs }),
      ...(options.workerWaitMs === undefined ? {} : { workerWaitMs: options.workerWaitMs }),
      ...(options.queueWaitMs === undefined ? {} : { queueWaitMs: options.queueWaitMs }),
    });
  };
  if (options.natsUrl) {
    const connection = await connectAs(
      options.natsUrl,
      `polish-orchestrator-${process.pid}`,
      options.credentials?.orchestrator,
    );
    const dispatcher = await dispatcherOn(connection).catch(async (error: unknown) => {
      await connection.close();
      throw error;
    });
    return {
      dispatcher,
      connection,
      natsUrl: options.natsUrl,
      credentials: options.credentials,
      embedded: false,
      maxPayload: connection.info?.max_payload ?? 1024 * 1024,
      close: async () => {
        await dispatcher.close?.();
        await connection.drain();
      },
    };
  }
  if (!options.models) throw unavailable('an embedded run needs model settings for its workers');
  const storeDir = makeStoreDir(options.stateDir ?? defaultStateDir());
  let server: EmbeddedNats | undefined;
  let host: AgentHost | undefined;
  let connection: NatsConnection | undefined;
  // If polish exits without close() (an uncaught error, process.exit), take the server and the
  // workers down with it: it started them, nothing else will stop them.
  const killOnExit = () => {
    for (const pid of [server?.pid, ...(host?.workerPids() ?? [])]) {
      try {
        if (pid) process.kill(pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
  };
  process.on('exit', killOnExit);
  let dispatcher: Dispatcher | undefined;
  const close = async (closeOptions: { abandon?: boolean } = {}) => {
    await dispatcher?.close?.();
    await connection?.drain().catch(() => undefined);
    // After a run has ended no task is in hand, so a worker that does not leave within 30 s is stuck.
    // Abandoned: a second for workers to stop what they started (a critique command), then killed.
    await host?.stop({ graceMs: closeOptions.abandon ? 1_000 : 30_000 });
    await server?.stop();
    process.off('exit', killOnExit);
    rmSync(storeDir, { recursive: true, force: true });
  };
  try {
    // The embedded server enforces per-role permissions: each process connects as its own user.
    const users = generatePasswords();
    const credentials = credentialsOf(users, storeDir);
    server = await startNatsServer({ storeDir, users });
    options.log?.(`polish: started nats-server (pid ${server.pid}) on ${server.url}`);
    // The queue first, so the workers find their consumers as they start.
    connection = await connectAs(server.url, `polish-orchestrator-${process.pid}`, credentials.orchestrator);
    dispatcher = await dispatcherOn(connection);
    host = createAgentHost({
      natsUrl: server.url,
      roles: options.roles ?? ROLES,
      pool: options.pool ?? 1,
      ...(options.maxWorkers === undefined ? {} : { maxWorkers: options.maxWorkers }),
      ...(options.command ? { command: options.command } : {}),
      ...(options.reuse === undefined ? {} : { reuse: options.reuse }),
      model: Object.values(options.models)[0] ?? { provider: 'none' },
      roleModels: options.models,
      auth: hostAuthOf(credentials, options.roles ?? ROLES),
    });
    await host.ready.catch((error: Error) => {
      throw unavailable(error.message);
    });
    options.log?.(`polish: ${host.workerPids().length} worker processes ready (one task each)`);
    return {
      dispatcher,
      connection,
      natsUrl: server.url,
      credentials,
      embedded: true,
      maxPayload: connection.info?.max_payload ?? 1024 * 1024,
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}
