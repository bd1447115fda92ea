import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { connect, type ConnectionOptions, type NatsConnection } from '@nats-io/transport-node';
import {
  DEFAULT_SUBJECT_PREFIX,
  PRINCIPALS,
  inboxPrefixOf,
  invalidInput,
  natsServers,
  permissionsFor,
  unavailable,
  type Principal,
  type TaskRole,
} from '@polish/protocol';

// The users of a NATS that enforces per-role permissions (DESIGN §5): the allow-lists are the
// protocol's (`permissionsFor`); here they get passwords, a server configuration and the
// credentials file each process reads.

const CredentialSchema = z.strictObject({
  user: z.string().min(1),
  password: z.string().min(16),
  inboxPrefix: z.string().regex(/^_INBOX_[a-z_]+$/),
});
export type NatsCredential = z.infer<typeof CredentialSchema>;
export const CredentialsSchema = z.strictObject(
  Object.fromEntries(PRINCIPALS.map((principal) => [principal, CredentialSchema])) as Record<
    Principal,
    typeof CredentialSchema
  >,
);
export type NatsCredentials = z.infer<typeof CredentialsSchema>;

/** Fresh random passwords for every principal. */
export function generateCredentials(): NatsCredentials {
  return Object.fromEntries(
    PRINCIPALS.map((principal) => [
      principal,
      { user: principal, password: randomBytes(24).toString('base64url'), inboxPrefix: inboxPrefixOf(principal) },
    ]),
  ) as NatsCredentials;
}

const quote = (text: string) => JSON.stringify(text);
const list = (subjects: string[]) => `[${subjects.map(quote).join(', ')}]`;

/** The `authorization` block of a nats-server configuration with every principal's user. */
export function renderAuthorization(credentials: NatsCredentials, prefix = DEFAULT_SUBJECT_PREFIX): string {
  const users = PRINCIPALS.map((principal) => {
    const { user, password } = credentials[principal];
    const permissions = permissionsFor(principal, prefix);
    return [
      `    { user: ${quote(user)}, password: ${quote(password)}, permissions: {`,
      `        publish: { allow: ${list(permissions.publish)} }`,
      `        subscribe: { allow: ${list(permissions.subscribe)} }`,
      ...(permissions.allowResponses ? ['        allow_responses: true'] : []),
      '    } }',
    ].join('\n');
  });
  return `authorization {\n  users: [\n${users.join('\n')}\n  ]\n}\n`;
}

/** A whole nats-server configuration: JetStream, 8 MB messages, and the users. */
export function renderServerConfig(
  credentials: NatsCredentials,
  options: { prefix?: string; storeDir?: string; port?: number; host?: string } = {},
): string {
  return [
    '# polish: one NATS user per role, allow-lists only (written by `polish nats-config`).',
    `listen: ${quote(`${options.host ?? '127.0.0.1'}:${options.port ?? 4222}`)}`,
    'max_payload: 8MB',
    // A worker host cut off from the network leaves the queue groups within ~20 s, not minutes:
    // until then each of its idle workers can swallow a dispatch.
    'ping_interval: "10s"',
    'ping_max: 2',
    `jetstream { ${options.storeDir ? `store_dir: ${quote(options.storeDir)}` : ''} }`,
    renderAuthorization(credentials, options.prefix),
  ].join('\n');
}

/** A principal's NATS connection options: its user and its own inbox prefix. */
export const authOf = (credential: NatsCredential) => ({
  user: credential.user,
  pass: credential.password,
  inboxPrefix: credential.inboxPrefix,
});

/** The connection options of a principal, or none when the server enforces no users. */
export function connectOptionsOf(credential: NatsCredential | undefined): {
  user?: string;
  pass?: string;
  inboxPrefix?: string;
} {
  return credential ? authOf(credential) : {};
}

/** What an agent host needs: its own user, and each role's for its workers. */
export function hostAuthOf(credentials: NatsCredentials, roles: readonly TaskRole[]) {
  return {
    host: authOf(credentials.host),
    roles: Object.fromEntries(roles.map((role) => [role, authOf(credentials[role])])),
  };
}

/** Reads a credentials file written by `polish nats-config` (`--credentials`, or `POLISH_NATS_CREDENTIALS`). */
export function readCredentials(path: string | undefined): NatsCredentials | undefined {
  if (!path) return undefined;
  let document: unknown;
  try {
    document = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw invalidInput('credentials', `cannot read ${path}: ${(error as Error).message}`);
  }
  const parsed = CredentialsSchema.safeParse(document);
  if (!parsed.success)
    throw invalidInput(
      'credentials',
      `${path} is not a polish credentials file (write one with \`polish nats-config\`)`,
    );
  return parsed.data;
}

/** The credentials a task role's workers use. */
export const roleCredential = (credentials: NatsCredentials | undefined, role: TaskRole) => credentials?.[role];

/**
 * Connects to NATS as a principal: its own user and inbox prefix when the server enforces users.
 * A NATS that cannot be reached is UNAVAILABLE (exit 6), naming the address.
 */
export async function connectAs(
  url: string,
  name: string,
  credential: NatsCredential | undefined,
  options: Partial<ConnectionOptions> = {},
): Promise<NatsConnection> {
  try {
    return await connect({ servers: natsServers(url), name, ...options, ...connectOptionsOf(credential) });
  } catch (error) {
    throw unavailable(`cannot connect to NATS at ${url}: ${(error as Error).message}`, { cause: error });
  }
}
