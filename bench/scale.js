// `pnpm bench:scale`: how far one orchestrator and a few worker hosts go on this machine.
// 1. 1,000 concurrent runs in one orchestrator (NATS dispatcher) against an instant scripted
//    model: runs/s, p50/p99 run latency, orchestrator memory per in-flight run, runs lost.
// 2. Throughput with 1, 2 and 4 `polish worker` hosts (--reuse) behind one orchestrator.
// Writes its section of docs/benchmarks.md (between the scale markers). Run with --expose-gc.
import { fork } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect } from '@nats-io/transport-node';
import { createNatsDispatcher, startPolish } from '@polish/orchestrator';
import { startNatsServer } from '@polish/cli';
import { startHostProcess } from './host-process.js';

const QUICK = process.argv.includes('--quick');
const REPO = fileURLToPath(new URL('../', import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), 'polish-scale-'));
const criteria = JSON.parse(readFileSync(`${REPO}examples/demo/criteria.json`, 'utf8'));
const artifact = readFileSync(`${REPO}examples/demo/artifact.md`, 'utf8');
const spec = { artifact, goal: 'Document the API rate limiter.', criteria, cap: 4 };
const log = (line) => process.stderr.write(`${line}\n`);
const quantile = (values, q) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(q * values.length))];
const ms = (value) => `${value.toFixed(value < 10 ? 2 : 0)} ms`;
const gc = () => globalThis.gc?.();

// The instant scripted model of bench/run.js: never converges, so every run is 7 waves (cap 4).
const script = join(scratch, 'instant.json');
writeFileSync(
  script,
  JSON.stringify({
    name: 'bench-instant',
    evaluate: [
      {
        answer: {
          scores: [
            { criterion_id: 'C1', pass: true, evidence: '100 requests per minute' },
            { criterion_id: 'C2', pass: true, evidence: '100 requests per minute' },
            { criterion_id: 'C3', pass: false, gap: 'Say how long to wait.' },
          ],
        },
      },
    ],
    revise: [{ answer: { artifact: `${artifact}\nA request over the limit gets 429.\n` } }],
  }),
);

const server = await startNatsServer({ storeDir: join(scratch, 'nats') });
const connection = await connect({ servers: server.url });
const dispatcher = createNatsDispatcher({ connection, workerWaitMs: 120_000, taskTimeoutMs: 600_000 });
const rows = [];

/** Starts `count` runs at once; resolves with each run's latency and status. */
async function concurrentRuns(count) {
  const started = performance.now();
  const outcomes = await Promise.all(
    Array.from({ length: count }, async () => {
      const begin = performance.now();
      const result = await startPolish(spec, { dispatcher }).result;
      return { latency: performance.now() - begin, status: result.status };
    }),
  );
  return { elapsed: performance.now() - started, outcomes };
}

