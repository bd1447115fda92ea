import { fork, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { availableParallelism, hostname } from 'node:os';
import { connect } from '@nats-io/transport-node';
import { EventEmitter } from 'node:events';
import { fileURLToPath } from 'node:url';
import {
  DEFAULT_SUBJECT_PREFIX,
  PROTOCOL_VERSION,
  PolishError,
  ZERO_USAGE,
  type TaskRole,
  natsServers,
} from '@polish/protocol';
import type { ModelSettings } from '../providers/model-settings.js';
import { WORKER_CONFIG_ENV, type NatsAuth, type WorkerConfig, type WorkerNotice } from '../worker/worker-config.js';

/** Settings of an agent host. */
export interface AgentHostOptions {
  natsUrl: string;
  roles: readonly TaskRole[];
  /** Warm worker processes kept per role. Default 2. */
  pool?: number;
  /** Tasks one process serves before it exits. Default 1: one task per process. */
  reuse?: number;
  prefix?: string;
  /** The model of every role, unless `roleModels` names another for it. */
  model: ModelSettings;
  /** Per-role models, e.g. an evaluator from another family than the reviser. */
  roleModels?: Partial<Record<TaskRole, ModelSettings>>;
  /**
   * NATS users when the server enforces per-role permissions: the host's own (it only answers
   * WORKER_CRASHED), and each role's, handed to that role's workers.
   */
  auth?: { host: NatsAuth; roles: Partial<Record<TaskRole, NatsAuth>> };
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
  'worker.started': [{ pid: number; role: TaskRole }];
  'worker.ready': [{ pid: number; role: TaskRole; bootMs: number }];
  'task.taken': [{ pid: number; role: TaskRole; taskId: string }];
  'task.done': [{ pid: number; role: TaskRole; taskId: string; ok: boolean }];
  'worker.exited': [
    { pid: number; role: TaskRole; code: number | null; signal: NodeJS.Signals | null; crashed: boolean },
  ];
  'worker.failed': [{ role: TaskRole; message: string }];
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
  role: TaskRole;
  ready: boolean;
  /** Whether this worker's boot has been counted as finished (once, whichever comes first: ready or exit). */
  bootCounted: boolean;
  tasksTaken: number;
  /** The task in hand, and where its reply goes. */
  held: { taskId: string; reply?: string } | undefined;
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
 * last task (not when it exits), so the pool stays warm. A worker that dies holding a task is
 * replaced too, and the host answers that task WORKER_CRASHED (retryable), so the dispatcher
 * sends it again at once instead of waiting out its timeout.
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

  const available = (role: TaskRole) =>
    [...slots.values()].filter((slot) => slot.role === role && slot.tasksTaken < reuse);
  const checkReady = () => {
    if (options.roles.every((role) => available(role).filter((slot) => slot.ready).length >= pool)) markReady();
  };
  // Boots are queued and started `bootConcurrency` at a time, so a burst of replacements does
  // not take every core from the workers that are answering tasks right now.
  const queued: TaskRole[] = [];
  let booting = 0;
  const bootNext = () => {
    while (!stopping && booting < bootConcurrency && queued.length > 0) {
      booting += 1;
      spawnWorker(queued.shift() as TaskRole);
    }
  };
  const replenish = (role: TaskRole) => {
    if (stopping) return;
    const wanted = pool - available(role).length - queued.filter((entry) => entry === role).length;
    for (let index = 0; index < wanted; index += 1) queued.push(role);
    bootNext();
  };
  const booted = (slot: WorkerSlot) => {
    if (slot.bootCounted) return;
    slot.bootCounted = true;
    booting -= 1;
    bootNext();
  };

  // The host's own connection publishes only WORKER_CRASHED replies; it subscribes to nothing.
  const connection = connect({
    servers: natsServers(options.natsUrl),
    name: `polish-host-${process.pid}`,
    ...options.auth?.host,
  });
  connection.catch(() => undefined);
  const reportCrash = async (slot: WorkerSlot, pid: number, how: string) => {
    if (!slot.held?.reply) return;
    const error = new PolishError('WORKER_CRASHED', `${slot.role} worker ${pid} died holding the task (${how})`);
    const reply = {
      v: PROTOCOL_VERSION,
      taskId: slot.held.taskId,
      ok: false,
      error: error.toWire(),
      usage: ZERO_USAGE,
      worker: { pid, hostname: hostname() },
    };
    try {
      (await connection).publish(slot.held.reply, JSON.stringify(reply));
    } catch {
      // NATS is unreachable: the dispatcher's timeout covers this task.
    }
  };

  const spawnWorker = (role: TaskRole) => {
    const auth = options.auth?.roles[role];
    const config: WorkerConfig = {
      natsUrl: options.natsUrl,
      prefix,
      role,
      reuse,
      model: options.roleModels?.[role] ?? options.model,
      ...(auth ? { auth } : {}),
    };
    const started = performance.now();
    const child = fork(entry, [], {
      env: { ...process.env, ...options.env, [WORKER_CONFIG_ENV]: JSON.stringify(config) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      // Its own process group: a terminal's Ctrl-C reaches the host, which stops workers in order.
      // A worker whose host dies sees the IPC channel close and drains by itself.
      detached: true,
    });
    const slot: WorkerSlot = { child, role, ready: false, bootCounted: false, tasksTaken: 0, held: undefined };
    if (child.pid === undefined) {
      // fork() failed (e.g. EAGAIN): no process, no exit event. Count it and try again later.
      child.once('error', (error) =>
        host.emit('worker.failed', { role, message: `cannot start a ${role} worker: ${error.message}` }),
      );
      booted(slot);
      if ((bootFailures += 1) <= pool * options.roles.length * 3) setTimeout(() => replenish(role), 1_000).unref();
      return;
    }
    const pid = child.pid;
    slots.set(pid, slot);
    child.on('error', () => undefined); // exit follows; a failed kill() on a gone process is not news
    child.on('message', (notice: WorkerNotice) => {
      if (notice.type === 'started') {
        host.emit('worker.started', { pid, role });
      } else if (notice.type === 'ready') {
        slot.ready = true;
        booted(slot);
        bootFailures = 0;
        host.emit('worker.ready', { pid, role, bootMs: performance.now() - started });
        checkReady();
      } else if (notice.type === 'task.taken') {
        slot.tasksTaken += 1;
        slot.held = { taskId: notice.taskId, ...(notice.reply ? { reply: notice.reply } : {}) };
        host.emit('task.taken', { pid, role, taskId: notice.taskId });
        // Replace it now, not when it exits: with a real model the successor is warm long before this task ends.
        replenish(role);
      } else {
        slot.held = undefined;
        host.emit('task.done', { pid, role, taskId: notice.taskId, ok: notice.ok });
      }
    });
    child.on('exit', (code, signal) => {
      slots.delete(pid);
      booted(slot);
      const crashed = code !== 0;
      if (crashed) void reportCrash(slot, pid, signal ?? `exit code ${code}`);
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
    const timer = setTimeout(
      () => {
        for (const slot of slots.values()) slot.child.kill('SIGKILL');
      },
      stopOptions.graceMs ?? options.drainTimeoutMs ?? 600_000,
    );
    await Promise.all(exits);
    clearTimeout(timer);
    await (await connection.catch(() => undefined))?.drain().catch(() => undefined);
  };
  return host;
}
