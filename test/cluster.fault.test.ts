// Fault test for durable runs on a NATS cluster: three real nats-servers (JetStream, R3), the
// orchestrator, the workers and the submitting client each on a different node, and the
// orchestrator's node killed with SIGKILL in the middle of a run. Slow by nature (leader
// elections): part of the fault-injection group.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { createScriptedProvider, handleTask, loadScriptFile } from '@polish/agents';
import { createInProcessDispatcher, createRunClient, openRunStore, runPolish } from '@polish/orchestrator';
import { storeNames, taskQueueNames, type RunResult } from '@polish/protocol';
import { startNatsCluster, type NatsCluster } from './support/cluster.js';
import { heldScript as held } from './support/held-script.js';
import { DEMO_SPEC, demoRunOnNatsArgs, runOutcome, passedPerIteration } from './support/demo.js';
import { startHost, startPolish, stop, type WatchedProcess } from './support/processes.js';
import { polish } from './support/cli.js';

const demo = 'examples/demo';
const scratch = mkdtempSync(join(tmpdir(), 'polish-cluster-test-'));
const took = (host: WatchedProcess, role: string) =>
  host.lines.filter((line) => new RegExp(`\\(${role}\\) took task`).test(line)).length;

/** Stream name → [configured replicas, peers the cluster reports for it (leader and replicas)]. */
async function replicasOf(connection: NatsConnection, streams: string[]) {
  const manager = await jetstreamManager(connection);
  const found: Record<string, [number, number]> = {};
  for (const name of streams) {
    const info = await manager.streams.info(name);
    found[name] = [info.config.num_replicas, (info.cluster?.leader ? 1 : 0) + (info.cluster?.replicas?.length ?? 0)];
  }
  return found;
}

/** Asks until the answer passes `done` (or the time is up: then returns the last answer, for the assertions to report). */
async function until<T>(ask: () => Promise<T>, done: (answer: T) => boolean, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const answer = await ask().catch((error: unknown) => {
      if (Date.now() > deadline) throw error;
      return undefined;
    });
    if ((answer !== undefined && done(answer)) || (answer !== undefined && Date.now() > deadline)) return answer;
    await delay(200);
  }
}

