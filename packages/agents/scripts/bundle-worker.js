// Bundles the worker entry: a worker process then loads a few modules instead of hundreds,
// which roughly halves its boot time (see docs/benchmarks.md). Each model SDK stays in its own
// chunk, loaded only by the workers that use it, and so does the OpenTelemetry SDK (the dynamic
// import in telemetry.ts), loaded only when an OTLP endpoint is configured.
import { build } from 'rolldown';
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const dist = fileURLToPath(new URL('../dist/', import.meta.url));
rmSync(`${dist}worker-bundle`, { recursive: true, force: true });
await build({
  // The entry turns the compile cache on, then imports the rest (a chunk of its own), so that
  // chunk's bytecode comes from the cache.
  input: { 'worker-entry': `${dist}worker/worker-entry.js` },
  platform: 'node',
  logLevel: 'warn',
  output: {
    dir: `${dist}worker-bundle`,
    format: 'esm',
    minify: true,
    entryFileNames: '[name].mjs',
    chunkFileNames: '[name]-[hash].mjs',
  },
});
