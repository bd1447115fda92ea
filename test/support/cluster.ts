import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { startNatsServer, type EmbeddedNats } from '@polish/cli';

/** One nats-server of a test cluster. */
export interface ClusterNode {
  /** Its `server_name` (n1, n2, …): JetStream reports peers and leaders by it. */
  name: string;
  /** Client URL, on a port the server chose itself (read from its log). */
  url: string;
  server: EmbeddedNats;
  /** Everything it logged so far. */
  log(): string;
  /** Kills it with SIGKILL (no goodbye to clients or peers) and waits until it has exited. */
  kill(): Promise<void>;
}

/** A JetStream cluster of real nats-server processes on 127.0.0.1, for one test file. */
export interface NatsCluster {
  nodes: ClusterNode[];
  /** Stops every node still running and removes their store folders. */
  stop(): Promise<void>;
}

/** Ports the OS reports free right now (all held at once, so they differ), released for the caller to bind. */
export async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
          const server = createServer();
          server.once('error', reject);
          server.listen(0, '127.0.0.1', () => resolve(server));
        }),
    ),
  );
  const ports = servers.map((server) => (server.address() as AddressInfo).port);
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  return ports;
}

/** Waits until JetStream answers `$JS.API.INFO` through this node: the cluster has a meta leader and this node knows it. */
async function waitForJetStream(url: string, deadline: number): Promise<void> {
  const connection = await connect({ servers: url });
  try {
    for (;;) {
      try {
        await (await jetstreamManager(connection)).getAccountInfo();
        return;
      } catch (error) {
        if (Date.now() > deadline)
          throw new Error(`JetStream on ${url} has no meta leader yet: ${(error as Error).message}`);
        await delay(100);
      }
    }
  } finally {
    await connection.close();
  }
}

/**
 * Starts `size` nats-servers with JetStream, clustered over routes on 127.0.0.1, each with its
 * own store folder, and waits (bounded) until every node reaches a JetStream meta leader.
 *
 * Client ports are chosen by each server (`-p -1`) and read from its log: no race. Route ports
 * must be known before any node starts (every node lists all routes; a JetStream cluster needs
 * configured routes), so they are taken from the OS just before; if another process grabs one
 * in between, the node fails with "address already in use" and the whole cluster is started
 * again on new ports (3 tries).
 */
export async function startNatsCluster(options: { size?: number; timeoutMs?: number } = {}): Promise<NatsCluster> {
  const size = options.size ?? 3;
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await tryStart(size, options.timeoutMs ?? 30_000);
    } catch (error) {
      if (attempt >= 3 || !/address already in use/i.test((error as Error).message)) throw error;
    }
  }
}

async function tryStart(size: number, timeoutMs: number): Promise<NatsCluster> {
  const root = mkdtempSync(join(tmpdir(), 'polish-cluster-'));
  const routePorts = await freePorts(size);
  const routes = routePorts.map((port) => `nats-route://127.0.0.1:${port}`).join(', ');
  const logs = routePorts.map(() => '');
  const started = await Promise.allSettled(
    routePorts.map((port, index) => {
      const name = `n${index + 1}`;
      const storeDir = join(root, name);
      const config = join(root, `${name}.conf`);
      // A node lists itself among the routes too: nats-server skips a route to itself.
      writeFileSync(
        config,
        [
          `server_name: ${name}`,
          'max_payload: 8MB',
          `jetstream { store_dir: "${storeDir}" }`,
          `cluster { name: polish-test, listen: "127.0.0.1:${port}", routes: [${routes}] }`,
          '',
        ].join('\n'),
      );
      return startNatsServer({ storeDir, configFile: config, onLog: (text) => (logs[index] += text) });
    }),
  );
  const servers = started.flatMap((outcome) => (outcome.status === 'fulfilled' ? [outcome.value] : []));
  const stopAll = async () => {
    await Promise.all(servers.map((server) => server.stop()));
    rmSync(root, { recursive: true, force: true });
  };
  const failed = started.find((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
  if (failed) {
    await stopAll();
    throw failed.reason;
  }
  const nodes: ClusterNode[] = servers.map((server, index) => ({
    name: `n${index + 1}`,
    url: server.url,
    server,
    log: () => logs[index] ?? '',
    async kill() {
      try {
        process.kill(server.pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
      await server.stop();
    },
  }));
  try {
    const deadline = Date.now() + timeoutMs;
    await Promise.all(nodes.map((node) => waitForJetStream(node.url, deadline)));
  } catch (error) {
    await stopAll();
    throw new Error(
      `${(error as Error).message}\n${nodes.map((node) => `--- ${node.name}\n${node.log().slice(-1500)}`).join('\n')}`,
    );
  }
  return { nodes, stop: stopAll };
}
