// `pnpm bench`: measures the NATS worker runtime in one run and writes docs/benchmarks.md.
// Every figure is measured here, now; ratios compare figures from this same run.
import { fork } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect } from '@nats-io/transport-node';
import { createScriptedProvider, evaluate, handleTask, loadScriptFile, revise } from '@polish/agents';
import { computeVerdict, createInProcessDispatcher, createNatsDispatcher, startPolish } from '@polish/orchestrator';
import { startNatsServer } from '@polish/cli';
import { buildLangGraphLoop, runLangGraphLoop } from './langgraph-loop.js';
import { startHostProcess } from './host-process.js';
import { measureReviseCost } from './revise-cost.js';

const QUICK = process.argv.includes('--quick');
const REPO = fileURLToPath(new URL('../', import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), 'polish-bench-'));
const criteria = JSON.parse(readFileSync(`${REPO}examples/demo/criteria.json`, 'utf8'));
const artifact = readFileSync(`${REPO}examples/demo/artifact.md`, 'utf8');
const goal = 'Document the API rate limiter.';

// An instant scripted model that never converges: 4 evaluations and 3 revisions with cap 4.
const scriptPath = join(scratch, 'instant.json');
writeFileSync(
  scriptPath,
  JSON.stringify({
    name: 'bench-instant',
    evaluate: [
      {
        answer: {
          scores: [
            { criterion_id: 'C1', pass: true, evidence: '100 requests per minute' },
            { criterion_id: 'C2', pass: true, evidence: '100 requests per minute' },
            { criterion_id: 'C3', pass: false, gap: 'Say how long to wait before retrying.' },
          ],
        },
      },
    ],
    revise: [{ answer: { artifact: `${artifact}\nA request over the limit gets 429.\n` } }],
  }),
);
const scriptedModel = createScriptedProvider(loadScriptFile(scriptPath));
const spec = { artifact, goal, criteria, cap: 4 };
const evaluatePayload = { artifact, criteria };

const log = (line) => process.stderr.write(`${line}\n`);
const quantile = (values, q) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
};
const median = (values) => quantile(values, 0.5);
const ms = (value) => `${value.toFixed(value < 10 ? 2 : 1)} ms`;

async function timeIt(action) {
  const started = performance.now();
  await action();
  return performance.now() - started;
}

const server = await startNatsServer({ storeDir: join(scratch, 'nats') });
const connection = await connect({ servers: server.url });
const dispatcher = createNatsDispatcher({ connection, workerWaitMs: 60_000 });
const rows = [];
const figures = {};
let section = 'start';
const watchdog = setTimeout(() => {
  log(`bench: still in "${section}" after 15 minutes; giving up`);
  process.exit(1);
}, 15 * 60_000);
watchdog.unref();

