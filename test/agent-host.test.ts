import { mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { getPriority, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  RESERVE_NICE,
  WORKER_CONFIG_ENV,
  backgroundBootsUnavailable,
  createAgentHost,
  niceOf,
  runWorker,
  youngGenerationFlags,
  type AgentHost,
  type BootSteps,
  type WorkerNotice,
} from '@polish/agents';
import { createNatsDispatcher, openTaskQueue } from '@polish/orchestrator';
import {
  TaskEnvelopeSchema,
  ZERO_USAGE,
  crashSubject,
  progressSubject,
  replySubject,
  taskQueueNames,
  taskQueueOf,
  type TaskEnvelope,
} from '@polish/protocol';
import { jetstream, jetstreamManager, type ConsumerInfo } from '@nats-io/jetstream';
import { createHash } from 'node:crypto';
import { startNats, type NatsFixture } from './support/nats.js';
import { REPO } from './support/cli.js';
import { commandLineOf, startHost, stop } from './support/processes.js';

const model = { provider: 'scripted' as const, script: `${REPO}examples/demo/script.yaml` };
const criteria = JSON.parse(readFileSync(`${REPO}examples/demo/criteria.json`, 'utf8'));

/** Every criterion passed, quoting the artifact the tests send. */
const scores = criteria.map((c: { id: string }) => ({
  criterion_id: c.id,
  pass: true,
  evidence: '100 requests per minute',
}));

/** A script whose evaluate workers each hold their task until `release` exists (they stay alive to be looked at). */
function heldScript(prefix: string): { script: string; release: string } {
  const release = join(mkdtempSync(join(tmpdir(), prefix)), 'release');
  const script = join(dirname(release), 'held.json');
  writeFileSync(script, JSON.stringify({ evaluate: [{ answer: { scores }, hold_until_file: release }] }));
  return { script, release };
}

/** The nice value of every thread of a process, and of its autogroup when it has its own ("nice N" in /proc). */
function nices(pid: number): { threads: number[]; autogroup: number | undefined } {
  // A thread that ends between the listing and the read (a worker on its way out) has none.
  const threads = readdirSync(`/proc/${pid}/task`)
    .map((tid) => niceOf(Number(tid)))
    .filter((nice): nice is number => nice !== undefined);
  const group = /nice (-?\d+)/.exec(readFileSync(`/proc/${pid}/autogroup`, 'utf8'))?.[1];
  return { threads, autogroup: group === undefined ? undefined : Number(group) };
}

/**
 * What a host did, read when it happened: the nice values of each worker when it started and when
 * it took a task, and its priority events. The workers hold their tasks, so they are alive to read.
 */
function watchPriorities(host: AgentHost) {
  const seen = {
    started: new Map<number, ReturnType<typeof nices>>(),
    taken: new Map<number, ReturnType<typeof nices>>(),
    events: [] as { pid: number; nice: number; why: string; threads: number[] }[],
    readyOrder: [] as number[],
  };
  host.on('worker.started', ({ pid }) => seen.started.set(pid, nices(pid)));
  host.on('task.taken', ({ pid }) => seen.taken.set(pid, nices(pid)));
  host.on('worker.priority', ({ pid, nice, why }) => seen.events.push({ pid, nice, why, threads: nices(pid).threads }));
  host.on('worker.ready', ({ pid }) => seen.readyOrder.push(pid));
  return seen;
}

/** Resolves when the host says worker `pid` is ready (at once if it already did). */
const readyOf = (host: AgentHost, seen: { readyOrder: number[] }, pid: number) =>
  seen.readyOrder.includes(pid)
    ? Promise.resolve()
    : new Promise<void>((resolve) => host.on('worker.ready', (ready) => ready.pid === pid && resolve()));

describe('agent host', () => {
  let nats: NatsFixture;
  beforeAll(async () => {
    nats = await startNats();
  });
  afterAll(async () => {
    await nats.stop();
  });
  /** A host on the suite's NATS with one evaluate worker answering from this script. */
  const evaluateHost = (script: string) =>
    createAgentHost({
      natsUrl: nats.server.url,
      roles: ['evaluate'],
      pool: 1,
      model: { provider: 'scripted', script },
    });

  it('stops promptly when SIGTERM reaches workers mid-boot (connecting, warming up), leaving none behind', async () => {
    // A server that accepts connections and never speaks NATS: every worker is stuck connecting.
    const silent = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as AddressInfo;
    const host = createAgentHost({
      natsUrl: `nats://127.0.0.1:${port}`,
      roles: ['evaluate', 'revise'],
      pool: 2,
      bootConcurrency: 4,
      model,
    });
    const spawned = host.workerPids();
    expect(spawned).toHaveLength(4);
    let started = 0;
    await new Promise<void>((resolve) => host.on('worker.started', () => (started += 1) === 4 && resolve()));
    // Workers run on the host's own node (Node 24 from setup), not whatever `node` the PATH finds.
    for (const pid of spawned) expect(realpathSync(`/proc/${pid}/exe`)).toBe(realpathSync(process.execPath));
    let ready = 0;
    host.on('worker.ready', () => (ready += 1));
    const exits: (NodeJS.Signals | null)[] = [];
    host.on('worker.exited', ({ signal }) => exits.push(signal));
    // Were the workers to wait out their connection, the host would have to kill them after the grace.
    await host.stop({ graceMs: 10_000 });
    expect(ready).toBe(0);
    expect(exits).toEqual([null, null, null, null]);
    expect(host.workerPids()).toEqual([]);
    for (const pid of spawned) expect(() => process.kill(pid, 0)).toThrow();
    silent.close();
  });

  it('with no idle worker left (pool 1), replaces a worker while its task waits on its model, not when it exits', async () => {
    const { script, release } = heldScript('polish-host-');
    const host = evaluateHost(script);
    try {
      await host.ready;
      const taken = new Promise<number>((resolve) => host.once('task.taken', ({ pid }) => resolve(pid)));
      const dispatcher = createNatsDispatcher({ connection: nats.connection });
      const answered = dispatcher.dispatch('evaluate', {
        artifact: 'Each key may send 100 requests per minute.',
        criteria,
      });
      const holder = await taken;
      // Its successor is booted and ready while the holder still has the task ("model" held).
      const replaced = await new Promise<{ pid: number; steps?: BootSteps }>((resolve) =>
        host.on('worker.ready', (ready) => ready.pid !== holder && resolve(ready)),
      );
      // It says where its boot went: every step measured (the clocks are the two processes').
      expect(Object.keys(replaced.steps ?? {}).sort()).toEqual([
        'code',
        'connect',
        'cpuMs',
        'nats',
        'node',
        'queue',
        'warmUp',
      ]);
      // (code is 0 for a worker restored from the startup snapshot: its code is in the heap it starts with).
      for (const value of Object.values(replaced.steps ?? {})) expect(value).toBeGreaterThanOrEqual(0);
      expect(replaced.steps?.node).toBeGreaterThan(0);
      expect(replaced.steps?.cpuMs).toBeGreaterThan(0);
      expect(replaced.pid).not.toBe(holder);
      expect(host.workerPids()).toContain(holder);
      writeFileSync(release, '');
      expect((await answered).worker.pid).toBe(holder);
      await dispatcher.close?.();
    } finally {
      writeFileSync(release, '');
      await host.stop();
    }
  });

  it('names the task in its crash report when a worker is killed as it takes it, so the task is handed out again at once', async () => {
    // Without the report the task would wait out its lease. (A worker that dies by itself right
    // after its notice: the next test.)
    const dispatcher = createNatsDispatcher({ connection: nats.connection });
    const payload = { artifact: 'Each key may send 100 requests per minute.', criteria };
    try {
      for (let kill = 0; kill < 3; kill += 1) {
        const { script, release } = heldScript('polish-crash-');
        const host = evaluateHost(script);
        const crashed = new Promise<string>((resolve) =>
          nats.connection.subscribe(crashSubject('evaluate'), {
            max: 1,
            callback: (_error, message) => resolve(message.json<{ taskId: string }>().taskId),
          }),
        );
        // The worker publishes "taken" just before it tells its host: kill it as soon as it does.
        let killedTask: string | undefined;
        const taken = nats.connection.subscribe(progressSubject('evaluate', '*'), {
          callback: (_error, message) => {
            const progress = message.json<{
              taskId: string;
              state: string;
              delivery: number;
              worker: { pid: number };
            }>();
            if (progress.state !== 'taken' || progress.delivery !== 1) return;
            process.kill(progress.worker.pid, 'SIGKILL');
            killedTask = progress.taskId;
          },
        });
        try {
          await nats.connection.flush();
          await host.ready;
          const answered = dispatcher.dispatch('evaluate', payload);
          const crashedTask = await crashed;
          writeFileSync(release, '');
          expect(crashedTask).toBe(killedTask);
          // Handed out again at once, to the next worker, which answers.
          expect((await answered).attempts).toBe(2);
        } finally {
          taken.unsubscribe();
          writeFileSync(release, '');
          await host.stop();
        }
      }
    } finally {
      await dispatcher.close?.();
    }
  });

  it('names the task in its crash report when a worker dies by itself just after telling its host it took it', async () => {
    // Fault injection in a real worker: a preload makes it kill itself once its "taken" notice is
    // written to the IPC channel, so its death and the notice reach the host together. (Handling
    // the death on 'exit' instead of 'close' passes here too: Node emits the notice before it runs
    // the exit's callback, which follows it in the pipe; it did even with this process held still
    // until the worker was a zombie with its notice written, so that both waited for the loop
    // together (tried on 2026-12-05, not kept). 'close' does not rely on that order.)
    const scratch = mkdtempSync(join(tmpdir(), 'polish-dies-'));
    const dies = join(scratch, 'dies-after-taken.cjs');
    writeFileSync(
      dies,
      [
        'if (process.env.POLISH_WORKER_CONFIG && process.send) {',
        '  const send = process.send.bind(process);',
        '  process.send = (message, handle, options, callback) =>',
        "    send(message, handle, options, message && message.type === 'task.taken'",
        "      ? () => process.kill(process.pid, 'SIGKILL') : callback);",
        '}',
        '',
      ].join('\n'),
    );
    const answer = join(scratch, 'answer.json');
    writeFileSync(answer, JSON.stringify({ evaluate: [{ answer: { scores } }] }));
    const dispatcher = createNatsDispatcher({ connection: nats.connection });
    const payload = { artifact: 'Each key may send 100 requests per minute.', criteria };
    try {
      for (let death = 0; death < 3; death += 1) {
        const host = createAgentHost({
          natsUrl: nats.server.url,
          roles: ['evaluate'],
          pool: 1,
          model: { provider: 'scripted', script: answer },
          env: { NODE_OPTIONS: `--require ${dies}` },
        });
        const crashes: string[] = [];
        const crashed = nats.connection.subscribe(crashSubject('evaluate'), {
          callback: (_error, message) => {
            crashes.push(message.json<{ taskId: string }>().taskId);
          },
        });
        const taken: string[] = [];
        const progress = nats.connection.subscribe(progressSubject('evaluate', '*'), {
          callback: (_error, message) => {
            const notice = message.json<{ taskId: string; state: string }>();
            if (notice.state === 'taken') taken.push(notice.taskId);
          },
        });
        const exited = new Promise<{ signal: string | null; crashed: boolean }>((resolve) =>
          host.once('worker.exited', resolve),
        );
        try {
          await nats.connection.flush();
          await host.ready;
          // Handed out once: every worker here dies after its take.
          const failed = dispatcher.dispatch('evaluate', payload, { maxAttempts: 1 });
          failed.catch(() => undefined);
          expect(await exited).toMatchObject({ signal: 'SIGKILL', crashed: true });
          await expect(failed).rejects.toThrow(/worker .*(died|crash)/i);
          expect(taken).toHaveLength(1);
          expect(crashes).toEqual(taken);
        } finally {
          progress.unsubscribe();
          crashed.unsubscribe();
          await host.stop();
        }
      }
    } finally {
      await dispatcher.close?.();
      rmSync(scratch, { recursive: true, force: true });
    }
  });

  it('boots a replacement beside a task only once it waits on its model, or after an instant answer', async () => {
    const dispatcher = createNatsDispatcher({ connection: nats.connection });
    const payload = { artifact: 'Each key may send 100 requests per minute.', criteria };
    const instant = join(mkdtempSync(join(tmpdir(), 'polish-instant-')), 'instant.json');
    writeFileSync(instant, JSON.stringify({ evaluate: [{ answer: { scores } }] }));
    const held = heldScript('polish-waits-');
    for (const [script, release, pool] of [
      [instant, undefined, 2],
      [held.script, held.release, 2],
      // No idle worker left: the successor still waits for an instant answer (a next task waits for a boot anyway).
      [instant, undefined, 1],
    ] as const) {
      // With two, the one that does not take the task keeps the role served meanwhile.
      const host = createAgentHost({
        natsUrl: nats.server.url,
        roles: ['evaluate'],
        pool,
        // The instant answer is told from a long one by what it does, not by a race with the grace.
        successorGraceMs: 60_000,
        model: { provider: 'scripted', script },
      });
      try {
        await host.ready;
        const before = host.workerPids();
        const holder = new Promise<number>((resolve) => host.once('task.taken', ({ pid }) => resolve(pid)));
        const newcomer = new Promise<number>((resolve) =>
          host.on('worker.ready', ({ pid }) => !before.includes(pid) && resolve(pid)),
        );
        // Who is alive when the answer is given: no successor yet beside an instant answer.
        const aliveAtAnswer = new Promise<number[]>((resolve) =>
          host.once('task.done', () => resolve(host.workerPids())),
        );
        const answered = dispatcher.dispatch('evaluate', payload);
        if (release) {
          // The task waits on its (held) model: its successor boots and is ready while it waits.
          await holder;
          await newcomer;
          expect(host.workerPids()).toContain(await holder);
          writeFileSync(release, '');
          await answered;
        } else {
          await answered;
          expect((await aliveAtAnswer).sort()).toEqual([...before].sort());
          // With pool 2 the successor was postponed (the role kept an idle worker): the host, quiet
          // now, boots it all the same.
          await newcomer;
        }
      } finally {
        if (release) writeFileSync(release, '');
        await host.stop();
      }
    }
    await dispatcher.close?.();
  });

  it('postpones the successor of an instant answer while tasks keep coming and the role has an idle worker', async () => {
    const dispatcher = createNatsDispatcher({ connection: nats.connection });
    const payload = { artifact: 'Each key may send 100 requests per minute.', criteria };
    const instant = join(mkdtempSync(join(tmpdir(), 'polish-postponed-')), 'instant.json');
    writeFileSync(instant, JSON.stringify({ evaluate: [{ answer: { scores } }, { answer: { scores } }] }));
    const host = createAgentHost({
      natsUrl: nats.server.url,
      roles: ['evaluate'],
      pool: 2,
      // Never quiet long enough within the test: only a role left without an idle worker releases it.
      successorQuietMs: 60_000,
      successorGraceMs: 60_000,
      model: { provider: 'scripted', script: instant },
    });
    try {
      await host.ready;
      const before = host.workerPids();
      const newcomer = (pid: number) => !before.includes(pid);
      // The host has handled the first answer (a boot it starts there forks before this resolves).
      const firstDone = new Promise<void>((resolve) => host.once('task.done', () => resolve()));
      const first = await dispatcher.dispatch('evaluate', payload);
      await firstDone;
      expect(host.workerPids().filter(newcomer)).toEqual([]);
      // The second task is taken by the worker that stayed idle; until then no boot ran beside it.
      const forkedAtSecondTake = new Promise<number[]>((resolve) =>
        host.once('task.taken', () => resolve(host.workerPids().filter(newcomer))),
      );
      const newcomers = new Promise<void>((resolve) => {
        const ready = new Set<number>();
        host.on('worker.ready', ({ pid }) => {
          if (newcomer(pid)) ready.add(pid);
          if (ready.size === 2) resolve();
        });
      });
      const second = await dispatcher.dispatch('evaluate', payload);
      expect(await forkedAtSecondTake).toEqual([]);
      expect(second.worker.pid).not.toBe(first.worker.pid);
      expect(before).toEqual(expect.arrayContaining([first.worker.pid, second.worker.pid]));
      // With no idle worker left both successors boot: the pool is whole again.
      await newcomers;
      expect(host.workerPids()).toHaveLength(2);
    } finally {
      await host.stop();
      await dispatcher.close?.();
    }
  });

  it.each([
    {
      pool: 2,
      reuse: 1,
      maxWorkers: 8,
      exitsAtLowPriority: true,
      lowered: [true],
      why: 'another worker idle: lowered',
    },
    { pool: 2, reuse: 1, maxWorkers: 8, exitsAtLowPriority: false, lowered: [false], why: 'turned off' },
    { pool: 1, reuse: 1, maxWorkers: 8, exitsAtLowPriority: true, lowered: [false], why: 'no idle worker left' },
    {
      pool: 1,
      reuse: 2,
      maxWorkers: 1,
      exitsAtLowPriority: true,
      lowered: [false, false],
      why: 'not its last task; then its last, no idle worker left',
    },
    {
      pool: 2,
      reuse: 1,
      maxWorkers: 2,
      exitsAtLowPriority: true,
      lowered: [false],
      why: 'the host at its process limit',
    },
  ])(
    'lowers a worker that answered its last task to the lowest priority for its exit only where its place is not wanted: pool $pool, reuse $reuse, max $maxWorkers, $why',
    async ({ pool, reuse, maxWorkers, exitsAtLowPriority, lowered: expected }) => {
      const dispatcher = createNatsDispatcher({ connection: nats.connection });
      const payload = { artifact: 'Each key may send 100 requests per minute.', criteria };
      const two = join(mkdtempSync(join(tmpdir(), 'polish-exit-nice-')), 'two.json');
      writeFileSync(two, JSON.stringify({ evaluate: [{ answer: { scores } }, { answer: { scores } }] }));
      const host = createAgentHost({
        natsUrl: nats.server.url,
        roles: ['evaluate'],
        pool,
        reuse,
        maxWorkers,
        exitsAtLowPriority,
        // The successor waits for the answer however long it takes: no worker of the role turns idle before it.
        successorGraceMs: 60_000,
        model: { provider: 'scripted', script: two },
      });
      // Read when it happens: the host has not reaped the worker yet (it is alive, or a zombie
      // whose /proc entry still says its nice value); 'gone' should it ever be (a failure, not a crash).
      const threadsOf = (pid: number): number[] | 'gone' => {
        try {
          return nices(pid).threads;
        } catch {
          return 'gone';
        }
      };
      const events: { pid: number; nice: number; threads: number[] | 'gone' }[] = [];
      host.on('worker.priority', ({ pid, nice, why }) => {
        if (why === 'exiting') events.push({ pid, nice, threads: threadsOf(pid) });
      });
      const atDone: { pid: number; threads: number[] | 'gone' }[] = [];
      host.on('task.done', ({ pid }) => atDone.push({ pid, threads: threadsOf(pid) }));
      try {
        await host.ready;
        const normal = getPriority();
        const pids: number[] = [];
        for (const count of expected.keys()) {
          const done = new Promise<void>((resolve) => host.on('task.done', () => atDone.length > count && resolve()));
          const [reply] = await Promise.all([dispatcher.dispatch('evaluate', payload), done]);
          pids.push(reply.worker.pid);
        }
        // One worker served them all.
        expect(new Set(pids).size).toBe(1);
        expect(atDone.map(({ pid }) => pid)).toEqual(pids);
        // Every thread at the lowest priority when the host says the task is done, or all at the host's.
        expect(
          atDone.map(({ threads }) =>
            threads === 'gone'
              ? threads
              : threads.every((nice) => nice === RESERVE_NICE)
                ? true
                : threads.every((nice) => nice === normal)
                  ? false
                  : threads,
          ),
        ).toEqual(expected);
        // Read a moment apart from the ones above (threads of an exiting worker end meanwhile).
        expect(
          events.map(({ pid, nice, threads }) => ({
            pid,
            nice,
            lowest: threads !== 'gone' && threads.length > 0 && threads.every((value) => value === RESERVE_NICE),
          })),
        ).toEqual(
          expected.flatMap((low, index) => (low ? [{ pid: pids[index], nice: RESERVE_NICE, lowest: true }] : [])),
        );
        // The host's own priority is untouched.
        expect(niceOf(process.pid)).toBe(normal);
      } finally {
        await host.stop();
        await dispatcher.close?.();
      }
    },
  );

  it('boots the successor of a worker whose answer stays on the CPU past the grace, before it answers', async () => {
    const dispatcher = createNatsDispatcher({ connection: nats.connection });
    const busy = join(mkdtempSync(join(tmpdir(), 'polish-busy-')), 'busy.json');
    writeFileSync(busy, JSON.stringify({ evaluate: [{ answer: { scores }, busy_ms: 3_000 }] }));
    const host = createAgentHost({
      natsUrl: nats.server.url,
      roles: ['evaluate'],
      pool: 1,
      successorGraceMs: 100,
      model: { provider: 'scripted', script: busy },
    });
    try {
      await host.ready;
      const before = host.workerPids();
      const aliveAtAnswer = new Promise<number[]>((resolve) =>
        host.once('task.done', () => resolve(host.workerPids())),
      );
      const answered = dispatcher.dispatch('evaluate', {
        artifact: 'Each key may send 100 requests per minute.',
        criteria,
      });
      // The handler never waits on I/O, so only the grace lets its successor start beside it.
      const alive = await aliveAtAnswer;
      expect(alive).toEqual(expect.arrayContaining(before));
      expect(alive.filter((pid) => !before.includes(pid))).toHaveLength(1);
      expect((await answered).worker.pid).toBe(before[0]);
    } finally {
      await host.stop();
      await dispatcher.close?.();
    }
  });

  /**
   * One worker run in this process on a queue of its own (prefix: no other test's worker pulls
   * from it), calling `onReady` with the queue's consumer figures when it says it is ready.
   */
  const runOwnWorker = async (prefix: string, onReady: (info: ConsumerInfo, stop: AbortController) => void) => {
    await openTaskQueue(nats.connection, { prefix });
    const queue = taskQueueOf('evaluate', undefined, prefix);
    const manager = await jetstreamManager(nats.connection);
    const stop = new AbortController();
    const notify = async (notice: WorkerNotice) => {
      if (notice.type === 'ready') onReady(await manager.consumers.info(queue.stream, queue.consumer), stop);
    };
    const config = { natsUrl: nats.server.url, prefix, role: 'evaluate' as const, reuse: 1, model };
    const running = runWorker(config, { notify, stop: stop.signal, pulling: () => undefined });
    return { queue, manager, running, stop };
  };

  it('a worker says it is ready only once its first pull waits at the server', async () => {
    let pullsAtReady: number | undefined;
    const worker = await runOwnWorker('polish-ready', (info, stop) => {
      // Read before the ready notice is delivered: a task sent on "ready" finds the worker asking.
      pullsAtReady = info.num_waiting;
      stop.abort();
    });
    await worker.running;
    expect(pullsAtReady).toBe(1);
  });

  it('a worker stopped right after its first pull gives back the task that pull brought, at once', async () => {
    const prefix = 'polish-given-back';
    await openTaskQueue(nats.connection, { prefix });
    const js = jetstream(nats.connection);
    // Queued before the worker starts: its first pull brings it.
    await js.publish(taskQueueOf('evaluate', undefined, prefix).subject, JSON.stringify({ waiting: 'for a worker' }));
    const worker = await runOwnWorker(prefix, (_info, stop) => stop.abort());
    await worker.running;
    // Back in the queue now, not held until its lease runs out (30 s): the next pull gets it.
    const consumer = await js.consumers.get(worker.queue.stream, worker.queue.consumer);
    const again = await consumer.next({ expires: 10_000 });
    expect(again?.info.deliveryCount).toBe(2);
    again?.term();
  });

  it('a worker gives up a task at its deadline instead of paying for an answer nobody reads', async () => {
    const release = join(mkdtempSync(join(tmpdir(), 'polish-deadline-')), 'never-released');
    const script = join(dirname(release), 'held.json');
    writeFileSync(script, JSON.stringify({ evaluate: [{ answer: { scores: [] }, hold_until_file: release }] }));
    const host = evaluateHost(script);
    try {
      await host.ready;
      const taken = new Promise<number>((resolve) => host.once('task.taken', ({ pid }) => resolve(pid)));
      const done = new Promise<boolean>((resolve) => host.once('task.done', ({ ok }) => resolve(ok)));
      const exited = new Promise<number>((resolve) => host.once('worker.exited', ({ pid }) => resolve(pid)));
      const dispatcher = createNatsDispatcher({ connection: nats.connection, taskTimeoutMs: 300 });
      // Given back to the queue, once: with one delivery allowed, the task then fails naming why.
      const failed = dispatcher.dispatch('evaluate', { artifact: 'text', criteria }, { maxAttempts: 1 });
      failed.catch(() => undefined);
      const worker = await taken;
      await expect(failed).rejects.toThrow(
        new RegExp(
          `^evaluate task handed out 1 time without an answer; last: worker ${worker} gave it back \\(its time ran out in the worker`,
        ),
      );
      expect(await done).toBe(false);
      expect(await exited).toBe(worker);
      await dispatcher.close?.();
    } finally {
      await host.stop();
    }
  });

  it('tasks of durable runs carry an idempotency key that reveals nothing about the run', async () => {
    const seen: TaskEnvelope[] = [];
    // A protocol peer standing in for a worker: it pulls from the evaluate queue, records the
    // envelope and answers on the reply subject, as docs/protocol.md says a worker does.
    const dispatcher = createNatsDispatcher({ connection: nats.connection });
    const key = 'result.run-42.evaluate.3';
    const answered = dispatcher.dispatch('evaluate', { artifact: 'text', criteria }, { idempotencyKey: key });
    const names = taskQueueNames();
    const consumer = await jetstream(nats.connection).consumers.get(names.tasksStream, names.taskConsumer('evaluate'));
    const message = await consumer.next({ expires: 10_000 });
    const task = TaskEnvelopeSchema.parse(message?.json());
    seen.push(task);
    const scores = criteria.map((c: { id: string }) => ({ criterion_id: c.id, pass: true }));
    const reply = {
      v: 1,
      taskId: task.taskId,
      ok: true,
      result: { scores },
      usage: ZERO_USAGE,
      model: { provider: 'peer', model: 'peer', scripted: true },
      worker: { pid: 1, hostname: 'peer' },
    };
    await jetstream(nats.connection).publish(
      replySubject('evaluate', task.idempotencyKey as string),
      JSON.stringify(reply),
    );
    message?.ack();
    expect((await answered).worker.hostname).toBe('peer');
    // The same wave dispatched again (a restarted orchestrator): its answer is found, not paid again.
    const again = await dispatcher.dispatch('evaluate', { artifact: 'text', criteria }, { idempotencyKey: key });
    expect(again.worker.hostname).toBe('peer');
    expect((await consumer.info()).num_pending).toBe(0);
    await dispatcher.close?.();
    expect(seen.map((envelope) => envelope.idempotencyKey)).toEqual([createHash('sha256').update(key).digest('hex')]);
    expect(JSON.stringify(seen)).not.toContain('run-42');
  });

  it('fails its ready promise instead of respawning forever when workers cannot start', async () => {
    const host = createAgentHost({ natsUrl: 'nats://127.0.0.1:1', roles: ['evaluate'], pool: 1, model });
    await expect(host.ready).rejects.toThrow('evaluate workers keep failing to start');
    await host.stop();
  });

  it('starts workers from the startup snapshot, or from the bundle, and both answer', async () => {
    const payload = { artifact: 'Each key may send 100 requests per minute.', criteria };
    const dispatcher = createNatsDispatcher({ connection: nats.connection });
    try {
      // Where huge pages work for a restore: glibc 2.35 or later, THP on (always or madvise).
      const [major = 0, minor = 0] = (
        (process.report.getReport() as { header: { glibcVersionRuntime?: string } }).header.glibcVersionRuntime ?? ''
      )
        .split('.')
        .map(Number);
      const thp = /\[(always|madvise)\]/.test(readFileSync('/sys/kernel/mm/transparent_hugepage/enabled', 'utf8'));
      const ours =
        (major > 2 || (major === 2 && minor >= 35)) && thp
          ? 'GLIBC_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=131072'
          : undefined;
      const cases = [
        // Restored: glibc's huge pages for its restore, where they work.
        { snapshot: true, env: {}, tunables: ours },
        // Restored, the user tuning malloc: theirs alone.
        {
          snapshot: true,
          env: { GLIBC_TUNABLES: 'glibc.malloc.arena_max=2' },
          tunables: 'GLIBC_TUNABLES=glibc.malloc.arena_max=2',
        },
        { snapshot: true, env: { MALLOC_ARENA_MAX: '2' }, tunables: undefined },
        // Turned off (POLISH_WORKER_HUGEPAGES=0 in the CLI).
        { snapshot: true, env: {}, hugePages: false, tunables: undefined },
        // From the bundle: nothing added.
        { snapshot: false, env: {}, tunables: undefined },
        // V8's own young generation (POLISH_WORKER_SEMI_SPACE_MB=0 in the CLI), and a larger one.
        { snapshot: true, env: {}, tunables: ours, semiSpaceMb: 0 },
        { snapshot: false, env: {}, tunables: undefined, semiSpaceMb: 8 },
      ];
      for (const { snapshot, env, hugePages, tunables: expected, semiSpaceMb } of cases) {
        const host = createAgentHost({
          natsUrl: nats.server.url,
          roles: ['evaluate'],
          pool: 1,
          model,
          snapshot,
          env,
          ...(hugePages === undefined ? {} : { hugePages }),
          ...(semiSpaceMb === undefined ? {} : { semiSpaceMb }),
        });
        try {
          await host.ready;
          const [pid] = host.workerPids() as [number];
          // What the worker process was started with: its node flags and script.
          const commandLine = commandLineOf(pid);
          // glibc (2.36) cuts the variable at its colons, in place, as it reads it: join the pieces again.
          const tunables = /GLIBC_TUNABLES=[^\0]*(\0glibc\.[^\0]*)*/
            .exec(readFileSync(`/proc/${pid}/environ`, 'utf8'))?.[0]
            .replaceAll('\0', ':');
          expect(tunables).toBe(expected);
          if (snapshot) {
            expect(commandLine).toContain('--snapshot-blob');
            expect(commandLine[commandLine.indexOf('--snapshot-blob') + 1]).toMatch(/worker-snapshot\/worker\.blob$/);
          } else {
            expect(commandLine).not.toContain('--snapshot-blob');
          }
          expect(commandLine.at(-2)).toMatch(/worker-bundle\/worker-entry\.mjs$/);
          // A young generation it never collects in a task's life, whichever way it starts.
          const semiSpace = commandLine.filter((flag) => flag.startsWith('--min-semi-space-size'));
          expect(semiSpace).toEqual(semiSpaceMb === 0 ? [] : [`--min-semi-space-size=${semiSpaceMb ?? 2}`]);
          const reply = await dispatcher.dispatch('evaluate', payload);
          expect(reply.worker.pid).toBe(pid);
          const { scores } = reply.result as { scores: { criterion_id: string }[] };
          expect(scores.map((score) => score.criterion_id)).toEqual(criteria.map((c: { id: string }) => c.id));
        } finally {
          await host.stop();
        }
      }
    } finally {
      await dispatcher.close?.();
    }
  });

  it('leaves the young generation to the user who sizes it, and takes no bad size', () => {
    expect(youngGenerationFlags(2, [])).toEqual(['--min-semi-space-size=2']);
    expect(youngGenerationFlags(2, ['--max-semi-space-size=1'])).toEqual([]);
    expect(youngGenerationFlags(2, [], '--max-old-space-size=512 --max-semi-space-size=64')).toEqual([]);
    expect(youngGenerationFlags(2, ['--inspect'], '--max-old-space-size=512')).toEqual(['--min-semi-space-size=2']);
    for (const bad of [0, -1, 1.5, Number.NaN]) expect(youngGenerationFlags(bad, [])).toEqual([]);
  });

  it('gives every worker restored from the startup snapshot inbox names of its own', async () => {
    // The NATS client is in the snapshot's heap: a worker must not start with the build's inbox
    // prefix (two workers would then share inboxes). Each warm-up asks on a new inbox of its own.
    const warmUps: string[] = [];
    const subscription = nats.connection.subscribe('_INBOX.>', {
      callback: (_error, message) => {
        if (message.reply && /"taskId":"warm-up"/.test(message.string())) warmUps.push(message.subject);
      },
    });
    await nats.connection.flush();
    const host = createAgentHost({ natsUrl: nats.server.url, roles: ['evaluate', 'criteria'], pool: 2, model });
    try {
      await host.ready;
      for (const pid of host.workerPids()) expect(commandLineOf(pid)).toContain('--snapshot-blob');
      await nats.connection.flush();
      expect(warmUps).toHaveLength(4);
      // _INBOX.<12-character prefix><10-character sequence>
      const prefixes = new Set(warmUps.map((subject) => subject.slice('_INBOX.'.length, '_INBOX.'.length + 12)));
      expect(prefixes.size).toBe(4);
    } finally {
      subscription.unsubscribe();
      await host.stop();
    }
  });

  it('a worker restored from the startup snapshot before its task queue exists serves it once it is made', async () => {
    // The worker asks for its queue again each second, on a timer set in a restored heap. (Not
    // the regression test of the snapshot's timers: a first wait set soon enough after the
    // restore was armed even with a stale due time; the next test and the build's probe are.)
    const prefix = 'late-queue';
    // One process at most: a task waiting is not given to a second worker booted for it.
    const host = createAgentHost({
      natsUrl: nats.server.url,
      prefix,
      roles: ['evaluate'],
      pool: 1,
      maxWorkers: 1,
      model,
    });
    let dispatcher: ReturnType<typeof createNatsDispatcher> | undefined;
    try {
      // Ready comes after the worker's first look for its queue, which found none.
      await host.ready;
      const [pid] = host.workerPids() as [number];
      expect(commandLineOf(pid)).toContain('--snapshot-blob');
      const manager = await jetstreamManager(nats.connection);
      await expect(manager.streams.info(taskQueueNames(prefix).tasksStream)).rejects.toThrow(/not found/);
      // The dispatcher makes the queue.
      dispatcher = createNatsDispatcher({ connection: nats.connection, prefix });
      const reply = await dispatcher.dispatch('evaluate', {
        artifact: 'Each key may send 100 requests per minute.',
        criteria,
      });
      expect(reply.worker.pid).toBe(pid);
    } finally {
      await dispatcher?.close?.();
      await host.stop();
    }
  });

  it('a worker restored from the startup snapshot gives up on a NATS server that never answers', async () => {
    // Its connect timeout is the first timer it sets, due in 20 s. Node's timer state is in the
    // snapshot's heap: a due time left stale by a timer the build cleared (about a second into the
    // build) would leave it never armed and the worker hung for good (snapshot-entry.ts).
    const sockets: Socket[] = [];
    const silent = createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const config = {
      natsUrl: `nats://127.0.0.1:${(silent.address() as AddressInfo).port}`,
      prefix: 'silent',
      role: 'evaluate',
      reuse: 1,
      model,
    };
    const dist = `${REPO}packages/agents/dist/`;
    const worker = fork(`${dist}worker-bundle/worker-entry.mjs`, [], {
      execArgv: ['--snapshot-blob', `${dist}worker-snapshot/worker.blob`],
      env: { [WORKER_CONFIG_ENV]: JSON.stringify(config) },
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
    let stderr = '';
    worker.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    try {
      const [code] = await once(worker, 'exit');
      expect(code, stderr).toBe(1);
      expect(stderr).toMatch(/timeout/i);
      expect(sockets).toHaveLength(1);
    } finally {
      worker.kill('SIGKILL');
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
  }, 60_000);

  describe('background boots (Linux, root or CAP_SYS_NICE: raising a priority back needs it)', () => {
    const payload = { artifact: 'Each key may send 100 requests per minute.', criteria };
    const normal = getPriority();
    const unavailable = backgroundBootsUnavailable();

    /**
     * Runs `body` with a host of two evaluate workers whose tasks are held (the workers stay alive
     * to be looked at), its priorities watched, and `send` dispatching one task; then releases the
     * tasks, waits for their answers and stops the host.
     */
    async function withHeldHost(
      prefix: string,
      backgroundBoots: boolean,
      body: (run: { host: AgentHost; seen: ReturnType<typeof watchPriorities>; send: () => void }) => Promise<void>,
    ): Promise<void> {
      const { script, release } = heldScript(prefix);
      const host = createAgentHost({
        natsUrl: nats.server.url,
        roles: ['evaluate'],
        pool: 2,
        ...(backgroundBoots ? { backgroundBoots } : {}),
        model: { provider: 'scripted', script },
      });
      const seen = watchPriorities(host);
      const dispatcher = createNatsDispatcher({ connection: nats.connection });
      const answers: Promise<unknown>[] = [];
      try {
        await body({ host, seen, send: () => answers.push(dispatcher.dispatch('evaluate', payload)) });
      } finally {
        writeFileSync(release, '');
        await Promise.allSettled(answers);
        await dispatcher.close?.();
        await host.stop();
      }
    }

    /** Sends a task once the pool is ready: the replacement booted while the other worker is idle is a reserve; resolves with it once ready. */
    async function readyReserve({ host, seen, send }: Parameters<Parameters<typeof withHeldHost>[2]>[0]) {
      const reserve = new Promise<number>((resolve) =>
        host.on('worker.priority', ({ pid, why }) => why === 'reserve' && resolve(pid)),
      );
      send();
      const pid = await reserve;
      await readyOf(host, seen, pid);
      return pid;
    }

    it.skipIf(unavailable !== undefined)(
      'a reserve boots at the lowest priority, every thread, and is raised before it takes a task',
      () =>
        withHeldHost('polish-reserve-', true, async (run) => {
          const { host, seen, send } = run;
          expect(host.backgroundBoots).toBe(true);
          await host.ready;
          // The first worker is awaited by the tasks to come (no other is idle): it boots at full speed.
          const [first] = host.workerPids() as [number];
          expect(seen.started.get(first)?.threads.every((nice) => nice === normal)).toBe(true);
          // A task taken leaves an idle worker for the next one: the replacement is a reserve.
          const pid = await readyReserve(run);
          // Both idle workers take the next two tasks; one of them is the reserve, raised by then.
          const takers = new Set<number>();
          const bothTaken = new Promise<void>((resolve) =>
            host.on('task.taken', ({ pid: taker }) => takers.add(taker).size === 3 && resolve()),
          );
          for (const taker of seen.taken.keys()) takers.add(taker);
          send();
          send();
          await bothTaken;
          expect(takers).toContain(pid);
          const events = seen.events.filter((event) => event.pid === pid);
          expect(events.map(({ nice, why }) => ({ nice, why }))).toEqual([
            { nice: RESERVE_NICE, why: 'reserve' },
            { nice: normal, why: 'ready' },
          ]);
          // Lowered at the fork, every thread the process ever had (they inherit the main thread's value).
          expect(events[0]?.threads.every((nice) => nice === RESERVE_NICE)).toBe(true);
          const atStart = seen.started.get(pid);
          expect(atStart?.threads.every((nice) => nice === RESERVE_NICE)).toBe(true);
          if (
            atStart?.autogroup !== undefined &&
            readFileSync('/proc/sys/kernel/sched_autogroup_enabled', 'utf8').trim() === '1'
          )
            expect(atStart.autogroup).toBe(RESERVE_NICE);
          // When it took its task, every thread (and its own autogroup) was back at the host's priority.
          const atTask = seen.taken.get(pid);
          expect(atTask?.threads.length).toBeGreaterThan(1);
          expect(atTask?.threads.every((nice) => nice === normal)).toBe(true);
          if (atTask?.autogroup !== undefined) expect(atTask.autogroup).toBe(normal);
          // The host's own priority and group are untouched.
          expect(niceOf(process.pid)).toBe(normal);
        }),
    );

    it.skipIf(unavailable !== undefined)(
      'a task never waits for a boot when a ready reserve exists: the reserve takes it, raised',
      () =>
        withHeldHost('polish-reserve-take-', true, async (run) => {
          const { host, seen, send } = run;
          await host.ready;
          const pid = await readyReserve(run);
          // The two workers ready now are the only ones that may take the next two tasks: a task
          // that waited for a worker booted after it was sent would be taken by another pid.
          const ready = host.workerPids().filter((worker) => !seen.taken.has(worker));
          expect(ready).toHaveLength(2);
          expect(ready).toContain(pid);
          const takers: number[] = [];
          const twoTaken = new Promise<void>((resolve) =>
            host.on('task.taken', ({ pid: taker }) => takers.push(taker) === 2 && resolve()),
          );
          send();
          send();
          await twoTaken;
          expect(takers.sort()).toEqual([...ready].sort());
        }),
    );

    it.skipIf(unavailable !== undefined)(
      'polish worker --background-boots --boot-concurrency 1 boots the pool one by one, the second a reserve; by default none',
      async () => {
        const script = `${REPO}examples/demo/script.yaml`;
        const args = ['--roles', 'evaluate', '--pool', '2', '--boot-concurrency', '1', '--script', script];
        const background = await startHost(nats.server.url, [...args, '--background-boots']);
        await stop(background);
        // One boot at a time: the second worker boots while the first is idle, so in the background.
        const reserves = background.lines.filter((line) =>
          / \(evaluate\) boots in the background: nice 19$/.test(line),
        );
        expect(reserves).toHaveLength(1);
        expect(background.lines.some((line) => line.includes('background boots off'))).toBe(false);
        // The default, and what --no-background-boots asks for.
        const foreground = await startHost(nats.server.url, args);
        await stop(foreground);
        expect(foreground.lines.filter((line) => line.includes('boots in the background'))).toEqual([]);
        expect(foreground.lines).toContain('polish worker: background boots off: replacements boot at normal priority');
      },
    );

    it('by default (--no-background-boots) every worker boots and answers at normal priority', () =>
      withHeldHost('polish-foreground-', false, async ({ host, seen, send }) => {
        expect(host.backgroundBoots).toBe(false);
        await host.ready;
        // The replacement booted while the other worker is idle: a reserve, were background boots on.
        const replacement = new Promise<number>((resolve) =>
          host.on('worker.started', ({ pid }) => !seen.taken.has(pid) && resolve(pid)),
        );
        const first = host.workerPids();
        send();
        const pid = await replacement;
        expect(first).not.toContain(pid);
        await readyOf(host, seen, pid);
        const taken = new Promise<void>((resolve) => host.on('task.taken', () => seen.taken.size === 3 && resolve()));
        send();
        send();
        await taken;
        expect(seen.events).toEqual([]);
        for (const nice of [...seen.started.values(), ...seen.taken.values()]) {
          expect(nice.threads.every((value) => value === normal)).toBe(true);
          if (nice.autogroup !== undefined) expect(nice.autogroup).toBe(0);
        }
        expect(seen.started.get(pid)?.threads.length).toBeGreaterThan(0);
      }));
  });
});
