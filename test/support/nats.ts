import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { startNatsServer, type EmbeddedNats } from '@polish/cli';
import { polish } from './cli.js';

/** A real nats-server on a free loopback port, for one test file. */
export interface NatsFixture {
  server: EmbeddedNats;
  /** With `trace`: the server's log of every message it routed, payloads included. */
  trace(): string;
  connection: NatsConnection;
  stop(): Promise<void>;
}

/** Starts a real nats-server (JetStream on) in a temp folder and connects to it. */
export async function startNats(options: { trace?: boolean } = {}): Promise<NatsFixture> {
  const storeDir = mkdtempSync(join(tmpdir(), 'polish-nats-'));
  let log = '';
  const server = await startNatsServer({
    storeDir,
    ...(options.trace ? { args: ['-V'], onLog: (text) => (log += text) } : {}),
  });
  const connection = await connect({ servers: server.url });
  return {
    server,
    connection,
    trace: () => log,
    async stop() {
      await connection.drain().catch(() => undefined);
      await server.stop();
      rmSync(storeDir, { recursive: true, force: true });
    },
  };
}

/**
 * A free loopback port outside the kernel's ephemeral range, for a server that a test restarts
 * on the same port: a port the kernel handed out (port 0) may be handed to another process's
 * connection while the server is down, a port outside its range only to a process that asks
 * for that very number.
 */
export async function restartablePort(): Promise<number> {
  const [low = 0, high = 0] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
    .trim()
    .split(/\s+/)
    .map(Number);
  // Below the range where there is room (the default, 32768-60999), else above it.
  const [from, to] = low - 10_000 >= 1_000 ? [10_000, low] : [high + 1, 65_536];
  if (to - from < 1_000) throw new Error(`the ephemeral port range (${low}-${high}) leaves no room outside it`);
  for (let attempt = 0; attempt < 50; attempt += 1) {
    const port = from + Math.floor(Math.random() * (to - from));
    const probe = createServer();
    const free = await new Promise<boolean>((resolve) => {
      probe.once('error', () => resolve(false));
      probe.listen(port, '127.0.0.1', () => resolve((probe.address() as AddressInfo).port === port));
    });
    await new Promise((resolve) => probe.close(resolve));
    if (free) return port;
  }
  throw new Error(`no free port found between ${from} and ${to}`);
}

/** Runs `polish nats-config` (per-role users) into `directory`, the server storing in `storeDir`; its files. */
export async function writeNatsConfig(
  directory: string,
  storeDir: string,
  flags: string[] = [],
): Promise<{ config: string; credentials: string }> {
  const generated = await polish(['nats-config', '--dir', directory, '--store-dir', storeDir, ...flags]);
  expect(generated.code, generated.stderr).toBe(0);
  return JSON.parse(generated.stdout) as { config: string; credentials: string };
}
