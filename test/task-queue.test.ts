// The task queue (issue 14): a busy swarm waits for workers instead of failing, with bounded
// processes. Real nats-server, real `polish serve`, real `polish worker` hosts and their
// single-use worker processes; the model is the scripted one (with a delay where it matters).
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify as toYaml } from 'yaml';
import { createRunClient, openTaskQueue, type RunClient } from '@polish/orchestrator';
import { eventsSubject, taskQueueOf, type RunEvent } from '@polish/protocol';
import { startNats, type NatsFixture } from './support/nats.js';
import { polish } from './support/cli.js';
import { startHost, startPolish, stop, workerArgs, type WatchedProcess } from './support/processes.js';

const demo = 'examples/demo';
const scratch = mkdtempSync(join(tmpdir(), 'polish-queue-'));
const criteria = JSON.parse(readFileSync(`${demo}/criteria.json`, 'utf8')) as { id: string; text: string }[];
const goal = readFileSync(`${demo}/goal.txt`, 'utf8').trim();
const QUOTE = 'Each key may send 100 requests per minute.';
const artifact = (n: number) => `# Rate limits, run ${n}\n\n${QUOTE}\n`;

/** A scripted model whose evaluator passes every criterion, after `delayMs`, or once `release` exists. */
function passingScript(options: { delayMs?: number; release?: string }): string {
  const path = join(scratch, `script-${randomUUID()}.yaml`);
  const rule = {
    // A pass quotes the artifact (evidence is on by default): every artifact here has this sentence.
    answer: { scores: criteria.map((criterion) => ({ criterion_id: criterion.id, pass: true, evidence: QUOTE })) },
    ...(options.delayMs ? { delay_ms: options.delayMs } : {}),
    ...(options.release ? { hold_until_file: options.release } : {}),
  };
  writeFileSync(path, toYaml({ name: 'passing (scripted)', evaluate: [rule] }));
  return path;
}

async function startServe(natsUrl: string, id: string, extra: string[] = []): Promise<WatchedProcess> {
  const serve = startPolish(['serve', '--nats', natsUrl, '--id', id, ...extra]);
  await serve.waitFor(/^polish serve: ready/);
  return serve;
}

/** Every event of every run, as it is published. */
function followEvents(nats: NatsFixture) {
  const events: RunEvent[] = [];
  const waiters: { test: () => boolean; resolve: () => void }[] = [];
  nats.connection.subscribe(eventsSubject('*'), {
    callback: (_error, message) => {
      events.push(message.json<RunEvent>());
      for (const waiter of [...waiters]) {
        if (waiter.test()) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve();
        }
      }
    },
  });
  return {
    events,
    /** Resolves once `count` events of this type (matching `filter`) have been published. */
    until(type: RunEvent['type'], count: number, filter: (event: RunEvent) => boolean = () => true) {
      const test = () => events.filter((event) => event.type === type && filter(event)).length >= count;
      return test() ? Promise.resolve() : new Promise<void>((resolve) => waiters.push({ test, resolve }));
    },
  };
}

/** The host's "took task" lines: which worker took which task, at which place in the queue. */
function takes(host: WatchedProcess) {
  return host.lines.flatMap((line) => {
    const match =
      /^worker (\d+) \((\w+)\) took task \S+ key ([a-f0-9]+) \(queue #(\d+), handed out #(\d+)(?:, delivery (\d+))?\)/.exec(
        line,
      );
    if (!match) return [];
    const [, pid, role, key, queueSeq, deliverySeq, delivery] = match;
    return [
      {
        pid: Number(pid),
        role,
        key,
        queueSeq: Number(queueSeq),
        deliverySeq: Number(deliverySeq),
        delivery: Number(delivery ?? 1),
      },
    ];
  });
}

/** The most worker processes the host ever had alive, from its own count at every start and exit. */
const peakAlive = (host: WatchedProcess) =>
  Math.max(
    ...host.lines
      .flatMap((line) => /^worker \d+ \(\w+\) (?:started|exited); (\d+) alive$/.exec(line)?.[1] ?? [])
      .map(Number),
  );

