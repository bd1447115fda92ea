// Routes between the nodes of a NATS cluster, secured with the files `polish nats-config --nkeys
// --mtls` writes (README "NATS cluster", "Separate machines, securely"): each node includes the
// deployment's configuration and adds its name, its store and a `cluster` block whose `tls` uses
// the deployment's CA and server certificate, so nodes accept routes only from nodes holding a
// certificate of that CA. Real nats-server processes on 127.0.0.1, a real `polish worker` and
// `polish run` over mutual TLS with NKEYs. A node of another CA, and a node that offers its
// routes in plaintext, are refused by the cluster.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunResultSchema } from '@polish/protocol';
import { startNatsServer, type EmbeddedNats } from '@polish/cli';
import { polish } from './support/cli.js';
import { freePorts } from './support/cluster.js';
import { DEMO, demoRunOnNatsArgs } from './support/demo.js';
import { startHost, stop } from './support/processes.js';
import { watchLog, type LogWatch } from './support/log-watch.js';

const scratch = mkdtempSync(join(tmpdir(), 'polish-cluster-tls-'));

/** `polish nats-config --nkeys --mtls` into scratch/name: its server configuration and credentials file. */
async function deployment(
  name: string,
): Promise<{ config: string; credentials: string; tls: (file: string) => string }> {
  const made = await polish(['nats-config', '--dir', join(scratch, name), '--nkeys', '--mtls']);
  expect(made.code, made.stderr).toBe(0);
  const { config, credentials } = JSON.parse(made.stdout) as { config: string; credentials: string };
  return { config, credentials, tls: (file) => join(dirname(config), 'tls', file) };
}

/** A node as the README shows it, with what a node's own file adds to the deployment's. */
function nodeConfig(
  of: Awaited<ReturnType<typeof deployment>>,
  name: string,
  routePort: number,
  routes: number[],
  options: { tls: boolean },
): string {
  const path = join(scratch, `${name}.conf`);
  const tls = options.tls
    ? `  tls { cert_file: "${of.tls('server-cert.pem')}", key_file: "${of.tls('server-key.pem')}", ca_file: "${of.tls('ca.pem')}", verify: true, timeout: 5 }\n`
    : '';
  writeFileSync(
    path,
    [
      // nats-server takes an include path relative to the including file, never absolute.
      `include "${relative(scratch, of.config)}"`,
      `server_name: ${name}`,
      `jetstream { store_dir: "${join(scratch, `${name}-store`)}" }`,
      'cluster {',
      '  name: polish',
      `  listen: "127.0.0.1:${routePort}"`,
      `  routes: [${routes.map((port) => `nats-route://127.0.0.1:${port}`).join(', ')}]`,
      `${tls}}`,
      '',
    ].join('\n'),
    { mode: 0o600 },
  );
  return path;
}

/** A node of the test: its server and its log. */
interface Node extends Pick<LogWatch, 'mark' | 'logged'> {
  server: EmbeddedNats;
}

async function startNode(name: string, config: string): Promise<Node> {
  const log = watchLog(name);
  const server = await startNatsServer({
    storeDir: join(scratch, `${name}-store`),
    configFile: config,
    onLog: (text) => log.append(text),
  });
  return { server, mark: log.mark, logged: log.logged };
}

let ours: Awaited<ReturnType<typeof deployment>>;
let routePorts: number[];
const nodes: Node[] = [];

beforeAll(async () => {
  ours = await deployment('ours');
  routePorts = await freePorts(3);
  for (const [index, port] of routePorts.entries()) {
    const name = `n${index + 1}`;
    nodes.push(await startNode(name, nodeConfig(ours, name, port, routePorts, { tls: true })));
  }
  // A JetStream cluster: every node sees the same meta leader, over TLS routes only.
  await Promise.all(nodes.map((node) => node.logged(/JetStream cluster (new )?metadata leader/)));
});

afterAll(async () => {
  await Promise.all(nodes.map((node) => node.server.stop()));
  rmSync(scratch, { recursive: true, force: true });
});

describe('a NATS cluster whose routes use the certificates of `polish nats-config --mtls`', () => {
  it('forms over TLS routes, and a run converges with its worker on one node and its orchestrator on another', async () => {
    const [, second, third] = nodes as [Node, Node, Node];
    const host = await startHost(second.server.url, [
      '--credentials',
      ours.credentials,
      '--script',
      `${DEMO}/script.yaml`,
    ]);
    try {
      const run = await polish([...demoRunOnNatsArgs(third.server.url), '--credentials', ours.credentials]);
      expect(run.code, run.stderr).toBe(0);
      expect(RunResultSchema.parse(JSON.parse(run.stdout)).status).toBe('CONVERGED');
    } finally {
      await stop(host);
    }
  });

  it('refuses a node whose route certificate another CA signed', async () => {
    const theirs = await deployment('theirs');
    const [first] = nodes as [Node];
    const from = first.mark();
    // Its own route port is found just before it starts: another test file may take a port found earlier.
    const [port] = (await freePorts(1)) as [number];
    const rogue = await startNode('rogue', nodeConfig(theirs, 'rogue', port, routePorts, { tls: true }));
    try {
      expect(await first.logged(/TLS route handshake error/, from)).toMatch(/unknown authority|bad certificate/);
    } finally {
      await rogue.server.stop();
    }
  });

  it('refuses a node that offers its routes in plaintext', async () => {
    const [first] = nodes as [Node];
    const from = first.mark();
    const [port] = (await freePorts(1)) as [number];
    const plain = await startNode('plain', nodeConfig(ours, 'plain', port, routePorts, { tls: false }));
    try {
      expect(await first.logged(/TLS route handshake error/, from)).toMatch(
        /first record does not look like a TLS handshake/,
      );
    } finally {
      await plain.server.stop();
    }
  });
});
