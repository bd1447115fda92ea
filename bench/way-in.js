// `node bench/way-in.js [samples]` (after `pnpm build`): what a task's way in to a worker costs
// on this machine's loopback, without polish's code, in one run. Two NATS connections in this
// process stand for the orchestrator and a hot worker (one that has served many tasks), so
// these are floors of the way in, not polish's figures (those are in docs/benchmarks.md). The
// three ways, in turns (100 samples a round each):
// - core: a NATS request and its reply (the floor of any hop);
// - file / memory: a JetStream publish into a work-queue stream stored on file (as polish's task
//   queue is) or in memory, until a pull that waits at the server hands the message to the
//   worker and the worker's "taken" (a core publish) is back.
// It prints medians and p99s, and writes nothing.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { AckPolicy, RetentionPolicy, StorageType, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { startNatsServer } from '@polish/cli';

const samples = Number(process.argv[2] ?? 1000);
const scratch = mkdtempSync(join(tmpdir(), 'polish-way-in-'));
const server = await startNatsServer({ storeDir: join(scratch, 'nats') });
const orchestrator = await connect({ servers: server.url });
const worker = await connect({ servers: server.url });
const quantile = (values, q) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(q * values.length))];
const task = JSON.stringify({ payload: 'x'.repeat(2_000) });

try {
  worker.subscribe('way-in.core', { callback: (_error, message) => message.respond(message.data) });
  const manager = await jetstreamManager(orchestrator);
  const ways = { core: [], file: [], memory: [] };
  const consumers = {};
  for (const storage of ['file', 'memory']) {
    await manager.streams.add({
      name: `WAY_IN_${storage.toUpperCase()}`,
      subjects: [`way-in.${storage}`],
      retention: RetentionPolicy.Workqueue,
      storage: storage === 'file' ? StorageType.File : StorageType.Memory,
    });
    await manager.consumers.add(`WAY_IN_${storage.toUpperCase()}`, {
      durable_name: 'worker',
      ack_policy: AckPolicy.Explicit,
    });
    consumers[storage] = await jetstream(worker).consumers.get(`WAY_IN_${storage.toUpperCase()}`, 'worker');
  }
  const js = jetstream(orchestrator);
  let taken;
  orchestrator.subscribe('way-in.taken', { callback: () => taken?.() });
  const viaStream = async (storage) => {
    const pulled = consumers[storage].next({ expires: 5_000 });
    // Let the pull reach the server, as a worker's waits there before a task comes.
    await worker.flush();
    const back = new Promise((resolve) => (taken = resolve));
    const started = performance.now();
    const published = js.publish(`way-in.${storage}`, task);
    const message = await pulled;
    worker.publish('way-in.taken', '');
    await back;
    const elapsed = performance.now() - started;
    await published;
    message.ack();
    return elapsed;
  };
  const once = {
    core: async () => {
      const started = performance.now();
      await orchestrator.request('way-in.core', task);
      return performance.now() - started;
    },
    file: () => viaStream('file'),
    memory: () => viaStream('memory'),
  };
  // Warm every path first: these are a hot worker's figures.
  for (const way of Object.keys(once)) for (let index = 0; index < 200; index += 1) await once[way]();
  for (let round = 0; round * 100 < samples; round += 1) {
    const order = round % 2 ? Object.keys(once).reverse() : Object.keys(once);
    for (const way of order) for (let index = 0; index < 100; index += 1) ways[way].push(await once[way]());
  }
  const core = quantile(ways.core, 0.5);
  for (const [way, values] of Object.entries(ways)) {
    const p50 = quantile(values, 0.5);
    process.stdout.write(
      `${way}: p50 ${p50.toFixed(3)} ms (${(p50 / core).toFixed(1)}× core), p99 ${quantile(values, 0.99).toFixed(3)} ms, ${values.length} samples\n`,
    );
  }
} finally {
  await orchestrator.close();
  await worker.close();
  await server.stop();
  rmSync(scratch, { recursive: true, force: true });
}
