// The README's claims about files that hold secrets or decide trust, each attacked: a key open to
// others, owned by another user, reached through a symlink to another user's file, a folder or a
// FIFO given as a key, a CA or client certificate others may change, a credentials file others
// may change or own, a private folder that belongs to someone else, and a key swapped after it was
// checked (in one process, and between `polish worker`'s check and a later worker process). Each is refused (exit 2, naming the file and what is wrong) before anything connects,
// or, for the swap, cannot change what is used. A correct setup still connects over mutual TLS
// with its NKEY to a real nats-server. Tests run as root: "another user" is `nobody` (chown), and
// root could read such files anyway, so only polish's own checks refuse them.
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '@nats-io/transport-node';
import { natsConnectOptions, type NatsAuth } from '@polish/agents';
import { startNatsServer, type EmbeddedNats } from '@polish/cli';
import { polish, REPO } from './support/cli.js';
import { startPolish, stop } from './support/processes.js';

const scratch = mkdtempSync(join(tmpdir(), 'polish-attack-'));
/** Another user than the one the tests run as (root): `nobody`. */
const OTHER_UID = 65534;
const ME = process.getuid?.() ?? -1;
const asRoot = ME === 0;
/** A port nobody listens on: a command that gets past every check fails only to connect (exit 6). */
const NOBODY = 'tls://127.0.0.1:1';
const UNREACHABLE = 6;

/** The deployment every attack starts from: `polish nats-config --nkeys --mtls`. */
let original: string;
let copies = 0;
/** A fresh copy of the deployment (modes kept), to attack one file of without touching the others. */
function copy(): string {
  const dir = join(scratch, `copy-${++copies}`);
  cpSync(original, dir, { recursive: true });
  return dir;
}

/** `polish worker` for evaluate with the deployment's credentials file (and flags over it), toward NOBODY. */
const worker = (dir: string, ...flags: string[]) =>
  polish([
    'worker',
    ...['--roles', 'evaluate', '--model', 'scripted:examples/demo/script.yaml'],
    ...['--nats', NOBODY, '--credentials', join(dir, 'credentials.json'), ...flags],
  ]);

/** Runs `worker`, expecting the refusal: exit 2 with `message` in stderr, no worker started, no connection tried. */
async function refused(dir: string, flags: string[], message: string): Promise<void> {
  const outcome = await worker(dir, ...flags);
  expect(outcome.stderr).toContain(message);
  expect(outcome.code).toBe(2);
  expect(outcome.stderr).not.toMatch(/started|connect/i);
}

const KEY = 'principals/evaluate/key.pem';
const CERT = 'principals/evaluate/cert.pem';
const CA = 'tls/ca.pem';
const SEED = 'principals/evaluate/seed.nk';

beforeAll(async () => {
  original = join(scratch, 'deployment');
  const made = await polish(['nats-config', '--dir', original, '--nkeys', '--mtls']);
  expect(made.code, made.stderr).toBe(0);
  // As written, the worker passes every check and fails only to reach the address.
  const sound = await worker(original);
  expect([sound.code, sound.stderr]).toEqual([UNREACHABLE, expect.stringContaining('connection refused')]);
});

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('secret files: only this user may own and read them, and they must be files', () => {
  it('a TLS private key readable by all (0644) is refused', async () => {
    const dir = copy();
    const key = join(dir, KEY);
    chmodSync(key, 0o644);
    await refused(
      dir,
      [],
      `the TLS private key ${key} is open to other users (mode 0644): it must be readable by its owner only (chmod 600 ${key})`,
    );
  });

  it.runIf(asRoot)('a TLS private key owned by another user (mode 0600) is refused', async () => {
    const dir = copy();
    const key = join(dir, KEY);
    chownSync(key, OTHER_UID, OTHER_UID);
    await refused(
      dir,
      [],
      `the TLS private key ${key} belongs to another user (uid ${OTHER_UID}, this process runs as uid ${ME}): a secret must be owned by the user that uses it`,
    );
  });

  it.runIf(asRoot)('an NKEY seed owned by another user (mode 0600) is refused', async () => {
    const dir = copy();
    const seed = join(dir, SEED);
    chownSync(seed, OTHER_UID, OTHER_UID);
    await refused(dir, [], `the NKEY seed ${seed} belongs to another user (uid ${OTHER_UID}`);
  });

  it.runIf(asRoot)(
    "a key given through a symlink to another user's file is judged by that file, not the link",
    async () => {
      const dir = copy();
      // The link is ours (and symlinks have no mode of their own); the key it leads to is not.
      const theirs = join(dir, 'their-key.pem');
      cpSync(join(dir, KEY), theirs);
      chownSync(theirs, OTHER_UID, OTHER_UID);
      const link = join(dir, 'key-link.pem');
      symlinkSync(theirs, link);
      await refused(dir, ['--tls-key', link], `the TLS private key ${link} belongs to another user (uid ${OTHER_UID}`);
    },
  );

  it('a folder given as the key is refused, naming it', async () => {
    const dir = copy();
    const folder = join(dir, 'principals/evaluate');
    await refused(
      dir,
      ['--tls-key', folder],
      `the TLS private key ${folder} is a folder, not a regular file: name the file itself`,
    );
  });

  it('a FIFO given as the key is refused without waiting for a writer', async () => {
    const dir = copy();
    const fifo = join(dir, 'key.fifo');
    expect(spawnSync('mkfifo', ['-m', '600', fifo]).status).toBe(0);
    await refused(
      dir,
      ['--tls-key', fifo],
      `the TLS private key ${fifo} is a FIFO, not a regular file: name the file itself`,
    );
  });
  it('a "key" too big to be one (a sparse 2 GiB file) is refused by its size, never read', async () => {
    const dir = copy();
    const huge = join(dir, 'huge-key.pem');
    writeFileSync(huge, '', { mode: 0o600 });
    truncateSync(huge, 2 * 1024 ** 3);
    await refused(
      dir,
      ['--tls-key', huge],
      `the TLS private key ${huge} is ${2 * 1024 ** 3} bytes, more than such a file can be (1048576): name the file itself`,
    );
  });
});

