// `node bench/build-ab.js <rounds> <checkout> <checkout> …` (each checkout built with
// `pnpm build`): compares worker boots and strict hops of builds, in turns, in one run. Each
// round starts each checkout's `polish worker` in turn (the order reversed every other round)
// with one idle evaluate worker of the instant scripted model, and sends it 10 strict tasks one
// at a time, each once a worker is ready: 10 boots and 10 hops a round. It prints, per checkout,
// the median ready time, hop and boot steps, and writes nothing. With --reuse, each round sends
// 50 tasks back to back to one worker that serves them all (hot hops, no boots). With
// --anthropic, the workers use the Anthropic provider (its real SDK) against a local fake
// Messages API that answers at once (test/support/fake-model-server.ts) instead of the script.
// To compare with an older commit: `git worktree add /tmp/old <rev> && cd /tmp/old && pnpm
// install --frozen-lockfile && pnpm build`, then `node bench/build-ab.js 6 /tmp/old .`.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { createNatsDispatcher } from '@polish/orchestrator';
import { startNatsServer } from '@polish/cli';
import { startHostProcess } from './host-process.js';
import { artifact, criteria, median, writeInstantScript } from './instant-model.js';
// Node 24 loads these TypeScript files as they are (type stripping): one fake server for tests and bench.
import { startFakeModelServer } from '../test/support/fake-model-server.ts';
import { anthropicDialect } from '../test/support/fake-anthropic.ts';

const FLAGS = ['--reuse', '--anthropic'];
const reuse = process.argv.includes('--reuse');
const anthropic = process.argv.includes('--anthropic');
const [rounds, ...checkouts] = process.argv.slice(2).filter((arg) => !FLAGS.includes(arg));
if (!Number(rounds) || checkouts.length === 0) {
  process.stderr.write('usage: node bench/build-ab.js [--reuse] [--anthropic] <rounds> <checkout> [<checkout> …]\n');
  process.exit(2);
}
const scratch = mkdtempSync(join(tmpdir(), 'polish-build-ab-'));
const script = writeInstantScript(scratch, 'passing');
const scores = criteria.map(({ id }) => ({ criterion_id: id, pass: true, evidence: '100 requests per minute' }));
const modelServer = anthropic
  ? await startFakeModelServer(anthropicDialect, () => ({ answer: { scores } }))
  : undefined;
// The host passes its environment on to its workers: the key the provider wants.
if (modelServer) process.env.ANTHROPIC_API_KEY = 'sk-ant-bench';
const model = modelServer ? { flags: ['--model', `anthropic:claude-bench@${modelServer.url}`] } : { script };

const server = await startNatsServer({ storeDir: join(scratch, 'nats') });
const connection = await connect({ servers: server.url });
const dispatcher = createNatsDispatcher({ connection, workerWaitMs: 60_000 });
const results = new Map(checkouts.map((checkout) => [checkout, { boots: [], steps: [], hops: [] }]));
try {
  for (let round = 0; round < Number(rounds); round += 1) {
    for (const checkout of round % 2 ? [...checkouts].reverse() : checkouts) {
      const polish = join(resolve(checkout), 'packages/cli/dist/bin.js');
      const host = await startHostProcess({
        natsUrl: server.url,
        roles: ['evaluate'],
        pool: 1,
        ...model,
        polish,
        ...(reuse ? { reuse: 100_000 } : {}),
      });
      const result = results.get(checkout);
      for (let index = 0; index < (reuse ? 50 : 10); index += 1) {
        if (!reuse || index === 0) await host.warm('evaluate');
        const started = performance.now();
        await dispatcher.dispatch('evaluate', { artifact, criteria });
        result.hops.push(performance.now() - started);
        if (!reuse) await host.taken(index + 1);
      }
      result.boots.push(...host.boots);
      result.steps.push(...host.steps);
      await host.stop();
    }
  }
  for (const [checkout, { boots, steps, hops }] of results) {
    const step = Object.fromEntries(Object.keys(steps[0]).map((name) => [name, median(steps.map((s) => s[name]))]));
    process.stdout.write(
      `${checkout}: ${boots.length} boots, ready ${median(boots)} ms, hop p50 ${median(hops).toFixed(2)} ms, ` +
        `steps ${JSON.stringify(step)}\n`,
    );
  }
} finally {
  await connection.close();
  await server.stop();
  await modelServer?.stop();
  rmSync(scratch, { recursive: true, force: true });
}
