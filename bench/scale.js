// `pnpm bench:scale`: how far one orchestrator and real worker hosts go on this machine, through
// the task queue. No stand-in answers anything: every task is pulled and answered by a worker
// process of a `polish worker` host, with the instant scripted model.
// 1. 1,000 runs queued at once against one host: the orchestrator's memory per in-flight run,
//    the host's peak memory (host and workers) while it works through them, runs/s, latency.
// 2. Throughput with 1, 2 and 4 hosts behind one orchestrator.
// Writes its section of docs/benchmarks.md (between the scale markers). Run with --expose-gc.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync, readdirSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect } from '@nats-io/transport-node';
import { createNatsDispatcher, openTaskQueue, startPolish } from '@polish/orchestrator';
import { startNatsServer } from '@polish/cli';
import { startHostProcess } from './host-process.js';
import { artifact, criteria, goal, quantile, writeInstantScript } from './instant-model.js';

const QUICK = process.argv.includes('--quick');
const REPO = fileURLToPath(new URL('../', import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), 'polish-scale-'));
const spec = { artifact, goal, criteria, cap: 4 };
const log = (line) => process.stderr.write(`${line}\n`);
const ms = (value) => `${value.toFixed(value < 10 ? 2 : 0)} ms`;
const mb = (bytes) => `${(bytes / 1024 / 1024).toFixed(0)} MB`;
const gc = () => globalThis.gc?.();
const until = async (check, everyMs = 100) => {
  while (!(await check())) await new Promise((resolve) => setTimeout(resolve, everyMs));
};

// The instant scripted model of bench/run.js: never converges, so every run is 7 waves (cap 4).
const script = writeInstantScript(scratch, 'never-converges');
/** RSS of a process and all its descendants (a host and its workers), from /proc. */
function treeRss(rootPid) {
  const children = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(parent, [...(children.get(parent) ?? []), Number(entry)]);
    } catch {
      // Gone meanwhile.
    }
  }
  let total = 0;
  for (const pending = [rootPid]; pending.length > 0;) {
    const pid = pending.pop();
    try {
      total += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) * 1024;
    } catch {
      continue;
    }
    pending.push(...(children.get(pid) ?? []));
  }
  return total;
}

const server = await startNatsServer({ storeDir: join(scratch, 'nats') });
const connection = await connect({ servers: server.url });
const queue = await openTaskQueue(connection);
// Nobody serves the first minutes of part 1 on purpose: the runs wait in the queue.
const dispatcher = createNatsDispatcher({ connection, queue, workerWaitMs: 3_600_000, taskTimeoutMs: 600_000 });
const rows = [];

/** Starts `count` runs at once; resolves with each run's latency and status. */
function concurrentRuns(count) {
  const started = performance.now();
  const outcomes = Promise.all(
    Array.from({ length: count }, async () => {
      const begin = performance.now();
      const result = await startPolish(spec, { dispatcher }).result;
      return { latency: performance.now() - begin, status: result.status };
    }),
  );
  return outcomes.then((done) => ({ elapsed: performance.now() - started, outcomes: done }));
}

const evaluateQueued = async () =>
  (await queue.stats(['evaluate'])).find((stats) => stats.role === 'evaluate')?.queued ?? 0;