try {
  // 1. 1,000 concurrent runs, all in flight at once (the responder holds every first evaluation).
  const runs = QUICK ? 200 : 1000;
  const responder = fork(fileURLToPath(new URL('./responder.js', import.meta.url)), [], {
    env: { ...process.env, NATS_URL: server.url, SCRIPT: script, HOLD: String(runs) },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  await new Promise((resolve) => responder.once('message', resolve));
  const allHeld = new Promise((resolve) =>
    connection.subscribe('bench.all-held', { max: 1, callback: () => resolve() }),
  );
  gc();
  const before = process.memoryUsage();
  const running = concurrentRuns(runs);
  await allHeld;
  gc();
  const during = process.memoryUsage();
  connection.publish('bench.release', '');
  const { elapsed, outcomes } = await running;
  responder.kill('SIGTERM');
  const latencies = outcomes.map((outcome) => outcome.latency);
  const finished = outcomes.filter((outcome) => outcome.status === 'CAP_REACHED').length;
  const perRunKb = (during.heapUsed - before.heapUsed) / runs / 1024;
  const perRunRssKb = (during.rss - before.rss) / runs / 1024;
  rows.push([
    `${runs} concurrent runs in one orchestrator: finished as expected`,
    `${finished} of ${runs}`,
    finished === runs ? 'none lost' : `**${runs - finished} lost**`,
  ]);
  rows.push([
    '… runs/s (all started at once, 7 waves each)',
    (runs / (elapsed / 1000)).toFixed(0),
    `${((runs * 7) / (elapsed / 1000)).toFixed(0)} tasks/s`,
  ]);
  rows.push([
    '… run latency p50 / p99 (includes waiting for all to be in flight)',
    `${ms(quantile(latencies, 0.5))} / ${ms(quantile(latencies, 0.99))}`,
    '',
  ]);
  rows.push([
    '… orchestrator heap per in-flight run',
    `${perRunKb.toFixed(1)} KB`,
    `RSS ${perRunRssKb.toFixed(1)} KB per run; target < 100 KB`,
  ]);
  log(
    `concurrent: ${finished}/${runs} in ${ms(elapsed)}; heap ${perRunKb.toFixed(1)} KB/run, rss ${perRunRssKb.toFixed(1)} KB/run`,
  );

  // 2. Throughput with 1, 2 and 4 worker hosts (each: --pool 2 --reuse 100000, one task per worker at a time).
  const throughput = {};
  for (const hosts of [1, 2, 4]) {
    const started = await Promise.all(
      Array.from({ length: hosts }, () =>
        startHostProcess({ natsUrl: server.url, roles: ['evaluate', 'revise'], pool: 2, reuse: 100_000, script }),
      ),
    );
    const { elapsed: took, outcomes: done } = await concurrentRuns(QUICK ? 40 : 200);
    throughput[hosts] = done.length / (took / 1000);
    for (const host of started) await host.stop();
    log(`${hosts} host(s): ${throughput[hosts].toFixed(0)} runs/s`);
  }
  for (const hosts of [1, 2, 4]) {
    rows.push([
      `runs/s with ${hosts} worker host${hosts === 1 ? '' : 's'} (2 workers each, --reuse)`,
      throughput[hosts].toFixed(0),
      `${(throughput[hosts] / throughput[1]).toFixed(2)}× one host`,
    ]);
  }
} finally {
  await connection.drain();
  await server.stop();
  rmSync(scratch, { recursive: true, force: true });
}

const table = [
  '| measure | value | note |',
  '| --- | --- | --- |',
  ...rows.map((row) => `| ${row.join(' | ')} |`),
].join('\n');
console.log(table);
if (!QUICK) {
  const section =
    `<!-- scale:start -->\n## Scale\n\nProduced by \`pnpm bench:scale\` on ${new Date().toISOString().slice(0, 10)}: ${cpus().length} cores, Node ${process.version}. ` +
    'One orchestrator process with the NATS dispatcher; the instant scripted model. For the concurrency figures one bench ' +
    "process (`bench/responder.js`, the real handlers) answers every task, holding each run's first evaluation until all " +
    'runs are in flight, so memory is measured with every run in flight at once.\n\n' +
    `${table}\n\n` +
    'Where the bound is: each worker takes one task at a time, so adding hosts adds parallel workers and throughput grows with them (the ratios above). On this machine the ceiling is the two cores shared by the orchestrator, nats-server and the workers: the concurrency figure, where one many-task responder answers everything, is that ceiling (about 1,500 tasks/s here), and worker hosts approach it as they are added; beyond it, hosts must be on other machines.\n<!-- scale:end -->\n';
  const path = `${REPO}docs/benchmarks.md`;
  const current = existsSync(path) ? readFileSync(path, 'utf8') : '# Benchmarks\n';
  const next = current.includes('<!-- scale:start -->')
    ? current.replace(/<!-- scale:start -->[\s\S]*<!-- scale:end -->\n?/, section)
    : `${current.trimEnd()}\n\n${section}`;
  writeFileSync(path, next);
  log('wrote the scale section of docs/benchmarks.md');
}
