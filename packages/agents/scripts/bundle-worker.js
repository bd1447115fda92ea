// Bundles the worker entry: a worker process then loads a few modules instead of hundreds,
// which roughly halves its boot time (see docs/benchmarks.md). Each model SDK stays in its own
// chunk, loaded only by the workers that use it, and so does the OpenTelemetry SDK (the dynamic
// import in telemetry.ts), loaded only when an OTLP endpoint is configured.
//
// Then a V8 startup snapshot of the worker (worker.blob): the same code as one CommonJS script,
// run once by `node --build-snapshot`, so that a worker starts with its code already loaded;
// the model SDKs are not in it but beside it (worker-snapshot/sdk/), CommonJS files that a
// restored worker requires when it makes its model.
import { build } from 'rolldown';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  accessSync,
  chmodSync,
  constants,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const dist = fileURLToPath(new URL('../dist/', import.meta.url));
// `--out <folder>` writes the bundle and the snapshot there instead of into dist (the tests build
// one that way without touching the one the rest of the suite starts workers from).
const outFlag = process.argv.indexOf('--out');
if (outFlag > 0 && !process.argv[outFlag + 1]) {
  process.stderr.write('usage: node bundle-worker.js [--out <folder>]\n');
  process.exit(2);
}
const out = outFlag > 0 ? join(process.argv[outFlag + 1], '/') : dist;
rmSync(`${out}worker-bundle`, { recursive: true, force: true });
rmSync(`${out}worker-snapshot`, { recursive: true, force: true });
await build({
  // The entry turns the compile cache on, then imports the rest (a chunk of its own), so that
  // chunk's bytecode comes from the cache.
  input: { 'worker-entry': `${dist}worker/worker-entry.js` },
  platform: 'node',
  logLevel: 'warn',
  output: {
    dir: `${out}worker-bundle`,
    format: 'esm',
    minify: true,
    charset: 'ascii',
    entryFileNames: '[name].mjs',
    chunkFileNames: '[name]-[hash].mjs',
  },
});

// What a snapshot cannot hold, or what a restored process (which has no dynamic import()) could
// not load later, is replaced by a module that says so: the host forks the snapshot only for
// workers that need none of it (agent-host.ts, workerLaunch).
const NOT_IN_SNAPSHOT = /[\\/]dist[\\/]telemetry-sdk\.js$/;
// node:tls cannot be in a snapshot (the builder fails on it), but the NATS client needs it only
// to open a TLS connection: the client's `node:tls` is a stand-in that loads the real module at
// its first use, which is after the restore.
const LAZY = '\0polish-lazy:';
const lazyTls = [
  'let tls;',
  "const real = () => (tls ??= process.getBuiltinModule('node:tls'));",
  'export const connect = (...args) => real().connect(...args);',
  // Before the first TLS connection nothing can be a TLSSocket, so there is nothing to load.
  'export class TLSSocket { static [Symbol.hasInstance](value) { return tls !== undefined && value instanceof tls.TLSSocket; } }',
  'export default { connect, TLSSocket };',
].join('\n');
// Only par.command runs commands: their builtins (and the dozen modules they pull in, dgram,
// readline, fs watchers) would otherwise be in every worker's heap, and a restore's time grows
// with the heap. They load at the first call instead, after the restore. Their functions are
// forwarded, as plain functions: a name that is not one (a class, a constant) is not there, so
// an ES import of it fails the build, but a property read (CommonJS, or of the default export)
// gets undefined, and a forwarder has no util.promisify.custom (promisify(execFile) would resolve
// with stdout alone). The worker's code calls spawn, spawnSync and fs/promises functions, and
// tweetnacl reads crypto.randomBytes; the restore check below fails the build should one of
// them load at build time after all.
const DEFERRED = ['node:child_process', 'node:fs/promises', 'node:crypto'];
function deferred(id) {
  const module = process.getBuiltinModule(id);
  const names = Object.keys(module).filter((name) => typeof module[name] === 'function' && /^[a-z]/.test(name));
  return [
    'let real;',
    `const load = () => (real ??= process.getBuiltinModule(${JSON.stringify(id)}));`,
    ...names.map((name) => `export const ${name} = (...args) => load().${name}(...args);`),
    `export default { ${names.join(', ')} };`,
  ].join('\n');
}
// The model SDKs are not in the snapshot (each would add its heap to every worker's restore,
// where most workers use one SDK or none), and a restored process has no dynamic import() but
// has require(): the providers' own code is in the snapshot, and the SDK it constructs is a
// stand-in that requires the SDK's CommonJS build, written into sdk/ beside the blob below, at
// the first client. The blob is found from the process's own --snapshot-blob.
const SDKS = { '@anthropic-ai/sdk': 'anthropic', openai: 'openai' };
const sdkAfterRestore = (id) =>
  [
    "import { createRequire } from 'node:module';",
    "import { dirname, join, resolve } from 'node:path';",
    'let sdk;',
    'const load = () => {',
    "  const at = process.execArgv.findIndex((arg) => arg === '--snapshot-blob' || arg.startsWith('--snapshot-blob='));",
    "  const flag = process.execArgv[at] ?? '';",
    "  const blob = flag.includes('=') ? flag.slice(flag.indexOf('=') + 1) : process.execArgv[at + 1];",
    '  if (!blob)',
    `    throw new Error('${id} is required from beside the worker snapshot, but this process names no --snapshot-blob');`,
    `  const file = join(dirname(resolve(blob)), 'sdk', '${SDKS[id]}.cjs');`,
    '  return (sdk ??= createRequire(file)(file).default);',
    '};',
    // With new it makes the SDK's client; its static members (the SDK's error classes) are the SDK's.
    'export default new Proxy(function Client() {}, { construct: (_, args) => new (load())(...args), get: (_, key) => load()[key] });',
  ].join('\n');
