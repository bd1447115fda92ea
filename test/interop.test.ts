import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { Subscription } from '@nats-io/transport-node';
import { startNatsServer, type EmbeddedNats } from '@polish/cli';
import { jetstream } from '@nats-io/jetstream';
import { openTaskQueue } from '@polish/orchestrator';
import { RunEventSchema, RunResultSchema, RunSummarySchema, TaskReplySchema, type RunEvent } from '@polish/protocol';
import { startNats, writeNatsConfig, type NatsFixture } from './support/nats.js';
import { startHost, startPolish, stop, type WatchedProcess } from './support/processes.js';
import { REPO, polish } from './support/cli.js';
import { DEMO_TASK_ROLES } from './support/demo.js';

// Interoperability (docs/protocol.md): processes that use no polish package at all, only a NATS
// client and the published JSON Schemas, take part in runs beside polish's own processes.

const demo = 'examples/demo';
const goal = readFileSync(`${REPO}${demo}/goal.txt`, 'utf8').trim();
const WORKER = 'examples/raw-client/evaluate-worker.mjs';
const CLIENT = 'examples/raw-client/submit-and-follow.mjs';
/** The foreign worker's rule for the demo's criteria: C1, C2, C3 pass when these words are in the artifact. */
const KEYWORDS = ['--keyword', 'per minute', '--keyword', 'C2=429', '--keyword', 'C3=Retry-After'];
const FOREIGN_MODEL = { provider: 'raw-client', model: 'keyword-rule', scripted: true };
const gapFor = (id: string, word: string, text: string) =>
  `${id}: The artifact does not contain "${word}"; add it where it answers "${text}"`;
const C2 = 'Names the HTTP status code a client receives when it exceeds the limit.';
const C3 = 'Tells the client how long to wait before retrying, and where that value comes from.';

const ajv = new Ajv2020({ allErrors: true });
const schema = (name: string) =>
  ajv.compile(JSON.parse(readFileSync(`${REPO}packages/protocol/schema/${name}.schema.json`, 'utf8')));
const validReply = schema('task-reply');
const validEvaluation = schema('evaluation');

const children = new Set<ChildProcess>();

/** A node child process whose stderr lines can be awaited (the foreign worker logs there). */
function startNode(
  args: string[],
): WatchedProcess & { waitForCount(pattern: RegExp, count: number): Promise<string[]> } {
  const child = spawn(process.execPath, args, { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  const lines: string[] = [];
  // Each waiter is checked against every line so far, then again on every new line.
  const waiters = new Set<() => boolean>();
  let stdout = '';
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  createInterface({ input: child.stderr! }).on('line', (line) => {
    lines.push(line);
    for (const waiter of [...waiters]) if (waiter()) waiters.delete(waiter);
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      children.delete(child);
      resolve({ code, signal });
    }),
  );
  /** Resolves once `count` stderr lines (past or future) match the pattern, with those lines. */
  const waitForCount = (pattern: RegExp, count: number) =>
    new Promise<string[]>((resolve, reject) => {
      const check = () => {
        const matching = lines.filter((line) => pattern.test(line));
        if (matching.length >= count) resolve(matching);
        return matching.length >= count;
      };
      if (check()) return;
      waiters.add(check);
      void exited.then(() =>
        reject(new Error(`process exited before ${count} lines matched ${pattern}:\n${lines.join('\n')}`)),
      );
    });
  return {
    child,
    lines,
    exited,
    stdout: () => stdout,
    waitForCount,
    async waitFor(pattern) {
      const [line] = await waitForCount(pattern, 1);
      return pattern.exec(line ?? '') as RegExpExecArray;
    },
  };
}

/** Starts the foreign evaluate worker and waits until its subscription is known to the server. */
async function startForeignWorker(natsUrl: string, args: string[]) {
  const worker = startNode([WORKER, '--nats', natsUrl, ...args]);
  const [, pid] = await worker.waitFor(/^evaluate-worker: ready: pid (\d+), pulling from POLISH_TASKS\/evaluate/);
  return { ...worker, pid: Number(pid) };
}

/** Collects the events of every run on this NATS; `finished(runId)` resolves once that run's run.finished arrived. */
function followEvents(fixture: NatsFixture) {
  const events: RunEvent[] = [];
  const invalid: unknown[] = [];
  const waiting = new Map<string, () => void>();
  const subscription: Subscription = fixture.connection.subscribe('polish.v1.events.>', {
    callback: (_error, message) => {
      const parsed = RunEventSchema.safeParse(message.json());
      if (!parsed.success) return void invalid.push(message.json());
      const event = parsed.data;
      events.push(event);
      if (event.type === 'run.finished') waiting.get(event.runId)?.();
    },
  });
  return {
    ready: () => fixture.connection.flush(),
    of: (runId: string) => events.filter((event) => event.runId === runId),
    /** Messages on the events subjects that are not run events (there should be none). */
    invalid,
    finished(runId: string) {
      if (events.some((event) => event.runId === runId && event.type === 'run.finished')) return Promise.resolve();
      return new Promise<void>((resolve) => waiting.set(runId, resolve));
    },
    close: () => subscription.unsubscribe(),
  };
}

const runIdOf = (stderr: string) => /^polish: run (\S+) started/m.exec(stderr)?.[1] ?? '';
/** The example client's --json output: each run event as it came, then the run's summary. */
function clientOutput(stdout: string) {
  const lines = stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as unknown);
  const summary = RunSummarySchema.parse(lines.pop());
  return { events: lines.map((line) => RunEventSchema.parse(line)), summary };
}
const waves = (events: RunEvent[]) => events.flatMap((event) => (event.type === 'wave.finished' ? [event] : []));

