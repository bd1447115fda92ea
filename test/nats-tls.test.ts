// TLS and NKEY identities (issue 20), tried against a real nats-server running what
// `polish nats-config --nkeys --mtls` writes: the principal that holds its seed, its certificate
// and the CA gets in; a plaintext client, a certificate of another CA, a server of another CA,
// and a seed that is not the identity it claims are each refused. A second deployment made the
// same way provides the "other CA" and the "other seeds".
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect as connectSocket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, nkeyAuthenticator, type ConnectionOptions } from '@nats-io/transport-node';
import { encode, fromSeed } from '@nats-io/nkeys';
import { startNatsServer, type EmbeddedNats } from '@polish/cli';
import { polish, REPO } from './support/cli.js';
import { startPolish, stop } from './support/processes.js';
import { watchLog } from './support/log-watch.js';

const scratch = mkdtempSync(join(tmpdir(), 'polish-tls-'));

type Entry = { nkey: string; seedFile: string; inboxPrefix: string; tls: { cert: string; key: string } };

/** A deployment written by `polish nats-config --nkeys --mtls`: its files, and each principal's entry. */
interface Deployment {
  config: string;
  /** The CA certificate's path. */
  ca: string;
  principals: Record<string, Entry>;
  file: (relative: string) => string;
  seed: (principal: string) => Uint8Array;
}

async function deployment(name: string): Promise<Deployment> {
  const made = await polish([
    'nats-config',
    '--dir',
    join(scratch, name),
    '--nkeys',
    '--mtls',
    '--store-dir',
    join(scratch, `${name}-js`),
  ]);
  expect(made.code, made.stderr).toBe(0);
  const { config, credentials } = JSON.parse(made.stdout) as { config: string; credentials: string };
  const file = (relative: string) => join(dirname(credentials), relative);
  const { tls, ...principals } = JSON.parse(readFileSync(credentials, 'utf8')) as { tls: { ca: string } } & Record<
    string,
    Entry
  >;
  const seed = (principal: string) =>
    new TextEncoder().encode(readFileSync(file(principals[principal]?.seedFile ?? ''), 'utf8').trim());
  return { config, ca: file(tls.ca), principals, file, seed };
}

let ours: Deployment;
let theirs: Deployment;
let server: EmbeddedNats;
let port: number;
/** The server's log: a TLS refusal shows there. */
const serverLog = watchLog('the server', 10_000);

/** TLS options of `principal` in a deployment: the CA, and the principal's own certificate. */
const tlsOf = (of: Deployment, principal: string) => ({
  caFile: of.ca,
  certFile: of.file(of.principals[principal]?.tls.cert ?? ''),
  keyFile: of.file(of.principals[principal]?.tls.key ?? ''),
});

/** Connects, flushes and closes: resolves "connected", or the refusal's message. */
async function attempt(options: Partial<ConnectionOptions>): Promise<string> {
  try {
    const connection = await connect({
      servers: `tls://127.0.0.1:${port}`,
      reconnect: false,
      timeout: 5_000,
      ...options,
    });
    await connection.flush();
    await connection.close();
    return 'connected';
  } catch (error) {
    return `${(error as Error).message} ${String((error as { cause?: Error }).cause?.message ?? '')}`;
  }
}

beforeAll(async () => {
  [ours, theirs] = await Promise.all([deployment('ours'), deployment('theirs')]);
  server = await startNatsServer({
    storeDir: join(scratch, 'ours-js'),
    configFile: ours.config,
    onLog: (text) => serverLog.append(text),
  });
  port = Number(new URL(server.url).port);
});

afterAll(async () => {
  await server?.stop();
  rmSync(scratch, { recursive: true, force: true });
});

