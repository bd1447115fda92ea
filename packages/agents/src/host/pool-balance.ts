import type { TaskRole } from '@polish/protocol';

/** One role's workers on a host, and its tasks waiting in the queue. */
export interface RoleLoad {
  role: TaskRole;
  idle: number;
  booting: number;
  queued: number;
  /**
   * Workers answering their last task whose successors wait (their handlers have neither gone to
   * wait on I/O nor answered, for a short while at most: the host bounds it): each counted as
   * warm, so that a replacement's boot does not compete with an answer for the cores.
   */
  answering?: number;
}

/** What a host should do now: the roles to boot a worker for, and an idle worker to stop to make room. */
export interface BalancePlan {
  boot: TaskRole[];
  retire?: { from: TaskRole; to: TaskRole };
  /** Nothing more to boot: every role has its idle workers, or the process limit is reached. */
  settled: boolean;
}

/**
 * Decides which workers a host boots (pure, so it is tested alone). A role wants `pool` idle
 * workers plus one per task waiting for it; a role with tasks and no worker at all comes
 * first, then the largest shortfall. `free` is what the process limit leaves, `bootSlots` how
 * many more may boot at once. At the limit, a role with tasks and no worker gets the place of
 * an idle worker of a role with nothing waiting.
 */
export function chooseBoots(
  loads: readonly RoleLoad[],
  limits: { pool: number; free: number; bootSlots: number },
): BalancePlan {
  // An answering worker stands in for its successor in the role's pool (the host lets it stand
  // in only until it waits on I/O or answers, or briefly): a boot started beside the answer slows
  // the answer. It stands in for no task in the queue: it will never take one.
  const able = new Map(loads.map((load) => [load.role, load.idle + load.booting]));
  const warm = (load: RoleLoad) => (able.get(load.role) ?? 0) + Math.min(load.answering ?? 0, limits.pool);
  const want = (load: RoleLoad) => limits.pool + load.queued;
  const starved = (load: RoleLoad) => load.queued > 0 && (able.get(load.role) ?? 0) === 0;
  const boot: TaskRole[] = [];
  for (let room = Math.min(limits.free, limits.bootSlots); room > 0; room -= 1) {
    const short = loads.filter((load) => warm(load) < want(load));
    if (short.length === 0) break;
    const [next] = [...short].sort(
      (a, b) =>
        Number(starved(b)) - Number(starved(a)) ||
        want(b) - warm(b) - (want(a) - warm(a)) ||
        loads.indexOf(a) - loads.indexOf(b),
    );
    if (!next) break;
    boot.push(next.role);
    able.set(next.role, (able.get(next.role) ?? 0) + 1);
  }
  const atLimit = limits.free - boot.length <= 0;
  const needy = loads.find(starved);
  const donor = [...loads].filter((load) => load.queued === 0 && load.idle > 0).sort((a, b) => b.idle - a.idle)[0];
  const settled = atLimit || loads.every((load) => warm(load) >= limits.pool);
  return {
    boot,
    ...(atLimit && needy && donor ? { retire: { from: donor.role, to: needy.role } } : {}),
    settled,
  };
}