try {
  // 1. Every run queued before any worker exists: all in flight at once, measured; then one host.
  const runs = QUICK ? 200 : 1000;
  gc();
  const before = process.memoryUsage();
  const running = concurrentRuns(runs);
  await until(async () => (await evaluateQueued()) >= runs);
  gc();
  const during = process.memoryUsage();
  const perRunKb = (during.heapUsed - before.heapUsed) / runs / 1024;
  const perRunRssKb = (during.rss - before.rss) / runs / 1024;
  log(`${runs} runs queued: heap ${perRunKb.toFixed(1)} KB/run, rss ${perRunRssKb.toFixed(1)} KB/run`);
  const drainStarted = performance.now();
  const host = await startHostProcess({
    natsUrl: server.url,
    roles: ['evaluate', 'revise'],
    pool: 2,
    reuse: 100_000,
    script,
  });
  const hostSamples = [treeRss(host.pid)];
  const sampler = setInterval(() => hostSamples.push(treeRss(host.pid)), 250);
  const { outcomes } = await running;
  const drained = performance.now() - drainStarted;
  clearInterval(sampler);
  hostSamples.push(treeRss(host.pid));
  const peakWorkers = host.peakAlive();
  await host.stop();
  const latencies = outcomes.map((outcome) => outcome.latency);
  const finished = outcomes.filter((outcome) => outcome.status === 'CAP_REACHED').length;
  rows.push([
    `${runs} runs queued at once against one host: finished as expected`,
    `${finished} of ${runs}`,
    finished === runs ? 'none lost' : `**${runs - finished} lost**`,
  ]);
  rows.push([
    '… orchestrator heap per in-flight run (every run waiting in the queue)',
    `${perRunKb.toFixed(1)} KB`,
    `RSS ${perRunRssKb.toFixed(1)} KB per run; target < 100 KB`,
  ]);
  rows.push([
    "… the host's peak memory while it works through them (host and its workers)",
    mb(Math.max(...hostSamples)),
    `at most ${peakWorkers} worker processes at once (its --max-workers); ${hostSamples.length} samples`,
  ]);
  rows.push([
    '… runs/s once the host started (7 waves each)',
    (runs / (drained / 1000)).toFixed(0),
    `${((runs * 7) / (drained / 1000)).toFixed(0)} tasks/s`,
  ]);
  rows.push([
    '… run latency p50 / p99 (from submit, including the wait for a host)',
    `${ms(quantile(latencies, 0.5))} / ${ms(quantile(latencies, 0.99))}`,
    '',
  ]);
  log(`drained in ${ms(drained)}; host peak ${mb(Math.max(...hostSamples))}`);

  // 2. Throughput with 1, 2 and 4 worker hosts (each two workers per role, --reuse: one task per worker at a time).
  const throughput = {};
  for (const hosts of [1, 2, 4]) {
    const started = await Promise.all(
      Array.from({ length: hosts }, () =>
        startHostProcess({
          natsUrl: server.url,
          roles: ['evaluate', 'revise'],
          pool: 2,
          maxWorkers: 4,
          reuse: 100_000,
          script,
        }),
      ),
    );
    const { elapsed: took, outcomes: done } = await concurrentRuns(QUICK ? 40 : 200);
    throughput[hosts] = done.length / (took / 1000);
    for (const started_ of started) await started_.stop();
    log(`${hosts} host(s): ${throughput[hosts].toFixed(0)} runs/s`);
  }
  for (const hosts of [1, 2, 4]) {
    rows.push([
      `runs/s with ${hosts} worker host${hosts === 1 ? '' : 's'} (2 workers per role each, --reuse)`,
      throughput[hosts].toFixed(0),
      `${(throughput[hosts] / throughput[1]).toFixed(2)}× one host`,
    ]);
  }
} finally {
  await dispatcher.close();
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
  const nats = execFileSync('nats-server', ['--version']).toString().trim();
  const section =
    `<!-- scale:start -->\n## Scale\n\nProduced by \`pnpm bench:scale\` on ${new Date().toISOString().slice(0, 10)}: ` +
    `${cpus().length} cores, ${mb(totalmem())} of memory, Node ${process.version}, ${nats}. One orchestrator process ` +
    '(the NATS dispatcher over the task queue) and real `polish worker` hosts, each with worker processes pulling one ' +
    'task at a time; nothing stands in for a worker. The model is the instant scripted one. Workers run with `--reuse` ' +
    'here, so the figures are those of the queue, the orchestrator and the hosts, not of process boots (the strict ' +
    'one-task-per-process cost is in the table above).\n\n' +
    `${table}\n\n` +
    'Where the bound is: each worker takes one task at a time, so hosts add parallel workers. On this machine the ceiling ' +
    'is the two cores shared by the orchestrator, nats-server, the hosts and their workers; beyond it, hosts must be on ' +
    'other machines. A host works through any backlog with at most `--max-workers` processes, so its memory stays flat ' +
    'whatever waits in the queue.\n<!-- scale:end -->\n';
  const path = `${REPO}docs/benchmarks.md`;
  const current = existsSync(path) ? readFileSync(path, 'utf8') : '# Benchmarks\n';
  const next = current.includes('<!-- scale:start -->')
    ? current.replace(/<!-- scale:start -->[\s\S]*<!-- scale:end -->\n?/, section)
    : `${current.trimEnd()}\n\n${section}`;
  writeFileSync(path, next);
  log('wrote the scale section of docs/benchmarks.md');
}
