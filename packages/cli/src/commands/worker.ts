import {
  backgroundBootsUnavailable,
  createAgentHost,
  defaultMaxWorkers,
  laneModelOf,
  type BootSteps,
  type ModelSettings,
} from '@polish/agents';
import {
  unavailable,
  invalidInput,
  isLaneRole,
  modelLane,
  ReviseModeSchema,
  TaskRoleSchema,
  type TaskRole,
} from '@polish/protocol';
import { hostAuthOf, readCredentials, type NatsAccessFlags } from '../nats-auth.js';
import { describeModels, resolveModels, withAnswers, type ModelFlags } from '../models.js';
import { parseWholeNumber } from '../numbers.js';

/** Flags of `polish worker`. */
export interface WorkerFlags extends ModelFlags, NatsAccessFlags {
  roles: string;
  pool?: string;
  maxWorkers?: string;
  allowUnsandboxed?: boolean;
  commandEnv?: string;
  reuse?: string;
  nats?: string;
  reviseMode?: string;
  /** False with --no-evidence: passes need no quote (commander sets true otherwise). */
  evidence?: boolean;
  /** Evaluate workers serve their model's lane (a quorum's judges on that model), not the plain queue. */
  lane?: boolean;
  /** True with --background-boots (reserves boot at the lowest priority), false with --no-background-boots (the default). */
  backgroundBoots?: boolean;
  bootConcurrency?: string;
  successorQuiet?: string;
}

const log = (line: string) => process.stderr.write(`${line}\n`);

/**
 * Where a boot went, for the "ready in" line: `node 35, code 20, nats 9, connect 4, warm-up 12,
 * queue 1 (61 ms CPU)`; a model with its own warm-up (an SDK's) adds its part: `warm-up 12 (model 5)`.
 */
export function describeBoot(steps: BootSteps): string {
  const ms = (value: number) => Math.round(value);
  return (
    `node ${ms(steps.node)}, code ${ms(steps.code)}, nats ${ms(steps.nats)}, connect ${ms(steps.connect)}, ` +
    `warm-up ${ms(steps.warmUp)}${steps.modelWarmUp === undefined ? '' : ` (model ${ms(steps.modelWarmUp)})`}, queue ${ms(steps.queue)} (${ms(steps.cpuMs)} ms CPU)`
  );
}

/** `--allow-unsandboxed` and `--command-env A,B`: what critique commands run by these workers may do. */
export function commandSettingsOf(flags: { allowUnsandboxed?: boolean; commandEnv?: string }) {
  const env = (flags.commandEnv ?? '')
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean);
  for (const name of env)
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw invalidInput('command-env', `"${name}" is not a variable name`);
  return { ...(flags.allowUnsandboxed ? { allowUnsandboxed: true } : {}), ...(env.length > 0 ? { env } : {}) };
}

/**
 * `--lane`: each role that has lanes (evaluate) serves the lane of its model, so that the judge
 * of a run's `--evaluators` naming that model comes here and nowhere else.
 */
export function lanesOf(
  roles: readonly TaskRole[],
  byRole: Partial<Record<TaskRole, ModelSettings>>,
): Partial<Record<TaskRole, string>> {
  const laned = roles.filter(isLaneRole);
  if (laned.length === 0)
    throw invalidInput('lane', `only evaluate workers serve lanes; --roles ${roles.join(',')} has none`);
  return Object.fromEntries(
    laned.map((role) => {
      const model = laneModelOf(byRole[role] ?? { provider: 'none' });
      try {
        return [role, modelLane(model)];
      } catch (error) {
        throw invalidInput('lane', (error as Error).message);
      }
    }),
  );
}

function parseRoles(raw: string): TaskRole[] {
  const roles = raw
    .split(',')
    .map((role) => role.trim())
    .filter(Boolean);
  if (roles.length === 0) throw invalidInput('roles', 'name at least one role: criteria,evaluate,revise');
  return roles.map((role) => {
    const parsed = TaskRoleSchema.safeParse(role);
    if (!parsed.success)
      throw invalidInput('roles', `unknown role "${role}" (roles: ${TaskRoleSchema.options.join(', ')})`);
    return parsed.data;
  });
}

/**
 * `polish worker`: an agent host of single-use worker processes, at most `--max-workers` at once,
 * each pulling one task from its role's queue. SIGTERM/SIGINT drain it: no new tasks, tasks in
 * hand finish, then it exits 0.
 */
