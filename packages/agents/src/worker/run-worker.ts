import { setTimeout as delay } from 'node:timers/promises';
import type { Consumer, JetStreamClient, JsMsg } from '@nats-io/jetstream';
import { taskQueueOf } from '@polish/protocol';
import { natsOptions } from '../nats-options.js';
import { currentWorker } from '../handle-task.js';
import { createModel } from '../providers/model-settings.js';
import type { WorkerBoot, WorkerConfig, WorkerNotice } from './worker-config.js';
import { loadNatsClient, type NatsClient } from './nats-client.js';
import { warmUp } from './warm-up.js';
import { serveTask } from './serve-task.js';

/** An idle worker's pull request lasts this long; stopping waits for it at most this long. */
const PULL_EXPIRES_MS = 2_000;

/**
 * The role's consumer on the task queue. Until an orchestrator has created it (a worker may
 * start first), waits and asks again, saying so once; a stop ends the wait. With `wait` false,
 * asks once: undefined when it does not exist yet.
 */
async function openConsumer(
  js: JetStreamClient,
  config: WorkerConfig,
  stop: AbortSignal,
  wait = true,
): Promise<Consumer | undefined> {
  const queue = taskQueueOf(config.role, config.lane, config.prefix);
  for (let waited = false; !stop.aborted; waited = true) {
    try {
      return await js.consumers.get(queue.stream, queue.consumer);
    } catch (error) {
      if (!/not found/i.test(String((error as Error).message))) throw error;
      if (!wait) return undefined;
      if (!waited)
        process.stderr.write(
          `polish worker ${process.pid}: waiting for the ${queue.label} task queue (no orchestrator has created it yet)\n`,
        );
      await delay(1_000, undefined, { signal: stop }).catch(() => undefined);
    }
  }
  return undefined;
}

/**
 * Waits for one task: pulls one message at a time (the queue hands a worker only what it asks
 * for), until one comes or the worker is told to stop. A task that arrives for a pull made
 * before the stop is given back at once, never dropped.
 */
async function nextTask(consumer: Consumer, stop: AbortSignal): Promise<JsMsg | undefined> {
  while (!stop.aborted) {
    const message = await consumer.next({ expires: PULL_EXPIRES_MS });
    if (!message) continue;
    if (stop.aborted) {
      message.nak();
      return undefined;
    }
    return message;
  }
  return undefined;
}

/**
 * How a worker process began: when its entry ran, how long its code took to load, and how it
 * loads the NATS client (a dynamic import, unless the entry knows better: snapshot-entry.ts).
 */
export interface BootStart {
  entryAt: number;
  code: number;
  loadNats?: () => Promise<NatsClient>;
}

/** How a worker process talks with its host and hears when to stop. */
export interface WorkerLife {
  /** Resolves once the notice has been handed to the host. */
  notify: (notice: WorkerNotice) => Promise<void>;
  stop: AbortSignal;
  /** Called before the worker may pull: from then on a stop drains instead of exiting at once. */
  pulling: () => void;
  /** Resolves when a worker booted at low priority may pull (see WorkerConfig.lowPriority). */
  raised?: Promise<void>;
}

/**
 * One worker process's life: connect, warm up, then take at most `reuse` tasks of one role
 * from the task queue, one at a time (it pulls one only when it has none), answer each, then
 * drain and return. `stop` ends it early the same way: no new task, the one in hand finishes.
 * The ready notice says where the boot went (`start`: what the entry measured before). A worker
 * booted at low priority pulls nothing before `raised` resolves: it answers at normal priority.
 */
export async function runWorker(
  config: WorkerConfig,
  { notify, stop, pulling, raised }: WorkerLife,
  start: BootStart = { entryAt: performance.timeOrigin, code: 0 },
): Promise<void> {
  let mark = performance.now();
  const lap = () => {
    const now = performance.now();
    const elapsed = now - mark;
    mark = now;
    return elapsed;
  };
  // The model is made (reading a script, or loading an SDK) while the NATS client loads and
  // connects; its failure is awaited below, with the connection's.
  const modelMade = createModel(config.model);
  modelMade.catch(() => undefined);
  const nats = await (start.loadNats ?? loadNatsClient)();
  const natsMs = lap();
  const worker = currentWorker();
  const [connection, model] = await Promise.all([
    nats.connect({
      ...natsOptions(config.natsUrl, config.auth, nats.nkeyAuthenticator),
      name: `polish-${config.role}-${worker.pid}`,
    }),
    modelMade,
  ]);
  const connectMs = lap();
  // The role's queue is looked up while the warm-up task runs.
  const js = nats.jetstream(connection);
  const warming = Promise.all([
    openConsumer(js, config, stop, false),
    warmUp(config.role, connection, nats.createInbox, config.auth?.inboxPrefix),
  ]);
  // The model's own warm-up (synchronous: loading code) runs while those wait on the server.
  // Only a head start: should it fail, the first call loads the same and says so if it must.
  let modelWarmUp: number | undefined;
  if (model.warmUp) {
    const began = performance.now();
    try {
      model.warmUp();
    } catch {
      // nothing to do
    }
    modelWarmUp = performance.now() - began;
  }
  const [found] = await warming;
  const warmUpMs = lap();
  // Ready means pulling: where the queue exists, the first pull is at the server (flushed) before
  // the host hears "ready", so a task sent then is not left waiting for the worker to find its
  // queue. A reserve pulls only once raised. The queue's absence does not hold "ready" back.
  pulling();
  let firstPull = found && !raised && !stop.aborted ? nextTask(found, stop) : undefined;
  if (firstPull) {
    // The client writes the pull request a few promise turns later: let it go out, then PING.
    await new Promise(setImmediate);
    await connection.flush();
  }
  const cpu = process.cpuUsage();
  const boot: WorkerBoot = {
    entryAt: start.entryAt,
    code: start.code,
    nats: natsMs,
    connect: connectMs,
    warmUp: warmUpMs,
    ...(modelWarmUp === undefined ? {} : { modelWarmUp }),
    queue: lap(),
    cpuMs: (cpu.user + cpu.system) / 1000,
  };
  await notify({ type: 'ready', boot });
  const [consumer] = await Promise.all([found ?? openConsumer(js, config, stop), raised]);
  if (consumer) {
    const { config: consumerConfig } = await consumer.info(true);
    const context = {
      role: config.role,
      prefix: config.prefix,
      model,
      worker,
      connection,
      js,
      leaseMs: Math.round((consumerConfig.ack_wait ?? 30_000_000_000) / 1_000_000),
      command: config.command ?? {},
      notify,
    };
    for (let served = 0; served < config.reuse && !stop.aborted; served += 1) {
      const message = await (firstPull ?? nextTask(consumer, stop));
      firstPull = undefined;
      if (!message) break;
      await serveTask(message, context);
    }
  }
  // Stopped before it served its first pull: a task that pull brought goes back to the queue at
  // once, before the connection closes, instead of after its lease.
  (await firstPull)?.nak();
  await connection.drain();
}
