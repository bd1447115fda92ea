// The entry of the worker's V8 startup snapshot (`node --build-snapshot`, see
// scripts/bundle-worker.js): the worker's code, zod and the protocol's schemas are loaded and
// built once, at build time, and every worker process starts from that heap instead of loading
// them again. What cannot be in a snapshot is loaded after the restore: the NATS client
// (node:tls is not supported by the snapshot builder), from the bundle's nats-client.mjs, whose
// path the host passes as the script argument. A restored process has no dynamic import(), so
// the host uses the snapshot only for workers that need nothing else loaded later (the scripted
// model or none, no tracing); see workerLaunch in agent-host.ts.
// Nothing here may draw random values at build time (crypto.randomUUID keeps a cache of random
// bytes in the heap): every restored worker would then draw the same ones.
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