describe('task queues: a busy swarm waits for workers instead of failing', () => {
  let nats: NatsFixture;
  let client: RunClient;
  beforeAll(async () => {
    nats = await startNats();
    client = createRunClient(nats.connection);
  });
  afterAll(async () => {
    await nats.stop();
  });

  it('80 concurrent runs against one host with --pool 2 --max-workers 4 all converge; never more than 4 workers; tasks taken in queue order', async () => {
    const script = passingScript({ delayMs: 150 });
    const host = await startHost(nats.server.url, ['--pool', '2', '--max-workers', '4', '--script', script]);
    const serve = await startServe(nats.server.url, 'burst', ['--worker-wait', '5']);
    const follow = followEvents(nats);
    try {
      const runIds = Array.from({ length: 80 }, () => randomUUID());
      await Promise.all(runIds.map((runId, n) => client.submit({ artifact: artifact(n), goal, criteria }, runId)));
      await follow.until('run.finished', 80);
      const finished = follow.events.filter((event) => event.type === 'run.finished');
      expect(finished.map((event) => event.type === 'run.finished' && event.status)).toEqual(
        Array(80).fill('CONVERGED'),
      );
      // Bounded: the host's own count of live worker processes never went above 4.
      expect(peakAlive(host)).toBeLessThanOrEqual(4);
      // In order: the queue handed out the evaluate tasks in the order they were queued.
      const evaluations = takes(host).filter((take) => take.role === 'evaluate');
      expect(evaluations).toHaveLength(80);
      const byHandOut = [...evaluations].sort((a, b) => a.deliverySeq - b.deliverySeq).map((take) => take.queueSeq);
      expect(byHandOut).toEqual([...byHandOut].sort((a, b) => a - b));
      // Each task once: no redelivery in an undisturbed burst, and one process per task.
      expect(evaluations.every((take) => take.delivery === 1)).toBe(true);
      expect(new Set(evaluations.map((take) => take.pid)).size).toBe(80);
      // Queue wait and work are separate figures in the events.
      const answered = follow.events.filter((event) => event.type === 'wave.finished');
      expect(answered).toHaveLength(80);
      const figures = answered.flatMap((event) => (event.type === 'wave.finished' ? [event] : []));
      expect(figures.every((event) => event.queued_ms !== undefined && (event.work_ms ?? 0) > 0)).toBe(true);
      // 80 tasks for 4 processes: most waited in the queue, and the events say so.
      expect(Math.max(...figures.map((event) => event.queued_ms ?? 0))).toBeGreaterThan(0);
      expect(follow.events.filter((event) => event.type === 'task.queued')).toHaveLength(80);
    } finally {
      await stop(serve);
      await stop(host);
    }
  }, 240_000);

  it('busy workers: the task waits, progress says it is queued, and nothing fails while the worker wait passes', async () => {
    const release = join(scratch, `release-${randomUUID()}`);
    const host = await startHost(
      nats.server.url,
      workerArgs({ roles: ['evaluate'], pool: 1, maxWorkers: 1, script: passingScript({ release }) }),
    );
    const run = (n: number) => {
      const path = join(scratch, `artifact-${n}-${randomUUID()}.md`);
      writeFileSync(path, artifact(n));
      const flags = [
        '--goal',
        goal,
        '--criteria',
        `${demo}/criteria.json`,
        '--nats',
        nats.server.url,
        '--local',
        '--worker-wait',
        '1',
      ];
      return startPolish(['run', path, ...flags]);
    };
    const first = run(1);
    const second = run(2);
    try {
      // The only worker holds one task; the other run's task waits, well past the 1 s worker wait.
      await host.waitFor(/\(evaluate\) took task/);
      const progress =
        /evaluate: waiting for a worker \((\d+) queued, (\d+) pulling, (\d+) in flight; (\d+) s so far\)/;
      const [, queued, pulling, inFlight, waited] = await Promise.race([
        first.waitFor(progress),
        second.waitFor(progress),
      ]);
      expect([queued, pulling, inFlight]).toEqual(['1', '0', '1']);
      // Reported while it still waits, past the worker wait of 1 s: busy workers are no failure.
      expect(Number(waited)).toBeGreaterThanOrEqual(1);
      writeFileSync(release, '');
      expect((await first.exited).code).toBe(0);
      expect((await second.exited).code).toBe(0);
      expect(first.lines.concat(second.lines).join('\n')).not.toContain('nobody serves');
    } finally {
      writeFileSync(release, '');
      await stop(first);
      await stop(second);
      await stop(host);
    }
  }, 120_000);

  it('kill -9 the orchestrator while 50 tasks are queued; restarted, it ends every run and runs no finished wave twice', async () => {
    const release = join(scratch, `release-${randomUUID()}`);
    const script = passingScript({ release });
    const host = await startHost(
      nats.server.url,
      workerArgs({ roles: ['evaluate'], pool: 1, maxWorkers: 1, script: script }),
    );
    const first = await startServe(nats.server.url, 'restarted');
    const follow = followEvents(nats);
    let second: WatchedProcess | undefined;
    try {
      const runIds = Array.from({ length: 51 }, () => randomUUID());
      for (const [n, runId] of runIds.entries()) await client.submit({ artifact: artifact(n), goal, criteria }, runId);
      // One task in the only worker's hands, fifty waiting in the queue.
      await follow.until('task.queued', 51);
      await host.waitFor(/\(evaluate\) took task/);
      const status = await polish(['status', '--nats', nats.server.url, '--json']);
      expect(status.code, status.stderr).toBe(0);
      const queues = JSON.parse(status.stdout).queues as {
        role: string;
        queued: number;
        pulling: number;
        in_flight: number;
      }[];
      expect(queues.find((queue) => queue.role === 'evaluate')).toMatchObject({ queued: 50, pulling: 0, in_flight: 1 });
      first.child.kill('SIGKILL');
      await first.exited;
      second = await startServe(nats.server.url, 'restarted');
      expect(second.lines.join('\n')).toContain('resumed 51 unfinished run(s)');
      writeFileSync(release, '');
      await follow.until('run.finished', 51);
      for (const runId of runIds) expect((await client.status(runId)).status).toBe('CONVERGED');
      // Every task was taken once: the restarted orchestrator re-published none as a second task,
      // and the answer of the one in hand during the crash was found in the replies stream.
      const taken = takes(host);
      expect(taken).toHaveLength(51);
      expect(new Set(taken.map((take) => take.key)).size).toBe(51);
    } finally {
      writeFileSync(release, '');
      if (second) await stop(second);
      await stop(first);
      await stop(host);
    }
  }, 180_000);

  it('a model lane nobody pulls from is removed by NATS after its idle time, and its next task makes it again', async () => {
    // A prefix of its own: the lane's stream and consumer are this test's alone.
    const queue = await openTaskQueue(nats.connection, { prefix: 'idle-lanes', laneIdleMs: 1_000 });
    const { stream, consumer } = taskQueueOf('evaluate', 'scripted_idle-judge', 'idle-lanes');
    const removed = new Promise<void>((resolve) => {
      const advisory = nats.connection.subscribe(`$JS.EVENT.ADVISORY.CONSUMER.DELETED.${stream}.${consumer}`, {
        callback: () => {
          advisory.unsubscribe();
          resolve();
        },
      });
    });
    await nats.connection.flush();
    await queue.openLane('evaluate', 'scripted_idle-judge');
    expect((await queue.manager.consumers.info(stream, consumer)).config.inactive_threshold).toBe(1_000 * 1_000_000);
    await removed;
    await expect(queue.manager.consumers.info(stream, consumer)).rejects.toThrow(/not found/);
    // The lane's next task finds it gone and makes it again (no orchestrator restart needed).
    await queue.openLane('evaluate', 'scripted_idle-judge');
    expect((await queue.manager.consumers.info(stream, consumer)).name).toBe(consumer);
    // A role's own queue is never removed for idleness.
    const own = taskQueueOf('evaluate', undefined, 'idle-lanes');
    expect((await queue.manager.consumers.info(own.stream, own.consumer)).config.inactive_threshold ?? 0).toBe(0);
  });
});
