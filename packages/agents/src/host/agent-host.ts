import { fork, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { availableParallelism, getPriority, hostname, totalmem } from 'node:os';
import { EventEmitter } from 'node:events';
import { fileURLToPath } from 'node:url';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import {
  DEFAULT_SUBJECT_PREFIX,
  PROTOCOL_VERSION,
  crashSubject,
  taskQueueOf,
  type CrashNotice,
  type TaskRole,
} from '@polish/protocol';
import type { ModelSettings } from '../providers/model-settings.js';
import {
  WORKER_CONFIG_ENV,
  type HostNotice,
  type NatsAuth,
  type WorkerBoot,
  type WorkerConfig,
  type WorkerNotice,
} from '../worker/worker-config.js';
import { chooseBoots, type RoleLoad } from './pool-balance.js';
import { RESERVE_NICE, backgroundBootsUnavailable, setWorkerNice } from './priority.js';
import { natsConnectOptions } from '../nats-connect.js';
import { telemetryConfigured } from '../telemetry.js';
import { hostCodeOwner, untrustedWorkerCode } from '../code-paths.js';

/** Settings of an agent host. */
export interface AgentHostOptions {
  natsUrl: string;
  roles: readonly TaskRole[];
  /** Idle worker processes kept ready per role, within `maxWorkers`. Default 2. */
  pool?: number;
  /** Worker processes alive at once, whatever the load (booting, idle and busy). Default: {@link defaultMaxWorkers}. */
  maxWorkers?: number;
  /** Tasks one process serves before it exits. Default 1: one task per process. */
  reuse?: number;
  prefix?: string;
  /** The model of every role, unless `roleModels` names another for it. */
  model: ModelSettings;
  /** Per-role models, e.g. an evaluator from another family than the reviser. */
  roleModels?: Partial<Record<TaskRole, ModelSettings>>;
  /** Roles whose workers serve a model lane instead of the role's queue (see `taskQueueOf`). */
  lanes?: Partial<Record<TaskRole, string>>;
  /**
   * NATS identities and TLS files: the host's own (it reads its roles' queue lengths and reports
   * crashed workers), and each role's, handed to its workers (a seed by its file's path).
   */
  auth?: { host: NatsAuth; roles: Partial<Record<TaskRole, NatsAuth>> };
  /** Extra environment for the workers (keys are read by workers from their environment). */
  env?: NodeJS.ProcessEnv;
  /** par.command: run critique commands without a sandbox where none can be made, and the variables they may see. */
  command?: { allowUnsandboxed?: boolean; env?: string[] };
  /**
   * Boot reserve workers in the background (Linux, with the right to raise a priority: see
   * {@link backgroundBootsUnavailable}): a replacement booted while its role has an idle worker
   * for the next task boots at the lowest CPU priority, so that it does not take the cores from
   * the worker answering a task, and is raised to the host's priority when it is ready, or as
   * soon as a task would wait for it; it takes no task before. Default false: measured, it did not
   * make answers faster, and on a machine with other load the reserves starve and the pool refills
   * late (docs/benchmarks.md, "Background boots").
   */
  backgroundBoots?: boolean;
  /** Worker processes booting at once. Default: the cores. */
  bootConcurrency?: number;
  /**
   * How long a worker on its last task may hold its successor back while its handler neither
   * waits on I/O nor answers. Default {@link SUCCESSOR_GRACE_MS}.
   */
  successorGraceMs?: number;
  /**
   * How long the host must go without a task taken or answered before it replaces a worker that
   * answered its last task on the cores (never waiting on I/O) while the worker's role still has
   * an idle worker for the next task: the next waves of a run are answered without boots beside
   * them. At most {@link SUCCESSOR_POSTPONE_MAX_MS} (or this, if longer) after the answer; at once
   * when the role has no idle worker left. 0: the successor boots at the answer. Default {@link SUCCESSOR_QUIET_MS}.
   */
  successorQuietMs?: number;
  /** How long a drain waits for tasks in hand before killing workers. Default 10 min. */
  drainTimeoutMs?: number;
  /** Start workers from the build's V8 startup snapshot where it applies (see {@link workerLaunch}). Default true. */
  snapshot?: boolean;
  /**
   * Give workers restored from the snapshot glibc's transparent huge pages where they work (see
   * {@link hugePageTunables}). Default true, unless POLISH_WORKER_HUGEPAGES=0.
   */
  hugePages?: boolean;
  /**
   * Lower a worker that has answered its last task to the lowest CPU priority (nice 19, and its
   * own autogroup where the host may renice it) for its drain and exit while its role still has
   * an idle worker for the next task, so that its teardown yields to the workers answering the
   * next tasks (of a run). Where its place may be wanted (no idle worker of its role, tasks seen
   * waiting in a queue, the host at `maxWorkers`, or stopping) it exits at full speed. Lowering a
   * priority needs no privilege. Default false (measured, the gain is not settled: docs/benchmarks.md,
   * "Exits at low priority"), unless POLISH_WORKER_EXIT_NICE=1.
   */
  exitsAtLowPriority?: boolean;
  /**
   * V8's young generation a worker starts with, in MB a semi-space (see {@link youngGenerationFlags}).
   * Default 2, unless POLISH_WORKER_SEMI_SPACE_MB says otherwise; 0 leaves V8's own.
   */
  semiSpaceMb?: number;
}

/** What a host reports; `polish worker` prints these, tests wait on them. */
export interface AgentHostEvents {
  /** The process runs and handles signals; it is not connected or pulling yet. */
  /** `from`: what the process started from (a startup snapshot of its kind of model, the bundle, the modules). */
  'worker.started': [{ pid: number; role: TaskRole; alive: number; from: string }];
  /** `steps`: where the boot went, when the worker said (see {@link BootSteps}). */
  'worker.ready': [{ pid: number; role: TaskRole; bootMs: number; steps?: BootSteps }];
  'task.taken': [
    {
      pid: number;
      role: TaskRole;
      taskId: string;
      key: string;
      queueSeq: number;
      deliverySeq: number;
      delivery: number;
    },
  ];
  'task.done': [{ pid: number; role: TaskRole; taskId: string; ok: boolean }];
  'worker.exited': [
    {
      pid: number;
      role: TaskRole;
      code: number | null;
      signal: NodeJS.Signals | null;
      crashed: boolean;
      alive: number;
    },
  ];
  /** An idle worker was stopped so that a role with tasks waiting gets its place. */
  'worker.retired': [{ pid: number; role: TaskRole; for: TaskRole }];
  'worker.failed': [{ role: TaskRole; message: string }];
  /**
   * A worker's CPU priority changed (its nice value, every thread's): `reserve`, it boots in the
   * background; `ready`, raised once booted; `awaited`, raised while booting because a task waits for it;
   * `exiting`, lowered once it has answered its last task (see {@link AgentHostOptions.exitsAtLowPriority}).
   */
  'worker.priority': [{ pid: number; role: TaskRole; nice: number; why: 'reserve' | 'ready' | 'awaited' | 'exiting' }];
}

/**
 * Where a worker's boot went, in milliseconds: what the worker measured of itself (see
 * WorkerBoot: code, nats, connect, warm-up, queue, CPU) and `node`, Node starting until the
 * worker's entry ran (fork included), which only the host can tell.
 */
export type BootSteps = Omit<WorkerBoot, 'entryAt'> & { node: number };

/** A running agent host. */
export interface AgentHost extends EventEmitter<AgentHostEvents> {
  /** Resolves once the host has booted the idle workers it keeps (every role has one where the limit allows). */
  readonly ready: Promise<void>;
  /** Whether reserve workers boot in the background (asked for, and possible here). */
  readonly backgroundBoots: boolean;
  /** Pids of the live worker processes. */
  workerPids(): number[];
  /** The most worker processes that were alive at once so far. */
  peakWorkers(): number;
  /**
   * Drains: no new workers, idle ones leave, tasks in hand finish; resolves when all have
   * exited. Workers still running after `graceMs` (default: drainTimeoutMs) are killed.
   */
  stop(options?: { graceMs?: number }): Promise<void>;
}

interface WorkerSlot {
  child: ChildProcess;
  role: TaskRole;
  phase: 'booting' | 'idle' | 'busy' | 'leaving';
  /** Whether this worker's boot has been counted as finished (once: ready or exit). */
  bootCounted: boolean;
  tasksTaken: number;
  /** At the reserve's low priority now. */
  low: boolean;
  /** Started with `lowPriority`: it takes no task until told that it was raised. */
  awaitsRaise: boolean;
  /** The task in hand, and how to give it back. */
  held: { taskId: string; key: string; ack: string; delivery: number } | undefined;
  /**
   * Set while the worker answers its last task and its successor waits: a boot would compete with
   * the answer for the cores. Cleared when the task waits on I/O or is answered; when it fires,
   * {@link SUCCESSOR_GRACE_MS} after the take, the successor boots anyway.
   */
  successorHeld: NodeJS.Timeout | undefined;
}

/**
 * How long a worker on its last task may hold its successor back while its handler neither
 * waits on I/O nor answers: an instant model answers within it; a handler busy on the cores for
 * longer (or stuck) gets its successor booted beside it then, as before.
 */
export const SUCCESSOR_GRACE_MS = 20;

/**
 * How long a host must go without a task taken or answered before the successors it postponed
 * boot (see AgentHostOptions.successorQuietMs): longer than the time between two waves of a run,
 * when the orchestrator reads one answer and sends the next task (about 5 ms measured).
 */
export const SUCCESSOR_QUIET_MS = 15;

/** The longest a successor is postponed after its predecessor answered: the pool refills even on a host that is never quiet. */
export const SUCCESSOR_POSTPONE_MAX_MS = 200;

/** How long a role must have tasks and no worker before an idle worker of another role leaves for it. */
const RETIRE_AFTER_MS = 1_000;

/** Memory one single-use worker process takes, measured (docs/benchmarks.md), with a margin. */
const WORKER_MEMORY_BYTES = 96 * 1024 * 1024;

/**
 * The default `--max-workers`: four per core (a worker mostly waits on its model's API), and no
 * more than half the memory can hold; at least 1.
 */
export function defaultMaxWorkers(): number {
  return Math.max(1, Math.min(4 * availableParallelism(), Math.floor(totalmem() / 2 / WORKER_MEMORY_BYTES)));
}

/**
 * A worker's environment: the host's, without what only an orchestrator or a human needs (the
 * human keys that sign gate decisions, the NATS credentials file of every principal).
 */
function workerEnvironment(environment: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(
    Object.entries(environment).filter(([name]) => !/^(AGENT_COLLAB_|POLISH_NATS_CREDENTIALS$)/.test(name)),
  );
}

/** How a worker process is started: the script fork() runs, the node flags before it, its environment. */
interface WorkerLaunch {
  modulePath: string;
  execArgv: string[];
  env: NodeJS.ProcessEnv;
  /** What it starts from, for the host's log: the startup snapshot, the bundle or the modules. */
  from: string;
  /**
   * The built folders its code comes from, which nobody but the host's user or root may write:
   * all of it for the snapshot and the bundle; for the modules (a checkout without the bundle),
   * only dist/, not the packages it imports from node_modules.
   */
  roots: string[];
}

const dist = (path: string) => fileURLToPath(new URL(`../${path}`, import.meta.url));

/**
 * A restore reads the whole blob (about 10 MB) into memory from malloc: with glibc's hugetlb
 * tunable (glibc 2.35 and later) that memory comes in transparent huge pages, a few page faults
 * instead of thousands. Where a fault is dear (a VM) that is much of a restore's cost: ready
 * 200 -> 148 ms, a quarter less CPU a strict task, whole runs a little slower (bench/notes.md). A fixed mmap threshold (glibc's own starting value) keeps the
 * large buffers freed after the restore from moving later ones onto the huge-page heap. Nothing
 * is added where it would do nothing (not glibc 2.35+, THP off) or where the user tunes malloc
 * (GLIBC_TUNABLES or a MALLOC_* variable): theirs is left as it is.
 */
export function hugePageTunables(environment: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  if (process.platform !== 'linux') return {};
  if (Object.keys(environment).some((name) => name === 'GLIBC_TUNABLES' || /^MALLOC_[A-Z_]+$/.test(name))) return {};
  const { glibcVersionRuntime } = (process.report.getReport() as { header: { glibcVersionRuntime?: string } }).header;
  const [major = 0, minor = 0] = (glibcVersionRuntime ?? '').split('.').map(Number);
  if (major < 2 || (major === 2 && minor < 35)) return {};
  let thp = '';
  try {
    thp = readFileSync('/sys/kernel/mm/transparent_hugepage/enabled', 'utf8');
  } catch {
    return {};
  }
  if (!/\[(always|madvise)\]/.test(thp)) return {};
  return { GLIBC_TUNABLES: 'glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=131072' };
}

/**
 * A strict worker lives for one task: with V8's smallest young generation it stops once, about
 * 100 ms in, for a scavenge of 2-4 ms that frees what it was about to leave anyway. A 2 MB
 * semi-space holds all it allocates, so it never collects (bench/notes.md). Left alone where the
 * user sizes the young generation (a semi-space flag of the host's or in NODE_OPTIONS).
 */
export function youngGenerationFlags(semiSpaceMb: number, execArgv: string[], nodeOptions = ''): string[] {
  if (!Number.isInteger(semiSpaceMb) || semiSpaceMb <= 0) return [];
  if ([...execArgv, nodeOptions].some((flag) => /semi[-_]space/.test(flag))) return [];
  return [`--min-semi-space-size=${semiSpaceMb}`];
}

/**
 * How to start a worker: from the build's startup snapshot when there is one for this very Node,
 * platform and architecture (a blob starts only what built it) and the worker needs nothing that
 * a restored process cannot load later (the tracing SDK: it has no dynamic import(); a model
 * SDK it requires, from beside its --snapshot-blob); else the bundled entry (it boots
 * faster than the plain modules); else the plain module.
 */
function workerLaunch(
  environment: NodeJS.ProcessEnv,
  snapshot: boolean,
  tunables: () => NodeJS.ProcessEnv,
  nodeFlags: string[],
): WorkerLaunch {
  const blob = dist('worker-snapshot/worker.blob');
  const bundled = dist('worker-bundle/worker-entry.mjs');
  if (snapshot && !telemetryConfigured(environment) && existsSync(blob)) {
    const built = JSON.parse(readFileSync(dist('worker-snapshot/worker.blob.json'), 'utf8')) as Record<string, string>;
    // A restored process runs the snapshot's main, not its script argument: the bundled entry
    // only names what the process is in `ps` (a model SDK is found beside the --snapshot-blob).
    if (built.node === process.version && built.platform === process.platform && built.arch === process.arch)
      return {
        modulePath: bundled,
        execArgv: [...nodeFlags, '--snapshot-blob', blob],
        env: { ...environment, ...tunables() },
        from: 'the startup snapshot',
        roots: [dist('worker-snapshot'), dist('worker-bundle')],
      };
  }
  return existsSync(bundled)
    ? { modulePath: bundled, execArgv: nodeFlags, env: environment, from: 'the bundle', roots: [dist('worker-bundle')] }
    : {
        modulePath: dist('worker/worker-entry.js'),
        execArgv: nodeFlags,
        env: environment,
        from: 'the modules',
        roots: [dist('.')],
      };
}

/**
 * Keeps worker processes for its roles, never more than `maxWorkers` at once. Each worker pulls
 * one task from its role's queue when it has none, so the host takes only what it has processes
 * for, and a burst waits in the queue, in order. The host keeps `pool` idle workers per role
 * where the limit allows. A worker that takes its last task is replaced once its task waits on
 * I/O (its model) or is answered (at the latest {@link SUCCESSOR_GRACE_MS} after the take), so
 * that a replacement's boot does not compete with an answer for the cores; a task waiting in
 * the queue gets a boot at once. When a role has tasks
 * waiting but no worker while the limit is reached, it stops an idle worker of a
 * role with nothing waiting to make room. It subscribes to nothing itself; when a worker dies
 * holding a task it says so on `polish.v1.crashed.<role>`, so the task is handed out again at
 * once instead of after its lease.
 */
export function createAgentHost(options: AgentHostOptions): AgentHost {
  const pool = options.pool ?? 2;
  const maxWorkers = options.maxWorkers ?? defaultMaxWorkers();
  const reuse = options.reuse ?? 1;
  const prefix = options.prefix ?? DEFAULT_SUBJECT_PREFIX;
  const backgroundBoots = (options.backgroundBoots ?? false) && backgroundBootsUnavailable() === undefined;
  // A boot per core: replacements no longer boot against answers (successorHeld), and measured
  // that way a core per boot gave about 1.5x the strict throughput at the same CPU per task, with
  // slower hops only while the host is saturated with boots (docs/benchmarks.md).
  const bootConcurrency = options.bootConcurrency ?? availableParallelism();
  const successorGraceMs = options.successorGraceMs ?? SUCCESSOR_GRACE_MS;
  const successorQuietMs = backgroundBoots ? 0 : (options.successorQuietMs ?? SUCCESSOR_QUIET_MS);
  const postponeMaxMs = Math.max(SUCCESSOR_POSTPONE_MAX_MS, successorQuietMs);
  const hugePages = options.hugePages ?? process.env.POLISH_WORKER_HUGEPAGES !== '0';
  const exitsLow = options.exitsAtLowPriority ?? process.env.POLISH_WORKER_EXIT_NICE === '1';
  const semiSpaceMb = options.semiSpaceMb ?? Number(process.env.POLISH_WORKER_SEMI_SPACE_MB ?? 2);
  // Node's flags for every worker: the host's own, and a young generation it does not collect.
  const workerNodeFlags = [
    ...process.execArgv,
    ...youngGenerationFlags(semiSpaceMb, process.execArgv, process.env.NODE_OPTIONS),
  ];
  // Found once, at the first restored worker (it reads the process report and /sys).
  let tunables: NodeJS.ProcessEnv | undefined;
  const restoreTunables = (environment: NodeJS.ProcessEnv) =>
    hugePages ? (tunables ??= hugePageTunables(environment)) : {};
  // Checked once for each kind of launch, before its first worker starts.
  const owner = hostCodeOwner();
  const codeChecked = new Map<string, string | undefined>();
  const untrustedCode = (launch: WorkerLaunch) => {
    if (!owner) return undefined;
    const key = launch.roots.join('\0');
    if (!codeChecked.has(key)) codeChecked.set(key, untrustedWorkerCode(launch.roots, owner));
    return codeChecked.get(key);
  };
  /** The priority workers answer at: the host's own. */
  const normalNice = getPriority();
  const host = new EventEmitter<AgentHostEvents>() as AgentHost;
  const slots = new Map<number, WorkerSlot>();
  const queued = new Map<TaskRole, number>();
  let stopping = false;
  let bootFailures = 0;
  let booting = 0;
  let peak = 0;
  let starvedSince: { role: TaskRole; at: number } | undefined;
  /** Successors postponed while the host keeps taking tasks (see successorQuietMs), and until when at most. */
  let postponed: { role: TaskRole; until: number }[] = [];
  /** When a task was last taken or answered here. */
  let lastActivity = 0;
  let postponedCheck: NodeJS.Timeout | undefined;
  let markReady: () => void = () => undefined;
  let markFailed: (error: Error) => void = () => undefined;
  const ready = new Promise<void>((resolve, reject) => {
    markReady = resolve;
    markFailed = reject;
  });
  // A host that never becomes ready must not leave an unhandled rejection behind.
  ready.catch(() => undefined);

  const loads = (): RoleLoad[] =>
    options.roles.map((role) => {
      const mine = [...slots.values()].filter((slot) => slot.role === role);
      return {
        role,
        idle: mine.filter((slot) => slot.phase === 'idle').length,
        booting: mine.filter((slot) => slot.phase === 'booting').length,
        queued: queued.get(role) ?? 0,
        // With background boots a successor boots as a reserve anyway: it is not held back.
        answering: backgroundBoots
          ? 0
          : mine.filter((slot) => slot.successorHeld !== undefined).length +
            postponed.filter((successor) => successor.role === role).length,
      };
    });

  /**
   * Whether the next task of a role would wait for a worker that is booting: no idle worker is
   * left over once the tasks waiting are taken.
   */
  const awaited = (role: TaskRole) =>
    [...slots.values()].filter((slot) => slot.role === role && slot.phase === 'idle').length <= (queued.get(role) ?? 0);

  /** The worker on its last task waits on I/O, has answered or used its grace: its successor may boot. */
  const dueSuccessor = (slot: WorkerSlot) => {
    clearTimeout(slot.successorHeld);
    slot.successorHeld = undefined;
    balance();
  };

  const raise = (slot: WorkerSlot, why: 'ready' | 'awaited') => {
    if (!slot.low) return;
    slot.low = false;
    const pid = slot.child.pid as number;
    setWorkerNice(pid, normalNice);
    host.emit('worker.priority', { pid, role: slot.role, nice: normalNice, why });
  };

  /**
   * Lets postponed successors boot once the host is quiet, their time is up or their role has no
   * idle worker left for its next task; checks again when the next of these is due.
   */
  const releasePostponed = () => {
    const now = performance.now();
    const quiet = now - lastActivity >= successorQuietMs;
    postponed = postponed.filter((successor) => !quiet && now < successor.until && !awaited(successor.role));
    clearTimeout(postponedCheck);
    if (postponed.length === 0) return;
    const due = Math.min(lastActivity + successorQuietMs, ...postponed.map((successor) => successor.until));
    postponedCheck = setTimeout(balance, Math.max(1, due - now)).unref();
  };

  /** Boots what the roles need within the limits, or makes room for a role with tasks and no worker. */
  const balance = () => {
    if (stopping) return;
    releasePostponed();
    // A reserve that a task now waits for is on the critical path: it boots at full speed.
    for (const slot of slots.values())
      if (slot.low && slot.phase === 'booting' && awaited(slot.role)) raise(slot, 'awaited');
    const plan = chooseBoots(loads(), { pool, free: maxWorkers - slots.size, bootSlots: bootConcurrency - booting });
    for (const role of plan.boot) spawnWorker(role);
    // One at a time: the place of a worker that is leaving is not free yet, but it is spoken for.
    // And only for a want that lasts (a second): a queue that empties and refills between two
    // looks must not make workers leave and boot in turn.
    const leaving = [...slots.values()].some((slot) => slot.phase === 'leaving');
    const needy = plan.retire?.to;
    if (!needy) starvedSince = undefined;
    else if (starvedSince?.role !== needy) starvedSince = { role: needy, at: Date.now() };
    if (plan.retire && !leaving && starvedSince && Date.now() - starvedSince.at >= RETIRE_AFTER_MS) {
      const victim = [...slots.values()].find((slot) => slot.role === plan.retire?.from && slot.phase === 'idle');
      if (victim) {
        victim.phase = 'leaving';
        host.emit('worker.retired', { pid: victim.child.pid as number, role: victim.role, for: plan.retire.to });
        victim.child.kill('SIGTERM');
      }
    }
    if (plan.boot.length === 0 && booting === 0 && plan.settled) markReady();
  };

  // The host's own connection: it reads its roles' queue lengths and reports crashes. Nothing else.
  const connection: Promise<NatsConnection> = connect({
    ...natsConnectOptions(options.natsUrl, options.auth?.host),
    name: `polish-host-${process.pid}`,
  });
  connection.catch(() => undefined);
  // Known once connected: a host stopped while still connecting does not wait for that to end.
  let connected: NatsConnection | undefined;
  void connection.then(
    (value) => {
      connected = value;
      if (stopping && slots.size === 0) void value.close();
    },
    () => undefined,
  );
  const watchQueues = async () => {
    const manager = await jetstreamManager(await connection);
    while (!stopping) {
      for (const role of options.roles) {
        const queue = taskQueueOf(role, options.lanes?.[role], prefix);
        const info = await manager.consumers.info(queue.stream, queue.consumer).catch(() => undefined);
        queued.set(role, info?.num_pending ?? 0);
      }
      balance();
      await new Promise((resolve) => setTimeout(resolve, 1_000).unref());
    }
  };
  void watchQueues().catch(() => undefined);

  const reportCrash = async (slot: WorkerSlot, pid: number, how: string) => {
    if (!slot.held) return;
    const notice: CrashNotice = {
      v: PROTOCOL_VERSION,
      role: slot.role,
      key: slot.held.key,
      taskId: slot.held.taskId,
      delivery: slot.held.delivery,
      worker: { pid, hostname: hostname() },
      reason: how,
      ack: slot.held.ack,
    };
    try {
      (await connection).publish(crashSubject(slot.role, prefix), JSON.stringify(notice));
    } catch {
      // NATS is unreachable: the task's lease runs out and the queue hands it out again.
    }
  };

  const booted = (slot: WorkerSlot) => {
    if (slot.bootCounted) return;
    slot.bootCounted = true;
    booting -= 1;
  };

  const spawnWorker = (role: TaskRole) => {
    const auth = options.auth?.roles[role];
    // A reserve: no task waits for it (an idle worker of its role will take the next one).
    const reserve = backgroundBoots && !awaited(role);
    const config: WorkerConfig = {
      natsUrl: options.natsUrl,
      prefix,
      role,
      ...(options.lanes?.[role] ? { lane: options.lanes[role] } : {}),
      reuse,
      model: options.roleModels?.[role] ?? options.model,
      ...(auth ? { auth } : {}),
      ...(role === 'par.command' && options.command ? { command: options.command } : {}),
      ...(reserve ? { lowPriority: true } : {}),
    };
    const environment = {
      ...workerEnvironment({ ...process.env, ...options.env }),
      [WORKER_CONFIG_ENV]: JSON.stringify(config),
    };
    const launch = workerLaunch(
      environment,
      options.snapshot ?? true,
      () => restoreTunables(environment),
      workerNodeFlags,
    );
    const untrusted = untrustedCode(launch);
    if (untrusted) {
      stopping = true;
      const message =
        `refusing to start workers from ${launch.from}: ${untrusted} (every worker runs that code with ` +
        'your rights and keys, so nobody but you or root may change it)';
      host.emit('worker.failed', { role, message });
      markFailed(new Error(message));
      return;
    }
    const started = performance.now();
    // The epoch time of the fork, to compare with the worker's own clock (its entry's start).
    const spawnedAt = performance.timeOrigin + started;
    booting += 1;
    const child = fork(launch.modulePath, [], {
      execArgv: launch.execArgv,
      env: launch.env,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      // Its own process group: a terminal's Ctrl-C reaches the host, which stops workers in order.
      // A worker whose host dies sees the IPC channel close and drains by itself.
      detached: true,
    });
    const slot: WorkerSlot = {
      child,
      role,
      phase: 'booting',
      bootCounted: false,
      tasksTaken: 0,
      low: false,
      awaitsRaise: reserve,
      held: undefined,
      successorHeld: undefined,
    };
    if (child.pid === undefined) {
      // fork() failed (e.g. EAGAIN): no process, no exit event. Count it and try again later.
      child.once('error', (error) =>
        host.emit('worker.failed', { role, message: `cannot start a ${role} worker: ${error.message}` }),
      );
      booted(slot);
      if ((bootFailures += 1) <= 3 * maxWorkers) setTimeout(balance, 1_000).unref();
      return;
    }
    const pid = child.pid;
    if (reserve) {
      // Right after the fork, before Node starts its other threads: they inherit the main thread's value.
      setWorkerNice(pid, RESERVE_NICE);
      slot.low = true;
      host.emit('worker.priority', { pid, role, nice: RESERVE_NICE, why: 'reserve' });
    }
    slots.set(pid, slot);
    peak = Math.max(peak, slots.size);
    child.on('error', () => undefined); // close follows; a failed kill() on a gone process is not news
    child.on('message', (notice: WorkerNotice) => {
      if (notice.type === 'started') {
        host.emit('worker.started', { pid, role, alive: slots.size, from: launch.from });
      } else if (notice.type === 'ready') {
        if (slot.phase === 'booting') slot.phase = 'idle';
        booted(slot);
        raise(slot, 'ready');
        // Only now may it pull a task (see WorkerConfig.lowPriority).
        if (slot.awaitsRaise) child.send({ type: 'raised' } satisfies HostNotice, () => undefined);
        bootFailures = 0;
        const boot = notice.boot;
        const steps: BootSteps | undefined = boot && {
          node: boot.entryAt - spawnedAt,
          code: boot.code,
          nats: boot.nats,
          connect: boot.connect,
          warmUp: boot.warmUp,
          ...(boot.modelWarmUp === undefined ? {} : { modelWarmUp: boot.modelWarmUp }),
          queue: boot.queue,
          cpuMs: boot.cpuMs,
        };
        host.emit('worker.ready', { pid, role, bootMs: performance.now() - started, ...(steps ? { steps } : {}) });
        balance();
      } else if (notice.type === 'task.taken') {
        slot.tasksTaken += 1;
        slot.phase = 'busy';
        slot.held = { taskId: notice.taskId, key: notice.key, ack: notice.ack, delivery: notice.delivery };
        lastActivity = performance.now();
        if (slot.tasksTaken >= reuse) {
          clearTimeout(slot.successorHeld);
          slot.successorHeld = setTimeout(() => dueSuccessor(slot), successorGraceMs).unref();
        }
        host.emit('task.taken', {
          pid,
          role,
          taskId: notice.taskId,
          key: notice.key,
          queueSeq: notice.queueSeq,
          deliverySeq: notice.deliverySeq,
          delivery: notice.delivery,
        });
        // Its successor waits until the task waits on I/O or is answered, or the grace ends (see successorHeld).
        balance();
      } else if (notice.type === 'task.waiting') {
        if (notice.taskId !== slot.held?.taskId) return;
        // Waiting on its model: the successor boots now, warm long before this task ends.
        dueSuccessor(slot);
      } else if (notice.type === 'task.done') {
        slot.held = undefined;
        // Its last task answered, the worker only drains and exits, freeing a heap of tens of MB:
        // while its role has an idle worker for the next task (a run goes on), that must not take
        // the cores from the next answer. Where its place may be wanted (no idle worker of its
        // role, tasks seen waiting in any queue, the host at its process limit, or stopping) it
        // exits at full speed: a lowered process gets a core only when nothing else wants one.
        // Decided now, never revisited (raising it back would need a privilege). Not reaped yet
        // (no exit code): the pid is still its own.
        const placeWanted =
          stopping || awaited(role) || slots.size >= maxWorkers || [...queued.values()].some((waiting) => waiting > 0);
        const lowered = exitsLow && slot.tasksTaken >= reuse && !placeWanted;
        if (lowered && child.exitCode === null && child.signalCode === null) {
          setWorkerNice(pid, RESERVE_NICE);
          host.emit('worker.priority', { pid, role, nice: RESERVE_NICE, why: 'exiting' });
        }
        if (slot.tasksTaken < reuse && slot.phase === 'busy') slot.phase = 'idle';
        lastActivity = performance.now();
        // Answered on the cores: while the host keeps taking tasks and the role has a worker for
        // its next one, the successor's boot would run beside the next answers (of this run).
        if (slot.successorHeld !== undefined && successorQuietMs > 0 && !awaited(role))
          postponed.push({ role, until: lastActivity + postponeMaxMs });
        host.emit('task.done', { pid, role, taskId: notice.taskId, ok: notice.ok });
        dueSuccessor(slot);
      }
    });
    // 'close', not 'exit': it waits for the IPC channel's end, so a 'task.taken' the worker sent just
    // before it died has been read and the crash report names that task.
    child.on('close', (code, signal) => {
      slots.delete(pid);
      clearTimeout(slot.successorHeld);
      booted(slot);
      const crashed = code !== 0;
      if (crashed) void reportCrash(slot, pid, signal ?? `exit code ${code}`);
      host.emit('worker.exited', { pid, role, code, signal, crashed, alive: slots.size });
      if (stopping) return;
      // A worker that cannot even start (bad settings, NATS unreachable) must not respawn forever.
      if (slot.phase === 'booting' && (bootFailures += 1) > 3 * Math.max(pool, 1) * options.roles.length) {
        stopping = true;
        const message = `${role} workers keep failing to start (exit code ${code}); see their output above`;
        host.emit('worker.failed', { role, message });
        markFailed(new Error(message));
        return;
      }
      balance();
    });
  };

  balance();

  host.workerPids = () => [...slots.keys()];
  Object.defineProperty(host, 'backgroundBoots', { value: backgroundBoots });
  host.peakWorkers = () => peak;
  Object.defineProperty(host, 'ready', { value: ready });
  host.stop = async (stopOptions = {}) => {
    stopping = true;
    clearTimeout(postponedCheck);
    const exits = [...slots.values()].map(
      (slot) =>
        new Promise<void>((resolve) => {
          // Every slot here is not yet closed (its 'close' handler removes it).
          slot.child.once('close', () => resolve());
          if (slot.child.exitCode === null && slot.child.signalCode === null) slot.child.kill('SIGTERM');
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
    await connected?.drain().catch(() => undefined);
  };
  return host;
}
