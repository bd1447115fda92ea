import type { Authenticator, ConnectionOptions } from '@nats-io/transport-node';
import { invalidInput, natsServers } from '@polish/protocol';
import type { NatsAuth, NatsTls } from './worker/worker-config.js';
import { readSecretFile, readTrustedFile } from './checked-files.js';

// The one place a principal's identity and TLS files become nats.js connection options, for the
// host, its workers and the CLI alike. No value is imported from the NATS client here: a worker
// loads the client itself, after its code (and outside a startup snapshot), and hands in the
// one function needed from it (nats-connect.ts does that for the host and the CLI).

/** Whether a NATS address asks for TLS: any of its servers written `tls://`. */
export const wantsTls = (url: string) => natsServers(url).some((server) => /^tls:\/\//i.test(server));

/** Reads an NKEY user seed file (`polish nats-config --nkeys`), or throws naming the file. */
export function readNkeySeed(path: string): Uint8Array {
  const seed = readSecretFile(path, 'the NKEY seed', 'credentials').toString('utf8').trim();
  if (!/^SU[A-Z2-7]{56}$/.test(seed)) throw invalidInput('credentials', `${path} is not an NKEY user seed`);
  return new TextEncoder().encode(seed);
}

/** The contents nats.js takes in place of each TLS file. */
const TLS_FILES = {
  caFile: { option: 'ca', field: 'tls-ca', what: 'the TLS CA certificate', read: readTrustedFile },
  certFile: { option: 'cert', field: 'tls-cert', what: 'the TLS client certificate', read: readTrustedFile },
  keyFile: { option: 'key', field: 'tls-key', what: 'the TLS private key', read: readSecretFile },
} as const;

/**
 * The TLS files' contents, each read once and checked on what was read (the key a secret, the
 * CA and certificate files that decide trust): nats.js gets these bytes, never a path it would
 * read again later, so the file checked is the file used. A certificate needs its key.
 */
export function readTls(tls: NatsTls | undefined): { ca?: string; cert?: string; key?: string } {
  const contents: { ca?: string; cert?: string; key?: string } = {};
  for (const [name, path] of Object.entries(tls ?? {}) as [keyof NatsTls, string | undefined][]) {
    if (!path) continue;
    const file = TLS_FILES[name];
    contents[file.option] = file.read(path, file.what, file.field).toString('utf8');
  }
  if (Boolean(contents.cert) !== Boolean(contents.key))
    throw invalidInput(
      'tls-cert',
      'a client certificate needs its key, and a key its certificate (--tls-cert with --tls-key)',
    );
  return contents;
}

/** Checks before anything starts that a principal's seed and TLS files can be read and may be used, naming the one that cannot. */
export function checkNatsAuth(auth: NatsAuth | undefined): void {
  if (auth?.identity && 'seedFile' in auth.identity) readNkeySeed(auth.identity.seedFile);
  readTls(auth?.tls);
}

/**
 * nats.js options to connect to `url` as a principal: its user and password, or its NKEY (the
 * client signs the server's nonce with the seed; only the public key is ever sent), its inbox
 * prefix, and TLS. TLS is required (a server without it is refused) when the address is
 * `tls://` or TLS files are given.
 */
export function natsOptions(
  url: string,
  auth: NatsAuth | undefined,
  nkeyAuthenticator: (seed: Uint8Array) => Authenticator,
): Partial<ConnectionOptions> {
  const identity = auth?.identity;
  // Read and checked here, in the order checkNatsAuth checks them: the seed, then the TLS files.
  const seed = identity && 'seedFile' in identity ? readNkeySeed(identity.seedFile) : undefined;
  const tls = readTls(auth?.tls);
  return {
    servers: natsServers(url),
    ...(identity && 'user' in identity ? { user: identity.user, pass: identity.pass } : {}),
    ...(seed ? { authenticator: nkeyAuthenticator(seed) } : {}),
    ...(auth?.inboxPrefix ? { inboxPrefix: auth.inboxPrefix } : {}),
    ...(Object.keys(tls).length > 0 || wantsTls(url) ? { tls } : {}),
  };
}
