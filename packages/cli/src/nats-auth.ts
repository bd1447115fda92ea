import { randomBytes } from 'node:crypto';
import { dirname, resolve } from 'node:path';
import { z } from 'zod';
import { connect, type ConnectionOptions, type NatsConnection } from '@nats-io/transport-node';
import {
  checkNatsAuth,
  natsConnectOptions,
  readOpenedFile,
  refuseSharedSecret,
  refuseUntrusted,
  type NatsAuth,
  type NatsTls,
} from '@polish/agents';
import { PRINCIPALS, inboxPrefixOf, invalidInput, unavailable, type Principal, type TaskRole } from '@polish/protocol';

// The principals of a NATS that enforces per-role permissions (DESIGN §5), as the credentials
// file of `polish nats-config` names them: each a user with a password (a quick local start) or
// an NKEY whose seed lives in its own file, plus TLS files. Paths in the file are relative to
// it, so a folder copied to another machine still works; a machine holds only the seeds of the
// principals it runs.

/** A value for every principal. */
export function perPrincipal<T>(make: (principal: Principal) => T): Record<Principal, T> {
  return Object.fromEntries(PRINCIPALS.map((principal) => [principal, make(principal)])) as Record<Principal, T>;
}

const TlsPairSchema = z.strictObject({ cert: z.string().min(1), key: z.string().min(1) });
const PasswordEntrySchema = z.strictObject({
  user: z.string().min(1),
  password: z.string().min(16),
  inboxPrefix: z.string().regex(/^_INBOX_[a-z_]+$/),
  tls: TlsPairSchema.optional(),
});
type PasswordEntry = z.infer<typeof PasswordEntrySchema>;
const NkeyEntrySchema = z.strictObject({
  /** The public key: the server's configuration holds only this. */
  nkey: z.string().regex(/^U[A-Z2-7]{55}$/),
  seedFile: z.string().min(1),
  inboxPrefix: z.string().regex(/^_INBOX_[a-z_]+$/),
  tls: TlsPairSchema.optional(),
});
const EntrySchema = z.union([PasswordEntrySchema, NkeyEntrySchema]);
export type CredentialEntry = z.infer<typeof EntrySchema>;

/** The credentials file: one entry per principal, and the CA that signed the server's certificate. */
export const CredentialsFileSchema = z.strictObject({
  tls: z.strictObject({ ca: z.string().min(1) }).optional(),
  ...perPrincipal(() => EntrySchema),
});
export type CredentialsFile = z.infer<typeof CredentialsFileSchema>;

/** How each principal connects (identities and TLS files, paths absolute): what processes use. */
export type NatsCredentials = Record<Principal, NatsAuth>;

/** Fresh random passwords for every principal (the embedded server's, and `nats-config` without --nkeys). */
export function generatePasswords(): Record<Principal, PasswordEntry> {
  return perPrincipal((principal) => ({
    user: principal,
    password: randomBytes(24).toString('base64url'),
    inboxPrefix: inboxPrefixOf(principal),
  }));
}

/** TLS files with only the ones given, or undefined when none is. */
function tlsFiles(
  caFile: string | undefined,
  certFile: string | undefined,
  keyFile: string | undefined,
): NatsTls | undefined {
  const files = Object.fromEntries(
    Object.entries({ caFile, certFile, keyFile }).filter((entry): entry is [string, string] => entry[1] !== undefined),
  );
  return Object.keys(files).length > 0 ? files : undefined;
}

const resolved = (base: string, path: string | undefined) => (path === undefined ? undefined : resolve(base, path));

/**
 * Resolves a credentials file (its paths relative to `base`) into what each principal connects
 * with; TLS flags (relative to the current folder) win over the file.
 */
export function credentialsOf(file: CredentialsFile, base: string, flags: NatsTlsFlags = {}): NatsCredentials {
  const cwd = process.cwd();
  return perPrincipal((principal): NatsAuth => {
    const entry = file[principal];
    const tls = tlsFiles(
      resolved(cwd, flags.tlsCa) ?? resolved(base, file.tls?.ca),
      resolved(cwd, flags.tlsCert) ?? resolved(base, entry.tls?.cert),
      resolved(cwd, flags.tlsKey) ?? resolved(base, entry.tls?.key),
    );
    return {
      identity:
        'nkey' in entry ? { seedFile: resolve(base, entry.seedFile) } : { user: entry.user, pass: entry.password },
      inboxPrefix: entry.inboxPrefix,
      ...(tls ? { tls } : {}),
    };
  });
}

