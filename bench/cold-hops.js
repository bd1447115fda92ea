// `node bench/cold-hops.js [--workers N] [--idle-ms MS] [--node-flags="<flags>"]`: why a strict hop costs more
// than a hot one. One `polish worker` host (the instant scripted model, one idle evaluate
// worker), in one run:
// - fresh workers (--reuse 2): N workers (default 16), each sent its first task once it is ready
//   and idle, then its second: the hop of each, and the page faults (minflt, /proc/<pid>/stat)
//   the worker took during it; measured first and again last, when this process's dispatcher
//   has served hundreds of hops (its own code warm);
// - a hot worker (--reuse 100000): 6 blocks of 40 tasks back to back, each block's hop p50 and
//   page faults a task, so a worker's warming over hundreds of tasks shows.
// The host may run one worker at a time (--max-workers 1), so no boot runs beside a hop.
// --node-flags passes Node/V8 options to the host, which its workers inherit. Prints medians.
// See bench/notes.md ("What bounds the missed targets").
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { connect } from '@nats-io/transport-node';
import { startNatsServer } from '@polish/cli';
import { createNatsDispatcher } from '@polish/orchestrator';
import { startHostProcess } from './host-process.js';
import { artifact, criteria, median, writeInstantScript } from './instant-model.js';

const { values } = parseArgs({
  options: {
    workers: { type: 'string', default: '16' },
    'idle-ms': { type: 'string', default: '50' },
    'node-flags': { type: 'string', default: '' },
  },
});
const WORKERS = Number(values.workers);
const IDLE_MS = Number(values['idle-ms']);
if (!Number.isInteger(WORKERS) || WORKERS < 1 || !(IDLE_MS >= 0)) {
  process.stderr.write('usage: node bench/cold-hops.js [--workers N] [--idle-ms MS] [--node-flags="<flags>"]\n');
  process.exit(2);
}
const nodeFlags = values['node-flags'].split(' ').filter(Boolean);
const scratch = mkdtempSync(join(tmpdir(), 'polish-cold-hops-'));
const script = writeInstantScript(scratch, 'passing');
/** Minor page faults a process has taken so far. */
const faults = (pid) => Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')[7]);

const server = await startNatsServer({ storeDir: join(scratch, 'nats') });
const connection = await connect({ servers: server.url });
const dispatcher = createNatsDispatcher({ connection, workerWaitMs: 60_000 });
/** Page faults of each live process of `pids`. */
const faultsOf = (pids) =>
  new Map(
    pids.flatMap((pid) => {
      try {
        return [[pid, faults(pid)]];
      } catch {
        return [];
      }
    }),
  );
/**
 * One task: its hop in ms, the worker that answered, and the page faults that worker took
 * meanwhile (NaN where it was gone before they were read: a single-use worker exits at once).
 */
async function hop(pids) {
  const before = faultsOf(pids);
  const started = performance.now();
  const reply = await dispatcher.dispatch('evaluate', { artifact, criteria });
  const ms = performance.now() - started;
  const { pid } = reply.worker;
  const after = faultsOf([pid]).get(pid) ?? Number.NaN;
  return { ms, pid, faults: after - (before.get(pid) ?? Number.NaN) };
}
/** N fresh workers, each sent its first task once it is ready and idle, then its second. */
async function freshWorkers() {
  const fresh = { first: [], second: [] };
  const host = await startHostProcess({
    natsUrl: server.url,
    roles: ['evaluate'],
    pool: 1,
    maxWorkers: 1,
    reuse: 2,
    script,
    nodeFlags,
  });
  for (let index = 0; index < WORKERS; index += 1) {
    await host.warm('evaluate', 2);
    // Idle, as a pool's worker is when its task comes.
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
    const first = await hop(host.pids);
    const second = await hop(host.pids);
    // The second task is counted only where the worker of the first answered it.
    fresh.first.push(first);
    if (second.pid === first.pid) fresh.second.push(second);
    await host.taken((index + 1) * 2);
  }
  await host.stop();
  return fresh;
}
/** 6 blocks of 40 tasks back to back to workers that serve 100,000 each. */
async function hotWorkers() {
  const host = await startHostProcess({
    natsUrl: server.url,
    roles: ['evaluate'],
    pool: 1,
    maxWorkers: 1,
    reuse: 100_000,
    script,
    nodeFlags,
  });
  await host.warm('evaluate');
  const blocks = [];
  for (let block = 0; block < 6; block += 1) {
    const hops = [];
    for (let index = 0; index < 40; index += 1) hops.push(await hop(host.pids));
    blocks.push(hops);
  }
  await host.stop();
  return blocks;
}
const line = (hops) =>
  `hop p50 ${median(hops.map((h) => h.ms)).toFixed(2)} ms, ` +
  `${median(hops.map((h) => h.faults).filter((f) => !Number.isNaN(f)))} page faults`;
const flags = nodeFlags.length ? ` (node ${nodeFlags.join(' ')})` : '';
const printFresh = (fresh, when) =>
  process.stdout.write(
    `fresh workers${flags}, ${WORKERS}, idle ${IDLE_MS} ms, ${when}: first task ${line(fresh.first)}; ` +
      `second task (${fresh.second.length} by the same worker) ${line(fresh.second)}\n`,
  );
try {
  // This process's dispatcher warms as well: fresh workers are measured with it cold and then hot.
  printFresh(await freshWorkers(), 'the dispatcher cold');
  const blocks = await hotWorkers();
  const count = new Set(blocks.flat().map((h) => h.pid)).size;
  process.stdout.write(
    `hot workers${flags} (${count}, --reuse 100000, one at a time):\n` +
      blocks.map((hops, block) => `  tasks ${block * 40 + 1}-${block * 40 + 40}: ${line(hops)}\n`).join(''),
  );
  printFresh(await freshWorkers(), 'the dispatcher hot');
} finally {
  await connection.close();
  await server.stop();
  rmSync(scratch, { recursive: true, force: true });
}
