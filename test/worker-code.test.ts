// Every worker runs the code `pnpm build` made with the host's rights and model keys: the host
// refuses to start workers from code that another user may change (README, "Workers, task
// queues and separate machines"). Each case below makes one file or folder of a copy of the
// built package changeable by someone else and starts a real host from that copy.
import { spawn } from 'node:child_process';
import { chmodSync, chownSync, cpSync, mkdtempSync, rmSync, statSync, symlinkSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO } from './support/cli.js';
import { watchProcess } from './support/processes.js';

const scratch = mkdtempSync(join(tmpdir(), 'polish-worker-code-'));
const asRoot = process.getuid?.() === 0;
/** Another user and group than the tests' own (root): `nobody` and `nogroup`. */
const OTHER = 65534;
let copies = 0;
const FROM_SNAPSHOT = 'refusing to start workers from the startup snapshot: ';

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A copy of the built agents package (dist, and its dependencies through a link), modes kept. */
function copy(): string {
  const dir = join(scratch, `copy-${++copies}`);
  cpSync(join(REPO, 'packages/agents/dist'), join(dir, 'dist'), { recursive: true });
  symlinkSync(join(REPO, 'packages/agents/node_modules'), join(dir, 'node_modules'));
  return dir;
}

/**
 * Starts a host from the copy toward a port nobody listens on: it reports the first worker that
 * starts (and is then stopped), or its refusal with the number of workers it had started (0). A started worker proves the copy itself is fine.
 */
async function startFrom(dir: string, snapshot = true): Promise<string> {
  const host = pathToFileURL(join(dir, 'dist/index.js')).href;
  const script = `
    import { createAgentHost } from ${JSON.stringify(host)};
    const host = createAgentHost({ natsUrl: 'nats://127.0.0.1:1', roles: ['evaluate'], pool: 1, snapshot: ${snapshot} });
    host.on('worker.started', ({ from }) => { console.error('started from ' + from); process.exit(0); });
    host.ready.then(() => process.exit(1), (error) => {
      console.error(host.workerPids().length + ' workers, refused: ' + error.message);
      process.exit(0);
    });
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, POLISH_WORKER_HUGEPAGES: '0' },
  });
  const watched = watchProcess(child, { describe: 'host' });
  const line = await watched.waitFor(/^(started from|\d+ workers, refused: )/);
  await watched.exited;
  return line.input;
}

describe('a host starts workers only from code nobody else may change', () => {
  it('a copy as the build left it starts workers from the snapshot', async () => {
    expect(await startFrom(copy())).toBe('started from the startup snapshot');
  });

  it('a blob others may write is refused, naming it and what to do, and no worker starts', async () => {
    const dir = copy();
    const blob = join(dir, 'dist/worker-snapshot/worker.blob');
    chmodSync(blob, 0o646);
    expect(await startFrom(dir)).toBe(
      `0 workers, refused: ${FROM_SNAPSHOT}${blob} may be written by other users (mode 0646): chmod go-w it ` +
        '(every worker runs that code with your rights and keys, so nobody but you or root may change it)',
    );
  });

  it('a bundle file others may write is refused when workers start from the bundle', async () => {
    const dir = copy();
    const entry = join(dir, 'dist/worker-bundle/worker-entry.mjs');
    chmodSync(entry, 0o666);
    expect(await startFrom(dir, false)).toContain(
      `0 workers, refused: refusing to start workers from the bundle: ${entry} may be written by other users (mode 0666): chmod go-w it`,
    );
  });

  it('a folder on the way from / that others may write is refused', async () => {
    const dir = copy();
    chmodSync(dir, 0o777);
    expect(await startFrom(dir)).toContain(
      `0 workers, refused: ${FROM_SNAPSHOT}${dir} may be written by other users (mode 0777): chmod go-w it`,
    );
  });

  it("group write is refused even for the host's own group: with POSIX ACLs the group bits are the mask of every named grant", async () => {
    const dir = copy();
    const folder = join(dir, 'dist/worker-snapshot');
    chmodSync(folder, 0o775);
    expect(await startFrom(dir)).toContain(
      `0 workers, refused: ${FROM_SNAPSHOT}${folder} may be written by other users (mode 0775): chmod go-w it`,
    );
  });

  it('an SDK file swapped for a symbolic link is refused', async () => {
    const dir = copy();
    const sdk = join(dir, 'dist/worker-snapshot/sdk/anthropic.cjs');
    unlinkSync(sdk);
    symlinkSync(join(REPO, 'packages/agents/dist/worker-snapshot/sdk/anthropic.cjs'), sdk);
    expect(await startFrom(dir)).toContain(
      `0 workers, refused: ${FROM_SNAPSHOT}${sdk} is a symbolic link, which the build never makes: build again`,
    );
  });

  it.runIf(asRoot)('an SDK file of another user is refused', async () => {
    const dir = copy();
    const sdk = join(dir, 'dist/worker-snapshot/sdk/anthropic.cjs');
    chownSync(sdk, OTHER, OTHER);
    expect(statSync(sdk).mode & 0o022).toBe(0);
    expect(await startFrom(dir)).toContain(
      `0 workers, refused: ${FROM_SNAPSHOT}${sdk} belongs to another user (uid ${OTHER}, this host runs as uid 0): chown it`,
    );
  });

  it.runIf(asRoot)('a sticky folder of root on the way (as /tmp) is not refused; one of another user is', async () => {
    const dir = copy();
    chmodSync(dir, 0o1777);
    expect(await startFrom(dir)).toBe('started from the startup snapshot');
    chownSync(dir, OTHER, OTHER);
    expect(await startFrom(dir)).toContain(
      `0 workers, refused: ${FROM_SNAPSHOT}${dir} belongs to another user (uid ${OTHER}, this host runs as uid 0): chown it`,
    );
  });
});
