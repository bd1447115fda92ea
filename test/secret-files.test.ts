// Credentials at rest (issue 15): every file polish writes that holds a secret (credentials.json,
// nats-server.conf, NKEY seeds, private keys) is 0600 in a folder of mode 0700, whatever the
// umask, and a file that exists already is neither replaced nor widened.
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { generatePasswords, startNatsServer } from '@polish/cli';
import { POLISH, REPO } from './support/cli.js';

const scratch = mkdtempSync(join(tmpdir(), 'polish-secret-files-'));
const modeOf = (path: string) => statSync(path).mode & 0o777;
const octal = (mode: number) => mode.toString(8).padStart(4, '0');

/** `polish nats-config` under umask 000, so any mode wider than 0600 would show. */
function natsConfig(args: string[]) {
  const outcome = spawnSync(
    'sh',
    ['-c', 'umask 000; exec "$@"', 'sh', process.execPath, POLISH, 'nats-config', ...args],
    {
      cwd: REPO,
      encoding: 'utf8',
    },
  );
  return { code: outcome.status, stdout: outcome.stdout, stderr: outcome.stderr };
}

/** What makes a file's content secret: a private key, an NKEY seed, a password. */
const SECRET = /PRIVATE KEY|\bSU[A-Z2-7]{56}\b|password/;

/** Every file and folder under `dir`, with its mode and whether it holds a secret. */
function walk(dir: string): { path: string; mode: number; folder: boolean; secret: boolean; text: string }[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory())
      return [{ path, mode: modeOf(path), folder: true, secret: false, text: '' }, ...walk(path)];
    const text = readFileSync(path, 'utf8');
    return [{ path, mode: modeOf(path), folder: false, secret: SECRET.test(text), text }];
  });
}

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('files holding secrets are 0600 in 0700 folders', () => {
  it('--nkeys --mtls under umask 000: every seed, private key, the credentials and the server configuration are 0600, every folder 0700', () => {
    const dir = join(scratch, 'nkeys-mtls');
    const made = natsConfig(['--dir', dir, '--nkeys', '--mtls']);
    expect(made.code, made.stderr).toBe(0);
    const entries = walk(dir);
    const wrong = [
      ...(modeOf(dir) === 0o700 ? [] : [`${dir} is ${octal(modeOf(dir))}`]),
      ...entries
        // Folders 0700, secrets 0600; anything else is 0600 or, if it is a certificate, 0644.
        .filter((entry) =>
          entry.folder
            ? entry.mode !== 0o700
            : entry.secret
              ? entry.mode !== 0o600
              : entry.mode !== 0o600 && !(entry.mode === 0o644 && entry.text.startsWith('-----BEGIN CERTIFICATE-----')),
        )
        .map((entry) => `${entry.path} is ${octal(entry.mode)}`),
    ];
    expect(wrong).toEqual([]);
    // The walk found what it had to: 11 seeds, 12 private keys (the server's and one per principal:
    // the CA's key was never written), the credentials file and the server configuration.
    const named = (pattern: RegExp) => entries.filter((entry) => pattern.test(entry.path));
    expect(named(/seed\.nk$/).filter((entry) => entry.secret)).toHaveLength(11);
    expect(entries.filter((entry) => entry.text.includes('PRIVATE KEY'))).toHaveLength(12);
    expect(named(/\/(credentials\.json|nats-server\.conf)$/).map((entry) => octal(entry.mode))).toEqual([
      '0600',
      '0600',
    ]);
    // Only the 13 certificates (the CA's, the server's, one per principal) are readable by others.
    expect(entries.filter((entry) => !entry.folder && entry.mode === 0o644)).toHaveLength(13);
  });

  it('with passwords: credentials.json and nats-server.conf hold them, and are 0600 in a 0700 folder', () => {
    const dir = join(scratch, 'passwords');
    const made = natsConfig(['--dir', dir]);
    expect(made.code, made.stderr).toBe(0);
    const entries = walk(dir).filter((entry) => !entry.folder);
    expect(entries.map((entry) => [entry.path.slice(dir.length), entry.secret, octal(entry.mode)]).sort()).toEqual([
      ['/credentials.json', true, '0600'],
      ['/nats-server.conf', true, '0600'],
    ]);
    expect(octal(modeOf(dir))).toBe('0700');
  });

  it('an existing credentials file is left as it was (bytes and mode), and nothing else is written', () => {
    const dir = join(scratch, 'existing');
    mkdirSync(dir, { mode: 0o700 });
    const existing = join(dir, 'credentials.json');
    writeFileSync(existing, '{"kept": true}\n', { mode: 0o600 });
    const made = natsConfig(['--dir', dir, '--nkeys']);
    expect(made.code).toBe(2);
    expect(made.stderr).toContain(`${existing} exists`);
    expect([readFileSync(existing, 'utf8'), octal(modeOf(existing))]).toEqual(['{"kept": true}\n', '0600']);
    expect(readdirSync(dir)).toEqual(['credentials.json']);
  });

  it('a folder other users can enter is refused, not changed, and nothing is written in it', () => {
    const dir = join(scratch, 'open');
    mkdirSync(dir);
    chmodSync(dir, 0o755);
    const made = natsConfig(['--dir', dir, '--nkeys']);
    expect(made.code).toBe(2);
    expect(made.stderr).toMatch(/open to other users \(mode 0755\)/);
    expect([octal(modeOf(dir)), readdirSync(dir)]).toEqual(['0755', []]);
  });

  it("the embedded server's configuration (it names every user's password) is 0600, also when it replaces an older one", async () => {
    const storeDir = join(scratch, 'embedded');
    mkdirSync(storeDir, { mode: 0o700 });
    const config = join(storeDir, 'polish-nats.conf');
    // A file left by an earlier start, readable by all: the new one must not keep that mode.
    writeFileSync(config, '# old\n', { mode: 0o644 });
    chmodSync(config, 0o644);
    const users = generatePasswords();
    const server = await startNatsServer({ storeDir, users });
    try {
      expect(readFileSync(config, 'utf8')).toContain(users.orchestrator.password);
      expect(octal(modeOf(config))).toBe('0600');
    } finally {
      await server.stop();
    }
  });
});
