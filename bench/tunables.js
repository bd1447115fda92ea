// `node bench/tunables.js [--background-boots] <GLIBC_TUNABLES value> …`: how glibc tunables
// change strict workers restored from the startup snapshot (the instant scripted model), for
// each value in turns, 8 rounds: the median boot and idle RSS of 4 workers booted at once (so
// slower than one alone), and the median of whole 4-iteration runs (7 waves, cap 4, each wave a
// fresh worker from a full pool, 7 replacements booting meanwhile; 5 per round). The host puts
// its own tunables first and the given value after them, so the given value wins where both set
// one (`glibc.malloc.hugetlb=0` turns its huge pages off). How they were chosen: bench/notes.md.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { startNatsServer } from '@polish/cli';
import { createNatsDispatcher, startPolish } from '@polish/orchestrator';
import { startHostProcess } from './host-process.js';

const flags = process.argv.slice(2).filter((arg) => arg === '--background-boots');
const values = process.argv.slice(2).filter((arg) => arg !== '--background-boots');
if (values.length === 0) {
  process.stderr.write('usage: node bench/tunables.js [--background-boots] <GLIBC_TUNABLES value> [<value> …]\n');
  process.exit(2);
}
const REPO = new URL('../', import.meta.url).pathname;
const criteria = JSON.parse(readFileSync(`${REPO}examples/demo/criteria.json`, 'utf8')).slice(0, 3);
const artifact = readFileSync(`${REPO}examples/demo/artifact.md`, 'utf8');
const scratch = mkdtempSync(join(tmpdir(), 'polish-tunables-'));
const script = join(scratch, 'instant.json');
// Never converges: 4 evaluations and 3 revisions.
const scores = criteria.map(({ id }, index) =>
  index < 2
    ? { criterion_id: id, pass: true, evidence: '100 requests per minute' }
    : { criterion_id: id, pass: false, gap: 'Say how long to wait before retrying.' },
);
writeFileSync(
  script,
  JSON.stringify({
    name: 'instant',
    evaluate: [{ answer: { scores } }],
    revise: [{ answer: { artifact: `${artifact}\nA request over the limit gets 429.\n` } }],
  }),
);
const spec = { artifact, goal: 'Document the API rate limiter.', criteria, cap: 4 };
const server = await startNatsServer({ storeDir: join(scratch, 'nats') });
const connection = await connect({ servers: server.url });
const dispatcher = createNatsDispatcher({ connection, workerWaitMs: 60_000 });
const rssMb = (pid) => Number(/^Rss:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1]) / 1024;
const median = (list) => [...list].sort((a, b) => a - b)[list.length >> 1];
const seen = new Map(values.map((value) => [value, { rss: [], boot: [], run: [], readyDuring: [] }]));
try {
  for (let round = 0; round < 8; round += 1) {
    for (const value of round % 2 ? [...values].reverse() : values) {
      process.env.GLIBC_TUNABLES = value;
      const figures = seen.get(value);
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
        const readyBefore = runHost.boots.length;
        const { status } = await startPolish(spec, { dispatcher }).result;
        figures.readyDuring.push(runHost.boots.length - readyBefore);
        if (status !== 'CAP_REACHED') throw new Error(`a run ended ${status}, not CAP_REACHED`);
        figures.run.push(performance.now() - started);
      }
      await runHost.stop();
    }
  }
} finally {
  await connection.drain();
  await server.stop();
  rmSync(scratch, { recursive: true, force: true });
}
const mean = (list) => list.reduce((sum, value) => sum + value, 0) / list.length;
for (const [value, { rss, boot, run, readyDuring }] of seen)
  process.stdout.write(
    `${value}: boot ${median(boot)} ms, idle RSS ${median(rss).toFixed(1)} MB, 4-iteration run ${median(run).toFixed(1)} ms ` +
      `(${run.length} runs; replacements ready during a run: ${mean(readyDuring).toFixed(2)} on average)\n`,
  );
