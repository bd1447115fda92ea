// What the agent host forks: turns the compile cache on before the worker's code loads (static
// imports would be compiled before any line of the module ran), then loads it.
import { enableCompileCache } from '../compile-cache.js';

enableCompileCache();
await import('./worker-process.js');
