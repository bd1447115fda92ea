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
} else {
  const samples = Number(process.argv[2] ?? 1000);
  const scratch = mkdtempSync(join(tmpdir(), 'polish-way-in-'));
  const server = await startNatsServer({ storeDir: join(scratch, 'nats') });
  const orchestrator = await connect({ servers: server.url });
  const quantile = (values, q) =>
    [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(q * values.length))];
  const task = JSON.stringify({ payload: 'x'.repeat(2_000) });
  let worker;
  try {
    const manager = await jetstreamManager(orchestrator);
    for (const storage of STORAGES) {
      await manager.streams.add({
        name: streamOf(storage),
        subjects: [`way-in.${storage}`],
        retention: RetentionPolicy.Workqueue,
        storage: storage === 'file' ? StorageType.File : StorageType.Memory,
      });
      await manager.consumers.add(streamOf(storage), { durable_name: 'worker', ack_policy: AckPolicy.Explicit });
    }
    worker = fork(new URL(import.meta.url).pathname, ['--worker', server.url], { stdio: 'inherit' });
    await new Promise((resolve) => worker.once('message', resolve));
    orchestrator.subscribe('bench.echo', { callback: (_error, message) => message.respond(message.data) });
    const js = jetstream(orchestrator);
    let taken;
    orchestrator.subscribe('way-in.taken', { callback: () => taken?.() });
    const timed = async (action) => {
      const started = performance.now();
      await action();
      return performance.now() - started;
    };
    const viaStream = async (storage) => {
      // The worker's pull waits at the server before the task is sent, as a ready worker's does.
      await orchestrator.request('way-in.pull', storage, { timeout: 5_000 });
      const back = new Promise((resolve) => (taken = resolve));
      return timed(async () => {
        await Promise.all([js.publish(`way-in.${storage}`, task), back]);
      });
    };
    const ways = {
      'core, same process': () => timed(() => orchestrator.request('bench.echo', task, { timeout: 5_000 })),
      'core, other process': () => timed(() => orchestrator.request('way-in.core', task, { timeout: 5_000 })),
      'JetStream file, other process': () => viaStream('file'),
      'JetStream memory, other process': () => viaStream('memory'),
    };
    const results = Object.fromEntries(Object.keys(ways).map((way) => [way, []]));
    // Warm every path first: these are a hot worker's figures.
    for (const way of Object.keys(ways)) for (let index = 0; index < 200; index += 1) await ways[way]();
    for (let round = 0; round * 100 < samples; round += 1) {
      const order = round % 2 ? Object.keys(ways).reverse() : Object.keys(ways);
      for (const way of order) for (let index = 0; index < 100; index += 1) results[way].push(await ways[way]());
    }
    const floor = quantile(results['core, same process'], 0.5);
    for (const [way, values] of Object.entries(results)) {
      const p50 = quantile(values, 0.5);
      process.stdout.write(
        `${way}: p50 ${p50.toFixed(3)} ms (${(p50 / floor).toFixed(1)}×), p99 ${quantile(values, 0.99).toFixed(3)} ms, ${values.length} samples\n`,
      );
    }
  } finally {
    worker?.kill();
    await orchestrator.close();
    await server.stop();
    rmSync(scratch, { recursive: true, force: true });
  }
}