try {
  // 1. The floor of a hop: a NATS request to a responder in this process.
  const echo = connection.subscribe('bench.echo', { callback: (_error, message) => message.respond(message.data) });
  const payloadText = JSON.stringify(evaluatePayload);
  const natsSamples = [];
  for (let index = 0; index < (QUICK ? 200 : 2000); index += 1) {
    natsSamples.push(await timeIt(() => connection.request('bench.echo', payloadText, { timeout: 5_000 })));
  }
  echo.unsubscribe();
  figures.natsP50 = median(natsSamples);
  log(`nats request p50 ${ms(figures.natsP50)}`);

  // 2. Hop latency with a warm pool: dispatch → worker process → reply, one task per process and with --reuse.
  for (const [mode, reuse, samples] of [
    ['one task per process (default)', 1, QUICK ? 20 : 100],
    ['--reuse 1000', 1000, QUICK ? 200 : 1000],
  ]) {
    section = `hop latency, ${mode}`;
    const host = await startHostProcess({
      natsUrl: server.url,
      roles: ['evaluate'],
      pool: 2,
      reuse,
      script: scriptPath,
    });
    const hops = [];
    for (let index = 0; index < samples; index += 1) {
      await host.warm('evaluate');
      hops.push(await timeIt(() => dispatcher.dispatch('evaluate', evaluatePayload)));
      await host.taken(index + 1);
    }
    await host.stop();
    const p50 = median(hops);
    const p99 = quantile(hops, 0.99);
    figures[reuse === 1 ? 'hopDefault' : 'hopReuse'] = p50;
    rows.push([`hop p50, ${mode}`, ms(p50), `${(p50 / figures.natsP50).toFixed(1)}× a bare NATS request`]);
    rows.push([`hop p99, ${mode}`, ms(p99), '']);
    log(`hop ${mode}: p50 ${ms(p50)} p99 ${ms(p99)}`);
  }
  rows.unshift(['NATS request on loopback (floor of a hop), p50', ms(figures.natsP50), '1×']);

  // 3. Worker boot (spawn → ready) and idle RSS, one worker at a time; the floor is a bare node process with IPC.
  const floorEntry = join(scratch, 'floor.cjs');
  writeFileSync(floorEntry, "process.send('ready'); process.disconnect();");
  const floors = [];
  for (let index = 0; index < 10; index += 1) {
    floors.push(
      await timeIt(
        () =>
          new Promise((resolve) => {
            const child = fork(floorEntry, [], { stdio: ['ignore', 'ignore', 'ignore', 'ipc'] });
            child.once('message', resolve);
          }),
      ),
    );
  }
  section = 'worker boot';
  const rss = [];
  const bootHost = await startHostProcess({ natsUrl: server.url, roles: ['evaluate'], pool: 1, script: scriptPath });
  for (let index = 0; index < (QUICK ? 5 : 15); index += 1) {
    await bootHost.warm('evaluate');
    const pid = bootHost.pids.at(-1);
    rss.push(Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024);
    await dispatcher.dispatch('evaluate', evaluatePayload);
    await bootHost.taken(index + 1);
  }
  const boots = bootHost.boots;
  await bootHost.stop();
  figures.boot = median(boots);
  figures.rss = median(rss);
  figures.nodeFloor = median(floors);
  rows.push([
    'worker boot, spawn → ready (median)',
    ms(figures.boot),
    `${(figures.boot / figures.nodeFloor).toFixed(1)}× a bare node process`,
  ]);
  rows.push(['bare node process, spawn → IPC ready (floor)', ms(figures.nodeFloor), '1×']);
  rows.push(['idle worker RSS (median)', `${figures.rss.toFixed(1)} MB`, '']);
  log(`boot ${ms(figures.boot)} (node floor ${ms(figures.nodeFloor)}), rss ${figures.rss.toFixed(1)} MB`);

  // 4. Sustained tasks per second, one task per process: every task costs a process boot.
  for (const [mode, reuse] of [
    ['one task per process (default)', 1],
    ['--reuse 1000', 1000],
  ]) {
    section = `sustained, ${mode}`;
    const pool = 4;
    const host = await startHostProcess({ natsUrl: server.url, roles: ['evaluate'], pool, reuse, script: scriptPath });
    const total = QUICK ? 40 : reuse === 1 ? 200 : 2000;
    let next = 0;
    const elapsed = await timeIt(() =>
      Promise.all(
        Array.from({ length: pool }, async () => {
          while (next < total) {
            next += 1;
            await dispatcher.dispatch('evaluate', evaluatePayload);
          }
        }),
      ),
    );
    await host.stop();
    const perSecond = total / (elapsed / 1000);
    figures[reuse === 1 ? 'tpsDefault' : 'tpsReuse'] = perSecond;
    log(`sustained ${mode}: ${perSecond.toFixed(0)} tasks/s`);
  }
  rows.push(['sustained tasks/s, one task per process (default)', figures.tpsDefault.toFixed(0), '']);
  rows.push([
    'sustained tasks/s, --reuse 1000',
    figures.tpsReuse.toFixed(0),
    `${(figures.tpsReuse / figures.tpsDefault).toFixed(1)}× default`,
  ]);

  // 5. A whole 4-iteration run (7 waves) with the instant scripted model, four ways.
  const runs = QUICK ? 5 : 20;
  section = 'whole runs over NATS';
  const natsHost = await startHostProcess({
    natsUrl: server.url,
    roles: ['evaluate', 'revise'],
    pool: 4,
    script: scriptPath,
  });
  const overNats = [];
  for (let index = 0; index < runs; index += 1) {
    await natsHost.taken(index * 7);
    await Promise.all([natsHost.warm('evaluate', 4), natsHost.warm('revise', 3)]);
    overNats.push(await timeIt(() => startPolish(spec, { dispatcher }).result));
  }
  await natsHost.stop();
  const reuseHost = await startHostProcess({
    natsUrl: server.url,
    roles: ['evaluate', 'revise'],
    pool: 1,
    reuse: 100_000,
    script: scriptPath,
  });
  const overNatsReuse = [];
  for (let index = 0; index < runs * 5; index += 1)
    overNatsReuse.push(await timeIt(() => startPolish(spec, { dispatcher }).result));
  await reuseHost.stop();
  section = 'whole runs in-process';
  const inProcessDispatcher = createInProcessDispatcher((task) => handleTask(task, scriptedModel));
  const inProcess = [];
  const plainLoop = [];
  const langGraph = [];
  // LangGraph's best case: the graph is compiled once and only invoked per run.
  const graph = buildLangGraphLoop(scriptedModel);
  for (let index = 0; index < runs * 5; index += 1) {
    inProcess.push(await timeIt(() => startPolish(spec, { dispatcher: inProcessDispatcher }).result));
    plainLoop.push(await timeIt(() => plainAsyncLoop()));
    langGraph.push(await timeIt(() => runLangGraphLoop(graph, spec)));
  }
  figures.runNats = median(overNats);
  figures.runNatsReuse = median(overNatsReuse);
  figures.runInProcess = median(inProcess);
  figures.runPlain = median(plainLoop);
  figures.runLangGraph = median(langGraph);
  const vsFloor = (value) => `${(value / figures.runPlain).toFixed(1)}× the plain loop`;
  rows.push([
    '4-iteration run (7 waves), polish over NATS, worker processes',
    ms(figures.runNats),
    vsFloor(figures.runNats),
  ]);
  rows.push([
    '4-iteration run, polish over NATS, --reuse workers',
    ms(figures.runNatsReuse),
    vsFloor(figures.runNatsReuse),
  ]);
  rows.push(['4-iteration run, polish in-process dispatcher', ms(figures.runInProcess), vsFloor(figures.runInProcess)]);
  rows.push(['4-iteration run, LangGraph.js in-process', ms(figures.runLangGraph), vsFloor(figures.runLangGraph)]);
  rows.push(['4-iteration run, plain async loop (floor)', ms(figures.runPlain), '1×']);
  log(
    `runs: nats ${ms(figures.runNats)}, in-process ${ms(figures.runInProcess)}, langgraph ${ms(figures.runLangGraph)}, plain ${ms(figures.runPlain)}`,
  );
} finally {
  await connection.drain();
  await server.stop();
  rmSync(scratch, { recursive: true, force: true });
}

