// The entry of the worker's V8 startup snapshot (`node --build-snapshot`, see
// scripts/bundle-worker.js): the worker's code, zod and the protocol's schemas are loaded and
// built once, at build time, and every worker process starts from that heap instead of loading
// them again. What cannot be in a snapshot is loaded after the restore: the NATS client
// (node:tls is not supported by the snapshot builder), from the bundle's nats-client.mjs, whose
// path the host passes as the script argument. A restored process has no dynamic import(): a
// provider's SDK is in the snapshot of its kind (scripts/bundle-worker.js builds one per kind of
// model), and a worker with tracing on forks the bundle instead; see workerLaunch in agent-host.ts.
import { startupSnapshot } from 'node:v8';
import { enableCompileCache } from '../compile-cache.js';
import type { NatsClient } from './nats-client.js';
import { workerMain } from './worker-process.js';

startupSnapshot.setDeserializeMainFunction(() => {
  const entryAt = performance.timeOrigin + performance.now();
  enableCompileCache();
  const natsModule = process.argv[1] as string;
  const load = process.getBuiltinModule('node:module').createRequire(natsModule);
  void workerMain({
    entryAt,
    code: 0,
    loadNats: () => (load(natsModule) as { loadNatsClient: () => Promise<NatsClient> }).loadNatsClient(),
  });
});
