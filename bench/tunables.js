// `node bench/tunables.js <GLIBC_TUNABLES value> …`: boots a host of 4 idle evaluate workers
// (the instant scripted model, restored from the startup snapshot) once per value, in turns,
// 5 rounds, and prints each value's median boot (4 at once, so slower than one alone) and idle
// RSS. The host puts its own tunables first and the given value after them (the given value
// wins where both set one). How the workers' huge-page tunables were chosen (bench/notes.md).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startNatsServer } from '@polish/cli';
import { startHostProcess } from './host-process.js';

const values = process.argv.slice(2);
if (values.length === 0) {
  process.stderr.write('usage: node bench/tunables.js <GLIBC_TUNABLES value> [<value> …]\n');
  process.exit(2);
}
const scratch = mkdtempSync(join(tmpdir(), 'polish-tunables-'));
const script = join(scratch, 'instant.json');
writeFileSync(script, JSON.stringify({ name: 'instant', evaluate: [{ answer: { scores: [] } }] }));
const server = await startNatsServer({ storeDir: scratch });
const rssMb = (pid) => Number(/^Rss:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1]) / 1024;
const median = (list) => [...list].sort((a, b) => a - b)[list.length >> 1];
const seen = new Map(values.map((value) => [value, { rss: [], boot: [] }]));
try {
  for (let round = 0; round < 5; round += 1) {
    for (const value of values) {
      process.env.GLIBC_TUNABLES = value;
      const host = await startHostProcess({ natsUrl: server.url, roles: ['evaluate'], pool: 4, script });
      await host.warm('evaluate', 4);
      for (const pid of host.pids) seen.get(value).rss.push(rssMb(pid));
      seen.get(value).boot.push(...host.boots);
      await host.stop();
    }
  }
} finally {
  await server.stop();
  rmSync(scratch, { recursive: true, force: true });
}
for (const [value, { rss, boot }] of seen)
  process.stdout.write(`${value}: boot ${median(boot)} ms, idle RSS ${median(rss).toFixed(1)} MB\n`);
