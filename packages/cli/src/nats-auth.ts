import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { storeNames } from '@polish/orchestrator';
import { DEFAULT_SUBJECT_PREFIX, PROTOCOL_VERSION, TaskRoleSchema, type TaskRole } from '@polish/protocol';
import { InputError } from './input-error.js';

// Role isolation on the wire (DESIGN §5): every process connects as its own NATS user, and each
// user may publish and subscribe only where its job needs. Allow-lists only: whatever a user is
// not allowed is denied, including JetStream's API (streams, consumers, KV, Object Store).

/** Who connects: the orchestrator, the inspector, a submitting client, an agent host, and each task role's workers. */
export const PRINCIPALS = ['orchestrator', 'inspector', 'client', 'host', ...TaskRoleSchema.options] as const;
export type Principal = (typeof PRINCIPALS)[number];

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

/** Each principal's own inbox prefix: replies to it land where no other user may subscribe. */
export const inboxPrefixOf = (principal: Principal) => `_INBOX_${principal.replace(/\./g, '_')}`;

/** Fresh random passwords for every principal. */
export function generateCredentials(): NatsCredentials {
  return Object.fromEntries(
    PRINCIPALS.map((principal) => [
      principal,
      { user: principal, password: randomBytes(24).toString('base64url'), inboxPrefix: inboxPrefixOf(principal) },
    ]),
  ) as NatsCredentials;
}

interface Permissions {
  publish: string[];
  subscribe: string[];
  /** May answer requests it received (the reply subject), once each. */
  allowResponses: boolean;
}

/** What each principal may do, as allow-lists. */
export function permissionsFor(principal: Principal, prefix = DEFAULT_SUBJECT_PREFIX): Permissions {
  const root = `${prefix}.v${PROTOCOL_VERSION}`;
  const inbox = `${inboxPrefixOf(principal)}.>`;
  const stores = storeNames(prefix);
  if ((TaskRoleSchema.options as readonly string[]).includes(principal)) {
    // A worker takes its role's tasks and answers them; its own inbox serves its warm-up. Nothing else.
    return { publish: [inbox], subscribe: [`${root}.task.${principal}`, inbox], allowResponses: true };
  }
  switch (principal) {
    case 'host':
      // Answers WORKER_CRASHED for a worker that died holding a task: to the orchestrators' inboxes only.
      return { publish: [`${inboxPrefixOf('orchestrator')}.>`], subscribe: [inbox], allowResponses: false };
    case 'inspector':
      // Reads the event stream through its own consumers; creates the stream if it is missing.
      return {
        publish: [
          inbox,
          '$JS.API.INFO',
          `$JS.API.STREAM.INFO.${stores.events}`,
          `$JS.API.STREAM.CREATE.${stores.events}`,
          `$JS.API.CONSUMER.CREATE.${stores.events}`,
          `$JS.API.CONSUMER.CREATE.${stores.events}.>`,
          `$JS.API.CONSUMER.INFO.${stores.events}.>`,
          `$JS.API.CONSUMER.DELETE.${stores.events}.>`,
          `$JS.API.CONSUMER.MSG.NEXT.${stores.events}.>`,
          `$JS.ACK.${stores.events}.>`,
          '$JS.FC.>',
        ],
        subscribe: [inbox],
        allowResponses: false,
      };
    case 'client':
      // Submits and controls runs through the run service, and follows their events.
      return {
        publish: [inbox, `${root}.run.>`, '$SRV.>'],
        subscribe: [inbox, `${root}.events.>`],
        allowResponses: false,
      };
    case 'orchestrator':
      return {
        publish: [
          inbox,
          `${root}.task.>`,
          `${root}.events.>`,
          `${root}.inspect.>`,
          '$JS.API.>',
          '$JS.ACK.>',
          '$JS.FC.>',
          `$KV.${stores.runs}.>`,
          `$O.${stores.artifacts}.>`,
        ],
        subscribe: [inbox, `${root}.run.>`, '$SRV.>'],
        allowResponses: true,
      };
  }
  throw new Error(`no permissions for ${principal}`);
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
    throw new InputError('credentials', `cannot read ${path}: ${(error as Error).message}`);
  }
  const parsed = CredentialsSchema.safeParse(document);
  if (!parsed.success)
    throw new InputError(
      'credentials',
      `${path} is not a polish credentials file (write one with \`polish nats-config\`)`,
    );
  return parsed.data;
}

/** The credentials a task role's workers use. */
export const roleCredential = (credentials: NatsCredentials | undefined, role: TaskRole) => credentials?.[role];
