// Bundles the worker entry into one file: a worker process then loads one module instead of
// hundreds, which roughly halves its boot time (see docs/benchmarks.md).
import { build } from 'rolldown';
import { fileURLToPath } from 'node:url';

const dist = fileURLToPath(new URL('../dist/', import.meta.url));
await build({
  input: `${dist}worker/worker-process.js`,
  platform: 'node',
  logLevel: 'warn',
  output: { file: `${dist}worker-bundle.mjs`, format: 'esm', minify: true },
});