describe('a credentials file is checked before it is read, and never quoted', () => {
  it('one that is not JSON is refused without printing what it holds', async () => {
    const dir = copy();
    const credentials = join(dir, 'credentials.json');
    writeFileSync(credentials, 'password: hunter2-never-printed\n');
    await refused(dir, [], `${credentials} is not JSON: write a credentials file with \`polish nats-config\``);
    const outcome = await worker(dir);
    expect(outcome.stderr).not.toContain('hunter2');
  });

  it.runIf(asRoot)('one of another user is refused for its owner before it is parsed', async () => {
    const dir = copy();
    const credentials = join(dir, 'credentials.json');
    writeFileSync(credentials, 'password: hunter2-never-printed\n');
    chownSync(credentials, OTHER_UID, OTHER_UID);
    await refused(dir, [], `the credentials file ${credentials} belongs to another user (uid ${OTHER_UID}`);
  });
});

describe('files that decide trust: nobody else may have changed them', () => {
  it('a CA certificate writable by the group (0664) is refused', async () => {
    const dir = copy();
    const ca = join(dir, CA);
    chmodSync(ca, 0o664);
    await refused(
      dir,
      [],
      `the TLS CA certificate ${ca} is writable by other users (mode 0664): it decides whom polish trusts (chmod go-w ${ca})`,
    );
  });

  it.runIf(asRoot)('a CA certificate owned by another user is refused', async () => {
    const dir = copy();
    const ca = join(dir, CA);
    chownSync(ca, OTHER_UID, OTHER_UID);
    await refused(
      dir,
      [],
      `the TLS CA certificate ${ca} belongs to another user (uid ${OTHER_UID}, this process runs as uid ${ME}): it decides whom polish trusts, so it must be owned by you or root`,
    );
  });

  it.runIf(asRoot)(
    'a CA certificate owned by root is trusted by a process of another user; one of a third user is not',
    async () => {
      // A process that loads polish's code as root, then becomes `nobody` (so the checkout may
      // sit where nobody can read it) and checks a CA in a folder it can reach.
      const home = mkdtempSync(join(tmpdir(), 'polish-attack-nobody-'));
      chmodSync(home, 0o755);
      const ca = join(home, 'ca.pem');
      cpSync(join(original, CA), ca);
      const script = `
      const { natsConnectOptions } = await import(process.env.AGENTS);
      process.setgid(${OTHER_UID});
      process.setuid(${OTHER_UID});
      try {
        natsConnectOptions('tls://127.0.0.1:1', { tls: { caFile: process.env.CA } });
        process.stdout.write('trusted');
      } catch (error) {
        process.stdout.write(error.message);
      }`;
      const checkAsNobody = () =>
        spawnSync(process.execPath, ['--input-type=module', '-e', script], {
          env: { ...process.env, AGENTS: import.meta.resolve('@polish/agents'), CA: ca },
          encoding: 'utf8',
        });
      try {
        chownSync(ca, 0, 0);
        const trusted = checkAsNobody();
        expect([trusted.status, trusted.stdout, trusted.stderr]).toEqual([0, 'trusted', '']);
        const THIRD_UID = 1;
        chownSync(ca, THIRD_UID, THIRD_UID);
        expect(checkAsNobody().stdout).toContain(
          `the TLS CA certificate ${ca} belongs to another user (uid ${THIRD_UID}, this process runs as uid ${OTHER_UID})`,
        );
      } finally {
        rmSync(home, { recursive: true, force: true });
      }
    },
  );

  it('a client certificate writable by others (0646) is refused', async () => {
    const dir = copy();
    const cert = join(dir, CERT);
    chmodSync(cert, 0o646);
    await refused(dir, [], `the TLS client certificate ${cert} is writable by other users (mode 0646)`);
  });

  it('an NKEY credentials file (it names the seed files and the CA) writable by the group is refused', async () => {
    const dir = copy();
    const credentials = join(dir, 'credentials.json');
    chmodSync(credentials, 0o660);
    await refused(dir, [], `the credentials file ${credentials} is writable by other users (mode 0660)`);
  });

  it.runIf(asRoot)('an NKEY credentials file owned by another user is refused', async () => {
    const dir = copy();
    const credentials = join(dir, 'credentials.json');
    chownSync(credentials, OTHER_UID, OTHER_UID);
    await refused(dir, [], `the credentials file ${credentials} belongs to another user (uid ${OTHER_UID}`);
  });
});

