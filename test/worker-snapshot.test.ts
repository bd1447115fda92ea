// The worker's V8 startup snapshot (packages/agents/dist/worker-snapshot/worker.blob) ships in the
// package: nothing of the machine that built it may be in it. The build checks its environment
// with a canary (scripts/bundle-worker.js); this checks where it was built.
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { connect } from '@nats-io/transport-node';
import { startNatsServer } from '@polish/cli';
import { REPO } from './support/cli.js';

const blob = `${REPO}packages/agents/dist/worker-snapshot/worker.blob`;

/** A folder for PATH holding this test's node and nothing else (no nats-server unless added). */
function nodeOnlyBin(out: string): string {
  const bin = join(out, 'bin');
  mkdirSync(bin);
  symlinkSync(process.execPath, join(bin, 'node'));
  return bin;
}

describe('worker startup snapshot', () => {
  it('does not name the folder it was built in, nor do the SDKs beside it', () => {
    // V8 keeps the name of the snapshot's script (for stack traces) and Node the builder's command
    // line (its node's path, the blob's path, argv0): built inside the checkout, or by a node
    // under it, they put the builder's path (/home/<user>/…) in every installed copy.
    const checkout = REPO.replace(/\/$/, '');
    // The SDKs that restored workers require after the restore ship beside it, built with it.
    const sdk = join(dirname(blob), 'sdk');
    const sdks = readdirSync(sdk);
    expect(sdks).toEqual(expect.arrayContaining(['anthropic.cjs', 'openai.cjs']));
    for (const file of [blob, ...sdks.map((name) => join(sdk, name))]) {
      const bytes = readFileSync(file);
      const at = bytes.indexOf(checkout);
      expect(at, at < 0 ? '' : `${file}: ${bytes.subarray(at, at + 120).toString('latin1')}`).toBe(-1);
    }
  });
});

describe('worker snapshot build', () => {
  it('with POLISH_SNAPSHOT_REQUIRE_TASKS=1 and no nats-server to serve its tasks, stops with the reason and leaves no snapshot', async () => {
    const out = mkdtempSync(join(tmpdir(), 'polish-snapshot-build-'));
    try {
      // A PATH with node on it and nothing else (node's own folder may hold a nats-server: /usr/bin).
      const bin = nodeOnlyBin(out);
      const built = spawnSync(process.execPath, [`${REPO}packages/agents/scripts/bundle-worker.js`, '--out', out], {
        encoding: 'utf8',
        env: { ...process.env, PATH: bin, POLISH_SNAPSHOT_REQUIRE_TASKS: '1' },
        timeout: 120_000,
      });
      expect(built.stderr).toContain('nats-server is not installed');
      expect(built.stderr).toContain('POLISH_SNAPSHOT_REQUIRE_TASKS=1 refuses a snapshot built without its tasks');
      expect(built.status).toBe(1);
      // The bundle (which needs no server) was built; the snapshot was not.
      expect(existsSync(join(out, 'worker-bundle', 'worker-entry.mjs'))).toBe(true);
      expect(existsSync(join(out, 'worker-snapshot'))).toBe(false);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});

describe('worker snapshot build, by a builder with a private TMPDIR and umask 000', () => {
  it('names neither that TMPDIR in the blob nor leaves anything others may write (every worker runs it)', () => {
    const out = mkdtempSync(join(tmpdir(), 'polish-snapshot-build-'));
    try {
      // A TMPDIR in a home folder, with the user's name in it, as `~/tmp` is.
      const home = join(out, `home-builder-${Math.random().toString(36).slice(2)}`);
      const privateTmp = join(home, 'tmp');
      mkdirSync(privateTmp, { recursive: true });
      // No nats-server on this PATH: the snapshot is built without its tasks (faster, same files).
      const bin = nodeOnlyBin(out);
      const built = spawnSync(
        '/bin/sh',
        [
          '-c',
          'umask 000 && exec node "$0" --out "$1"',
          `${REPO}packages/agents/scripts/bundle-worker.js`,
          join(out, 'dist'),
        ],
        {
          encoding: 'utf8',
          env: { ...process.env, PATH: bin, TMPDIR: privateTmp, HOME: home, POLISH_SNAPSHOT_REQUIRE_TASKS: '0' },
          timeout: 120_000,
        },
      );
      expect(built.status, built.stderr).toBe(0);
      const snapshot = join(out, 'dist', 'worker-snapshot');
      expect(readFileSync(join(snapshot, 'worker.blob')).indexOf(home)).toBe(-1);
      const openToOthers: string[] = [];
      const walk = (path: string) => {
        if ((statSync(path).mode & 0o022) !== 0) openToOthers.push(path);
        if (statSync(path).isDirectory()) for (const name of readdirSync(path)) walk(join(path, name));
      };
      walk(snapshot);
      walk(join(out, 'dist', 'worker-bundle'));
      expect(openToOthers).toEqual([]);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});

describe("worker snapshot build's own NATS server", () => {
  it('takes tasks only from the build: a password in a file only its user reads, never on the command line', async () => {
    const out = mkdtempSync(join(tmpdir(), 'polish-snapshot-build-'));
    const real = spawnSync('sh', ['-c', 'command -v nats-server'], { encoding: 'utf8' }).stdout.trim();
    expect(real, 'nats-server must be installed').not.toBe('');
    try {
      // A nats-server on PATH that records how the build starts it, then is the real one.
      const bin = nodeOnlyBin(out);
      const seen = join(out, 'seen');
      mkdirSync(seen);
      writeFileSync(
        join(bin, 'nats-server'),
        [
          '#!/bin/sh',
          `printf '%s\\n' "$@" > ${seen}/args`,
          'conf=""; prev=""; for arg in "$@"; do [ "$prev" = "-c" ] && conf="$arg"; prev="$arg"; done',
          `cp "$conf" ${seen}/nats.conf && stat -c %a "$conf" > ${seen}/mode`,
          `exec ${real} "$@"`,
          '',
        ].join('\n'),
        { mode: 0o755 },
      );
      const built = spawnSync(
        process.execPath,
        [`${REPO}packages/agents/scripts/bundle-worker.js`, '--out', join(out, 'dist')],
        {
          encoding: 'utf8',
          env: { ...process.env, PATH: `${bin}:/usr/bin:/bin`, POLISH_SNAPSHOT_REQUIRE_TASKS: '1' },
          timeout: 120_000,
        },
      );
      expect(built.status, built.stderr).toBe(0);
      const config = readFileSync(join(seen, 'nats.conf'), 'utf8');
      const pass = /password: "([0-9a-f]+)"/.exec(config)?.[1] ?? '';
      expect(pass.length).toBeGreaterThanOrEqual(32);
      expect(readFileSync(join(seen, 'mode'), 'utf8').trim()).toBe('600');
      expect(readFileSync(join(seen, 'args'), 'utf8')).not.toContain(pass);
      // That configuration refuses a client without the password, and lets the build's user in.
      const server = await startNatsServer({ storeDir: join(out, 'store'), args: ['-c', join(seen, 'nats.conf')] });
      try {
        await expect(connect({ servers: server.url, reconnect: false })).rejects.toThrow(/authoriz/i);
        const build = await connect({ servers: server.url, user: 'snapshot', pass });
        await build.close();
      } finally {
        await server.stop();
      }
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});
