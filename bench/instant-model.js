// What the benchmarks share: the demo's artifact and criteria, and the instant scripted model they
// answer with. Its answers come at once, so a figure is the runtime's own cost, not a model's;
// it is a script, no LLM is called.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const REPO = new URL('../', import.meta.url);
export const criteria = JSON.parse(readFileSync(new URL('examples/demo/criteria.json', REPO), 'utf8'));
export const artifact = readFileSync(new URL('examples/demo/artifact.md', REPO), 'utf8');
export const goal = 'Document the API rate limiter.';

const passed = (id) => ({ criterion_id: id, pass: true, evidence: '100 requests per minute' });

/**
 * Writes the instant script into `folder` and returns its path. `passing`: every criterion
 * passes (evaluations only). `never-converges`: the last criterion keeps a gap and a revision
 * adds a line, so a run at cap 4 is 7 waves (4 evaluations, 3 revisions).
 */
export function writeInstantScript(folder, kind) {
  const last = criteria.length - 1;
  const scores = criteria.map(({ id }, index) =>
    kind === 'never-converges' && index === last
      ? { criterion_id: id, pass: false, gap: 'Say how long to wait before retrying.' }
      : passed(id),
  );
  const script = {
    name: 'bench-instant',
    evaluate: [{ answer: { scores } }],
    ...(kind === 'never-converges'
      ? { revise: [{ answer: { artifact: `${artifact}\nA request over the limit gets 429.\n` } }] }
      : {}),
  };
  const path = join(folder, 'instant.json');
  writeFileSync(path, JSON.stringify(script));
  return path;
}

/** The value at quantile `q` (0–1) of `values`. */
export function quantile(values, q) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

export const median = (values) => quantile(values, 0.5);