describe('a worker and a client written with only a NATS client and the JSON Schemas', () => {
  let nats: NatsFixture;
  let host: Awaited<ReturnType<typeof startHost>>;

  beforeAll(async () => {
    nats = await startNats();
    // An orchestrator makes the task queue (here the test does, as polish run or serve would):
    // a worker pulls from a queue that exists.
    await openTaskQueue(nats.connection);
    // polish's own workers serve criteria and revise: the only evaluate worker is the foreign one.
    host = await startHost(nats.server.url, ['--roles', 'criteria,revise', '--script', `${demo}/script.yaml`]);
  });
  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    if (host) await stop(host);
    await nats?.stop();
  });

  /** `polish run` of the demo over this test's NATS, its workers local, the result as JSON. */
  const runDemo = () =>
    polish(['run', `${demo}/artifact.md`, '--goal', goal, '--nats', nats.server.url, '--local', '--json']);

  it('serves every evaluation of a polish run, and the run follows its rule to CONVERGED', async () => {
    const worker = await startForeignWorker(nats.server.url, KEYWORDS);
    const events = followEvents(nats);
    try {
      await events.ready();
      const { code, stdout, stderr } = await runDemo();
      expect(code, stderr).toBe(0);
      const result = RunResultSchema.parse(JSON.parse(stdout));
      expect(result.status).toBe('CONVERGED');
      // The keyword rule, iteration by iteration: "per minute" is there from the start, the
      // scripted reviser adds "429", then "Retry-After". The gaps are the foreign worker's words.
      expect(result.history.map((record) => record.passed)).toEqual([1, 2, 3]);
      expect(result.history[0]?.blocking_gaps).toEqual([gapFor('C2', '429', C2), gapFor('C3', 'Retry-After', C3)]);
      expect(result.history[1]?.blocking_gaps).toEqual([gapFor('C3', 'Retry-After', C3)]);
      expect(result.models).toContainEqual(FOREIGN_MODEL);
      expect(result.usage_by_wave.evaluate.model_calls).toBe(3);

      const runId = runIdOf(stderr);
      expect(runId).not.toBe('');
      await events.finished(runId);
      expect(events.invalid).toEqual([]);
      const answers = waves(events.of(runId));
      expect(answers.map((answer) => answer.role)).toEqual(DEMO_TASK_ROLES);
      for (const answer of answers) {
        if (answer.role === 'evaluate') {
          expect(answer.worker.pid).toBe(worker.pid);
          expect(answer.model).toEqual(FOREIGN_MODEL);
        } else {
          await host.workerReady(answer.worker.pid);
        }
      }
      expect(await worker.waitForCount(/^evaluate-worker: task \S+ attempt 1:/, 3)).toEqual([
        expect.stringMatching(/C1 pass, C2 fail, C3 fail$/),
        expect.stringMatching(/C1 pass, C2 pass, C3 fail$/),
        expect.stringMatching(/C1 pass, C2 pass, C3 pass$/),
      ]);
    } finally {
      events.close();
      await stop(worker);
    }
  });

  it('a verdict that leaves a criterion out is rejected: the run ends FAILED (exit 4) with a contract violation naming evaluate', async () => {
    const worker = await startForeignWorker(nats.server.url, [...KEYWORDS, '--malformed']);
    try {
      const { code, stdout, stderr } = await runDemo();
      expect(code, stderr).toBe(4);
      const result = RunResultSchema.parse(JSON.parse(stdout));
      expect(result.status).toBe('FAILED');
      if (result.status !== 'FAILED') return;
      expect(result.code).toBe('CONTRACT_VIOLATION');
      // One re-dispatch, then the run fails: never a made-up verdict.
      expect(result.reason).toBe('evaluate agent broke the contract 2 times: scores: criterion C3 is not scored');
      expect(stderr).toContain('polish: FAILED: evaluate agent broke the contract 2 times');
      expect(result.history).toEqual([]);
      expect(result.models).toContainEqual(FOREIGN_MODEL);
      // Asked twice (two different tasks), answered malformed twice.
      const answered = await worker.waitForCount(
        /^evaluate-worker: task \S+ attempt 1: C1 pass, C2 fail \(malformed on purpose\)$/,
        2,
      );
      expect(new Set(answered).size).toBe(2);
    } finally {
      await stop(worker);
    }
  });

  it('rejects an envelope with an extra payload field before judging: ok false, INVALID_INPUT, a reply valid against task-reply.schema.json', async () => {
    const worker = await startForeignWorker(nats.server.url, KEYWORDS);
    try {
      const envelope = (payload: Record<string, unknown>) => ({
        v: 1,
        taskId: randomUUID(),
        role: 'evaluate',
        attempt: 1,
        deadline: 0,
        idempotencyKey: createHash('sha256').update(randomUUID()).digest('hex'),
        payload: {
          artifact: 'Each key may send 100 requests per minute.',
          criteria: [{ id: 'C1', text: 'States the limit.' }],
          ...payload,
        },
      });
      // A task goes into the evaluate queue; its answer comes on the reply subject of its key.
      const ask = async (task: ReturnType<typeof envelope>) => {
        const replies = nats.connection.subscribe(`polish.v1.reply.evaluate.${task.idempotencyKey}`, { max: 1 });
        await nats.connection.flush();
        await jetstream(nats.connection).publish('polish.v1.task.evaluate', JSON.stringify(task));
        for await (const message of replies) return message.json<Record<string, unknown>>();
        throw new Error('no reply');
      };

      // The control: the same task without the extra field is judged.
      const valid = envelope({});
      const judged = await ask(valid);
      expect(validReply(judged), JSON.stringify(validReply.errors)).toBe(true);
      expect(judged).toMatchObject({
        taskId: valid.taskId,
        ok: true,
        model: FOREIGN_MODEL,
        worker: { pid: worker.pid },
      });
      expect(validEvaluation(judged.result)).toBe(true);
      expect(judged.result).toEqual({ scores: [{ criterion_id: 'C1', pass: true, evidence: 'per minute' }] });

      // An iteration number is exactly what a stateless evaluator must never receive.
      const invalid = envelope({ iteration: 2 });
      const rejected = await ask(invalid);
      expect(validReply(rejected), JSON.stringify(validReply.errors)).toBe(true);
      expect(TaskReplySchema.parse(rejected)).toMatchObject({
        taskId: invalid.taskId,
        ok: false,
        error: { code: 'INVALID_INPUT', retryable: false },
      });
      expect((rejected.error as { message: string }).message).toBe(
        'task rejected before any model call: /payload must NOT have additional properties (iteration)',
      );
      expect(rejected.result).toBeUndefined();

      // Not JSON at all: there is nowhere to answer, so the task leaves the queue for good.
      await jetstream(nats.connection).publish('polish.v1.task.evaluate', 'not json');
      await worker.waitFor(/^evaluate-worker: a task without an idempotency key: terminated/);
      await worker.waitFor(new RegExp(`^evaluate-worker: rejected task ${invalid.taskId}: INVALID_INPUT`));
    } finally {
      await stop(worker);
    }
  });

  it('a raw NATS client submits to polish serve and follows the run event by event to its final status', async () => {
    const serve = startPolish(['serve', '--nats', nats.server.url, '--id', 'interop']);
    const worker = await startForeignWorker(nats.server.url, KEYWORDS);
    try {
      await serve.waitFor(/^polish serve: ready$/);
      const client = (extra: string[]) => {
        const process_ = startNode([
          CLIENT,
          `${demo}/artifact.md`,
          '--goal',
          goal,
          '--nats',
          nats.server.url,
          '--json',
          ...extra,
        ]);
        return process_.exited.then(({ code }) => ({ code, stdout: process_.stdout(), lines: process_.lines }));
      };

      // A spec the service refuses: exit 2 with the service's reason, and no run.
      const refused = await client(['--cap', '9']);
      expect(refused.code).toBe(2);
      expect(refused.lines.join('\n')).toContain(
        'the run service refused the run: INVALID_INPUT: cap: must be at most 8',
      );

      const { code, stdout } = await client([]);
      expect(code, stdout).toBe(0);
      const { events, summary } = clientOutput(stdout);
      expect(events[0]?.type).toBe('run.started');
      expect(events.at(-1)).toMatchObject({ type: 'run.finished', status: 'CONVERGED', iterations: 3 });
      expect(
        events
          .filter((event) => event.type === 'iteration.evaluated')
          .map((event) => (event.type === 'iteration.evaluated' ? event.passed : -1)),
      ).toEqual([1, 2, 3]);
      expect(
        waves(events)
          .filter((answer) => answer.role === 'evaluate')
          .map((answer) => answer.worker.pid),
      ).toEqual([worker.pid, worker.pid, worker.pid]);
      expect(new Set(events.map((event) => event.runId))).toEqual(new Set([summary.runId]));
      expect(summary).toMatchObject({
        status: 'CONVERGED',
        owner: 'interop',
        result: { status: 'CONVERGED', iterations: 3 },
      });
      expect(summary.result?.artifact).toContain('Retry-After');
      await serve.waitFor(new RegExp(`^run ${summary.runId}: CONVERGED after 3 iterations$`));
    } finally {
      await stop(worker);
      await stop(serve);
    }
  });
});

