// Bundles the worker entry: a worker process then loads a few modules instead of hundreds,
// which roughly halves its boot time (see docs/benchmarks.md). Each model SDK stays in its own
// chunk, loaded only by the workers that use it, and so does the OpenTelemetry SDK (the dynamic
// import in telemetry.ts), loaded only when an OTLP endpoint is configured.
//
// Then a V8 startup snapshot of the worker (worker.blob): the same code as one CommonJS script,
// run once by `node --build-snapshot`, so that a worker starts with its code already loaded.
import { build } from 'rolldown';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const dist = fileURLToPath(new URL('../dist/', import.meta.url));
rmSync(`${dist}worker-bundle`, { recursive: true, force: true });
rmSync(`${dist}worker-snapshot`, { recursive: true, force: true });
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
    charset: 'ascii',
    entryFileNames: '[name].mjs',
    chunkFileNames: '[name]-[hash].mjs',
  },
});

// What a snapshot cannot hold, or what a restored process (which has no dynamic import()) could
// not load later, is replaced by a module that says so: the host forks the snapshot only for
// workers that need none of it (agent-host.ts, workerLaunch). A snapshot per provider SDK was
// tried and measured: no faster than the bundle, and 20 MB more to install (docs/benchmarks.md).
const NOT_IN_SNAPSHOT = /[\\/]dist[\\/](providers[\\/](anthropic|openai)-provider|telemetry-sdk)\.js$/;
// node:tls cannot be in a snapshot (the builder fails on it), but the NATS client needs it only
// to open a TLS connection: the client's `node:tls` is a stand-in that loads the real module at
// its first use, which is after the restore.
const LAZY_TLS = '\0polish-lazy-tls';
const lazyTls = [
  'let tls;',
  "const real = () => (tls ??= process.getBuiltinModule('node:tls'));",
  'export const connect = (...args) => real().connect(...args);',
  // Before the first TLS connection nothing can be a TLSSocket, so there is nothing to load.
  'export class TLSSocket { static [Symbol.hasInstance](value) { return tls !== undefined && value instanceof tls.TLSSocket; } }',
  'export default { connect, TLSSocket };',
].join('\n');
const entry = `${dist}worker-snapshot/snapshot-entry.cjs`;
const snapshot = await build({
  input: `${dist}worker/snapshot-entry.js`,
  platform: 'node',
  logLevel: 'warn',
  plugins: [
    {
      name: 'lazy-tls',
      resolveId: (id) => (id === 'node:tls' || id === 'tls' ? LAZY_TLS : null),
      load: (id) => (id === LAZY_TLS ? lazyTls : null),
    },
    {
      name: 'not-in-snapshot',
      load: (id) =>
        NOT_IN_SNAPSHOT.test(id)
          ? `const fail = () => { throw new Error('${id.split(/[\\/]/).at(-1)} is not in the worker snapshot'); };\n` +
            'export { fail as loadNatsClient, fail as createAnthropicProvider, fail as createOpenAICompatibleProvider, fail as startSdk };'
          : null,
    },
  ],
  // ASCII only: V8 keeps a script's source in the heap, one byte a character if it is all
  // Latin-1, two bytes otherwise, and a restore's time grows with the heap.
  output: { file: entry, format: 'cjs', minify: true, codeSplitting: false, charset: 'ascii' },
});
// node:tls must load after the restore, never from the snapshot.
const modules = snapshot.output.flatMap((chunk) => chunk.moduleIds ?? []);
const tls = modules.filter((id) => /^(node:)?tls$/.test(id));
if (tls.length > 0) throw new Error(`the worker snapshot must not hold node:tls, but it has ${tls.join(', ')}`);

const nonAscii = readFileSync(entry).findIndex((byte) => byte > 0x7f);
if (nonAscii >= 0)
  throw new Error(
    `the worker snapshot's script is not all ASCII (at byte ${nonAscii}): its source would take twice the room in every worker's heap`,
  );

/**
 * A NATS server on loopback for the snapshot's build, through which its worker serves a few
 * tasks (src/worker/snapshot-path.ts); undefined where nats-server is not installed.
 */
async function snapshotNats() {
  if (spawnSync('nats-server', ['--version']).error) return undefined;
  const port = await new Promise((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port: free } = probe.address();
      probe.close(() => resolve(free));
    });
  });
  const store = mkdtempSync(join(tmpdir(), 'polish-snapshot-nats-'));
  const server = spawn('nats-server', ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', store], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const stop = () => {
    server.kill();
    rmSync(store, { recursive: true, force: true });
  };
  const lines = [];
  await new Promise((resolve, reject) => {
    createInterface({ input: server.stderr }).on('line', (line) => {
      lines.push(line);
      if (line.includes('Server is ready')) resolve();
    });
    server.once('exit', (code) => {
      stop();
      reject(new Error(`nats-server for the worker snapshot exited (${code}):\n${lines.join('\n')}`));
    });
  });
  return { url: `nats://127.0.0.1:${port}`, stop };
}

const blob = `${dist}worker-snapshot/worker.blob`;
const nats = await snapshotNats();
if (!nats)
  process.stderr.write(
    'nats-server is not installed: the worker snapshot is built without serving tasks first, so a restored worker compiles the task path on its first task\n',
  );
// The blob ships in the package and every worker starts from it: nothing of the build's
// environment may be in it. A value only the build's environment holds must not be found there.
const canary = randomBytes(16).toString('hex');
const built = spawnSync(process.execPath, ['--snapshot-blob', blob, '--build-snapshot', entry], {
  encoding: 'utf8',
  env: { ...process.env, POLISH_SNAPSHOT_CANARY: canary, ...(nats ? { POLISH_SNAPSHOT_NATS: nats.url } : {}) },
});
nats?.stop();
if (built.status !== 0) throw new Error(`building the worker snapshot failed:\n${built.stderr}`);
if (readFileSync(blob).includes(canary)) {
  rmSync(blob);
  throw new Error("the worker snapshot holds a copy of its build's environment: it would ship in the package");
}
// The script was only the snapshot's input: workers never read it.
rmSync(entry);
// A blob starts only the Node, platform and architecture that built it: the host checks these
// before using it (an installed package may run elsewhere than where it was built).
const builtFor = { node: process.version, platform: process.platform, arch: process.arch };
writeFileSync(`${dist}worker-snapshot/worker.blob.json`, `${JSON.stringify(builtFor)}\n`);
