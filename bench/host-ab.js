// `node bench/host-ab.js <comparison> [--background-boots] [--rounds N]`: one agent host
// process (the instant scripted model, strict workers) two ways, in turns, N rounds (default 8).
// Comparisons: `huge-pages`, restored workers with glibc's huge pages (the default) and without
// (POLISH_WORKER_HUGEPAGES=0 in the host's environment; the host itself never gets the
// tunables); `successor-quiet`, successors of instant answers postponed while the host keeps
// taking tasks (the default) and booted at the answer (--successor-quiet 0); `exit-nice`, workers
// lowered to nice 19 once they have answered their last task (the default) and left at normal
// priority (POLISH_WORKER_EXIT_NICE=0), both with --max-workers 12; `semi-space`, workers with a
// 2 MB young generation (the default) and V8's own (POLISH_WORKER_SEMI_SPACE_MB=0). Per round and way: 4
// workers booted at once (their boot, slower than one alone, and idle RSS), 5 whole 4-iteration
// runs (7 waves, cap 4, each wave a fresh worker from a full pool of 4, 7 replacements booting
// during or after the run), and 40 tasks sent at once to a pool of 2 (tasks a second, and CPU a
// task of the host and its workers). Prints medians. See bench/notes.md.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { startNatsServer } from '@polish/cli';
import { createNatsDispatcher, startPolish } from '@polish/orchestrator';
import { startHostProcess } from './host-process.js';
import { treeCpuMs } from './cpu.js';
import { artifact, criteria, goal, median, writeInstantScript } from './instant-model.js';

const COMPARISONS = {
  'huge-pages': {
    'huge pages': { env: { POLISH_WORKER_HUGEPAGES: '1' }, flags: [] },
    'no huge pages': { env: { POLISH_WORKER_HUGEPAGES: '0' }, flags: [] },
  },
  'exit-nice': {
    // Room under the process limit (2 roles × pool 4 is the default limit of 8 on 2 cores): at the
    // limit an exit is never lowered, its place may be wanted.
    'exits at nice 19': { env: { POLISH_WORKER_EXIT_NICE: '1' }, flags: ['--max-workers', '12'] },
    'exits at normal priority': { env: { POLISH_WORKER_EXIT_NICE: '0' }, flags: ['--max-workers', '12'] },
  },
  'semi-space': {
    'semi-space 2 MB': { env: { POLISH_WORKER_SEMI_SPACE_MB: '2' }, flags: [] },
    "V8's own young generation": { env: { POLISH_WORKER_SEMI_SPACE_MB: '0' }, flags: [] },
  },
  'successor-quiet': {
    'postponed successors': { env: {}, flags: [] },
    'successors at the answer': { env: {}, flags: ['--successor-quiet', '0'] },
  },
};
const [comparison] = process.argv.slice(2);
const ways = COMPARISONS[comparison];
if (!ways) {
  process.stderr.write(
    `usage: node bench/host-ab.js ${Object.keys(COMPARISONS).join('|')} [--background-boots] [--rounds N]\n`,
  );
  process.exit(2);
}
const roundsAt = process.argv.indexOf('--rounds');
const ROUNDS = roundsAt > 0 ? Number(process.argv[roundsAt + 1]) : 8;
const background = process.argv.includes('--background-boots') ? ['--background-boots'] : [];
const scratch = mkdtempSync(join(tmpdir(), 'polish-host-ab-'));
// Never converges: 4 evaluations and 3 revisions.
const script = writeInstantScript(scratch, 'never-converges');
const spec = { artifact, goal, criteria, cap: 4 };
const server = await startNatsServer({ storeDir: join(scratch, 'nats') });
const connection = await connect({ servers: server.url });
const dispatcher = createNatsDispatcher({ connection, workerWaitMs: 60_000 });
const rssMb = (pid) => Number(/^Rss:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1]) / 1024;
const seen = new Map(Object.keys(ways).map((way) => [way, { rss: [], boot: [], run: [], perSecond: [], cpu: [] }]));
const TASKS = 40;
try {
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const way of round % 2 ? Object.keys(ways).reverse() : Object.keys(ways)) {
      // The host process inherits this environment.
      Object.assign(process.env, ways[way].env);
      const flags = [...background, ...ways[way].flags];
      const figures = seen.get(way);
      const bootHost = await startHostProcess({ natsUrl: server.url, roles: ['evaluate'], pool: 4, script, flags });
      await bootHost.warm('evaluate', 4);
      for (const pid of bootHost.pids) figures.rss.push(rssMb(pid));
      figures.boot.push(...bootHost.boots);
      await bootHost.stop();
      const runHost = await startHostProcess({
        natsUrl: server.url,
        roles: ['evaluate', 'revise'],
        pool: 4,
        script,
        flags,
      });
      for (let index = 0; index < 5; index += 1) {
        await runHost.taken(index * 7);
        await Promise.all([runHost.warm('evaluate', 4), runHost.warm('revise', 3)]);
        const started = performance.now();
        const { status } = await startPolish(spec, { dispatcher }).result;
        if (status !== 'CAP_REACHED') throw new Error(`a run ended ${status}, not CAP_REACHED`);
        figures.run.push(performance.now() - started);
      }
      await runHost.stop();
      const loadHost = await startHostProcess({ natsUrl: server.url, roles: ['evaluate'], pool: 2, script, flags });
      await loadHost.warm('evaluate', 2);
      const cpuBefore = treeCpuMs(loadHost.pid);
      const started = performance.now();
      await Promise.all(Array.from({ length: TASKS }, () => dispatcher.dispatch('evaluate', { artifact, criteria })));
      figures.perSecond.push((TASKS / (performance.now() - started)) * 1000);
      await loadHost.warm('evaluate', 2);
      figures.cpu.push((treeCpuMs(loadHost.pid) - cpuBefore) / TASKS);
      await loadHost.stop();
      for (const name of Object.keys(ways[way].env)) delete process.env[name];
    }
  }
} finally {
  await connection.drain();
  await server.stop();
  rmSync(scratch, { recursive: true, force: true });
}
for (const [way, { rss, boot, run, perSecond, cpu }] of seen)
  process.stdout.write(
    `${way}${background.length ? ' (--background-boots)' : ''}: boot ${median(boot)} ms (4 at once), idle RSS ${median(rss).toFixed(1)} MB, ` +
      `4-iteration run ${median(run).toFixed(1)} ms, strict ${median(perSecond).toFixed(1)} tasks/s at ${median(cpu).toFixed(0)} ms CPU a task (host and workers)\n`,
  );
