// Bundles the worker entry: a worker process then loads a few modules instead of hundreds,
// which roughly halves its boot time (see docs/benchmarks.md). Each model SDK stays in its own
// chunk, loaded only by the workers that use it, and so does the OpenTelemetry SDK (the dynamic
// import in telemetry.ts), loaded only when an OTLP endpoint is configured.
//
// Then a V8 startup snapshot of the worker (worker.blob): the same code as one CommonJS script,
// run once by `node --build-snapshot`, so that a worker starts with its code already loaded.
import { build } from 'rolldown';
import { spawnSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const dist = fileURLToPath(new URL('../dist/', import.meta.url));
rmSync(`${dist}worker-bundle`, { recursive: true, force: true });
rmSync(`${dist}worker-snapshot`, { recursive: true, force: true });
await build({
  // The entry turns the compile cache on, then imports the rest (a chunk of its own), so that
  // chunk's bytecode comes from the cache. nats-client is an entry of its own with a fixed name:
  // a worker restored from the snapshot loads it by its path.
  input: { 'worker-entry': `${dist}worker/worker-entry.js`, 'nats-client': `${dist}worker/nats-client.js` },
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

// What a snapshot cannot hold, or what a restored process (which has no dynamic import()) could
// not load later, is replaced by a module that says so. One snapshot per kind of model: the
// pure one (scripted or no model) holds neither SDK; each provider's holds its own SDK only, so
// a worker restores just the code its role uses. The host forks the snapshot of the worker's
// kind (agent-host.ts, workerLaunch); a worker with tracing on forks the bundle.
const SNAPSHOTS = { pure: [], anthropic: ['anthropic'], openai: ['openai'] };
const stubbed = (providers) => {
  const others = ['anthropic', 'openai'].filter((provider) => !providers.includes(provider));
  const stubbedProviders = others.length > 0 ? `|providers[\\/](${others.join('|')})-provider` : '';
  return new RegExp(`[\\/]dist[\\/](worker[\\/]nats-client|telemetry-sdk${stubbedProviders})\\.js$`);
};
const blobs = {};
for (const [kind, providers] of Object.entries(SNAPSHOTS)) {
  const notInSnapshot = stubbed(providers);
  const entry = `${dist}worker-snapshot/${kind}-entry.cjs`;
  const snapshot = await build({
    input: `${dist}worker/snapshot-entry.js`,
    platform: 'node',
    logLevel: 'warn',
    plugins: [
      {
        name: 'not-in-snapshot',
        load: (id) =>
          notInSnapshot.test(id)
            ? `const fail = () => { throw new Error('${id.split(/[\\/]/).at(-1)} is not in the worker snapshot'); };\n` +
              'export { fail as loadNatsClient, fail as createAnthropicProvider, fail as createOpenAICompatibleProvider, fail as startSdk };'
            : null,
      },
    ],
    // One script: the provider a snapshot holds is inlined where it is imported (no import() at run time).
    output: { file: entry, format: 'cjs', minify: true, codeSplitting: false },
  });
  // The NATS client (and with it node:tls) must load after the restore, never from the snapshot.
  const modules = snapshot.output.flatMap((chunk) => chunk.moduleIds ?? []);
  const nats = modules.filter((id) => /@nats-io[\\/]|node:tls|^tls$/.test(id));
  if (nats.length > 0)
    throw new Error(`the ${kind} worker snapshot must not hold the NATS client, but it has ${nats.join(', ')}`);

  const blob = `${dist}worker-snapshot/${kind}.blob`;
  const built = spawnSync(process.execPath, ['--snapshot-blob', blob, '--build-snapshot', entry], { encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`building the ${kind} worker snapshot failed:\n${built.stderr}`);
  blobs[kind] = `${kind}.blob`;
}
// A blob only starts the Node that built it: the host checks this before using it.
writeFileSync(
  `${dist}worker-snapshot/snapshots.json`,
  `${JSON.stringify({ node: process.version, blobs }, null, 2)}\n`,
);
