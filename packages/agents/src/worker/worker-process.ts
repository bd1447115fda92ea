// A worker process's life, started by its entry (worker-entry.ts) once the code is loaded; forked
// by the agent host with an IPC channel.
import { WORKER_CONFIG_ENV, WorkerConfigSchema, type HostNotice, type WorkerNotice } from './worker-config.js';
import { runWorker, type BootStart } from './run-worker.js';
import { startTelemetry, type Telemetry } from '../telemetry.js';

/** Runs this process as a worker: its configuration comes from the environment, its host is at the IPC channel. */
export async function workerMain(start: BootStart): Promise<never> {
  // Until its first pull a worker holds nothing: stopping then is leaving at once (even in the
  // middle of connecting). From then on a stop drains: no new task, the one in hand finishes.
  let pulled = false;
  /** Resolves once the notice has been handed to the IPC channel, so none is lost at exit. */
  const notify = (notice: WorkerNotice) =>
    new Promise<void>((resolve) => {
      if (!process.send || !process.connected) return resolve();
      process.send(notice, undefined, {}, () => resolve());
    });
  const stop = new AbortController();
  const onStop = () => {
    if (!pulled) process.exit(0);
    stop.abort();
  };
  // SIGTERM/SIGINT, or the host going away.
  process.once('SIGTERM', onStop);
  process.once('SIGINT', onStop);
  process.once('disconnect', onStop);
  await notify({ type: 'started' });

  // Tracing only when an OTLP endpoint is configured: otherwise the SDK is never even loaded.
  let telemetry: Telemetry | undefined;
  try {
    telemetry = await startTelemetry('polish-worker');
    const config = WorkerConfigSchema.parse(JSON.parse(process.env[WORKER_CONFIG_ENV] ?? 'null'));
    // Listening before it says it is ready: the host answers that at once.
    const raised = config.lowPriority ? untilRaised(stop.signal) : undefined;
    const pulling = () => {
      pulled = true;
    };
    await runWorker(config, { notify, stop: stop.signal, pulling, ...(raised ? { raised } : {}) }, start);
    // A single-use process exits right after its task: export its spans first.
    await telemetry.shutdown();
    process.exit(0);
  } catch (error) {
    process.stderr.write(`polish worker ${process.pid}: ${(error as Error).message}\n`);
    await telemetry?.shutdown();
    process.exit(1);
  }
}

/** Resolves when the host says this worker's priority is back to normal, or when the worker is told to stop. */
function untilRaised(stop: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      process.off('message', onMessage);
      resolve();
    };
    const onMessage = (message: HostNotice) => {
      if (message.type === 'raised') done();
    };
    process.on('message', onMessage);
    stop.addEventListener('abort', done, { once: true });
  });
}
