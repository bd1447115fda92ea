// `node bench/boot-modes.js [samples]` (after `pnpm build`): strict hop latency with the pool full
// (the next task is sent once the replacement of the last is ready, so that replacement boots
// while the next worker answers), with --background-boots and without (the default), in turns:
// rounds of 20 hops each way, the order reversed every other round. It prints the figures and
// writes nothing; docs/benchmarks.md quotes what it printed.
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { createNatsDispatcher } from '@polish/orchestrator';
import { startNatsServer } from '@polish/cli';
import { startHostProcess } from './host-process.js';
import { artifact, criteria, quantile, writeInstantScript } from './instant-model.js';

const samples = Number(process.argv[2] ?? 200);
const scratch = mkdtempSync(join(tmpdir(), 'polish-boot-modes-'));
const script = writeInstantScript(scratch, 'passing');
const payload = { artifact, criteria };

const server = await startNatsServer({ storeDir: join(scratch, 'nats') });
const connection = await connect({ servers: server.url });
const dispatcher = createNatsDispatcher({ connection, workerWaitMs: 60_000 });
const modes = [
  ['--background-boots', ['--background-boots']],
  ['normal priority (default)', []],
];
const hops = new Map(modes.map(([name]) => [name, []]));
/** Wall time of each way's rounds: mostly waiting for the pool to be full again (the replacement's boot). */
const walls = new Map(modes.map(([name]) => [name, 0]));
const loadAtStart = loadavg()[0];
try {
  for (let round = 0; round * 20 < samples; round += 1) {
    for (const [name, flags] of round % 2 ? [...modes].reverse() : modes) {
      const host = await startHostProcess({ natsUrl: server.url, roles: ['evaluate'], pool: 2, script, flags });
      const roundStarted = performance.now();
      for (let index = 0; index < 20; index += 1) {
        await host.warm('evaluate', 2);
        const started = performance.now();
        await dispatcher.dispatch('evaluate', payload);
        hops.get(name).push(performance.now() - started);
        await host.taken(index + 1);
      }
      walls.set(name, walls.get(name) + performance.now() - roundStarted);
      process.stderr.write(
        `${name}: round ${round + 1}, ${((performance.now() - roundStarted) / 20).toFixed(0)} ms a hop with the wait\n`,
      );
      await host.stop();
    }
  }
} finally {
  await connection.close();
  await server.stop();
  rmSync(scratch, { recursive: true, force: true });
}
console.log(
  `strict hops, pool full, ${cpus().length} cores, load average ${loadAtStart.toFixed(1)} → ${loadavg()[0].toFixed(1)}:`,
);
for (const [name, values] of hops)
  console.log(
    `  ${name}: p50 ${quantile(values, 0.5).toFixed(2)} ms, p90 ${quantile(values, 0.9).toFixed(2)} ms, ` +
      `p99 ${quantile(values, 0.99).toFixed(2)} ms (${values.length} hops; ${(walls.get(name) / values.length).toFixed(0)} ms a hop with the wait for the pool)`,
  );
