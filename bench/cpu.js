// CPU time of processes from /proc, for the "CPU-seconds per task" figures: a process's own
// user+system time, the time of its children that have exited and been waited for (cutime,
// cstime), and the same for the children still alive, recursively. Linux only, like the bench.
import { readFileSync, readdirSync } from 'node:fs';

/** Milliseconds per clock tick of /proc/<pid>/stat (USER_HZ, 100 on Linux). */
const TICK_MS = 10;

/** [utime, stime, cutime, cstime] of a process in ms, or zeros once it is gone. */
function statTimes(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces): state is field 3, utime field 14.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields.slice(11, 15).map((ticks) => Number(ticks) * TICK_MS);
  } catch {
    return [0, 0, 0, 0];
  }
}

/** The live children of a process (every thread's: a child is listed under the thread that forked it). */
function childrenOf(pid) {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((thread) =>
      readFileSync(`/proc/${pid}/task/${thread}/children`, 'utf8').split(' ').filter(Boolean).map(Number),
    );
  } catch {
    return [];
  }
}

/** A process's own CPU time in ms (user + system), without its children. */
export function ownCpuMs(pid) {
  const [user, system] = statTimes(pid);
  return user + system;
}

/** The CPU time in ms of a process's children that have exited and been waited for (cutime + cstime). */
export function waitedChildrenCpuMs(pid) {
  const [, , childrenUser, childrenSystem] = statTimes(pid);
  return childrenUser + childrenSystem;
}

/**
 * The CPU time in ms a process and everything it started have used: its own, its waited-for
 * children's, and its live children's trees. The difference of two readings is what the tree
 * used in between, children that came and went included.
 */
export function treeCpuMs(pid) {
  const [user, system, childrenUser, childrenSystem] = statTimes(pid);
  return (
    user + system + childrenUser + childrenSystem + childrenOf(pid).reduce((sum, child) => sum + treeCpuMs(child), 0)
  );
}
