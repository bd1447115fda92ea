import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createInProcessDispatcher,
  createNatsDispatcher,
  openTaskQueue,
  startPolish as startRun,
  type NatsDispatcherOptions,
} from '@polish/orchestrator';
import { createScriptedProvider, handleTask, loadScriptFile } from '@polish/agents';
import { jetstream } from '@nats-io/jetstream';
import {
  RunResultSchema,
  TaskEnvelopeSchema,
  replySubject,
  taskQueueOf,
  type RunEvent,
  type RunResult,
  type RunSpecInput,
} from '@polish/protocol';
import { foreignReply } from './support/foreign-reply.js';
import { startNats, type NatsFixture } from './support/nats.js';
import { heldScript as held } from './support/held-script.js';
import { processesTagged, startHost, startPolish, stop, workerArgs } from './support/processes.js';
import { DEMO_SPEC, demoRunOnNatsArgs, DEMO_TASK_ROLES, runOutcome } from './support/demo.js';

const demo = 'examples/demo';
const criteria = JSON.parse(readFileSync(`${demo}/criteria.json`, 'utf8'));
const scratch = mkdtempSync(join(tmpdir(), 'polish-nats-test-'));

const heldScript = () => held(`${demo}/script.yaml`, scratch);

describe('agents as single-use worker processes over NATS', () => {
  let nats: NatsFixture;
  let undisturbed: RunResult;

  beforeAll(async () => {
    nats = await startNats();
    // The undisturbed outcome, in process with the same script: the reference for the fault tests.
    const model = createScriptedProvider(loadScriptFile(`${demo}/script.yaml`));
    undisturbed = await startRun(DEMO_SPEC, {
      dispatcher: createInProcessDispatcher((task) => handleTask(task, model)),
    }).result;
  });
  afterAll(async () => {
    await nats.stop();
  });

  async function run(input: RunSpecInput, options: Partial<NatsDispatcherOptions> = {}) {
    const events: RunEvent[] = [];
    const dispatcher = createNatsDispatcher({ connection: nats.connection, ...options });
    const result = await startRun(input, { dispatcher, onEvent: (event) => events.push(event) }).result.finally(() =>
      dispatcher.close?.(),
    );
    const answers = events.flatMap((event) => (event.type === 'wave.finished' ? [event] : []));
    return { result, events, answers };
  }

  it('runs the whole loop over NATS, every task in a different worker process', async () => {
    // Three per role: with an instant scripted model, tasks come faster than a replacement boots.
    const host = await startHost(nats.server.url, ['--pool', '3', '--script', `${demo}/script.yaml`]);
    try {
      const { result, answers } = await run(DEMO_SPEC);
      expect(runOutcome(result)).toEqual(runOutcome(undisturbed));
      expect(result.status).toBe('CONVERGED');
      expect(result.iterations).toBe(3);
      expect(answers.map((answer) => answer.role)).toEqual(DEMO_TASK_ROLES);
      const pids = answers.map((answer) => answer.worker.pid);
      expect(new Set(pids).size).toBe(pids.length);
      expect(pids).not.toContain(process.pid);
      for (const pid of pids) await host.workerReady(pid);
      expect(answers.map((answer) => answer.attempts)).toEqual([1, 1, 1, 1, 1, 1]);
    } finally {
      await stop(host);
    }
  });

  it('completes with the same result when a worker holding an evaluate task is killed with SIGKILL', async () => {
    const held = heldScript();
    const host = await startHost(nats.server.url, ['--pool', '1', '--script', held.script]);
    try {
      // Recovery comes from the host's crash notice (the task is handed out again at once), not
      // from its lease running out: the run's events say the task was given back for SIGKILL.
      const running = run(DEMO_SPEC);
      const [, pid] = await host.waitFor(/^worker (\d+) \(evaluate\) took task/);
      process.kill(Number(pid), 'SIGKILL');
      await host.waitFor(new RegExp(`^worker ${pid} \\(evaluate\\) died \\(SIGKILL\\); replacing it`));
      held.release();
      const { result, answers, events } = await running;
      expect(runOutcome(result)).toEqual(runOutcome(undisturbed));
      expect(answers.find((answer) => answer.role === 'evaluate')?.attempts).toBe(2);
      expect(
        events
          .filter((event) => event.type === 'task.released')
          .map((event) => event.type === 'task.released' && event.reason),
      ).toEqual(['SIGKILL']);
      expect(answers.map((answer) => answer.worker.pid)).not.toContain(Number(pid));
    } finally {
      await stop(host);
    }
  });

  it('a lane worker killed holding a judge’s task: handed out again at once, in its lane, by the host’s crash notice', async () => {
    const held = heldScript();
    // The judge's model, as `laneModelOf` names a script's (its file name without extension).
    const judgeModel = `scripted:${basename(held.script, '.json')}`;
    const lane = await startHost(nats.server.url, [
      '--roles',
      'evaluate',
      '--pool',
      '1',
      '--evaluator-model',
      `scripted:${held.script}`,
      '--lane',
    ]);
    const rest = await startHost(
      nats.server.url,
      workerArgs({ roles: ['criteria', 'revise'], pool: 1, script: `${demo}/script.yaml` }),
    );
    try {
      const running = run({ ...DEMO_SPEC, judge_models: [judgeModel] });
      const [, pid] = await lane.waitFor(/^worker (\d+) \(evaluate\) took task/);
      process.kill(Number(pid), 'SIGKILL');
      await lane.waitFor(new RegExp(`^worker ${pid} \\(evaluate\\) died \\(SIGKILL\\); replacing it`));
      held.release();
      const { result, answers, events } = await running;
      expect(runOutcome(result)).toEqual(runOutcome(undisturbed));
      // Given back for the kill (the crash notice of a lane task was routed), not after its lease.
      expect(
        events
          .filter((event) => event.type === 'task.released')
          .map((event) => event.type === 'task.released' && event.reason),
      ).toEqual(['SIGKILL']);
      const judged = answers.filter((answer) => answer.role === 'evaluate');
      expect(judged[0]?.attempts).toBe(2);
      // Every evaluation was the lane host's, none by the killed worker.
      for (const answer of judged) await lane.workerReady(answer.worker.pid);
      expect(judged.map((answer) => answer.worker.pid)).not.toContain(Number(pid));
    } finally {
      await Promise.all([stop(lane), stop(rest)]);
    }
  });

  it('a task answered twice (a redelivered task both workers finished): the first answer is used, the second ignored', async () => {
    // The evaluator here is a protocol peer in this process: it takes the first evaluation and
    // replies twice, passing everything first, then failing everything.
    await openTaskQueue(nats.connection);
    const rest = await startHost(
      nats.server.url,
      workerArgs({ roles: ['criteria', 'revise'], pool: 1, script: `${demo}/script.yaml` }),
    );
    try {
      const running = run(DEMO_SPEC);
      const queue = taskQueueOf('evaluate');
      const js = jetstream(nats.connection);
      const message = await (await js.consumers.get(queue.stream, queue.consumer)).next({ expires: 60_000 });
      expect(message).not.toBeNull();
      const task = TaskEnvelopeSchema.parse(JSON.parse(new TextDecoder().decode(message?.data)));
      const evidence = ['100 requests per minute', 'Our API has a rate limiter', 'so please be reasonable'];
      const first = ['C1', 'C2', 'C3'].map((id, index) => ({
        criterion_id: id,
        pass: true,
        evidence: evidence[index],
      }));
      const second = ['C1', 'C2', 'C3'].map((id) => ({ criterion_id: id, pass: false, gap: `${id} is missing.` }));
      for (const scores of [first, second])
        await js.publish(
          replySubject('evaluate', task.idempotencyKey as string),
          JSON.stringify(foreignReply(task, { scores })),
        );
      message?.ack();
      const { result } = await running;
      expect([result.status, result.iterations]).toEqual(['CONVERGED', 1]);
      expect(result.history[0]?.scores).toEqual(first);
    } finally {
      await stop(rest);
    }
  });

  it('ends FAILED naming the role when no worker serves it, within the configured wait', async () => {
    const host = await startHost(
      nats.server.url,
      workerArgs({ roles: ['criteria', 'revise'], pool: 1, script: `${demo}/script.yaml` }),
    );
    try {
      const { result, events } = await run({ ...DEMO_SPEC, criteria }, { workerWaitMs: 1_000 });
      // It did wait for workers before giving up (a lower bound only: no timing threshold).
      const started = events.find((event) => event.type === 'wave.started')?.at ?? 0;
      const finished = events.find((event) => event.type === 'run.finished')?.at ?? 0;
      expect(finished - started).toBeGreaterThanOrEqual(1_000);
      expect(result.status).toBe('FAILED');
      if (result.status !== 'FAILED') return;
      expect(result.code).toBe('NO_RESPONDERS');
      expect(result.reason).toBe('no evaluate workers pulled tasks within 1 s (nobody serves polish.v1.task.evaluate)');
      expect(result.artifact).toBe(DEMO_SPEC.artifact);
    } finally {
      await stop(host);
    }
  });

  it('with --reuse, one process serves several tasks in turn, never more than N', async () => {
    const host = await startHost(nats.server.url, ['--pool', '1', '--reuse', '2', '--script', `${demo}/script.yaml`]);
    try {
      const { result, answers } = await run(DEMO_SPEC);
      expect(runOutcome(result)).toEqual(runOutcome(undisturbed));
      const tasksPerPid = new Map<number, number>();
      for (const answer of answers) tasksPerPid.set(answer.worker.pid, (tasksPerPid.get(answer.worker.pid) ?? 0) + 1);
      expect(Math.max(...tasksPerPid.values())).toBe(2);
      expect(answers.filter((answer) => answer.role === 'evaluate').map((answer) => answer.worker.pid)).toHaveLength(3);
    } finally {
      await stop(host);
    }
  });

  it('spreads tasks over two hosts on the same NATS', async () => {
    const first = await startHost(nats.server.url, ['--pool', '2', '--script', `${demo}/script-stubborn.yaml`]);
    const second = await startHost(nats.server.url, ['--pool', '2', '--script', `${demo}/script-stubborn.yaml`]);
    try {
      // 16 tasks (1 + 8 evaluations + 7 revisions): all on one host has odds of about 1 in 30,000.
      const { result, answers } = await run({ ...DEMO_SPEC, cap: 8 });
      expect(result.status).toBe('CAP_REACHED');
      const pids = answers.map((answer) => answer.worker.pid);
      expect(pids).toHaveLength(16);
      // Each host ran at least one of them.
      await Promise.any(pids.map((pid) => first.workerReady(pid)));
      await Promise.any(pids.map((pid) => second.workerReady(pid)));
    } finally {
      await Promise.all([stop(first), stop(second)]);
    }
  });

  it('loses no task when a host is shut down gracefully mid-run', async () => {
    const held = heldScript();
    const draining = await startHost(nats.server.url, ['--pool', '1', '--script', held.script]);
    const running = run(DEMO_SPEC);
    const [, pid, taskId] = await draining.waitFor(/^worker (\d+) \(evaluate\) took task (\S+)/);
    draining.child.kill('SIGTERM');
    await draining.waitFor(/SIGTERM: draining/);
    const successor = await startHost(nats.server.url, ['--pool', '1', '--script', held.script]);
    held.release();
    try {
      expect(await draining.exited).toEqual({ code: 0, signal: null });
      const drainedAt = draining.lines.findIndex((line) => line.includes('SIGTERM: draining'));
      const answeredAt = draining.lines.indexOf(`worker ${pid} (evaluate) answered task ${taskId} (ok)`);
      expect(drainedAt).toBeGreaterThan(-1);
      expect(answeredAt).toBeGreaterThan(drainedAt);
      const { result, answers } = await running;
      expect(runOutcome(result)).toEqual(runOutcome(undisturbed));
      // The task in hand was answered by the draining worker on its first dispatch: not lost, not redone.
      expect(answers.find((answer) => answer.role === 'evaluate')).toMatchObject({
        attempts: 1,
        worker: { pid: Number(pid) },
      });
      await Promise.any(answers.map((answer) => successor.workerReady(answer.worker.pid)));
    } finally {
      await stop(successor);
    }
  });
});

