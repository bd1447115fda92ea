// Fault tests for durable runs (DESIGN §6): real nats-server, real `polish serve` and
// `polish worker` processes, kill -9. Slow by nature: `pnpm test:fault` runs only these.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstream } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { createScriptedProvider, handleTask, loadScriptFile } from '@polish/agents';
import {
  createInProcessDispatcher,
  createRunClient,
  createRunManager,
  openRunStore,
  runPolish,
  type Dispatcher,
  type RunClient,
  type RunStore,
} from '@polish/orchestrator';
import { eventsSubject, storeNames, type RunEvent, type RunResult } from '@polish/protocol';
import { startNatsServer } from '@polish/cli';
import { connect } from '@nats-io/transport-node';
import { restartablePort, startNats, type NatsFixture } from './support/nats.js';
import { heldScript as held } from './support/held-script.js';
import { runningRecord } from './support/run-record.js';
import { DEMO_SPEC, demoRunOnNatsArgs, runOutcome, passedPerIteration } from './support/demo.js';
import { startHost, startPolish, stop, workerArgs, type WatchedProcess } from './support/processes.js';

const demo = 'examples/demo';
const scratch = mkdtempSync(join(tmpdir(), 'polish-durable-'));

const heldScript = () => held(`${demo}/script.yaml`, scratch);

async function startServe(natsUrl: string, id: string, extra: string[] = []): Promise<WatchedProcess> {
  const serve = startPolish(['serve', '--nats', natsUrl, '--id', id, ...extra]);
  await serve.waitFor(/^polish serve: ready/);
  return serve;
}

/** Resolves with the run.finished event of a run (core subscription on its event subject). */
function finishedEvent(connection: Pick<NatsFixture['connection'], 'subscribe'>, runId: string): Promise<RunEvent> {
  return new Promise((resolve) => {
    const subscription = connection.subscribe(eventsSubject(runId), {
      callback: (_error, message) => {
        const event = message.json<RunEvent>();
        if (event.type === 'run.finished') {
          subscription.unsubscribe();
          resolve(event);
        }
      },
    });
  });
}

const took = (host: WatchedProcess, role: string) =>
  host.lines.filter((line) => new RegExp(`\\(${role}\\) took task`).test(line)).length;

