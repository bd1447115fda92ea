// Issue 15: no bad record takes a service down, no paid work is lost or misreported. Each case
// is what a red team or an unlucky operator did to the built CLI, with a real nats-server.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { startNatsServer } from '@polish/cli';
import { openRunStore } from '@polish/orchestrator';
import { RunResultSchema, storeNames } from '@polish/protocol';
import { POLISH, REPO, polish } from './support/cli.js';
import { runningRecord } from './support/run-record.js';
import { demoRunArgs, demoRunOnNatsArgs } from './support/demo.js';
import { startNats, type NatsFixture } from './support/nats.js';
import { startHost, startPolish, stop } from './support/processes.js';

const demo = `${REPO}examples/demo`;
const scratch = mkdtempSync(join(tmpdir(), 'polish-hardening-'));
const runArgs = (artifact: string, extra: string[] = []) =>
  demoRunArgs(['--script', `${demo}/script.yaml`, ...extra], artifact);
const file = (name: string, content: string | Buffer) => {
  const path = join(scratch, name);
  writeFileSync(path, content);
  return path;
};

describe('bad input is refused before anything runs (exit 2, one line)', () => {
  it('an artifact that is not valid UTF-8 is refused, naming the byte, never silently replaced', async () => {
    const artifact = file(
      'latin1.md',
      Buffer.concat([Buffer.from('Caf'), Buffer.from([0xe9]), Buffer.from(' limits\n')]),
    );
    const outcome = await polish(runArgs(artifact));
    expect(outcome.code).toBe(2);
    expect(outcome.stderr).toBe(
      `polish: invalid input: artifact: ${artifact} is not valid UTF-8 (byte 3); polish keeps text byte for byte, so convert it first\n`,
    );
    expect(outcome.stdout).toBe('');
  });

  it('a state folder that cannot be made is one line and exit 2 (under /proc it used to spin forever)', async () => {
    const outcome = await polish(runArgs(`${demo}/artifact.md`, ['--state-dir', '/proc/polish-state']));
    expect(outcome.code).toBe(2);
    expect(outcome.stderr).toContain('polish: invalid input: state-dir: cannot create /proc/polish-state (ENOENT)\n');
  });

  it('an artifact that fits only before JSON-escaping is measured as it travels, and refused before any model call', async () => {
    // A control character takes 6 bytes once escaped (\u0001): 2 MB here are 12 MB on the wire.
    const artifact = file('escapes.md', `# Limits\n${'\u0001'.repeat(2 * 1024 * 1024)}\n`);
    const outcome = await polish(runArgs(artifact, ['--json']));
    expect(outcome.code).toBe(2);
    expect(outcome.stderr).toMatch(/polish: invalid input: artifact: \d+ bytes once encoded do not fit in a task/);
    expect(outcome.stdout).toBe('');
  });
});

