// Bundles the worker entry: a worker process then loads a few modules instead of hundreds,
// which roughly halves its boot time (see docs/benchmarks.md). Each model SDK stays in its own
// chunk, loaded only by the workers that use it, and so does the OpenTelemetry SDK (the dynamic
// import in telemetry.ts), loaded only when an OTLP endpoint is configured.
//
// Only what changed is written, and only stale chunks are removed: a build while workers boot
// (the install test packs the checkout during the suite) must not pull their files away.
import { build } from 'rolldown';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const dist = fileURLToPath(new URL('../dist/', import.meta.url));
const target = `${dist}worker-bundle/`;
const output = await build({
  input: { 'worker-process': `${dist}worker/worker-process.js` },
  platform: 'node',
  logLevel: 'warn',
  write: false,
  output: {
    format: 'esm',
    minify: true,
    entryFileNames: '[name].mjs',
    chunkFileNames: '[name]-[hash].mjs',
  },
});
mkdirSync(target, { recursive: true });
const fresh = new Set();
for (const file of output.output) {
  const text = file.type === 'chunk' ? file.code : file.source;
  fresh.add(file.fileName);
  let current;
  try {
    current = readFileSync(`${target}${file.fileName}`);
  } catch {
    current = undefined;
  }
  if (!current || !current.equals(Buffer.from(text))) writeFileSync(`${target}${file.fileName}`, text);
}
for (const name of readdirSync(target)) if (!fresh.has(name)) rmSync(`${target}${name}`, { recursive: true });