describe('durable runs: fault tests (real processes, kill -9)', () => {
  let nats: NatsFixture;
  let client: RunClient;
  let undisturbed: RunResult;
  beforeAll(async () => {
    nats = await startNats();
    client = createRunClient(nats.connection);
    const model = createScriptedProvider(loadScriptFile(`${demo}/script.yaml`));
    undisturbed = await runPolish(DEMO_SPEC, {
      dispatcher: createInProcessDispatcher((task) => handleTask(task, model)),
    });
  });
  afterAll(async () => {
    await nats.stop();
  });

  /**
   * Submits `spec` to a `polish serve` named `id`, kills it with SIGKILL once `holder` has taken
   * an evaluation (held until `held.release()`), starts another under the same id, which must
   * resume the run, then releases the evaluation and returns the run once it has finished.
   */
  async function killedWhileEvaluating(
    id: string,
    spec: Parameters<RunClient['submit']>[0],
    holder: WatchedProcess,
    held: { release: () => void },
  ) {
    const first = await startServe(nats.server.url, id);
    try {
      const runId = randomUUID();
      const finished = finishedEvent(nats.connection, runId);
      await client.submit(spec, runId);
      await holder.waitFor(/\(evaluate\) took task/);
      first.child.kill('SIGKILL');
      await first.exited;
      const second = await startServe(nats.server.url, id);
      try {
        expect(second.lines.join('\n')).toContain(`resumed 1 unfinished run(s): ${runId}`);
        held.release();
        await finished;
        return await client.status(runId);
      } finally {
        await stop(second);
      }
    } finally {
      await stop(first);
    }
  }

  it('orchestrator killed while a wave is in flight: a new one resumes, same result, finished waves not paid twice', async () => {
    const held = heldScript();
    const host = await startHost(nats.server.url, ['--pool', '2', '--script', held.script]);
    try {
      const run = await killedWhileEvaluating('resumer', DEMO_SPEC, host, held);
      expect(run.status).toBe('CONVERGED');
      expect(runOutcome(run.result as RunResult)).toEqual(runOutcome(undisturbed));
      // Wave 1 had finished before the crash: its model call is not made again.
      expect(took(host, 'criteria')).toBe(1);
      expect(took(host, 'revise')).toBe(2);
      // The evaluation in flight may be asked again (its answer never reached an orchestrator).
      expect(took(host, 'evaluate')).toBeLessThanOrEqual(4);
    } finally {
      await stop(host);
    }
  });

  it('a run whose judges have models (judge_models) resumes in their lanes after the orchestrator is killed', async () => {
    // The judge's model is a held copy of the demo script: a lane host of that model alone may
    // answer the judge. The plain host serves the evaluate queue too, so a judge's task sent
    // there after the resume would show in its log.
    const held = heldScript();
    const judgeModel = `scripted:${basename(held.script, '.json')}`;
    const laneHost = await startHost(nats.server.url, [
      '--roles',
      'evaluate',
      '--lane',
      '--pool',
      '1',
      '--script',
      held.script,
    ]);
    const plainHost = await startHost(nats.server.url, [
      '--roles',
      'criteria,evaluate,revise',
      '--pool',
      '1',
      '--script',
      `${demo}/script.yaml`,
    ]);
    try {
      const spec = { ...DEMO_SPEC, judges: 1, judge_models: [judgeModel] };
      const run = await killedWhileEvaluating('lane-resumer', spec, laneHost, held);
      expect(run.status).toBe('CONVERGED');
      expect(runOutcome(run.result as RunResult)).toEqual(runOutcome(undisturbed));
      // Every evaluation, before and after the resume, was the lane's: none reached the plain queue.
      expect(took(laneHost, 'evaluate')).toBeGreaterThanOrEqual(3);
      expect(took(plainHost, 'evaluate')).toBe(0);
      expect(took(plainHost, 'criteria')).toBe(1);
    } finally {
      await stop(laneHost);
      await stop(plainHost);
    }
  });

  it('polish run --nats submits to polish serve; status and list show the run', async () => {
    const host = await startHost(nats.server.url, ['--pool', '2', '--script', `${demo}/script.yaml`]);
    const serve = await startServe(nats.server.url, 'cli');
    try {
      const run = await polishCli(demoRunOnNatsArgs(nats.server.url));
      expect(run.code).toBe(0);
      const [, runId] = /submitting run (\S+) to the polish run service/.exec(run.stderr) ?? [];
      expect(runId).toBeDefined();
      expect(run.stderr).toContain('iteration 3: 3/3 pass');
      expect(JSON.parse(run.stdout).status).toBe('CONVERGED');
      const status = await polishCli(['status', runId as string, '--nats', nats.server.url, '--json']);
      expect(JSON.parse(status.stdout)).toMatchObject({ runId, status: 'CONVERGED', owner: 'cli', iteration: 3 });
      const list = await polishCli(['list', '--nats', nats.server.url]);
      expect(list.stdout).toMatch(new RegExp(`^${runId}\\s+CONVERGED`, 'm'));
      const missing = await polishCli(['status', 'no-such-run', '--nats', nats.server.url]);
      expect([missing.code, missing.stderr.trim()]).toEqual([2, 'polish: invalid input: no run no-such-run']);
    } finally {
      await stop(serve);
      await stop(host);
    }
  });

  it('worker killed mid-task: the task is retried and the run completes', async () => {
    const held = heldScript();
    const host = await startHost(nats.server.url, ['--pool', '1', '--script', held.script]);
    const serve = await startServe(nats.server.url, 'worker-crash');
    try {
      const runId = randomUUID();
      const finished = finishedEvent(nats.connection, runId);
      await client.submit(DEMO_SPEC, runId);
      const [, pid] = await host.waitFor(/^worker (\d+) \(evaluate\) took task/);
      process.kill(Number(pid), 'SIGKILL');
      await host.waitFor(new RegExp(`^worker ${pid} \\(evaluate\\) died`));
      held.release();
      await finished;
      const run = await client.status(runId);
      expect(runOutcome(run.result as RunResult)).toEqual(runOutcome(undisturbed));
      // The run's whole history can be replayed from the event stream.
      const replay = await (await openRunStore(nats.connection)).events(runId);
      expect(replay[0]?.type).toBe('run.started');
      expect(replay.at(-1)?.type).toBe('run.finished');
      expect(passedPerIteration(replay)).toEqual([1, 2, 3]);
    } finally {
      await stop(serve);
      await stop(host);
    }
  });

  it('cancel during a wave: CANCELLED, the late reply is ignored, nothing else changes', async () => {
    const held = heldScript();
    const host = await startHost(nats.server.url, ['--pool', '1', '--script', held.script]);
    const serve = await startServe(nats.server.url, 'canceller');
    try {
      const runId = randomUUID();
      await client.submit(DEMO_SPEC, runId);
      const [, , taskId] = await host.waitFor(/^worker (\d+) \(evaluate\) took task (\S+)/);
      const cancelled = await client.cancel(runId);
      expect(cancelled.status).toBe('CANCELLED');
      held.release();
      await host.waitFor(new RegExp(`answered task ${taskId} \\(ok\\)`));
      const after = await client.status(runId);
      expect(after).toEqual(cancelled);
      // The late answer was not recorded as the wave's result either.
      const kv = await new Kvm(jetstream(nats.connection)).open(storeNames().runs);
      expect(await kv.get(`result.${runId}.evaluate.1`)).toBeNull();
      expect(after.result?.history).toEqual([]);
      expect(after.result?.status === 'CANCELLED' && after.result.reason).toBe('cancelled by the caller');
    } finally {
      await stop(serve);
      await stop(host);
    }
  });

  it('extends a run that reached its cap: criteria unchanged, continuing from the last evaluated version', async () => {
    const host = await startHost(nats.server.url, ['--pool', '2', '--script', `${demo}/script-stubborn.yaml`]);
    const serve = await startServe(nats.server.url, 'extender');
    try {
      const runId = randomUUID();
      let finished = finishedEvent(nats.connection, runId);
      await client.submit({ ...DEMO_SPEC, cap: 2 }, runId);
      await finished;
      const capped = await client.status(runId);
      expect([capped.status, capped.iteration]).toEqual(['CAP_REACHED', 2]);
      finished = finishedEvent(nats.connection, runId);
      await client.extend(runId, 4);
      await finished;
      const extended = await client.status(runId);
      expect([extended.status, extended.iteration, extended.cap]).toEqual(['CAP_REACHED', 4, 4]);
      expect(extended.result?.criteria).toEqual(capped.result?.criteria);
      // The versions evaluated before stay as they were (a revision adds its usage, and its report,
      // to the iteration it follows).
      const withoutUsage = (history: RunResult['history'] = []) =>
        history.map(({ usage: _usage, revision: _revision, ...record }) => record);
      expect(withoutUsage(extended.result?.history.slice(0, 2))).toEqual(withoutUsage(capped.result?.history));
      expect(took(host, 'criteria')).toBe(1);
      const refused = await polishCli(['extend', runId, '--cap', '9', '--nats', nats.server.url]);
      expect(refused.code).toBe(2);
    } finally {
      await stop(serve);
      await stop(host);
    }
  });

  it('200 concurrent runs with one orchestrator restart: all reach a terminal state, none lost, none duplicated', async () => {
    // Reused workers: this test is about the orchestrator, and 1,200 single-use boots would take minutes.
    const host = await startHost(
      nats.server.url,
      workerArgs({ pool: 2, reuse: 1_000_000, script: `${demo}/script.yaml` }),
    );
    const first = await startServe(nats.server.url, 'bulk');
    const ids: string[] = Array.from({ length: 200 }, () => randomUUID());
    const finished = new Set<string>();
    let half: () => void = () => undefined;
    let all: () => void = () => undefined;
    const halfway = new Promise<void>((resolve) => (half = resolve));
    const everyone = new Promise<void>((resolve) => (all = resolve));
    const subscription = nats.connection.subscribe(eventsSubject('*'), {
      callback: (_error, message) => {
        const event = message.json<RunEvent>();
        if (event.type !== 'run.finished' || !ids.includes(event.runId)) return;
        finished.add(event.runId);
        if (finished.size >= 100) half();
        if (finished.size === ids.length) all();
      },
    });
    let second: WatchedProcess | undefined;
    try {
      await Promise.all(ids.map((runId) => client.submit(DEMO_SPEC, runId)));
      await halfway;
      first.child.kill('SIGKILL');
      await first.exited;
      second = await startServe(nats.server.url, 'bulk');
      await everyone;
      const runs = (await client.list()).filter((run) => ids.includes(run.runId));
      expect(runs).toHaveLength(200);
      expect(new Set(runs.map((run) => run.runId)).size).toBe(200);
      expect(
        runs.every(
          (run) => run.status === 'CONVERGED' && run.result && runOutcome(run.result).artifact === undisturbed.artifact,
        ),
      ).toBe(true);
      // Exactly one run.finished per run in the event stream.
      const consumer = await jetstream(nats.connection).consumers.get(storeNames().events, {
        filter_subjects: eventsSubject('*'),
      });
      const counts = new Map<string, number>();
      for await (const message of await consumer.consume()) {
        const event = message.json<RunEvent>();
        if (event.type === 'run.finished' && ids.includes(event.runId))
          counts.set(event.runId, (counts.get(event.runId) ?? 0) + 1);
        if (message.info.pending === 0) break;
      }
      expect(counts.size).toBe(200);
      expect([...counts.values()].every((count) => count === 1)).toBe(true);
    } finally {
      subscription.unsubscribe();
      if (second) await stop(second);
      await stop(first);
      await stop(host);
    }
  });

  it('a wave whose result was saved is not sent again, even if the orchestrator dies before its next snapshot', async () => {
    const store = await openRunStore(nats.connection);
    const model = createScriptedProvider(loadScriptFile(`${demo}/script.yaml`));
    const inProcess = createInProcessDispatcher((task) => handleTask(task, model));
    const dispatched: string[] = [];
    const dispatcher: Dispatcher = {
      dispatch: (role, payload, options) => (dispatched.push(role), inProcess.dispatch(role, payload, options)),
    };
    let markCrashed: () => void = () => undefined;
    const crashed = new Promise<void>((resolve) => (markCrashed = resolve));
    // The real store, with one twist: right after the first evaluation's result is saved, the
    // orchestrator stops dead, before the transition that follows can be saved.
    const crashing: RunStore = {
      ...store,
      async put(key, value) {
        await store.put(key, value);
        if (/\.evaluate\.1$/.test(key)) {
          await first.close();
          markCrashed();
        }
      },
    };
    const first = createRunManager({ store: crashing, dispatcher, owner: 'ledger' });
    const runId = randomUUID();
    await first.submit(DEMO_SPEC, runId);
    await crashed;
    expect((await store.get<{ state: string }>(`run.${runId}`))?.state).toBe('evaluating');
    const second = createRunManager({ store, dispatcher, owner: 'ledger' });
    expect((await second.resumeOwned()).resumed).toContain(runId);
    expect(runOutcome(await second.result(runId))).toEqual(runOutcome(undisturbed));
    // Without the recorded result the restored run would have evaluated iteration 1 again (4 calls).
    expect(dispatched).toEqual(['criteria', 'evaluate', 'revise', 'evaluate', 'revise', 'evaluate']);
  });

  it('never runs one run in two orchestrators: no takeover from a live owner, no second process of one name', async () => {
    const held = heldScript();
    const host = await startHost(nats.server.url, ['--pool', '1', '--script', held.script]);
    const alpha = await startServe(nats.server.url, 'alpha');
    const twins: WatchedProcess[] = [];
    try {
      const runId = randomUUID();
      await client.submit(DEMO_SPEC, runId);
      await host.waitFor(/\(evaluate\) took task/);
      const beta = createRunManager({
        store: await openRunStore(nats.connection),
        dispatcher: createInProcessDispatcher(() => Promise.reject(new Error('must not run'))),
        owner: 'beta',
      });
      await expect(beta.resume(runId)).rejects.toThrow(
        `run ${runId} belongs to orchestrator "alpha", which is running: resume it there`,
      );
      await expect(beta.cancel(runId)).rejects.toThrow('which is running: cancel it there');
      const twin = startPolish(['serve', '--nats', nats.server.url, '--id', 'alpha']);
      twins.push(twin);
      const twinExit = await twin.exited;
      expect(twinExit.code).toBe(6);
      expect(twin.lines.join('\n')).toContain('orchestrator "alpha" is already running');
    } finally {
      // Released whatever happened above: a failed expectation must not leave the task held.
      held.release();
      for (const twin of twins) await stop(twin);
      await stop(alpha);
      await stop(host);
    }
  });

  it('a snapshot from another machine version is refused with both versions named, never restarted', async () => {
    await openRunStore(nats.connection);
    const kv = await new Kvm(jetstream(nats.connection)).open(storeNames().runs);
    const runId = randomUUID();
    const record = runningRecord({
      runId,
      owner: 'old-orchestrator',
      machineVersion: 0,
      snapshot: { value: 'evaluating' },
    });
    await kv.put(`run.${runId}`, JSON.stringify(record));
    const serve = await startServe(nats.server.url, 'old-orchestrator');
    try {
      expect(serve.lines.join('\n')).toContain(
        `cannot resume ${runId}: run ${runId} was saved by polish machine version 0, and this orchestrator runs machine version 2`,
      );
      const resume = await polishCli(['resume', runId, '--nats', nats.server.url]);
      expect(resume.code).toBe(2);
      expect(resume.stderr).toContain('machine version 0');
      expect((await client.status(runId)).status).toBe('RUNNING');
    } finally {
      await stop(serve);
    }
  });

  it('keeps a 5 MB artifact in the Object Store, referenced from the run record', async () => {
    // With the sentences the demo's scripted judge quotes as evidence.
    const big = `${'All work and no play. '.repeat(240_000)}\n100 requests per minute; 429 Too Many Requests; Retry-After header.\n`;
    const host = await startHost(nats.server.url, ['--pool', '1', '--script', `${demo}/script.yaml`]);
    const serve = await startServe(nats.server.url, 'big');
    try {
      const runId = randomUUID();
      const finished = finishedEvent(nats.connection, runId);
      await client.submit(
        { ...DEMO_SPEC, artifact: big, criteria: JSON.parse(readFileSync(`${demo}/criteria.json`, 'utf8')) },
        runId,
      );
      await finished;
      const run = await client.status(runId);
      const kv = await new Kvm(jetstream(nats.connection)).open(storeNames().runs);
      const raw = await kv.get(`run.${runId}`);
      expect(raw?.length).toBeLessThan(64 * 1024);
      expect(raw?.string()).toContain('$polish_object');
      // The status reply carries it as a reference too; the client reads it back whole.
      expect(run.status).toBe('CONVERGED');
      expect(run.result?.artifact).toBe(big);
    } finally {
      await stop(serve);
      await stop(host);
    }
  });
});

