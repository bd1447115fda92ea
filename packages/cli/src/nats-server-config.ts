import { DEFAULT_SUBJECT_PREFIX, PRINCIPALS, permissionsFor } from '@polish/protocol';
import type { CredentialsFile } from './nats-auth.js';

// nats-server configuration for per-role permissions: the allow-lists are the protocol's
// (`permissionsFor`); each principal is a user with a password or an NKEY public key (the
// server never sees a seed), and TLS when asked.

const quote = (text: string) => JSON.stringify(text);
const list = (subjects: string[]) => `[${subjects.map(quote).join(', ')}]`;

/** The `authorization` block with every principal: a user and password, or only its NKEY public key. */
export function renderAuthorization(credentials: CredentialsFile, prefix = DEFAULT_SUBJECT_PREFIX): string {
  const users = PRINCIPALS.map((principal) => {
    const entry = credentials[principal];
    const who =
      'nkey' in entry ? `nkey: ${quote(entry.nkey)}` : `user: ${quote(entry.user)}, password: ${quote(entry.password)}`;
    const permissions = permissionsFor(principal, prefix);
    return [
      `    { ${who}, permissions: {`,
      `        publish: { allow: ${list(permissions.publish)} }`,
      `        subscribe: { allow: ${list(permissions.subscribe)} }`,
      ...(permissions.allowResponses ? ['        allow_responses: true'] : []),
      '    } }',
    ].join('\n');
  });
  return `authorization {\n  users: [\n${users.join('\n')}\n  ]\n}\n`;
}

/** The server side of TLS: its certificate and key, and with `verifyClients` the CA every client certificate must chain to. */
export interface ServerTls {
  certFile: string;
  keyFile: string;
  caFile: string;
  verifyClients: boolean;
}

/** The `tls` block: with it every client connection must use TLS; with `verifyClients`, present a certificate of the CA. */
export function renderTls(tls: ServerTls): string {
  return [
    'tls {',
    `  cert_file: ${quote(tls.certFile)}`,
    `  key_file: ${quote(tls.keyFile)}`,
    ...(tls.verifyClients ? [`  ca_file: ${quote(tls.caFile)}`, '  verify: true'] : []),
    '  timeout: 5',
    '}',
  ].join('\n');
}

/** A whole nats-server configuration: JetStream, 8 MB messages, the users, and TLS when given. */
export function renderServerConfig(
  credentials: CredentialsFile,
  options: { prefix?: string; storeDir?: string; port?: number; host?: string; tls?: ServerTls } = {},
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
    ...(options.tls ? [renderTls(options.tls)] : []),
    renderAuthorization(credentials, options.prefix),
  ].join('\n');
}
