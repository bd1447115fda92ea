import { fork, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { EventEmitter } from 'node:events';
import { fileURLToPath } from 'node:url';
import { DEFAULT_SUBJECT_PREFIX, type Role } from '@polish/protocol';
import type { ModelSettings } from '../providers/model-settings.js';
import { WORKER_CONFIG_ENV, type WorkerConfig, type WorkerNotice } from '../worker/worker-config.js';


/** Settings of an agent host. */
export interface AgentHostOptions {
  natsUrl: string;
  roles: readonly Role[];
  /** Warm worker processes kept per role. Default 2. */
  pool?: number;
  /** Tasks one process serves before it exits. Default 1: one task per process. */
  reuse?: number;
  prefix?: string;
  /** The model of every role, unless `roleModels` names another for it. */
  model: ModelSettings;
  /** Per-role models, e.g. an evaluator from another family than the reviser. */
  roleModels?: Partial<Record<Role, ModelSettings>>;
  /** Extra environment for the workers (keys are read by workers from their environment). */
  env?: NodeJS.ProcessEnv;
  /** Worker processes booting at once. Default: one less than the cores, at least 1. */
  bootConcurrency?: number;
  /** How long a drain waits for tasks in hand before killing workers. Default 10 min. */
  drainTimeoutMs?: number;
}

/** What a host reports; `polish worker` prints these, tests wait on them. */
export interface AgentHostEvents {
  /** The process runs and handles signals; it is not connected or subscribed yet. */
  'worker.started': [{ pid: number; role: Role }];
  'worker.ready': [{ pid: number; role: Role; bootMs: number }];
  'task.taken': [{ pid: number; role: Role; taskId: string }];
  'task.done': [{ pid: number; role: Role; taskId: string; ok: boolean }];
  'worker.exited': [{ pid: number; role: Role; code: number | null; signal: NodeJS.Signals | null; crashed: boolean }];
  'worker.failed': [{ role: Role; message: string }];
}

/** A running agent host. */
export interface AgentHost extends EventEmitter<AgentHostEvents> {
  /** Resolves when every role's pool is full and subscribed. */
  readonly ready: Promise<void>;
  /** Pids of the live worker processes. */
  workerPids(): number[];
  /**
   * Drains: no new workers, idle ones leave, tasks in hand finish; resolves when all have
   * exited. Workers still running after `graceMs` (default: drainTimeoutMs) are killed.
   */
  stop(options?: { graceMs?: number }): Promise<void>;
}

interface WorkerSlot {
  child: ChildProcess;
  role: Role;
  ready: boolean;
  tasksTaken: number;
}

/** Where the worker entry is: the bundled one when the build made it (it boots faster), else the plain module. */
function workerEntry(): string {
  const bundled = fileURLToPath(new URL('../worker-bundle/worker-process.mjs', import.meta.url));
  return existsSync(bundled) ? bundled : fileURLToPath(new URL('../worker/worker-process.js', import.meta.url));
}

/**
 * Keeps a warm pool of single-use worker processes per role: `pool` processes per role that
 * can still take a task. The host subscribes to nothing itself: each worker connects to NATS,
 * takes its task(s), replies and exits. A replacement is spawned as soon as a worker takes its
 * last task (not when it exits), so the pool stays warm. A worker that crashes is replaced
 * too; its task times out and the dispatcher retries it.
 */
export function createAgentHost(options: AgentHostOptions): AgentHost {
  const pool = options.pool ?? 2;
  const reuse = options.reuse ?? 1;
  const prefix = options.prefix ?? DEFAULT_SUBJECT_PREFIX;
  const bootConcurrency = options.bootConcurrency ?? Math.max(1, availableParallelism() - 1);
  const entry = workerEntry();
  const host = new EventEmitter<AgentHostEvents>() as AgentHost;
  const slots = new Map<number, WorkerSlot>();
  let stopping = false;
  let bootFailures = 0;
  let markReady: () => void = () => undefined;
  let markFailed: (error: Error) => void = () => undefined;
  const ready = new Promise<void>((resolve, reject) => {
    markReady = resolve;
    markFailed = reject;
  });
  // A host that never becomes ready must not leave an unhandled rejection behind.
  ready.catch(() => undefined);

  const available = (role: Role) => [...slots.values()].filter((slot) => slot.role === role && slot.tasksTaken < reuse);
  const checkReady = () => {
    if (options.roles.every((role) => available(role).filter((slot) => slot.ready).length >= pool)) markReady();
  };
  // Boots are queued and started `bootConcurrency` at a time, so a burst of replacements does
  // not take every core from the workers that are answering tasks right now.
  const queued: Role[] = [];
  let booting = 0;
  const bootNext = () => {
    while (!stopping && booting < bootConcurrency && queued.length > 0) {
      booting += 1;
      spawnWorker(queued.shift() as Role);
    }
  };
  const replenish = (role: Role) => {
    if (stopping) return;
    const wanted = pool - available(role).length - queued.filter((entry) => entry === role).length;
    for (let index = 0; index < wanted; index += 1) queued.push(role);
    bootNext();
  };
  const booted = () => {
    booting -= 1;
    bootNext();
  };

  const spawnWorker = (role: Role) => {
    const config: WorkerConfig = { natsUrl: options.natsUrl, prefix, role, reuse, model: options.roleModels?.[role] ?? options.model };
    const started = performance.now();
    const child = fork(entry, [], {
      env: { ...process.env, ...options.env, [WORKER_CONFIG_ENV]: JSON.stringify(config) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      // Its own process group: a terminal's Ctrl-C reaches the host, which stops workers in order.
      // A worker whose host dies sees the IPC channel close and drains by itself.
      detached: true,
    });
    const pid = child.pid ?? -1;
    const slot: WorkerSlot = { child, role, ready: false, tasksTaken: 0 };
    slots.set(pid, slot);
    child.on('message', (notice: WorkerNotice) => {
      if (notice.type === 'started') {
        host.emit('worker.started', { pid, role });
      } else if (notice.type === 'ready') {
        slot.ready = true;
        booted();
        bootFailures = 0;
        host.emit('worker.ready', { pid, role, bootMs: performance.now() - started });
        checkReady();
      } else if (notice.type === 'task.taken') {
        slot.tasksTaken += 1;
        host.emit('task.taken', { pid, role, taskId: notice.taskId });
        // Replace it now, not when it exits: with a real model the successor is warm long before this task ends.
        replenish(role);
      } else {
        host.emit('task.done', { pid, role, taskId: notice.taskId, ok: notice.ok });
      }
    });
    child.on('exit', (code, signal) => {
      slots.delete(pid);
      if (!slot.ready) booted();
      const crashed = code !== 0;
      host.emit('worker.exited', { pid, role, code, signal, crashed });
      if (stopping) return;
      // A worker that cannot even start (bad settings, NATS unreachable) must not respawn forever.
      if (!slot.ready && (bootFailures += 1) > pool * options.roles.length * 3) {
        stopping = true;
        const message = `${role} workers keep failing to start (exit code ${code}); see their output above`;
        host.emit('worker.failed', { role, message });
        markFailed(new Error(message));
        return;
      }
      replenish(role);
    });
  };

  for (const role of options.roles) replenish(role);

  host.workerPids = () => [...slots.keys()];
  Object.defineProperty(host, 'ready', { value: ready });
  host.stop = async (stopOptions = {}) => {
    stopping = true;
    const exits = [...slots.values()].map(
      (slot) =>
        new Promise<void>((resolve) => {
          if (slot.child.exitCode !== null || slot.child.signalCode !== null) return resolve();
          slot.child.once('exit', () => resolve());
          slot.child.kill('SIGTERM');
        }),
    );
    const timer = setTimeout(() => {
      for (const slot of slots.values()) slot.child.kill('SIGKILL');
    }, stopOptions.graceMs ?? options.drainTimeoutMs ?? 600_000);
    await Promise.all(exits);
    clearTimeout(timer);
  };
  return host;
}
