import { existsSync } from 'node:fs';
import { isIP } from 'node:net';
import { join, resolve } from 'node:path';
import { createUser } from '@nats-io/nkeys';
import { PRINCIPALS, inboxPrefixOf, invalidInput, type Principal } from '@polish/protocol';
import { parseWholeNumber } from '../numbers.js';
import { generatePasswords, perPrincipal, type CredentialEntry, type CredentialsFile } from '../nats-auth.js';
import { renderServerConfig } from '../nats-server-config.js';
import { makePrivateDir, writeNewFile, writeSecretFile } from '../secret-files.js';
import { issueCertificates, subjectAltNames, type Certificates } from '../tls-certificates.js';

const ROLE_OF: Record<string, string> = {
  orchestrator: 'polish serve, polish run (orchestrating), polish par',
  inspector: 'polish inspect',
  client: 'polish run (submitting to serve), polish status/list/cancel/resume/extend',
  host: "polish worker (the host itself); its workers get their role's identity",
};

/** Flags of `polish nats-config`. */
export interface NatsConfigFlags {
  dir?: string;
  port?: string;
  host?: string;
  storeDir?: string;
  nkeys?: boolean;
  tls?: boolean;
  mtls?: boolean;
  tlsNames?: string;
}

/** Where each file goes in `--dir`, relative to it (the credentials file names them so). */
const LAYOUT = {
  config: 'nats-server.conf',
  credentials: 'credentials.json',
  ca: 'tls/ca.pem',
  serverCert: 'tls/server-cert.pem',
  serverKey: 'tls/server-key.pem',
  seed: (principal: Principal) => `principals/${principal}/seed.nk`,
  cert: (principal: Principal) => `principals/${principal}/cert.pem`,
  key: (principal: Principal) => `principals/${principal}/key.pem`,
};

/** The names and addresses the server certificate lists: those given, the listen address, and this machine's loopback. */
function serverNames(flags: NatsConfigFlags, host: string): string[] {
  const given = (flags.tlsNames ?? '')
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean);
  const listening = isIP(host) && host !== '0.0.0.0' && host !== '::' ? [host] : [];
  const names = [...new Set([...given, ...listening, 'localhost', '127.0.0.1', '::1'])];
  subjectAltNames(names);
  return names;
}

/** An NKEY per principal: the entries name the public key and the seed's file; the seeds are returned apart. */
function generateNkeys(): { entries: Record<Principal, CredentialEntry>; seeds: Record<Principal, string> } {
  const pairs = perPrincipal(() => createUser());
  return {
    entries: perPrincipal((principal) => ({
      nkey: pairs[principal].getPublicKey(),
      seedFile: LAYOUT.seed(principal),
      inboxPrefix: inboxPrefixOf(principal),
    })),
    seeds: perPrincipal((principal) => new TextDecoder().decode(pairs[principal].getSeed())),
  };
}

/**
 * `polish nats-config --dir D`: a nats-server configuration with one identity per principal and
 * allow-list permissions, and the credentials each process needs. Passwords by default (a quick
 * local start); `--nkeys`: one NKEY per principal, only public keys in the server's
 * configuration, each seed in its own file; `--tls`: a private CA and a server certificate, TLS
 * required; `--mtls`: also a client certificate per principal, verified by the server. Every
 * secret is written 0600 in folders of mode 0700; nothing existing is overwritten.
 */
