// CPU priority of worker processes, for background boots: a reserve worker (a replacement booted
// while another worker of its role is idle and can take the next task) boots at the lowest
// priority, so its boot does not take the cores from the worker that is answering, and is raised
// to normal priority before it may take a task. Linux only: it renices every thread (a nice value
// is per thread on Linux, and a thread inherits its creator's) and, when the worker is the only
// member of its own autogroup, that autogroup too (with autogroups on, the scheduler shares the
// cores between autogroups first, by the autogroup's nice; a thread's nice then only counts within
// its group). The host forks workers detached, so each is a session, hence an autogroup, of its
// own; the host's group (and the orchestrator's, when it started the host) is never touched.
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';

/** The nice value a reserve worker boots at: it gets a core only when nothing at normal priority wants it. */
export const RESERVE_NICE = 19;

/** CAP_SYS_NICE allows lowering a nice value (raising a priority); CAP_SYS_ADMIN setting autogroup nice values unthrottled. */
const CAP_SYS_NICE = 23n;
const CAP_SYS_ADMIN = 21n;

/** Whether this process has a capability (Linux), from /proc/self/status. */
function capable(capability: bigint): boolean {
  try {
    const mask = /^CapEff:\s*([0-9a-f]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
    return mask !== undefined && ((BigInt(`0x${mask}`) >> capability) & 1n) === 1n;
  } catch {
    return false;
  }
}

/**
 * Why this host cannot boot workers in the background, or undefined when it can: it must be able
 * to raise a worker back to its own priority, which on Linux takes root, CAP_SYS_NICE, or a
 * nice limit (RLIMIT_NICE, `ulimit -e`) that reaches the host's own nice value.
 */
export function backgroundBootsUnavailable(): string | undefined {
  if (process.platform !== 'linux' || !existsSync('/proc/self/task')) return 'they need Linux (/proc)';
  if (capable(CAP_SYS_NICE)) return undefined;
  // "Max nice priority  <soft>  <hard>": the soft limit allows nice values down to 20 - soft.
  const limit = /^Max nice priority\s+(\S+)/m.exec(readFileSync('/proc/self/limits', 'utf8'))?.[1];
  const reach = limit === 'unlimited' ? -20 : 20 - Number(limit ?? 0);
  if (reach <= getPriority()) return undefined;
  return (
    'raising a worker back to normal priority needs root, CAP_SYS_NICE or `ulimit -e` of at least ' +
    String(20 - getPriority())
  );
}

/** Whether worker autogroups are reniced: autogroups are on and this process may change them unthrottled. */
const autogroups = (() => {
  try {
    return readFileSync('/proc/sys/kernel/sched_autogroup_enabled', 'utf8').trim() === '1' && capable(CAP_SYS_ADMIN);
  } catch {
    return false;
  }
})();

/** The autogroup line of a process ("/autogroup-13 nice 0"), or undefined (gone, or autogroups off). */
function autogroupOf(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/autogroup`, 'utf8');
  } catch {
    return undefined;
  }
}

/**
 * Sets a thread's nice value; a thread that has exited meanwhile is not an error. Node reports
 * that as a SystemError whose own code is ERR_SYSTEM_ERROR: the errno is in `info`.
 */
export function setThreadNice(thread: number, nice: number): void {
  try {
    setPriority(thread, nice);
  } catch (error) {
    if ((error as { info?: { code?: string } }).info?.code !== 'ESRCH') throw error;
  }
}

/**
 * Sets the nice value of every thread of a worker, and of its autogroup when that is its own
 * (not the host's). The main thread first: threads it starts afterwards inherit its value.
 * Threads that start while the list is walked are caught by walking it again. A worker that has
 * exited meanwhile is not an error.
 */
export function setWorkerNice(pid: number, nice: number): void {
  const done = new Set<number>();
  for (let pass = 0; pass < 3; pass += 1) {
    let threads: number[];
    try {
      threads = [pid, ...readdirSync(`/proc/${pid}/task`).map(Number)];
    } catch {
      return;
    }
    const fresh = threads.filter((thread) => !done.has(thread));
    if (fresh.length === 0) break;
    for (const thread of fresh) {
      done.add(thread);
      setThreadNice(thread, nice);
    }
  }
  // Without CAP_SYS_ADMIN the kernel takes one autogroup change per 100 ms from the whole machine
  // (EAGAIN otherwise): a raise could be refused, so such a host leaves autogroups alone.
  if (!autogroups) return;
  const group = autogroupOf(pid);
  if (group === undefined || group.split(' ')[0] === autogroupOf(process.pid)?.split(' ')[0]) return;
  try {
    writeFileSync(`/proc/${pid}/autogroup`, String(nice));
  } catch {
    // Gone meanwhile.
  }
}

/** The nice value of a process's (main thread's) scheduling, from /proc/<pid>/stat, or undefined once it is gone. */
export function niceOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces): state is field 3, nice field 19.
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
  } catch {
    return undefined;
  }
}