describe('private folders of `polish nats-config`', () => {
  it.runIf(asRoot)(
    'an existing folder owned by another user (even 0700) is refused and nothing is written in it',
    async () => {
      const dir = join(scratch, 'their-folder');
      mkdirSync(dir, { mode: 0o700 });
      chownSync(dir, OTHER_UID, OTHER_UID);
      const made = await polish(['nats-config', '--dir', dir, '--nkeys', '--mtls']);
      expect(made.stderr).toContain(
        `${dir} belongs to another user (uid ${OTHER_UID}, this process runs as uid ${ME}): secrets go only in a folder of your own`,
      );
      expect(made.code).toBe(2);
      expect(readdirSync(dir)).toEqual([]);
    },
  );
});

describe('over TLS to a real nats-server', () => {
  let server: EmbeddedNats;
  let dir: string;
  let auth: NatsAuth;

  beforeAll(async () => {
    dir = copy();
    const made = JSON.parse(readFileSync(join(dir, 'credentials.json'), 'utf8')) as { tls: { ca: string } };
    server = await startNatsServer({ storeDir: join(scratch, 'js'), configFile: join(dir, 'nats-server.conf') });
    auth = {
      identity: { seedFile: join(dir, SEED) },
      inboxPrefix: '_INBOX_evaluate',
      tls: { caFile: join(dir, made.tls.ca), certFile: join(dir, CERT), keyFile: join(dir, KEY) },
    };
  });
  afterAll(async () => {
    await server?.stop();
  });

  /** Connects with `options`, flushes and closes: "connected", or why not. */
  async function attempt(options: ReturnType<typeof natsConnectOptions>): Promise<string> {
    try {
      const connection = await connect({ ...options, servers: server.url, reconnect: false, timeout: 5_000 });
      await connection.flush();
      await connection.close();
      return 'connected';
    } catch (error) {
      return `${(error as Error).message} ${String((error as { cause?: Error }).cause?.message ?? '')}`;
    }
  }

  it('a correct setup (NKEY seed, client certificate and key, CA) connects over mutual TLS', async () => {
    expect(server.url).toMatch(/^tls:\/\//);
    expect(await attempt(natsConnectOptions(server.url, auth))).toBe('connected');
  });

  it('a key swapped after it was checked is not what is used: the client holds the checked bytes, not a path', async () => {
    const options = natsConnectOptions(server.url, auth);
    // Swap the key's path for another file (as someone who could write the folder would), after the check.
    const swapped = join(dir, 'swapped.pem');
    writeFileSync(swapped, 'not the key that was checked\n', { mode: 0o644 });
    renameSync(swapped, join(dir, KEY));
    expect(await attempt(options)).toBe('connected');
    // The key, certificate and CA travel as their checked contents; no path is left for the client to read later.
    expect(Object.keys(options.tls ?? {}).sort()).toEqual(['ca', 'cert', 'key']);
  });

  it('a key swapped after `polish worker` checked it at start is refused by the next worker process, which checks what it reads', async () => {
    const ours = copy();
    const key = join(ours, KEY);
    const host = startPolish([
      ...['worker', '--nats', server.url, '--credentials', join(ours, 'credentials.json')],
      ...['--roles', 'evaluate', '--pool', '1', '--script', `${REPO}examples/demo/script.yaml`],
    ]);
    try {
      const [, first] = await host.waitFor(/^worker (\d+) \(evaluate\) ready in/);
      await host.waitFor(/^polish worker: all pools ready$/);
      // The same key bytes, but now in a file others may read, swapped in under the checked path.
      const open = join(ours, 'open-key.pem');
      writeFileSync(open, readFileSync(key), { mode: 0o644 });
      renameSync(open, key);
      // The host replaces the worker it loses; the replacement reads the key itself.
      process.kill(Number(first), 'SIGKILL');
      const outcome = await Promise.race([
        host.waitFor(/the TLS private key .* is open to other users/).then((match) => match.input),
        host.waitFor(new RegExp(`^worker (?!${first}\\b)\\d+ \\(evaluate\\) ready in`)).then(() => 'ready'),
      ]);
      expect(outcome).toContain(`the TLS private key ${key} is open to other users (mode 0644)`);
    } finally {
      await stop(host);
    }
  });
});