/** The TLS flags every command takes; they win over the credentials file. */
export interface NatsTlsFlags {
  tlsCa?: string;
  tlsCert?: string;
  tlsKey?: string;
}

/** The flags that say how a command reaches NATS as its principals. */
export interface NatsAccessFlags extends NatsTlsFlags {
  /** A credentials file from `polish nats-config` (default $POLISH_NATS_CREDENTIALS). */
  credentials?: string;
}

/**
 * Reads how this process's principals connect: the credentials file of `polish nats-config`
 * (`--credentials`, or `POLISH_NATS_CREDENTIALS`), with `--tls-ca/--tls-cert/--tls-key` over
 * it. Undefined when neither is given: connections then use no identity and no TLS files.
 */
export function readCredentials(flags: NatsAccessFlags): NatsCredentials | undefined {
  const path = flags.credentials ?? process.env.POLISH_NATS_CREDENTIALS;
  if (!path) {
    const cwd = process.cwd();
    const tls = tlsFiles(resolved(cwd, flags.tlsCa), resolved(cwd, flags.tlsCert), resolved(cwd, flags.tlsKey));
    return tls ? perPrincipal(() => ({ tls })) : undefined;
  }
  // Read once and checked on what was read: it names the seed files and the CA (it decides
  // whom polish trusts: nobody else may have written it, checked before it is read) and, with
  // passwords, is itself the secret (checked once it is known to hold them).
  const { bytes, stat } = readOpenedFile(path, 'the credentials file', 'credentials', (opened) =>
    refuseUntrusted(opened, path, 'the credentials file', 'credentials'),
  );
  let document: unknown;
  try {
    document = JSON.parse(bytes.toString('utf8'));
  } catch {
    // JSON.parse quotes the text it stopped at: never print a credentials file's contents.
    throw invalidInput('credentials', `${path} is not JSON: write a credentials file with \`polish nats-config\``);
  }
  const parsed = CredentialsFileSchema.safeParse(document);
  if (!parsed.success)
    throw invalidInput(
      'credentials',
      `${path} is not a polish credentials file (write one with \`polish nats-config\`): ${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message}`,
    );
  // With NKEYs it holds public keys and paths only (each seed is checked where it is read).
  if (Object.values(parsed.data).some((entry) => 'password' in entry))
    refuseSharedSecret(stat, path, 'the credentials file', 'credentials');
  return credentialsOf(parsed.data, dirname(resolve(path)), flags);
}

/** What an agent host needs: its own identity, and each role's for its workers; every seed and TLS file checked. */
export function hostAuthOf(credentials: NatsCredentials, roles: readonly TaskRole[]) {
  const wanted = { host: credentials.host, roles: Object.fromEntries(roles.map((role) => [role, credentials[role]])) };
  for (const auth of [wanted.host, ...Object.values(wanted.roles)]) checkNatsAuth(auth);
  return wanted;
}

const TLS_HINT =
  ' (over TLS: pass the CA of `polish nats-config --tls` with --tls-ca or the credentials file, and dial a name or address its certificate lists)';

/**
 * Connects to NATS as a principal: its identity, inbox prefix and TLS files. A NATS that cannot
 * be reached, or refuses the connection, is UNAVAILABLE (exit 6), naming the address.
 */
export async function connectAs(
  url: string,
  name: string,
  auth: NatsAuth | undefined,
  options: Partial<ConnectionOptions> = {},
): Promise<NatsConnection> {
  // Its files read and checked once, those bytes used.
  const connectOptions = natsConnectOptions(url, auth);
  try {
    return await connect({ ...connectOptions, name, ...options });
  } catch (error) {
    const message = (error as Error).message;
    const hint = /certificate|tls|ssl|altname/i.test(message) ? TLS_HINT : '';
    throw unavailable(`cannot connect to NATS at ${url}: ${message}${hint}`, { cause: error });
  }
}
