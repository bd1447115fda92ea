import { mkdtempSync, rmSync } from 'node:fs';
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