describe('polish run/demo with embedded NATS (real processes)', () => {
  it('polish demo starts nats-server and workers, converges, and leaves no process behind', async () => {
    const tag = randomUUID();
    const demoRun = startPolish(['demo', '--state-dir', join(scratch, 'state'), '--json'], { POLISH_TEST_TAG: tag });
    expect(await demoRun.exited).toEqual({ code: 0, signal: null });
    expect(demoRun.lines.join('\n')).toMatch(/started nats-server \(pid \d+\) on nats:\/\/127\.0\.0\.1:\d+/);
    expect(demoRun.lines.join('\n')).toContain('3 worker processes ready');
    const result = RunResultSchema.parse(JSON.parse(demoRun.stdout()));
    expect([result.status, result.iterations]).toEqual(['CONVERGED', 3]);
    // One worker process per task (issue 22): 1 criteria, 3 evaluate and 2 revise tasks, each
    // answered by a process that served no other.
    const answeredBy = demoRun.lines.flatMap((line) => {
      const match = /^ {2}(\S+) answered by process (\d+)/.exec(line);
      return match ? [{ role: match[1], pid: Number(match[2]) }] : [];
    });
    expect(answeredBy.map((answer) => answer.role)).toEqual(DEMO_TASK_ROLES);
    expect(new Set(answeredBy.map((answer) => answer.pid)).size).toBe(answeredBy.length);
    expect(processesTagged(tag)).toEqual([]);
  });

  it('Ctrl-C twice cancels an embedded run: exit 5, and nothing left running', async () => {
    const tag = randomUUID();
    const running = startPolish(
      [
        'run',
        `${demo}/artifact.md`,
        '--goal',
        'g',
        '--script',
        heldScript().script,
        '--state-dir',
        join(scratch, 'state'),
      ],
      { POLISH_TEST_TAG: tag },
    );
    await running.waitFor(/^iteration 1: wave 2, evaluating/);
    running.child.kill('SIGINT');
    running.child.kill('SIGINT');
    expect(await running.exited).toEqual({ code: 5, signal: null });
    expect(running.lines).toContain('polish: CANCELLED: interrupted by SIGINT');
    expect(processesTagged(tag)).toEqual([]);
  });

  it('workers that cannot start are a setup error (exit 6), with nothing left running', async () => {
    const tag = randomUUID();
    const crash = join(scratch, 'crash-workers.cjs');
    writeFileSync(crash, 'if (process.env.POLISH_WORKER_CONFIG) process.exit(3);\n');
    const failing = startPolish(['demo', '--state-dir', join(scratch, 'state')], {
      NODE_OPTIONS: `--require ${crash}`,
      POLISH_TEST_TAG: tag,
    });
    expect((await failing.exited).code).toBe(6);
    // Roles boot side by side (a boot per core): whichever role's workers fail first is named.
    expect(failing.lines.join('\n')).toMatch(
      /polish: cannot start: (criteria|evaluate|revise) workers keep failing to start/,
    );
    expect(processesTagged(tag)).toEqual([]);
  });

  it('a missing nats-server binary is a clear setup error (exit 6) saying how to install it', async () => {
    const missing = startPolish(['demo'], { POLISH_NATS_SERVER: join(scratch, 'no-such-nats-server') });
    expect((await missing.exited).code).toBe(6);
    expect(missing.lines.join('\n')).toContain('nats-server is not installed');
    expect(missing.lines.join('\n')).toContain('apt-get install nats-server');
  });

  it('polish run --nats uses workers started elsewhere with polish worker', async () => {
    const nats = await startNats();
    const host = await startHost(nats.server.url, ['--pool', '1', '--script', `${demo}/script.yaml`]);
    try {
      const remote = startPolish(demoRunOnNatsArgs(nats.server.url));
      expect(await remote.exited).toEqual({ code: 0, signal: null });
      expect(remote.lines).toContain(`polish: using workers on ${nats.server.url}`);
      expect(remote.lines.join('\n')).not.toContain('started nats-server');
      const result = RunResultSchema.parse(JSON.parse(remote.stdout()));
      expect(result.status).toBe('CONVERGED');
      // The host logs an answer after its worker's reply went out: drained and stopped, it has logged all.
      await stop(host);
      expect(host.lines.filter((line) => / answered task /.test(line))).toHaveLength(6);
      // Every worker says where its boot went.
      const ready = host.lines.filter((line) => / ready in /.test(line));
      expect(ready.length).toBeGreaterThanOrEqual(6);
      for (const line of ready)
        expect(line).toMatch(
          /^worker \d+ \(\w+\) ready in \d+ ms: node \d+, code \d+, nats \d+, connect \d+, warm-up \d+, queue \d+ \(\d+ ms CPU\)$/,
        );
    } finally {
      await stop(host);
      await nats.stop();
    }
  });
});