// In the snapshot the providers' modules are static imports: their SDKs are the stand-ins above,
// so nothing heavy loads early. A dynamic import would make the bundler wrap every module they
// share with the rest (the protocol, zod) in a lazy initialiser: half a megabyte more heap to
// restore in every worker. The build fails if the import it rewrites is not there.
const MODEL_SETTINGS = /[\\/]dist[\\/]providers[\\/]model-settings\.js$/;
const PROVIDER_MODULES = ['./anthropic-provider.js', './openai-provider.js'];
let providersMadeStatic = false;
function staticProviders(code) {
  providersMadeStatic = true;
  return PROVIDER_MODULES.reduce((source, specifier, index) => {
    const dynamic = `import('${specifier}')`;
    if (!source.includes(dynamic))
      throw new Error(`model-settings.js no longer has ${dynamic} for the snapshot to make static`);
    return `import * as provider${index} from '${specifier}';\n${source.replaceAll(dynamic, `Promise.resolve(provider${index})`)}`;
  }, code);
}
const lazyModule = (id) => {
  if (id in SDKS) return sdkAfterRestore(id);
  const name = id.startsWith('node:') ? id : `node:${id}`;
  if (name === 'node:tls') return lazyTls;
  return DEFERRED.includes(name) ? deferred(name) : undefined;
};
// The script is built outside the checkout: V8 keeps the name of a snapshot's script (for stack
// traces), and the blob ships in the package, so a script in the checkout would put the builder's
// path (often /home/<user>/…) in every installed copy. Only a fresh temporary folder is named,
// under /tmp itself where there is one: TMPDIR is often in the builder's home (~/tmp) too.
const scratchRoot = (() => {
  try {
    accessSync('/tmp', constants.W_OK);
    return '/tmp';
  } catch {
    return tmpdir();
  }
})();
const scratch = mkdtempSync(join(scratchRoot, 'polish-snapshot-entry-'));
process.on('exit', () => rmSync(scratch, { recursive: true, force: true }));
const entry = join(scratch, 'snapshot-entry.cjs');
await build({
  input: `${dist}worker/snapshot-entry.js`,
  platform: 'node',
  logLevel: 'warn',
  plugins: [
    {
      name: 'lazy-builtins',
      resolveId: (id) => (lazyModule(id) === undefined ? null : `${LAZY}${id}`),
      load: (id) => (id.startsWith(LAZY) ? lazyModule(id.slice(LAZY.length)) : null),
    },
    {
      name: 'static-providers',
      transform: (code, id) => (MODEL_SETTINGS.test(id) ? staticProviders(code) : null),
    },
    {
      name: 'not-in-snapshot',
      load: (id) =>
        NOT_IN_SNAPSHOT.test(id)
          ? `const fail = () => { throw new Error('${id.split(/[\\/]/).at(-1)} is not in the worker snapshot'); };\n` +
            'export { fail as startSdk };'
          : null,
    },
  ],
  // ASCII only: V8 keeps a script's source in the heap, one byte a character if it is all
  // Latin-1, two bytes otherwise, and a restore's time grows with the heap.
  output: { file: entry, format: 'cjs', minify: true, codeSplitting: false, charset: 'ascii' },
});
// node:tls and the deferred builtins must load after the restore, never from the snapshot: the
// script must not require them.
if (!providersMadeStatic)
  throw new Error("the snapshot build did not find model-settings.js to make its providers' imports static");
