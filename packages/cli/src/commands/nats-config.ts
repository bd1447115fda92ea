import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { writeFileAtomic } from '@polish/orchestrator';
import { parseWholeNumber } from '../numbers.js';
import { generateCredentials, renderServerConfig } from '../nats-auth.js';
import { PRINCIPALS, invalidInput } from '@polish/protocol';

const ROLE_OF: Record<string, string> = {
  orchestrator: 'polish serve, polish run (orchestrating), polish par',
  inspector: 'polish inspect',
  client: 'polish run (submitting to serve), polish status/list/cancel/resume/extend',
  host: "polish worker (the host itself); its workers get their role's user",
};

/**
 * `polish nats-config --dir D`: writes a nats-server configuration with one user per role and
 * allow-list permissions (`D/nats-server.conf`), and the credentials each process needs
 * (`D/credentials.json`, readable by its owner only). Refuses to overwrite either.
 */
export function natsConfigCommand(flags: { dir?: string; port?: string; host?: string; storeDir?: string }): number {
  if (!flags.dir) throw invalidInput('dir', 'required: --dir folder for nats-server.conf and credentials.json');
  const dir = resolve(flags.dir);
  const port = parseWholeNumber('port', flags.port, 1, 65535) ?? 4222;
  const conf = join(dir, 'nats-server.conf');
  const creds = join(dir, 'credentials.json');
  for (const path of [conf, creds])
    if (existsSync(path))
      throw invalidInput(
        'dir',
        `${path} exists; choose another --dir (new passwords would not match the running server)`,
      );
  mkdirSync(dir, { recursive: true });
  const credentials = generateCredentials();
  writeFileAtomic(creds, `${JSON.stringify(credentials, null, 2)}\n`);
  writeFileAtomic(
    conf,
    renderServerConfig(credentials, {
      port,
      host: flags.host ?? '127.0.0.1',
      storeDir: flags.storeDir ?? join(dir, 'jetstream'),
    }),
  );
  const lines = [
    `wrote ${conf} and ${creds} (keep the credentials secret)`,
    `start the server:  nats-server -c ${conf}`,
    'each process passes --credentials with this file (or POLISH_NATS_CREDENTIALS) and connects as its own user:',
    ...PRINCIPALS.map(
      (principal) =>
        `  ${principal.padEnd(12)} ${ROLE_OF[principal] ?? `the ${principal} workers (handed to them by their host)`}`,
    ),
  ];
  process.stderr.write(`${lines.join('\n')}\n`);
  process.stdout.write(`${JSON.stringify({ config: conf, credentials: creds })}\n`);
  return 0;
}