describe('paid work is never lost', () => {
  it("when --out cannot be written (a full disk), the artifact goes to standard output and the exit code is the run's", async () => {
    // A 64 KB file system of its own (a tmpfs in a mount namespace): the artifact does not fit.
    const out = join(scratch, 'full');
    mkdirSync(out, { recursive: true });
    const artifact = file(
      'big.md',
      `${readFileSync(`${demo}/artifact.md`, 'utf8')}${'Each key may send 100 requests per minute.\n'.repeat(2_000)}`,
    );
    // Every criterion passes at once: the result is the (large) artifact itself.
    const passing = file(
      'passing.json',
      JSON.stringify({
        evaluate: [
          {
            answer: {
              scores: ['C1', 'C2', 'C3'].map((id) => ({
                criterion_id: id,
                pass: true,
                evidence: '100 requests per minute',
              })),
            },
          },
        ],
      }),
    );
    const args = demoRunArgs(['--script', passing], artifact);
    const child = spawn(
      'unshare',
      [
        '--mount',
        'sh',
        '-c',
        `mount -t tmpfs -o size=64k tmpfs ${out} && exec "$0" "$@"`,
        process.execPath,
        POLISH,
        ...args,
        '--out',
        join(out, 'result.md'),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(stderr).toContain(
      `polish: could not write --out ${join(out, 'result.md')} (ENOSPC); the artifact goes to standard output instead`,
    );
    expect(code, stderr).toBe(0);
    expect(stdout).toBe(readFileSync(artifact, 'utf8'));
  });

  it('a revision larger than the server takes ends FAILED with its usage counted, not three crashed workers and three paid calls', async () => {
    // A server that takes 256 KB messages, and a reviser whose answer is over 300 KB.
    const config = file('small.conf', 'max_payload: 262144\n');
    const server = await startNatsServer({ storeDir: join(scratch, `small-${randomUUID()}`), configFile: config });
    const huge = `${readFileSync(`${demo}/artifact.md`, 'utf8')}${'A request over the limit gets 429. '.repeat(9_000)}\n`;
    const script = file(
      'huge-reviser.json',
      JSON.stringify({
        evaluate: [
          {
            answer: {
              scores: [
                { criterion_id: 'C1', pass: true, evidence: '100 requests per minute' },
                { criterion_id: 'C2', pass: false, gap: 'Name the status code.' },
                { criterion_id: 'C3', pass: false, gap: 'Say how long to wait.' },
              ],
            },
          },
        ],
        revise: [{ answer: { artifact: huge } }],
      }),
    );
    const host = await startHost(server.url, ['--pool', '1', '--script', script]);
    try {
      const outcome = await polish(demoRunArgs(['--nats', server.url, '--local', '--json']));
      expect(outcome.code, outcome.stderr).toBe(4);
      const result = RunResultSchema.parse(JSON.parse(outcome.stdout));
      expect(result.status).toBe('FAILED');
      if (result.status !== 'FAILED') return;
      expect(result.reason).toMatch(
        /^revise answer is \d+ bytes, over this NATS server's max_payload of 262144: it cannot be delivered/,
      );
      // The revise call was made once, paid once, and counted.
      expect(result.usage_by_wave.revise.model_calls).toBe(1);
      expect(host.lines.filter((line) => /\(revise\) took task/.test(line))).toHaveLength(1);
      expect(host.lines.join('\n')).not.toMatch(/\(revise\) died/);
    } finally {
      await stop(host);
      await server.stop();
    }
  });
});

describe('no bad record takes the service down', () => {
  let nats: NatsFixture;
  beforeAll(async () => {
    nats = await startNats();
  });
  afterAll(async () => {
    await nats.stop();
  });

  it('a run record that is not JSON, and one whose snapshot cannot restore, are quarantined as CORRUPT; serve starts and runs the rest', async () => {
    await openRunStore(nats.connection);
    const kv = await new Kvm(jetstream(nats.connection)).open(storeNames().runs);
    const garbled = randomUUID();
    const broken = randomUUID();
    await kv.put(`run.${garbled}`, 'this is not json {');
    await kv.put(
      `run.${broken}`,
      JSON.stringify(
        runningRecord({
          runId: broken,
          owner: 'keeper',
          machineVersion: 2,
          snapshot: { status: 'active', value: 'no-such-state', context: { spec: { cap: 4 } } },
        }),
      ),
    );
    const host = await startHost(nats.server.url, ['--pool', '1', '--script', `${demo}/script.yaml`]);
    const serve = startPolish(['serve', '--nats', nats.server.url, '--id', 'keeper']);
    try {
      await serve.waitFor(/^polish serve: ready$/);
      expect(serve.lines.join('\n')).toContain(`cannot resume ${broken}: its snapshot does not restore`);
      const listed = await polish(['list', '--nats', nats.server.url, '--json']);
      expect(listed.code, listed.stderr).toBe(0);
      const runs = JSON.parse(listed.stdout) as { runId: string; status: string; problem?: string }[];
      expect(runs.find((run) => run.runId === garbled)).toMatchObject({
        status: 'CORRUPT',
        problem: expect.stringMatching(/not JSON/),
      });
      expect(runs.find((run) => run.runId === broken)).toMatchObject({
        status: 'CORRUPT',
        problem: expect.stringMatching(/does not restore/),
      });
      const status = await polish(['status', garbled, '--nats', nats.server.url]);
      expect(status.code).toBe(0);
      expect(status.stdout).toContain('CORRUPT');
      // Everything else keeps working: a new run through the same service converges.
      const run = await polish(demoRunOnNatsArgs(nats.server.url));
      expect(run.code, run.stderr).toBe(0);
      // And a restart meets the quarantined records without stumbling.
      await stop(serve);
      const again = startPolish(['serve', '--nats', nats.server.url, '--id', 'keeper']);
      await again.waitFor(/^polish serve: ready$/);
      await stop(again);
    } finally {
      await stop(serve);
      await stop(host);
    }
  });

  it('serve refuses a stream made for something else, naming the difference (exit 6)', async () => {
    const rogue = await startNatsServer({ storeDir: join(scratch, `rogue-${randomUUID()}`) });
    try {
      // What the red team did with the inspector's old rights: POLISH_EVENTS capturing the task and run subjects.
      const { connect } = await import('@nats-io/transport-node');
      const connection = await connect({ servers: rogue.url });
      await (
        await jetstreamManager(connection)
      ).streams.add({
        name: 'POLISH_EVENTS',
        subjects: ['polish.v1.events.>', 'polish.v1.task.>', 'polish.v1.run.>'],
      });
      await connection.close();
      const serve = await polish(['serve', '--nats', rogue.url, '--id', 'strict']);
      expect(serve.code).toBe(6);
      expect(serve.stderr).toContain('stream POLISH_EVENTS exists with another configuration (subjects:');
    } finally {
      await rogue.stop();
    }
  });

  it('SIGTERM ends serve within its grace period while NATS is gone', async () => {
    const lonely = await startNatsServer({ storeDir: join(scratch, `lonely-${randomUUID()}`) });
    const serve = startPolish(['serve', '--nats', lonely.url, '--id', 'graceful', '--grace', '1']);
    await serve.waitFor(/^polish serve: ready$/);
    await lonely.stop();
    await serve.waitFor(/lost NATS/);
    serve.child.kill('SIGTERM');
    const exit = await serve.exited;
    expect(exit.code).toBe(0);
    expect(serve.lines.join('\n')).toMatch(/stopping; unfinished runs stay resumable/);
  });
});
