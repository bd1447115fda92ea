// Entry point of a worker process, forked by the agent host with an IPC channel.
import { WORKER_CONFIG_ENV, WorkerConfigSchema, type WorkerNotice } from './worker-config.js';
import { runWorker } from './run-worker.js';

/** Resolves once the notice has been handed to the IPC channel, so none is lost at exit. */
const notify = (notice: WorkerNotice) =>
  new Promise<void>((resolve) => {
    if (!process.send || !process.connected) return resolve();
    process.send(notice, undefined, {}, () => resolve());
  });
const stop = new AbortController();
// SIGTERM/SIGINT, or the host going away, drain: no new task, the one in hand finishes.
process.once('SIGTERM', () => stop.abort());
process.once('SIGINT', () => stop.abort());
process.once('disconnect', () => stop.abort());
await notify({ type: 'started' });

try {
  const config = WorkerConfigSchema.parse(JSON.parse(process.env[WORKER_CONFIG_ENV] ?? 'null'));
  await runWorker(config, notify, stop.signal);
  process.exit(0);
} catch (error) {
  process.stderr.write(`polish worker ${process.pid}: ${(error as Error).message}\n`);
  process.exit(1);
}
