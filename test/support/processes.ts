import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { POLISH, REPO } from './cli.js';

/** A `polish …` child process whose stderr lines can be awaited. */
export interface WatchedProcess {
  child: ChildProcess;
  lines: string[];
  /** Resolves with the first stderr line (past or future) matching the pattern; see `watchProcess`. */
  waitFor(pattern: RegExp, withinMs?: number): Promise<RegExpExecArray>;
  /** Resolves with the exit code (or signal) once the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stdout(): string;
}

/** Every process the tests started, so a test that times out leaves none behind (see setup.ts). */
const started = new Set<ChildProcess>();

/** Kills whatever the tests started and is still running. */
export function killStarted(): void {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  started.clear();
}

/**
 * Watches a child process's stderr line by line. `waitFor` resolves with the first line (past or
 * future) matching the pattern and rejects if the process exits first, or after `withinMs` when a
 * bound is given (default: `defaultWaitMs`, none unless set).
 */
export function watchProcess(
  child: ChildProcess,
  options: { describe?: string; defaultWaitMs?: number } = {},
): WatchedProcess {
  const describe = options.describe ?? 'process';
  const lines: string[] = [];
  const waiters: { pattern: RegExp; resolve: (match: RegExpExecArray) => void }[] = [];
  let stdout = '';
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  createInterface({ input: child.stderr! }).on('line', (line) => {
    lines.push(line);
    for (const waiter of [...waiters]) {
      const match = waiter.pattern.exec(line);
      if (match) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(match);
      }
    }
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
    child.once('error', () => resolve({ code: null, signal: null }));
  });
  return {
    child,
    lines,
    exited,
    stdout: () => stdout,
    waitFor(pattern, withinMs = options.defaultWaitMs) {
      for (const line of lines) {
        const match = pattern.exec(line);
        if (match) return Promise.resolve(match);
      }
      return new Promise((resolve, reject) => {
        const timer =
          withinMs === undefined
            ? undefined
            : setTimeout(() => {
                waiters.splice(waiters.indexOf(waiter), 1);
                reject(
                  new Error(
                    `${describe}: no line matched ${pattern} within ${withinMs / 1000} s:\n${lines.join('\n')}`,
                  ),
                );
              }, withinMs);
        timer?.unref();
        const waiter = {
          pattern,
          resolve: (match: RegExpExecArray) => {
            clearTimeout(timer);
            resolve(match);
          },
        };
        waiters.push(waiter);
        void exited.then(() => {
          if (!waiters.includes(waiter)) return;
          waiters.splice(waiters.indexOf(waiter), 1);
          clearTimeout(timer);
          reject(new Error(`${describe} exited before a line matched ${pattern}:\n${lines.join('\n')}`));
        });
      });
    },
  };
}

/** Starts the built `polish` with these arguments, watching its stderr line by line. */
export function startPolish(args: string[], env: NodeJS.ProcessEnv = {}): WatchedProcess {
  const child = spawn(process.execPath, [POLISH, ...args], {
    cwd: REPO,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.add(child);
  child.once('exit', () => started.delete(child));
  return watchProcess(child, { describe: `polish ${args[0] ?? ''}` });
}

/** The arguments of `polish worker` for a scripted host: its roles (default: all), pool per role, reuse and cap. */
export function workerArgs(options: {
  script: string;
  roles?: string[];
  pool?: number;
  reuse?: number;
  maxWorkers?: number;
}): string[] {
  const flag = (name: string, value: string | number | undefined) => (value === undefined ? [] : [name, String(value)]);
  return [
    ...flag('--roles', options.roles?.join(',')),
    ...flag('--pool', options.pool),
    ...flag('--reuse', options.reuse),
    ...flag('--max-workers', options.maxWorkers),
    '--script',
    options.script,
  ];
}

/** Starts `polish worker` and waits until all its pools are ready. */
export async function startHost(
  natsUrl: string,
  args: string[] = [],
  env: NodeJS.ProcessEnv = {},
): Promise<WatchedProcess & { pids: () => number[]; workerReady: (pid: number) => Promise<void> }> {
  const host = startPolish(['worker', '--nats', natsUrl, ...args], env);
  await host.waitFor(/all pools ready/);
  const pids = () => host.lines.flatMap((line) => /^worker (\d+) \(\w+\) ready/.exec(line)?.[1] ?? []).map(Number);
  // Waited for, not read at once: a worker's answer (over NATS) may arrive before its host's log
  // line (stderr) saying it was ready. A worker of another host is never logged: rejects after 10 s.
  const workerReady = async (pid: number) => {
    await host.waitFor(new RegExp(`^worker ${pid} \\(\\S+\\) ready`), 10_000);
  };
  return { ...host, pids, workerReady };
}

/** Stops a watched process with SIGTERM and waits for it to exit. */
export async function stop(process_: WatchedProcess): Promise<void> {
  if (process_.child.exitCode === null && process_.child.signalCode === null) process_.child.kill('SIGTERM');
  await process_.exited;
}

/** A process's node flags, script and arguments, as it was started. */
export const commandLineOf = (pid: number): string[] => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');

/** Pids of live processes whose environment holds `TAG=value` (to prove nothing was left behind). */
export function processesTagged(tag: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/environ`, 'utf8').split('\0').includes(`POLISH_TEST_TAG=${tag}`))
        found.push(Number(entry));
    } catch {
      // The process ended while we looked: it is not left behind.
    }
  }
  return found;
}

/** An environment without any model key or model setting of the developer's own. */
export function cleanEnvironment(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const environment = { ...process.env };
  for (const name of Object.keys(environment))
    if (/^(ANTHROPIC_|OPENAI_|POLISH_|NATS_URL)/.test(name)) delete environment[name];
  return { ...environment, ...extra };
}