export async function workerCommand(flags: WorkerFlags): Promise<number> {
  const roles = parseRoles(flags.roles);
  const pool = parseWholeNumber('pool', flags.pool, 1, 64) ?? 2;
  const maxWorkers = parseWholeNumber('max-workers', flags.maxWorkers, 1, 4096) ?? defaultMaxWorkers();
  const reuse = parseWholeNumber('reuse', flags.reuse, 1, 1_000_000) ?? 1;
  const bootConcurrency = parseWholeNumber('boot-concurrency', flags.bootConcurrency, 1, 4096);
  const successorQuietMs = parseWholeNumber('successor-quiet', flags.successorQuiet, 0, 60_000);
  const natsUrl = flags.nats ?? process.env.NATS_URL;
  if (!natsUrl) throw invalidInput('nats', 'required: pass --nats nats://host:4222 or set NATS_URL');
  const reviseMode = flags.reviseMode === undefined ? undefined : ReviseModeSchema.safeParse(flags.reviseMode);
  if (reviseMode && !reviseMode.success)
    throw invalidInput('revise-mode', `must be auto, edits or full, got "${flags.reviseMode}"`);
  const resolved = resolveModels(flags, process.env, roles);
  const models = {
    ...resolved,
    byRole: withAnswers(resolved.byRole, {
      ...(reviseMode?.data ? { revise: reviseMode.data } : {}),
      ...(flags.evidence === false ? { evidence: false } : {}),
    }),
  };
  for (const line of describeModels(models.byRole)) log(`polish worker: model for ${line}`);
  const lanes = flags.lane ? lanesOf(roles, models.byRole) : undefined;
  for (const [role, lane] of Object.entries(lanes ?? {}))
    log(
      `polish worker: ${role} workers serve lane ${lane} (the judges of runs whose --evaluators name ` +
        `${laneModelOf(models.byRole[role as TaskRole] ?? { provider: 'none' })}), not the plain ${role} queue`,
    );
  const credentials = readCredentials(flags);
  const host = createAgentHost({
    natsUrl,
    roles,
    pool,
    maxWorkers,
    reuse,
    ...(bootConcurrency ? { bootConcurrency } : {}),
    ...(successorQuietMs === undefined ? {} : { successorQuietMs }),
    backgroundBoots: flags.backgroundBoots === true,
    command: commandSettingsOf(flags),
    model: models.byRole[roles[0] as TaskRole] ?? { provider: 'none' },
    roleModels: models.byRole,
    ...(lanes ? { lanes } : {}),
    ...(credentials ? { auth: hostAuthOf(credentials, roles) } : {}),
  });
  host.on('worker.ready', ({ pid, role, bootMs, steps }) =>
    log(`worker ${pid} (${role}) ready in ${Math.round(bootMs)} ms${steps ? `: ${describeBoot(steps)}` : ''}`),
  );
  // A raise at ready goes without saying (the "ready in" line follows), and so does lowering a
  // worker that has answered its last task (every strict task; its "exited" line follows); the others are news.
  host.on('worker.priority', ({ pid, role, nice, why }) => {
    if (why === 'reserve') log(`worker ${pid} (${role}) boots in the background: nice ${nice}`);
    else if (why === 'awaited') log(`worker ${pid} (${role}) raised to nice ${nice}: a task waits for it`);
  });
  host.on('worker.started', ({ pid, role, alive, from }) =>
    log(`worker ${pid} (${role}) started from ${from}; ${alive} alive`),
  );
  host.on('task.taken', ({ pid, role, taskId, key, queueSeq, deliverySeq, delivery }) =>
    log(
      `worker ${pid} (${role}) took task ${taskId} key ${key.slice(0, 16)} (queue #${queueSeq}, handed out #${deliverySeq}` +
        `${delivery > 1 ? `, delivery ${delivery}` : ''})`,
    ),
  );
  host.on('worker.retired', ({ pid, role, for: needy }) =>
    log(`worker ${pid} (${role}) retired: idle, and ${needy} tasks wait with no worker`),
  );
  host.on('task.done', ({ pid, role, taskId, ok }) =>
    log(`worker ${pid} (${role}) answered task ${taskId} (${ok ? 'ok' : 'error'})`),
  );
  host.on('worker.exited', ({ pid, role, code, signal, crashed, alive }) => {
    if (crashed) log(`worker ${pid} (${role}) died (${signal ?? `exit code ${code}`}); replacing it`);
    else log(`worker ${pid} (${role}) exited; ${alive} alive`);
  });
  log(
    `polish worker: roles ${roles.join(',')}, pool ${pool} per role, at most ${maxWorkers} worker processes, ` +
      `${reuse === 1 ? 'one task per process' : `up to ${reuse} tasks per process (weaker isolation)`}, NATS ${natsUrl}`,
  );
  const cannot = backgroundBootsUnavailable();
  if (flags.backgroundBoots !== true) log('polish worker: background boots off: replacements boot at normal priority');
  else if (cannot) log(`polish worker: background boots off: ${cannot}`);
  else log('polish worker: background boots: replacements boot at the lowest priority until needed');
  const stopped = new Promise<string>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
  const ready = host.ready.then(
    () => 'ready',
    async (error: Error) => {
      await host.stop();
      throw unavailable(error.message);
    },
  );
  const outcome = await Promise.race([ready, stopped]);
  if (outcome === 'ready') {
    log('polish worker: all pools ready');
    const signal = await stopped;
    log(`polish worker: ${signal}: draining (no new tasks; tasks in hand finish)`);
  }
  await host.stop();
  log('polish worker: drained, exiting');
  return 0;
}
