// The entry of the worker's V8 startup snapshot (`node --build-snapshot`, see
// scripts/bundle-worker.js): the worker's code, zod, the protocol's schemas and the NATS client
// are loaded and built once, at build time, and every worker process starts from that heap
// instead of loading them again. node:tls cannot be in a snapshot: the bundle gives the NATS
// client a stand-in that loads it at the first TLS connection, after the restore. A restored
// process has no dynamic import(): a model SDK is a stand-in that requires the SDK's CommonJS
// build beside the blob at its first client (scripts/bundle-worker.js), and the host uses the
// snapshot only for workers without tracing (its SDK is an ES module graph); see workerLaunch in
// agent-host.ts.
// Nothing here may draw random values at build time (crypto.randomUUID keeps a cache of random
// bytes in the heap): every restored worker would then draw the same ones. The NATS client's
// nuid, the source of its inbox names, draws a new prefix after the restore all the same.
import { setTimeout as delay } from 'node:timers/promises';
import { startupSnapshot } from 'node:v8';
import { enableCompileCache } from '../compile-cache.js';
import { TaskRoleSchema } from '@polish/protocol';
import { parseScriptFile } from '../providers/script-file.js';
import { loadNatsClient, type NatsClient } from './nats-client.js';
import { SNAPSHOT_NATS_ENV, SNAPSHOT_NATS_PASS_ENV, exercisePath } from './snapshot-path.js';
import { warmHandler } from './warm-up.js';
import { workerMain } from './worker-process.js';

// Run at build time, so that the snapshot holds the NATS client's modules already run, and the
// handlers' code (zod compiles a schema's parser at its first use) already used once.
// With a NATS server from the build (SNAPSHOT_NATS_ENV), a worker also serves a few tasks
// through the whole path (snapshot-path.ts). A failure fails the build.
let natsClient: NatsClient | undefined;
const built = (async () => {
  const client = await loadNatsClient();
  const natsUrl = process.env[SNAPSHOT_NATS_ENV];
  if (natsUrl) await exercisePath(natsUrl, process.env[SNAPSHOT_NATS_PASS_ENV] ?? '', client);
  natsClient = client;
})();
// par.command runs a command: not at build time.
const warmed = TaskRoleSchema.options.filter((role) => role !== 'par.command').map((role) => warmHandler(role));
// Last, one timer that fires. Node keeps the time its next timer is due in the heap, and a timer
// cleared before it fired (a connection's timeout, a pull's expiry) leaves that time stale: the
// snapshot would keep it, and a restored process would never arm the timers due after it (a
// connect timeout that never fires; test/agent-host.test.ts). A timer that fires with none left
// sets it back to "none"; the build checks it did (SNAPSHOT_PROBE_ARG).
void Promise.all([built, ...warmed]).then(() => delay(0));
// A scripted worker's first step is reading its script (YAML or JSON).
parseScriptFile(
  'name: warm-up\nevaluate:\n  - when: { artifact_contains: warm }\n    answer: { scores: [] }\n    delay_ms: 0\n' +
    'revise: [{ answers: ["warm-up", { artifact: "warm-up" }] }]\n',
  'warm-up.yaml',
);
parseScriptFile('{"name":"warm-up","evaluate":[{"answer":{"scores":[]}}]}', 'warm-up.json');

/**
 * The script argument of the build's one restore that checks its timers are armed
 * (scripts/bundle-worker.js): an argument, not an environment variable a worker could inherit;
 * a host names the bundle's entry by its absolute path there.
 */
const SNAPSHOT_PROBE_ARG = 'polish-snapshot-probe';

/**
 * Exits 0 if a timer set now is armed in the event loop (libuv's timer is active) and none of
 * `deferred`, the builtins the build leaves out of the heap (`node:child_process`, …, named after
 * the probe argument), was loaded at build time (process.moduleLoadList comes from the heap); 3
 * if the timer is not armed, 4 if such a builtin is in the heap.
 */
function probeSnapshot(deferred: string[]): never {
  setTimeout(() => undefined, 2 ** 31 - 1);
  const { libuv } = process.report.getReport() as { libuv: { type: string; is_active: boolean }[] };
  const armed = libuv.some((handle) => handle.type === 'timer' && handle.is_active);
  if (!armed) {
    process.stdout.write('a timer set after the restore is not armed\n');
    process.exit(3);
  }
  // Node's list of the modules it has loaded, not in its typings.
  const { moduleLoadList } = process as unknown as { moduleLoadList: string[] };
  const loaded = deferred.filter((id) => moduleLoadList.includes(`NativeModule ${id.replace(/^node:/, '')}`));
  if (loaded.length > 0) {
    process.stdout.write(`loaded at build time, so in every worker's heap: ${loaded.join(', ')}\n`);
    process.exit(4);
  }
  process.stdout.write('timers armed, deferred builtins not loaded\n');
  process.exit(0);
}

// The build's command line would stay in the heap, and the blob ships in the package: its node's
// path (often under /home/<user>) and its arguments go. A restored process gets its own.
startupSnapshot.addSerializeCallback(() => {
  process.argv.length = 0;
  process.execArgv.length = 0;
  process.execPath = '';
});

startupSnapshot.setDeserializeMainFunction(() => {
  if (process.argv[1] === SNAPSHOT_PROBE_ARG) probeSnapshot(process.argv.slice(2));
  const entryAt = performance.timeOrigin + performance.now();
  enableCompileCache();
  if (!natsClient) throw new Error('the worker snapshot was built without its NATS client');
  const client = natsClient;
  client.nuid.reset();
  void workerMain({ entryAt, code: 0, loadNats: async () => client });
});