describe('nats-server killed and restarted on the same store during a run', () => {
  let undisturbed: RunResult;
  beforeAll(async () => {
    const model = createScriptedProvider(loadScriptFile(`${demo}/script.yaml`));
    undisturbed = await runPolish(DEMO_SPEC, {
      dispatcher: createInProcessDispatcher((task) => handleTask(task, model)),
    });
  });

  it('the run completes', async () => {
    const storeDir = mkdtempSync(join(tmpdir(), 'polish-restart-'));
    // Restarted on the same port below: one the kernel never hands out by itself.
    const port = String(await restartablePort());
    let server = await startNatsServer({ storeDir, args: ['-p', port] });
    const held = heldScript();
    const host = await startHost(server.url, ['--pool', '1', '--script', held.script]);
    const serve = await startServe(server.url, 'survivor', ['--task-timeout', '5']);
    const connection = await connect({ servers: server.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
    try {
      const runClient = createRunClient(connection);
      const runId = randomUUID();
      // The subscription is re-made by the client after the restart.
      const finished = finishedEvent(connection, runId);
      await runClient.submit(DEMO_SPEC, runId);
      await host.waitFor(/\(evaluate\) took task/);
      process.kill(server.pid, 'SIGKILL');
      await server.stop();
      server = await startNatsServer({ storeDir, args: ['-p', port] });
      held.release();
      await finished;
      // The record is read back from the restarted server's store.
      const run = await runClient.status(runId);
      expect(run.status).toBe('CONVERGED');
      expect(runOutcome(run.result as RunResult)).toEqual(runOutcome(undisturbed));
    } finally {
      await connection.close();
      await stop(serve);
      await stop(host);
      await server.stop();
    }
  });
});

async function polishCli(args: string[]) {
  const { polish } = await import('./support/cli.js');
  return polish(args);
}