const script = readFileSync(entry);
// The SDKs stay out of the heap: a subpath import the stand-ins do not catch would bring one in.
if (/x-stainless/i.test(script.toString('latin1')))
  throw new Error(
    "a model SDK is in the worker snapshot's script: import it by its package name, which the build replaces",
  );
for (const id of ['node:tls', ...DEFERRED]) {
  const bare = id.slice('node:'.length);
  const required = script.toString('latin1').match(new RegExp(`require\\((["'])(node:)?${bare}\\1\\)`));
  if (required) throw new Error(`the worker snapshot's script must not load ${id}, but it has ${required[0]}`);
}

/** Fails the build unless `bytes` are all ASCII: V8 holds other source at two bytes a character. */
function assertAscii(bytes, what) {
  const at = bytes.findIndex((byte) => byte > 0x7f);
  if (at >= 0)
    throw new Error(
      `${what} is not all ASCII (at byte ${at}): its source would take twice the room in a worker's heap`,
    );
}
assertAscii(script, "the worker snapshot's script");

/** How long the build waits for its NATS server, for it to stop, and for the snapshot. */
const NATS_READY_MS = 10_000;
const NATS_STOP_MS = 10_000;
const SNAPSHOT_BUILD_MS = 120_000;
const WITHOUT_TASKS =
  'the worker snapshot is built without serving tasks first, so a restored worker compiles the task path on its first task';

/**
 * A NATS server on loopback for the snapshot's build, through which its worker serves a few
 * tasks (src/worker/snapshot-path.ts); undefined, saying why, where none could be started.
 */
