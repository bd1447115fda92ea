// Copies the demo's files (examples/demo) into dist/demo, so `polish demo` finds them inside the
// installed package too. A file already up to date is left alone: a build while tests run
// (the install test packs the checkout) must not pull files away from a running demo.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const source = fileURLToPath(new URL('../../../examples/demo/', import.meta.url));
const target = fileURLToPath(new URL('../dist/demo/', import.meta.url));
mkdirSync(target, { recursive: true });
for (const name of ['artifact.md', 'goal.txt', 'script.yaml']) {
  const text = readFileSync(`${source}${name}`, 'utf8');
  let current;
  try {
    current = readFileSync(`${target}${name}`, 'utf8');
  } catch {
    current = undefined;
  }
  if (current !== text) writeFileSync(`${target}${name}`, text);
}