/** Waits for a promise, or fails naming what did not happen in time. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>(
    (_resolve, reject) => (timer = setTimeout(() => reject(new Error(`waited ${ms} ms for ${what}`)), ms)),
  );
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

describe('durable runs on a 3-node NATS cluster (JetStream replicas 3)', () => {
  let cluster: NatsCluster;
  let undisturbed: RunResult;
  const connections: NatsConnection[] = [];
  const timings: string[] = [];
  const startedAt = Date.now();

  beforeAll(async () => {
    cluster = await startNatsCluster({ size: 3 });
    timings.push(`cluster up with a meta leader: ${Date.now() - startedAt} ms`);
    const model = createScriptedProvider(loadScriptFile(`${demo}/script.yaml`));
    undisturbed = await runPolish(DEMO_SPEC, {
      dispatcher: createInProcessDispatcher((task) => handleTask(task, model)),
    });
  });

  afterAll(async () => {
    for (const connection of connections) await connection.close().catch(() => undefined);
    await cluster?.stop();
    rmSync(scratch, { recursive: true, force: true });
    console.log(`cluster.fault timings:\n  ${timings.join('\n  ')}`);
  });

  it('rejects --replicas outside 1..5 before touching NATS', async () => {
    const refused = await polish(['serve', '--nats', 'nats://127.0.0.1:1', '--replicas', '6']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('replicas');
  });

  it('a store made with 1 replica is raised to 3, its data kept', async () => {
    // While all three nodes run: a stream of 3 replicas needs 3 live servers to be placed.
    const connection = await connect({ servers: cluster.nodes[1]!.url });
    connections.push(connection);
    const single = await openRunStore(connection, 'polishr1');
    await single.put('run.kept', { kept: true });
    const names = storeNames('polishr1');
    const streams = [names.events, `KV_${names.runs}`, `OBJ_${names.artifacts}`];
    expect(Object.values(await replicasOf(connection, streams)).map(([configured]) => configured)).toEqual([1, 1, 1]);
    const raised = await openRunStore(connection, 'polishr1', { replicas: 3 });
    expect(Object.values(await replicasOf(connection, streams)).map(([configured]) => configured)).toEqual([3, 3, 3]);
    expect(await raised.get('run.kept')).toEqual({ kept: true });
  });

  it(
    'the node the orchestrator uses is killed mid-run: it reconnects to another node and the run completes, nothing lost',
    { timeout: 180_000 },
    async () => {
      const [orchestratorNode, workerNode, clientNode] = cluster.nodes as [
        NatsCluster['nodes'][0],
        NatsCluster['nodes'][0],
        NatsCluster['nodes'][0],
      ];
      const t0 = Date.now();
      const hold = held(`${demo}/script.yaml`, scratch);
      // --task-timeout bounds the test if an answer were lost; the assertions below prove none was.
      const serve = startPolish([
        'serve',
        '--nats',
        orchestratorNode.url,
        '--id',
        'clustered',
        '--replicas',
        '3',
        '--task-timeout',
        '30',
      ]);
      let host: WatchedProcess | undefined;
      let client: WatchedProcess | undefined;
      try {
        [host] = await Promise.all([
          startHost(workerNode.url, ['--pool', '1', '--script', hold.script]),
          serve.waitFor(/^polish serve: ready/),
        ]);
        timings.push(`worker host and polish serve --replicas 3 ready: ${Date.now() - t0} ms`);
        expect(serve.lines.join('\n')).toContain('(JetStream replicas 3)');
        const names = storeNames();
        const streams = [names.events, `KV_${names.runs}`, `OBJ_${names.artifacts}`];
        const observer = await connect({ servers: clientNode.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
        connections.push(observer);
        expect(await replicasOf(observer, streams)).toEqual(Object.fromEntries(streams.map((name) => [name, [3, 3]])));

        client = startPolish(demoRunOnNatsArgs(clientNode.url));
        const [, runId] = await client.waitFor(/submitting run (\S+) to the polish run service/);
        // Wave 1 is done and stored; the first evaluation is in a worker's hands, held there.
        await host.waitFor(/\(evaluate\) took task/);
        // JetStream replicates a consumer's deliveries a moment after it hands a task out: a
        // leader killed inside that moment leaves successors that never saw the delivery and
        // hand the task out again (at-least-once, JetStream's own). What this test is about
        // starts after the cluster knows the task is in the worker's hands.
        const queue = taskQueueNames();
        const handedOut = await until(
          () =>
            jetstreamManager(observer).then((manager) =>
              manager.consumers.info(queue.tasksStream, queue.taskConsumer('evaluate')),
            ),
          (info) =>
            info.num_ack_pending === 1 &&
            (info.cluster?.replicas ?? []).length === 2 &&
            (info.cluster?.replicas ?? []).every((peer) => peer.current && !peer.lag),
          30_000,
        );
        expect([handedOut.num_ack_pending, handedOut.cluster?.replicas?.every((peer) => peer.current)]).toEqual([
          1,
          true,
        ]);

        timings.push(`run submitted, first evaluation held: ${Date.now() - t0} ms`);
        const killedAt = Date.now();
        await orchestratorNode.kill();
        await serve.waitFor(/^polish serve: lost NATS at /);
        const [, reconnectedTo] = await serve.waitFor(/^polish serve: reconnected to NATS at (\S+)/);
        timings.push(
          `orchestrator reconnected ${Date.now() - killedAt} ms after its node was killed (to ${reconnectedTo})`,
        );
        expect([new URL(workerNode.url).host, new URL(clientNode.url).host]).toContain(
          reconnectedTo?.replace(/^nats:\/\//, ''),
        );

        // The orchestrator answers again, asked from the workers' node: its subscriptions (the
        // run service, and the inbox the held evaluation's answer will go to) reached that node.
        const viaWorkerNode = await connect({ servers: workerNode.url });
        connections.push(viaWorkerNode);
        expect((await createRunClient(viaWorkerNode).status(runId as string)).status).toBe('RUNNING');
        hold.release();
        const exit = await within(client.exited, 120_000, 'the run to finish');
        timings.push(`run finished ${Date.now() - killedAt} ms after the kill`);
        expect(exit.code, client.lines.join('\n')).toBe(0);
        const result = JSON.parse(client.stdout()) as RunResult;
        expect(result.status).toBe('CONVERGED');
        expect(runOutcome(result)).toEqual(runOutcome(undisturbed));

        // Asked through another surviving node: the service answers from the replicated bucket.
        const status = await polish(['status', runId as string, '--nats', workerNode.url, '--json']);
        expect(status.code, status.stderr).toBe(0);
        expect(JSON.parse(status.stdout)).toMatchObject({
          runId,
          status: 'CONVERGED',
          owner: 'clustered',
          iteration: 3,
        });

        // Nothing lost, nothing paid twice: the held evaluation's answer reached the orchestrator
        // after it reconnected; no wave was sent again.
        expect([took(host, 'criteria'), took(host, 'evaluate'), took(host, 'revise')]).toEqual([1, 3, 2]);
        // Every event of the run is in the replicated stream, in order.
        // (Opening the store asks for each stream's info: one that led on node 1 may still be electing.)
        const replay = await (
          await until(
            () => openRunStore(observer),
            () => true,
            30_000,
          )
        ).events(runId as string);
        expect(replay[0]?.type).toBe('run.started');
        expect(replay.at(-1)?.type).toBe('run.finished');
        expect(passedPerIteration(replay)).toEqual([1, 2, 3]);
        // Still 3 replicas: the same 3 peers (the dead node stays a member), the leader one of the
        // survivors. A stream nobody wrote to since the kill may still be electing: wait, bounded.
        const manager = await jetstreamManager(observer);
        for (const name of streams) {
          const info = await until(
            () => manager.streams.info(name),
            (found) => found.cluster?.leader !== orchestratorNode.name && Boolean(found.cluster?.leader),
            30_000,
          );
          expect(info.config.num_replicas).toBe(3);
          expect([workerNode.name, clientNode.name]).toContain(info.cluster?.leader);
          expect([info.cluster?.leader, ...(info.cluster?.replicas ?? []).map((peer) => peer.name)].sort()).toEqual([
            'n1',
            'n2',
            'n3',
          ]);
        }
        timings.push(`assertions done: ${Date.now() - t0} ms`);
      } catch (error) {
        // What each process and node said: a failure here is about timing across processes.
        const notable = (log: string) =>
          log
            .split('\n')
            .filter((line) => /\[(WRN|ERR)\]|leader/.test(line) && !/connect to route/.test(line))
            .slice(-40)
            .join('\n');
        console.log(
          [
            `serve:\n${serve.lines.join('\n')}`,
            `client:\n${client?.lines.join('\n')}`,
            ...cluster.nodes.map((node) => `${node.name}:\n${notable(node.log())}`),
          ].join('\n--- '),
        );
        throw error;
      } finally {
        // A held worker never finishes its task, and a draining host waits for it: let go first.
        hold.release();
        // The submitting client would cancel the run on SIGTERM and wait for that: it has nothing to keep.
        if (client?.child.exitCode === null && client.child.signalCode === null) client.child.kill('SIGKILL');
        if (client) await client.exited;
        // SIGTERM drains; a wedged orchestrator must not keep the test from ending.
        const killer = setTimeout(() => serve.child.kill('SIGKILL'), 15_000);
        await stop(serve);
        clearTimeout(killer);
        if (host) await stop(host);
        timings.push(`processes stopped: ${Date.now() - t0} ms`);
      }
    },
  );

  it('polish serve takes a comma-separated list of servers and uses one that answers', async () => {
    // Nothing listens on port 1, and node 1 is down if the previous test ran.
    const [down, up] = cluster.nodes as [NatsCluster['nodes'][0], NatsCluster['nodes'][0]];
    const serve = startPolish([
      'serve',
      '--nats',
      `nats://127.0.0.1:1,${down.url},${up.url}`,
      '--id',
      'listed',
      '--replicas',
      '3',
    ]);
    try {
      await serve.waitFor(/^polish serve: ready/);
    } finally {
      await stop(serve);
    }
  });
});
