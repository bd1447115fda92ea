import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { startNatsServer, type EmbeddedNats } from '@polish/cli';

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