describe('the same on a NATS with per-role users (polish nats-config)', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'polish-interop-'));
  let server: EmbeddedNats | undefined;

  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await server?.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('the foreign worker connects as `evaluate` and the client as `client`, each with its inbox prefix, and a served run converges', async () => {
    const { config, credentials } = await writeNatsConfig(join(scratch, 'nats'), join(scratch, 'jetstream'));
    server = await startNatsServer({ storeDir: join(scratch, 'jetstream'), configFile: config });
    const url = server.url;
    const auth = ['--credentials', credentials];
    const host = await startHost(url, ['--roles', 'criteria,revise', '--script', `${demo}/script.yaml`, ...auth]);
    const serve = startPolish(['serve', '--nats', url, '--id', 'interop-secured', ...auth]);
    const worker = await startForeignWorker(url, [...KEYWORDS, ...auth]);
    try {
      await serve.waitFor(/^polish serve: ready$/);
      const run = (extra: string[]) => {
        const client = startNode([CLIENT, `${demo}/artifact.md`, '--goal', goal, '--nats', url, '--json', ...extra]);
        return client.exited.then(({ code }) => ({ code, stdout: client.stdout(), lines: client.lines }));
      };
      // Without a user the server refuses the connection: the service is not reachable anonymously.
      const anonymous = await run([]);
      expect(anonymous.code).toBe(6);
      expect(anonymous.lines.join('\n')).toMatch(/cannot connect to NATS .*Authorization Violation/);

      const { code, stdout } = await run(auth);
      expect(code, stdout).toBe(0);
      const { events, summary } = clientOutput(stdout);
      expect(summary).toMatchObject({
        status: 'CONVERGED',
        owner: 'interop-secured',
        result: { status: 'CONVERGED', iterations: 3 },
      });
      expect(
        waves(events)
          .filter((answer) => answer.role === 'evaluate')
          .map((answer) => answer.worker.pid),
      ).toEqual([worker.pid, worker.pid, worker.pid]);
      expect(worker.lines.filter((line) => line.startsWith('evaluate-worker: rejected'))).toEqual([]);
    } finally {
      await stop(worker);
      await stop(serve);
      await stop(host);
    }
  });
});