describe('a NATS of `polish nats-config --nkeys --mtls`', () => {
  it('only public keys reach the server configuration; every seed stays in its own file', () => {
    const config = readFileSync(ours.config, 'utf8');
    expect(Object.keys(ours.principals)).toHaveLength(11);
    for (const [principal, entry] of Object.entries(ours.principals)) {
      const seed = new TextDecoder().decode(ours.seed(principal));
      expect(config).toContain(`nkey: "${entry.nkey}"`);
      expect(config).not.toContain(seed);
      expect(fromSeed(ours.seed(principal)).getPublicKey()).toBe(entry.nkey);
    }
    expect(config).not.toMatch(/password/);
    expect(server.url).toMatch(/^tls:\/\//);
  });

  it('accepts a principal with its seed, its client certificate and the CA', async () => {
    expect(
      await attempt({
        authenticator: nkeyAuthenticator(ours.seed('evaluate')),
        inboxPrefix: '_INBOX_evaluate',
        tls: tlsOf(ours, 'evaluate'),
      }),
    ).toBe('connected');
  });

  it('refuses a client that does not start TLS: a plaintext CONNECT gets no PONG, and the connection is closed', async () => {
    const socket = connectSocket(port, '127.0.0.1');
    let received = '';
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.on('error', () => undefined);
    const from = serverLog.mark();
    socket.on('data', (chunk: Buffer) => {
      const first = received === '';
      received += chunk.toString('latin1');
      if (first) socket.write('CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n');
    });
    await closed;
    // The server said, in its greeting, that TLS is required, and never took the plaintext CONNECT.
    expect(received).toMatch(/^INFO \{.*"tls_required":true/);
    expect(received).not.toContain('PONG');
    expect(await serverLog.logged(/TLS handshake error/, from)).toMatch(/does not look like a TLS handshake/);
  });

  it('refuses a client without a certificate (mutual TLS)', async () => {
    const from = serverLog.mark();
    const outcome = await attempt({
      authenticator: nkeyAuthenticator(ours.seed('evaluate')),
      tls: { caFile: tlsOf(ours, 'evaluate').caFile },
    });
    expect(outcome).not.toBe('connected');
    expect(await serverLog.logged(/TLS handshake error/, from)).toMatch(/didn't provide a certificate/);
  });

  it('refuses a client certificate signed by another CA', async () => {
    const from = serverLog.mark();
    const outcome = await attempt({
      authenticator: nkeyAuthenticator(ours.seed('evaluate')),
      tls: { ...tlsOf(theirs, 'evaluate'), caFile: tlsOf(ours, 'evaluate').caFile },
    });
    expect(outcome).not.toBe('connected');
    expect(await serverLog.logged(/TLS handshake error/, from)).toMatch(/unknown authority/);
  });

  it('a client refuses a server whose certificate another CA signed', async () => {
    const outcome = await attempt({
      authenticator: nkeyAuthenticator(ours.seed('evaluate')),
      tls: { ...tlsOf(ours, 'evaluate'), caFile: tlsOf(theirs, 'evaluate').caFile },
    });
    expect(outcome).toMatch(/certificate/);
  });

  it("refuses another role's seed: an evaluator's seed cannot sign in as the orchestrator", async () => {
    // The orchestrator's public key is no secret (it is in the server configuration); claiming it
    // with a signature made by the evaluator's seed must fail.
    const evaluator = fromSeed(ours.seed('evaluate'));
    const outcome = await attempt({
      authenticator: (nonce?: string) => ({
        nkey: ours.principals.orchestrator?.nkey ?? '',
        sig: encode(evaluator.sign(new TextEncoder().encode(nonce ?? ''))),
      }),
      tls: tlsOf(ours, 'evaluate'),
    });
    expect(outcome).toMatch(/Authorization Violation/i);
  });

  it("refuses a seed of another deployment, even with this deployment's certificate", async () => {
    const outcome = await attempt({
      authenticator: nkeyAuthenticator(theirs.seed('orchestrator')),
      tls: tlsOf(ours, 'orchestrator'),
    });
    expect(outcome).toMatch(/Authorization Violation/i);
  });

  it('a client certificate without its key, or a key without its certificate, is bad input (exit 2) before any connection', async () => {
    const { certFile, keyFile } = tlsOf(ours, 'orchestrator');
    for (const half of [
      ['--tls-cert', certFile],
      ['--tls-key', keyFile],
    ]) {
      const outcome = await polish(['status', '--nats', server.url, '--tls-ca', ours.ca, ...half]);
      expect(outcome.code).toBe(2);
      expect(outcome.stderr).toContain('a client certificate needs its key, and a key its certificate');
    }
  });

  it('polish without the CA cannot connect, and says to pass it (exit 6)', async () => {
    const outcome = await polish(['status', '--nats', server.url]);
    expect(outcome.code).toBe(6);
    expect(outcome.stderr).toMatch(/cannot connect to NATS at tls:\/\/.*certificate.*--tls-ca/);
  });
});

describe('a machine that runs only evaluators holds only the host and evaluator seeds', () => {
  let machine: string;

  beforeAll(() => {
    // What the README tells an operator to copy to such a machine, and nothing else.
    machine = join(scratch, 'evaluator-machine');
    mkdirSync(machine, { mode: 0o700 });
    for (const part of ['credentials.json', 'tls/ca.pem', 'principals/host', 'principals/evaluate'])
      cpSync(ours.file(part), join(machine, part), { recursive: true });
  });

  /** `polish worker` on that machine, with its credentials file only. */
  const workerArgs = (roles: string) => [
    'worker',
    '--nats',
    server.url,
    '--credentials',
    join(machine, 'credentials.json'),
    '--roles',
    roles,
    '--pool',
    '1',
    '--script',
    `${REPO}examples/demo/script.yaml`,
  ];

  it('serves evaluate over TLS with its NKEY', async () => {
    const worker = startPolish(workerArgs('evaluate'));
    try {
      await worker.waitFor(/^polish worker: all pools ready$/);
    } finally {
      await stop(worker);
    }
  });

  it('refuses to serve a role whose seed it was not given, naming the missing file (exit 2)', async () => {
    const outcome = await polish(workerArgs('evaluate,revise'));
    expect(outcome.code).toBe(2);
    expect(outcome.stderr).toContain(`cannot read the NKEY seed ${join(machine, 'principals/revise/seed.nk')}`);
  });
});
