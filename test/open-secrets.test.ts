// A secret other users can read is refused before anything starts (as ssh refuses such a key):
// an NKEY seed, a TLS private key, or a credentials file holding passwords, each made readable by
// others after `polish nats-config` wrote it 0600. Nothing connects: the NATS address given is a
// port nobody listens on, so getting past the check would show as a connection error instead.
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { polish } from './support/cli.js';

const scratch = mkdtempSync(join(tmpdir(), 'polish-open-secrets-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const NOBODY = 'tls://127.0.0.1:1';

/** A fresh deployment's files, written by `polish nats-config`. */
async function deployment(name: string, flags: string[]): Promise<string> {
  const dir = join(scratch, name);
  const made = await polish(['nats-config', '--dir', dir, ...flags]);
  expect(made.code, made.stderr).toBe(0);
  return dir;
}

const worker = (dir: string) =>
  polish([
    'worker',
    ...['--roles', 'evaluate', '--model', 'scripted:examples/demo/script.yaml'],
    ...['--nats', NOBODY, '--credentials', join(dir, 'credentials.json')],
  ]);
/** Exit 6: NATS could not be reached, so every check before connecting passed. */
const UNREACHABLE = 6;

describe('secrets open to other users are refused', () => {
  it.each([
    ['an NKEY seed readable by the group', 'principals/evaluate/seed.nk', 0o640, 'the NKEY seed'],
    ['an NKEY seed readable by all', 'principals/host/seed.nk', 0o644, 'the NKEY seed'],
    ['a TLS private key readable by all', 'principals/evaluate/key.pem', 0o604, 'the TLS private key'],
  ])('%s: exit 2 naming the file and its mode, nothing started', async (name, file, mode, what) => {
    const dir = await deployment(name.replace(/\W+/g, '-'), ['--nkeys', '--mtls']);
    const path = join(dir, file);
    // As written, the worker gets past every check and fails only to reach the address.
    const sound = await worker(dir);
    expect([sound.code, sound.stderr]).toEqual([UNREACHABLE, expect.not.stringContaining('open to other users')]);
    chmodSync(path, mode);
    const refused = await worker(dir);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(
      `${what} ${path} is open to other users (mode 0${mode.toString(8)}): it must be readable by its owner only (chmod 600 ${path})`,
    );
    expect(refused.stderr).not.toMatch(/started|connect/i);
  });

  it('a credentials file holding passwords, readable by others: exit 2; with NKEYs the file names no secret and may be read', async () => {
    const passwords = await deployment('passwords', ['--tls']);
    chmodSync(join(passwords, 'credentials.json'), 0o644);
    const refused = await worker(passwords);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(
      `the credentials file ${join(passwords, 'credentials.json')} is open to other users`,
    );

    const nkeys = await deployment('nkeys-public-file', ['--nkeys', '--tls']);
    chmodSync(join(nkeys, 'credentials.json'), 0o644);
    const accepted = await worker(nkeys);
    expect([accepted.code, accepted.stderr]).toEqual([UNREACHABLE, expect.not.stringContaining('open to other users')]);
  });
});
