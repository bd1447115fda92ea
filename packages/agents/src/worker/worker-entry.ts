// What the agent host forks. It notes when it began to run, turns the compile cache on before the
// worker's code loads (static imports would be compiled before any line of a module ran), then
// loads that code and runs it.
import { enableCompileCache } from '../compile-cache.js';

const entryAt = performance.timeOrigin + performance.now();
enableCompileCache();
const { workerMain } = await import('./worker-process.js');
await workerMain({ entryAt, code: performance.timeOrigin + performance.now() - entryAt });
