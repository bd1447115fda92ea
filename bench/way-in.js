// `node bench/way-in.js [samples]` (after `pnpm build`): what a task's way to a worker and back
// costs on this machine, without polish's code, in one run. This process stands for the
// orchestrator; the "worker" is a bare Node process with only the NATS client (a hot one: it has
// answered hundreds of requests first). So these are floors, not polish's figures (those are in
// docs/benchmarks.md). The ways, in turns (100 samples a round each):
// - core, same process: a NATS request to a responder on this process's own connection (the
//   floor `pnpm bench` calls "a bare NATS request");
// - core, other process: the same request answered by the worker process;
// - file / memory: a JetStream publish into a work-queue stream stored on file (as polish's task
//   queue is) or in memory, until a pull that waits at the server hands it to the worker
//   process and the worker's "taken" (a core publish) is back here.
// It prints medians and p99s, and writes nothing.
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { AckPolicy, RetentionPolicy, StorageType, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { startNatsServer } from '@polish/cli';

const STORAGES = ['file', 'memory'];
const streamOf = (storage) => `WAY_IN_${storage.toUpperCase()}`;

const quantile = (values, q) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(q * values.length))];

/**
 * The floors of a hop through `serverUrl` (JetStream enabled), measured from `connection` against
 * a bare worker process: the p50 and p99 in ms of each way, `samples` of each, in turns.
 */
export async function measureWayIn(serverUrl, connection, samples) {
  const task = JSON.stringify({ payload: 'x'.repeat(2_000) });
  const manager = await jetstreamManager(connection);
  const worker = fork(new URL(import.meta.url).pathname, ['--worker', serverUrl], { stdio: 'inherit' });
  const subscriptions = [];
  try {
    for (const storage of STORAGES) {
      await manager.streams.add({
        name: streamOf(storage),
        subjects: [`way-in.${storage}`],
        retention: RetentionPolicy.Workqueue,
        storage: storage === 'file' ? StorageType.File : StorageType.Memory,
      });
      await manager.consumers.add(streamOf(storage), { durable_name: 'worker', ack_policy: AckPolicy.Explicit });
    }
    await new Promise((resolve) => worker.once('message', resolve));
    subscriptions.push(
      connection.subscribe('way-in.echo', { callback: (_error, message) => message.respond(message.data) }),
    );
    const js = jetstream(connection);
    let taken;
    subscriptions.push(connection.subscribe('way-in.taken', { callback: () => taken?.() }));
    await connection.flush();
    const timed = async (action) => {
      const started = performance.now();
      await action();
      return performance.now() - started;
    };
    const viaStream = async (storage) => {
      // The worker's pull waits at the server before the task is sent, as a ready worker's does.
      await connection.request('way-in.pull', storage, { timeout: 5_000 });
      const back = new Promise((resolve) => (taken = resolve));
      return timed(async () => {
        await Promise.all([js.publish(`way-in.${storage}`, task), back]);
      });
    };
    const ways = {
      core: () => timed(() => connection.request('way-in.echo', task, { timeout: 5_000 })),
      coreOtherProcess: () => timed(() => connection.request('way-in.core', task, { timeout: 5_000 })),
      file: () => viaStream('file'),
      memory: () => viaStream('memory'),
    };
    const results = Object.fromEntries(Object.keys(ways).map((way) => [way, []]));
    // Warm every path first: these are a hot worker's figures.
    for (const way of Object.keys(ways)) for (let index = 0; index < 100; index += 1) await ways[way]();
    for (let round = 0; round * 100 < samples; round += 1) {
      const order = round % 2 ? Object.keys(ways).reverse() : Object.keys(ways);
      for (const way of order) for (let index = 0; index < 100; index += 1) results[way].push(await ways[way]());
    }
    return Object.fromEntries(
      Object.entries(results).map(([way, values]) => [
        way,
        { p50: quantile(values, 0.5), p99: quantile(values, 0.99) },
      ]),
    );
  } finally {
    worker.kill();
    for (const subscription of subscriptions) subscription.unsubscribe();
    for (const storage of STORAGES) await manager.streams.delete(streamOf(storage)).catch(() => undefined);
  }
}

if (process.argv[2] === '--worker') {
  // The worker: answers core requests, and serves each stream's tasks one at a time, each with a
  // pull that waits at the server before the orchestrator sends the next task.
  const connection = await connect({ servers: process.argv[3] });
  connection.subscribe('way-in.core', { callback: (_error, message) => message.respond(message.data) });
  connection.subscribe('way-in.pull', {
    callback: async (_error, request) => {
      const consumer = await jetstream(connection).consumers.get(streamOf(request.string()), 'worker');
      const pulled = consumer.next({ expires: 5_000 });
      await connection.flush();
      request.respond('');
      const message = await pulled;
      connection.publish('way-in.taken', '');
      message?.ack();
    },
  });
  await connection.flush();
  process.send('ready');
} else if (import.meta.url === new URL(process.argv[1], 'file://').href) {
  const samples = Number(process.argv[2] ?? 1000);
  const scratch = mkdtempSync(join(tmpdir(), 'polish-way-in-'));
  const server = await startNatsServer({ storeDir: join(scratch, 'nats') });
  const connection = await connect({ servers: server.url });
  try {
    const ways = await measureWayIn(server.url, connection, samples);
    const names = {
      core: 'core, same process',
      coreOtherProcess: 'core, other process',
      file: 'JetStream file, other process',
      memory: 'JetStream memory, other process',
    };
    for (const [way, { p50, p99 }] of Object.entries(ways))
      process.stdout.write(
        `${names[way]}: p50 ${p50.toFixed(3)} ms (${(p50 / ways.core.p50).toFixed(1)}×), p99 ${p99.toFixed(3)} ms\n`,
      );
  } finally {
    await connection.close();
    await server.stop();
    rmSync(scratch, { recursive: true, force: true });
  }
}
