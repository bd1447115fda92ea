// `node bench/first-parse.js`: what reading one answer costs in a fresh process, with zod's JIT
// and without it (jitless), for the evaluation schema made per task (evaluationSchemaFor) and for
// the static one. Each case runs in a fresh process, 10 times in turns, so nothing is warm but the
// modules loaded; then 5,000 parses give the cost in a hot process. Prints medians, writes nothing.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const [kind, mode] = process.argv.slice(2);
if (!kind) {
  const cases = ['per-task', 'static'].flatMap((schema) => ['jit', 'jitless'].map((jit) => [schema, jit]));
  const results = new Map(cases.map((pair) => [pair.join(' '), []]));
  for (let round = 0; round < 10; round += 1)
    for (const pair of cases) {
      const output = execFileSync(process.execPath, [fileURLToPath(import.meta.url), ...pair], { encoding: 'utf8' });
      results.get(pair.join(' ')).push(JSON.parse(output));
    }
  const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  for (const [name, runs] of results)
    console.log(
      `${name}: first parse ${median(runs.map((run) => run.first)).toFixed(2)} ms, ` +
        `then ${median(runs.map((run) => run.hotMicros)).toFixed(1)} µs a parse (medians of ${runs.length})`,
    );
} else {
  const { EvaluationSchema, evaluationSchemaFor } = await import('@polish/protocol');
  const demo = new URL('../examples/demo/', import.meta.url);
  const criteria = JSON.parse(readFileSync(new URL('criteria.json', demo), 'utf8'));
  const artifact = readFileSync(new URL('artifact.md', demo), 'utf8');
  const answer = {
    scores: criteria.map((criterion) => ({ criterion_id: criterion.id, pass: true, evidence: artifact.slice(0, 20) })),
  };
  const options = mode === 'jitless' ? { jitless: true } : undefined;
  const schema = () =>
    kind === 'static' ? EvaluationSchema : evaluationSchemaFor(criteria, { artifact, evidence: true });
  let started = performance.now();
  if (!schema().safeParse(answer, options).success) throw new Error('the sample answer does not read');
  const first = performance.now() - started;
  started = performance.now();
  for (let index = 0; index < 5_000; index += 1) schema().safeParse(answer, options);
  const hotMicros = ((performance.now() - started) / 5_000) * 1000;
  console.log(JSON.stringify({ first, hotMicros }));
}