/** The same calls as a polish run, with no machine, no wire and no validation beyond the handlers'. */
async function plainAsyncLoop() {
  let current = artifact;
  for (let iteration = 1; iteration <= 4; iteration += 1) {
    const { value } = await evaluate({ artifact: current, criteria }, scriptedModel);
    const record = computeVerdict({
      iteration,
      artifact: current,
      criteria,
      scores: value.scores,
      threshold: 'pass_all',
    });
    if (record.overall === 'pass' || iteration === 4) return record;
    current = (await revise({ artifact: current, blocking_gaps: record.blocking_gaps, goal }, scriptedModel)).value
      .artifact;
  }
}

const reviseCost = await measureReviseCost();
clearTimeout(watchdog);
const targets = [
  ['hop p50 ≤ 2 ms with a warm pool (default mode)', figures.hopDefault <= 2, `${ms(figures.hopDefault)}`],
  [
    'worker ready ≤ 150 ms after spawn',
    figures.boot <= 150,
    `${ms(figures.boot)}; a bare node process takes ${ms(figures.nodeFloor)} here`,
  ],
  ['idle RSS ≤ 60 MB per worker', figures.rss <= 60, `${figures.rss.toFixed(1)} MB`],
  [
    '4-iteration run over NATS faster than LangGraph.js in-process',
    figures.runNats < figures.runLangGraph,
    `${ms(figures.runNats)} vs ${ms(figures.runLangGraph)}`,
  ],
  [
    '… the same with --reuse workers',
    figures.runNatsReuse < figures.runLangGraph,
    `${ms(figures.runNatsReuse)} vs ${ms(figures.runLangGraph)}`,
  ],
];

const table = [
  '| measure | value | ratio |',
  '| --- | --- | --- |',
  ...rows.map((row) => `| ${row.join(' | ')} |`),
].join('\n');
const verdicts = [
  '| target | met | measured |',
  '| --- | --- | --- |',
  ...targets.map(([name, met, measured]) => `| ${name} | ${met ? 'yes' : '**no**'} | ${measured} |`),
].join('\n');
console.log(`${table}\n\n${verdicts}\n\n${reviseCost.markdown}`);

if (!QUICK) {
  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  const notes = readFileSync(`${REPO}bench/notes.md`, 'utf8');
  // Keep the section `pnpm bench:scale` writes.
  const previous = existsSync(`${REPO}docs/benchmarks.md`) ? readFileSync(`${REPO}docs/benchmarks.md`, 'utf8') : '';
  const scale = /<!-- scale:start -->[\s\S]*<!-- scale:end -->\n?/.exec(previous)?.[0] ?? '';
  writeFileSync(
    `${REPO}docs/benchmarks.md`,
    `# Benchmarks\n\nProduced by \`pnpm bench\` (\`node bench/run.js\` after a build) on ${new Date().toISOString().slice(0, 10)}: ` +
      `${cpus().length} cores (${cpu}), Node ${process.version}, nats-server on 127.0.0.1. ` +
      'All figures come from the same run; ratios compare figures of that run. The model is the instant scripted one, ' +
      'so these are the costs of the runtime itself, not of any LLM.\n\n' +
      `${table}\n\n## Targets\n\n${verdicts}\n\n${notes}\n${reviseCost.markdown}${scale ? `\n${scale}` : ''}`,
  );
  log('wrote docs/benchmarks.md');
}