export function natsConfigCommand(flags: NatsConfigFlags): number {
  if (!flags.dir) throw invalidInput('dir', 'required: --dir folder for nats-server.conf and credentials.json');
  const dir = resolve(flags.dir);
  const port = parseWholeNumber('port', flags.port, 1, 65535) ?? 4222;
  const host = flags.host ?? '127.0.0.1';
  const tls = Boolean(flags.tls || flags.mtls);
  if (flags.tlsNames !== undefined && !tls) throw invalidInput('tls-names', 'names the server certificate: add --tls');
  const names = tls ? serverNames(flags, host) : [];
  const path = (relative: string) => join(dir, relative);
  for (const target of [LAYOUT.config, LAYOUT.credentials, 'tls', 'principals'].map(path))
    if (existsSync(target))
      throw invalidInput(
        'dir',
        `${target} exists; choose another --dir (new secrets would not match the running server)`,
      );
  makePrivateDir(dir);

  // Everything is made before anything is written: a failure leaves no half-made folder behind.
  const { entries, seeds } = flags.nkeys ? generateNkeys() : { entries: generatePasswords(), seeds: undefined };
  const certificates: Certificates | undefined = tls
    ? issueCertificates(names, flags.mtls ? PRINCIPALS : [])
    : undefined;
  const credentials: CredentialsFile = {
    ...(tls ? { tls: { ca: LAYOUT.ca } } : {}),
    ...perPrincipal((principal) => ({
      ...entries[principal],
      ...(flags.mtls ? { tls: { cert: LAYOUT.cert(principal), key: LAYOUT.key(principal) } } : {}),
    })),
  };
  const config = renderServerConfig(credentials, {
    port,
    host,
    storeDir: flags.storeDir ? resolve(flags.storeDir) : path('jetstream'),
    ...(tls
      ? {
          tls: {
            certFile: path(LAYOUT.serverCert),
            keyFile: path(LAYOUT.serverKey),
            caFile: path(LAYOUT.ca),
            verifyClients: Boolean(flags.mtls),
          },
        }
      : {}),
  });

  writeSecretFile(path(LAYOUT.config), config);
  writeSecretFile(path(LAYOUT.credentials), `${JSON.stringify(credentials, null, 2)}\n`);
  if (certificates) {
    makePrivateDir(path('tls'));
    writeNewFile(path(LAYOUT.ca), certificates.ca, 0o644);
    writeNewFile(path(LAYOUT.serverCert), certificates.server.cert, 0o644);
    writeSecretFile(path(LAYOUT.serverKey), certificates.server.key);
  }
  if (seeds || certificates?.clients) {
    makePrivateDir(path('principals'));
    for (const principal of PRINCIPALS) {
      const client = certificates?.clients[principal];
      if (!seeds && !client) continue;
      makePrivateDir(path(`principals/${principal}`));
      if (seeds) writeSecretFile(path(LAYOUT.seed(principal)), `${seeds[principal]}\n`);
      if (client) {
        writeNewFile(path(LAYOUT.cert(principal)), client.cert, 0o644);
        writeSecretFile(path(LAYOUT.key(principal)), client.key);
      }
    }
  }
  process.stderr.write(`${instructions(dir, { nkeys: Boolean(flags.nkeys), tls, names })}\n`);
  process.stdout.write(
    `${JSON.stringify({ config: path(LAYOUT.config), credentials: path(LAYOUT.credentials), ...(tls ? { ca: path(LAYOUT.ca) } : {}) })}\n`,
  );
  return 0;
}

/** What to do next, and what each machine must hold. */
function instructions(dir: string, made: { nkeys: boolean; tls: boolean; names: string[] }): string {
  const scheme = made.tls ? 'tls' : 'nats';
  return [
    `wrote ${dir} (secrets 0600, folders 0700)`,
    `start the server:  nats-server -c ${join(dir, LAYOUT.config)}`,
    ...(made.tls ? [`clients dial tls://<one of: ${made.names.join(', ')}>:<port>`] : []),
    `each process passes --credentials ${join(dir, LAYOUT.credentials)} (or POLISH_NATS_CREDENTIALS) and --nats ${scheme}://…, and connects as its own principal:`,
    ...PRINCIPALS.map(
      (principal) =>
        `  ${principal.padEnd(12)} ${ROLE_OF[principal] ?? `the ${principal} workers (handed to them by their host)`}`,
    ),
    made.nkeys
      ? `a machine needs ${LAYOUT.credentials}${made.tls ? `, ${LAYOUT.ca}` : ''} and principals/<p>/ for each principal it runs (no other seed)`
      : 'credentials.json holds every password: for separate machines use --nkeys, so each machine holds only its own seeds',
  ].join('\n');
}
