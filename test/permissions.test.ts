// Role isolation on the wire (DESIGN §5), proved against a real nats-server running the
// configuration `polish nats-config` writes. One table says what each principal may publish
// and subscribe to; every cell is tried, and each answer comes from the server at once (its
// refusal arrives before the reply to a flush), so a wrong permission fails naming the subject.
// The same table holds for every kind of identity nats-config makes: passwords (with and without
// TLS), and NKEYs (with and without mutual TLS).
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  connect,
  nkeyAuthenticator,
  PermissionViolationError,
  type ConnectionOptions,
  type NatsConnection,
} from '@nats-io/transport-node';
import { startNatsServer, type EmbeddedNats } from '@polish/cli';
import { writeNatsConfig } from './support/nats.js';
import { PRINCIPALS, PUBLISH, SUBSCRIBE, type Principal } from './support/permission-table.js';

const scratch = mkdtempSync(join(tmpdir(), 'polish-permissions-'));
type Credential = { inboxPrefix: string; tls?: { cert: string; key: string } } & (
  { user: string; password: string } | { nkey: string; seedFile: string }
);
type CredentialsFile = Record<string, Credential> & { tls?: { ca: string } };

/** The kinds of identity `polish nats-config` makes: each configuration is tried against the whole table. */
const CONFIGURATIONS = [
  { name: 'passwords', flags: [] },
  { name: 'passwords over TLS', flags: ['--tls'] },
  { name: 'NKEYs', flags: ['--nkeys'] },
  { name: 'NKEYs over mutual TLS', flags: ['--nkeys', '--mtls'] },
];

// The configuration under test (the describe blocks run one after the other).
let server: EmbeddedNats;
let credentials: CredentialsFile;
let base: string;
const connections = new Map<Principal, { connection: NatsConnection; refused: PermissionViolationError[] }>();

/** How a principal connects, read from the credentials file alone (its paths relative to it). */
function optionsOf(principal: Principal): Partial<ConnectionOptions> {
  const credential = credentials[principal] as Credential;
  const at = (path: string) => join(base, path);
  const seed = (path: string) => new TextEncoder().encode(readFileSync(at(path), 'utf8').trim());
  return {
    servers: server.url,
    inboxPrefix: credential.inboxPrefix,
    ...('password' in credential
      ? { user: credential.user, pass: credential.password }
      : { authenticator: nkeyAuthenticator(seed(credential.seedFile)) }),
    ...(credentials.tls
      ? {
          tls: {
            caFile: at(credentials.tls.ca),
            ...(credential.tls ? { certFile: at(credential.tls.cert), keyFile: at(credential.tls.key) } : {}),
          },
        }
      : {}),
  };
}

/** A principal's connection, collecting every permission the server refused it. */
async function as(principal: Principal) {
  const known = connections.get(principal);
  if (known) return known;
  const connection = await connect(optionsOf(principal));
  const entry = { connection, refused: [] as PermissionViolationError[] };
  void (async () => {
    for await (const status of connection.status())
      if (status.type === 'error' && status.error instanceof PermissionViolationError) entry.refused.push(status.error);
  })();
  connections.set(principal, entry);
  return entry;
}

/** Publishes and asks the server for a flush: a refusal, if any, has arrived by then. */
async function mayPublish(principal: Principal, subject: string): Promise<boolean> {
  const entry = await as(principal);
  const before = entry.refused.length;
  entry.connection.publish(subject, '{}');
  await entry.connection.flush();
  // The refusal arrived before the flush's reply; one turn of the event loop hands it to the status iterator.
  await new Promise((resolve) => setImmediate(resolve));
  return !entry.refused.slice(before).some((error) => error.operation === 'publish' && error.subject === subject);
}

/** Subscribes and flushes: the server refuses a forbidden subscription before the flush's reply. */
async function maySubscribe(principal: Principal, subject: string): Promise<boolean> {
  const entry = await as(principal);
  const subscription = entry.connection.subscribe(subject);
  await entry.connection.flush();
  const refused = subscription.isClosed();
  if (!refused) subscription.unsubscribe();
  return !refused;
}

/** Where the server departs from the table for a principal: each subject it refused or allowed against the table. */
async function departures(
  principal: Principal,
  table: [subject: string, allowed: readonly Principal[]][],
  may: (principal: Principal, subject: string) => Promise<boolean>,
  operation: string,
): Promise<string[]> {
  const wrong: string[] = [];
  for (const [subject, allowed] of table) {
    const expected = allowed.includes(principal);
    if ((await may(principal, subject)) !== expected)
      wrong.push(`${expected ? 'refused' : 'allowed'} ${operation} ${subject}`);
  }
  return wrong;
}

describe.each(CONFIGURATIONS)(
  'per-role NATS permissions with $name: the whole table, tried on the server',
  ({ name, flags }) => {
    const folder = join(scratch, name.replace(/\W+/g, '-'));

    beforeAll(async () => {
      const { config, credentials: file } = await writeNatsConfig(join(folder, 'nats'), join(folder, 'js'), flags);
      credentials = JSON.parse(readFileSync(file, 'utf8'));
      base = dirname(file);
      server = await startNatsServer({ storeDir: join(folder, 'js'), configFile: config });
      // Under --tls or --mtls the server takes TLS connections only (the harness then hands out a tls:// URL).
      expect(server.url.startsWith('tls://')).toBe(flags.some((flag) => flag.endsWith('tls')));
    });

    afterAll(async () => {
      for (const { connection } of connections.values()) await connection.close().catch(() => undefined);
      connections.clear();
      await server?.stop();
    });

    it.each(PRINCIPALS)('%s publishes exactly what the table allows', async (principal) => {
      const wrong = await departures(principal, PUBLISH, mayPublish, 'publish to');
      expect(wrong, `${principal}: ${wrong.join('; ')}`).toEqual([]);
    });

    it.each(PRINCIPALS)('%s subscribes exactly where the table allows', async (principal) => {
      const wrong = await departures(principal, SUBSCRIBE, maySubscribe, 'subscription to');
      expect(wrong, `${principal}: ${wrong.join('; ')}`).toEqual([]);
    });
  },
);
