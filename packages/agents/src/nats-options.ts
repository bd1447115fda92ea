import { accessSync, constants, readFileSync, statSync } from 'node:fs';
import type { Authenticator, ConnectionOptions } from '@nats-io/transport-node';
import { invalidInput, natsServers } from '@polish/protocol';
import type { NatsAuth, NatsTls } from './worker/worker-config.js';

// The one place a principal's identity and TLS files become nats.js connection options, for the
// host, its workers and the CLI alike. No value is imported from the NATS client here: a worker
// loads the client itself, after its code (and outside a startup snapshot), and hands in the
// one function needed from it (nats-connect.ts does that for the host and the CLI).

/** Whether a NATS address asks for TLS: any of its servers written `tls://`. */
export const wantsTls = (url: string) => natsServers(url).some((server) => /^tls:\/\//i.test(server));

/**
 * Refuses a file holding a secret (a seed, a private key, passwords) that other users may read
 * or write, as ssh refuses such a key: a secret others can read is no longer only this
 * principal's. A file that cannot be read is left to the caller's read to report.
 */
export function refuseOpenSecret(path: string, what: string, field: string): void {
  let mode: number;
  try {
    mode = statSync(path).mode & 0o777;
  } catch {
    return;
  }
  if ((mode & 0o077) !== 0)
    throw invalidInput(
      field,
      `${what} ${path} is open to other users (mode ${mode.toString(8).padStart(4, '0')}): it must be readable by its owner only (chmod 600 ${path})`,
    );
}

/** Reads an NKEY user seed file (`polish nats-config --nkeys`), or throws naming the file. */
export function readNkeySeed(path: string): Uint8Array {
  let seed: string;
  try {
    seed = readFileSync(path, 'utf8').trim();
  } catch (error) {
    throw invalidInput('credentials', `cannot read the NKEY seed ${path}: ${(error as Error).message}`);
  }
  refuseOpenSecret(path, 'the NKEY seed', 'credentials');
  if (!/^SU[A-Z2-7]{56}$/.test(seed)) throw invalidInput('credentials', `${path} is not an NKEY user seed`);
  return new TextEncoder().encode(seed);
}

const TLS_FIELDS: Record<keyof NatsTls, string> = { caFile: 'tls-ca', certFile: 'tls-cert', keyFile: 'tls-key' };

/** Checks before anything starts that a principal's seed and TLS files can be read, naming the one that cannot. */
export function checkNatsAuth(auth: NatsAuth | undefined): void {
  if (auth?.identity && 'seedFile' in auth.identity) readNkeySeed(auth.identity.seedFile);
  for (const [name, path] of Object.entries(auth?.tls ?? {}) as [keyof NatsTls, string | undefined][]) {
    if (!path) continue;
    try {
      accessSync(path, constants.R_OK);
    } catch (error) {
      throw invalidInput(TLS_FIELDS[name], `cannot read ${path}: ${(error as Error).message}`);
    }
    if (name === 'keyFile') refuseOpenSecret(path, 'the TLS private key', TLS_FIELDS[name]);
  }
  const tls = auth?.tls;
  if (tls && Boolean(tls.certFile) !== Boolean(tls.keyFile))
    throw invalidInput(
      'tls-cert',
      'a client certificate needs its key, and a key its certificate (--tls-cert with --tls-key)',
    );
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
  const tls = Object.fromEntries(Object.entries(auth?.tls ?? {}).filter(([, path]) => path));
  return {
    servers: natsServers(url),
    ...(identity && 'user' in identity ? { user: identity.user, pass: identity.pass } : {}),
    ...(identity && 'seedFile' in identity
      ? { authenticator: nkeyAuthenticator(readNkeySeed(identity.seedFile)) }
      : {}),
    ...(auth?.inboxPrefix ? { inboxPrefix: auth.inboxPrefix } : {}),
    ...(Object.keys(tls).length > 0 || wantsTls(url) ? { tls } : {}),
  };
}