async function snapshotNats() {
  const store = mkdtempSync(join(tmpdir(), 'polish-snapshot-nats-'));
  // With a password of its own, in a file only this user reads (not on the command line, which
  // `ps` shows): what the build's worker serves ends up in every worker's heap, so no other local
  // user may send it a task while it runs.
  const pass = randomBytes(24).toString('hex');
  const config = join(store, 'nats.conf');
  writeFileSync(config, `authorization { user: snapshot, password: "${pass}" }\n`, { mode: 0o600 });
  // -p -1: a free port the server picks itself, read from its log.
  const server = spawn('nats-server', ['-c', config, '-js', '-a', '127.0.0.1', '-p', '-1', '-sd', store], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const exited = new Promise((resolve) => server.once('close', resolve));
  // The store is removed once the server has stopped writing to it (or could not start).
  const stop = async () => {
    server.kill();
    const timer = setTimeout(() => server.kill('SIGKILL'), NATS_STOP_MS);
    await exited;
    clearTimeout(timer);
    rmSync(store, { recursive: true, force: true });
  };
  const lines = [];
  const port = await new Promise((resolve) => {
    const settle = (value) => {
      clearTimeout(deadline);
      server.off('error', onError).off('exit', onExit);
      resolve(value);
    };
    const giveUp = (why) => {
      settle(undefined);
      process.stderr.write(`${why}: ${WITHOUT_TASKS}\n${lines.join('\n')}${lines.length ? '\n' : ''}`);
    };
    const deadline = setTimeout(
      () => giveUp(`nats-server was not ready within ${NATS_READY_MS / 1000} s`),
      NATS_READY_MS,
    );
    const onError = (error) =>
      giveUp(error.code === 'ENOENT' ? 'nats-server is not installed' : `nats-server did not start (${error.message})`);
    const onExit = (code, signal) => giveUp(`nats-server exited (${code ?? signal})`);
    server.once('error', onError).once('exit', onExit);
    let clientPort;
    createInterface({ input: server.stderr }).on('line', (line) => {
      lines.push(line);
      clientPort ??= /Listening for client connections on \S+:(\d+)/.exec(line)?.[1];
      if (clientPort && line.includes('Server is ready')) settle(Number(clientPort));
    });
  });
  if (port !== undefined) return { url: `nats://127.0.0.1:${port}`, pass, stop };
  await stop();
  return undefined;
}

const nats = await snapshotNats();
// CI sets this: there a snapshot built without its task path would pass unnoticed, only slower.
if (!nats && process.env.POLISH_SNAPSHOT_REQUIRE_TASKS === '1') {
  process.stderr.write('POLISH_SNAPSHOT_REQUIRE_TASKS=1 refuses a snapshot built without its tasks: build stopped\n');
  process.exit(1);
}
// The blob ships in the package and every worker starts from it: nothing of the build's
// environment may be in it. A value only the build's environment holds must not be found there.
const canary = randomBytes(16).toString('hex');
// Built in the scratch folder, named relatively: the builder's command line stays in the heap
// (as Node's options), and must not name the package's folder (snapshot-entry.ts scrubs the rest).
const built = spawnSync(
  process.execPath,
  ['--snapshot-blob', 'worker.blob', '--build-snapshot', 'snapshot-entry.cjs'],
  {
    cwd: scratch,
    // process.argv0 is what the command was called, here the node's path: a bare name instead.
    argv0: 'node',
    encoding: 'utf8',
    env: {
      ...process.env,
      POLISH_SNAPSHOT_CANARY: canary,
      ...(nats ? { POLISH_SNAPSHOT_NATS: nats.url, POLISH_SNAPSHOT_NATS_PASS: nats.pass } : {}),
    },
    timeout: SNAPSHOT_BUILD_MS,
  },
);
await nats?.stop();
if (built.error?.code === 'ETIMEDOUT')
  throw new Error(`building the worker snapshot took more than ${SNAPSHOT_BUILD_MS / 1000} s:\n${built.stderr}`);
if (built.status !== 0) throw new Error(`building the worker snapshot failed:\n${built.stderr}`);
// Checked where it was built, and copied into the package only once every check passed.
const blob = join(scratch, 'worker.blob');
const bytes = readFileSync(blob);
if (bytes.includes(canary) || (nats && bytes.includes(nats.pass)))
  throw new Error("the worker snapshot holds a copy of its build's environment: it would ship in the package");
// Nor the folder it was built in (the package's own path, with the builder's user name in it).
const checkout = fileURLToPath(new URL('../../../', import.meta.url)).replace(/[\\/]$/, '');
if (bytes.includes(checkout))
  throw new Error(`the worker snapshot names the folder it was built in (${checkout}): it would ship in the package`);
// Nor the builder's TMPDIR, where that is not /tmp (a home folder, say).
const builderTmp = realpathSync(tmpdir());
if (builderTmp !== '/tmp' && bytes.includes(builderTmp))
  throw new Error(`the worker snapshot names the build's TMPDIR (${builderTmp}): it would ship in the package`);
// A restored process must arm its timers: Node keeps the time its next timer is due in the heap,
// and a stale one from the build would leave a worker's timeouts and waits never firing
// (snapshot-entry.ts). Restored once in probe mode, the snapshot arms a timer due in 24 days or
// says it could not; and says whether a deferred builtin (DEFERRED) was loaded at build time
// after all, by a call during the build rather than a require in the script.
const probe = spawnSync(process.execPath, ['--snapshot-blob', blob, 'polish-snapshot-probe', ...DEFERRED], {
  encoding: 'utf8',
  timeout: SNAPSHOT_BUILD_MS,
});
if (probe.status !== 0)
  throw new Error(
    `a process restored from the worker snapshot failed its check (timers armed, deferred builtins not loaded):\n${probe.stdout}${probe.stderr}`,
  );
// Each SDK as CommonJS beside the blob, for restored workers to require (the stand-ins above),
// built from its ES build, which the bundler can shake. Its dynamic imports stay chunks that
// load at their first use, as require() calls (the Anthropic SDK's Node built-ins: child
// process, crypto, readline, worker threads, only for credentials files). Written before the
// blob: a blob is never there without them.
await build({
  input: Object.fromEntries(Object.entries(SDKS).map(([id, name]) => [name, fileURLToPath(import.meta.resolve(id))])),
  platform: 'node',
  logLevel: 'warn',
  output: {
    dir: `${out}worker-snapshot/sdk`,
    format: 'cjs',
    exports: 'named',
    minify: true,
    charset: 'ascii',
    entryFileNames: '[name].cjs',
    chunkFileNames: '[name]-[hash].cjs',
  },
});
for (const name of readdirSync(`${out}worker-snapshot/sdk`))
  assertAscii(readFileSync(`${out}worker-snapshot/sdk/${name}`), `worker-snapshot/sdk/${name}`);
mkdirSync(`${out}worker-snapshot`, { recursive: true });
copyFileSync(blob, `${out}worker-snapshot/worker.blob`);
// The script was only the snapshot's input: workers never read it.
rmSync(scratch, { recursive: true, force: true });
// A blob starts only the Node, platform and architecture that built it: the host checks these
// before using it (an installed package may run elsewhere than where it was built).
const builtFor = { node: process.version, platform: process.platform, arch: process.arch };
writeFileSync(`${out}worker-snapshot/worker.blob.json`, `${JSON.stringify(builtFor)}\n`);
// Every worker runs what is here: whatever the builder's umask, nobody else may write it.
const closeToOthers = (path) => {
  const stat = statSync(path);
  chmodSync(path, stat.mode & 0o755);
  if (stat.isDirectory()) for (const name of readdirSync(path)) closeToOthers(join(path, name));
};
closeToOthers(`${out}worker-snapshot`);
closeToOthers(`${out}worker-bundle`);
