import { closeSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { PolishError } from '@polish/protocol';

// An exclusive lock file shared by processes on one machine: it holds the holder's pid, and a
// lock whose holder died is broken safely. The functions are synchronous, as the CLI relies on.

const errorCode = (error: unknown) => (error as NodeJS.ErrnoException | undefined)?.code;

/** How long a writer waits for the lock. Not exported from the package; tests shorten it. */
export const lockFileSettings = { timeoutMs: 10_000 };
/** A lock file still without a pid this long after it was created belongs to a writer that died in between. */
const UNWRITTEN_LOCK_GRACE_MS = 2_000;

/** Blocks this thread for `ms` (the functions here are synchronous, and the CLI relies on that). */
const sleepSync = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return errorCode(error) !== 'ESRCH'; // EPERM: alive, someone else's
  }
}

/** The pid in a lock file, `null` while its holder has not written it yet, `undefined` when the file is gone. */
function lockHolder(path: string): { pid: number | null; ageMs: number } | undefined {
  try {
    const text = readFileSync(path, 'utf8').trim();
    const ageMs = Date.now() - statSync(path).mtimeMs;
    return { pid: /^[1-9]\d*$/.test(text) ? Number(text) : null, ageMs };
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return undefined;
    throw error;
  }
}

/** Whether the lock file's holder is gone: its pid is not a live process, or it never wrote one. */
function holderGone(path: string): boolean {
  const holder = lockHolder(path);
  if (!holder) return false; // released meanwhile: just try again
  return holder.pid === null ? holder.ageMs > UNWRITTEN_LOCK_GRACE_MS : !isAlive(holder.pid);
}

/** Creates `path` exclusively with this process's pid in it; false when it already exists. */
function tryCreateLock(path: string): boolean {
  let fd: number;
  try {
    fd = openSync(path, 'wx');
  } catch (error) {
    if (errorCode(error) === 'EEXIST') return false;
    throw error;
  }
  try {
    writeFileSync(fd, `${process.pid}\n`);
  } catch (error) {
    rmSync(path, { force: true });
    throw error;
  } finally {
    closeSync(fd);
  }
  return true;
}

/**
 * Removes the lock when its holder died. Breaking is itself done under a second lock file, and
 * the holder is checked again under it: two writers that both saw the same stale lock can then
 * never remove the fresh lock that one of them took after breaking it.
 */
function breakStaleLock(path: string) {
  if (!holderGone(path)) return;
  const breaker = `${path}.break`;
  if (!tryCreateLock(breaker)) {
    if (holderGone(breaker)) rmSync(breaker, { force: true }); // a breaker that died while breaking
    return;
  }
  try {
    if (holderGone(path)) rmSync(path, { force: true });
  } finally {
    rmSync(breaker, { force: true });
  }
}

/**
 * Runs `body` holding the lock file `path`. Waits with a short, growing backoff for a
 * live holder, removes the lock of a dead one, and gives up after `lockFileSettings.timeoutMs`.
 * With `readOnly`, a folder where the lock cannot be created at all (read-only) is read unlocked.
 */
export function withLockFile<T>(path: string, body: () => T, options: { readOnly?: boolean } = {}): T {
  const deadline = Date.now() + lockFileSettings.timeoutMs;
  for (let attempt = 0; ; attempt += 1) {
    let acquired: boolean;
    try {
      acquired = tryCreateLock(path);
    } catch (error) {
      if (options.readOnly && ['EACCES', 'EPERM', 'EROFS'].includes(errorCode(error) ?? '')) return body();
      throw error;
    }
    if (acquired) {
      try {
        return body();
      } finally {
        rmSync(path, { force: true });
      }
    }
    breakStaleLock(path);
    const left = deadline - Date.now();
    if (left <= 0) {
      const pid = lockHolder(path)?.pid;
      throw new PolishError(
        'INVALID_INPUT',
        `timed out after ${lockFileSettings.timeoutMs} ms waiting for the lock ${path}${pid ? ` (held by pid ${pid})` : ''}; remove it if no polish process is writing there`,
        { field: 'lock' },
      );
    }
    // 1, 2, 4 … 32 ms, with jitter so that waiting writers do not retry in step.
    sleepSync(Math.min(left, Math.min(2 ** attempt, 32) * (0.5 + Math.random())));
  }
}
