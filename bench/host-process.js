// Starts `polish worker` as its own process, the way it is deployed, and follows its log.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const POLISH = fileURLToPath(new URL('../packages/cli/dist/bin.js', import.meta.url));

/**
 * A running agent host: boot times and worker pids from its log, and a way to wait until a
 * role has `count` ready, unused task slots (a warm pool).
 */
export async function startHostProcess({
  natsUrl,
  roles,
  pool,
  reuse = 1,
  script,
  maxWorkers,
  flags = [],
  polish = POLISH,
  // Node's own options for the host, which its workers inherit (a profiler, say).
  nodeFlags = [],
  // Added to this process's environment for the host (and so its workers).
  env = {},
}) {
  const child = spawn(
    process.execPath,
    [
      ...nodeFlags,
      polish,
      'worker',
      '--nats',
      natsUrl,
      '--roles',
      roles.join(','),
      '--pool',
      String(pool),
      '--reuse',
      String(reuse),
      ...(script ? ['--script', script] : []),
      ...(maxWorkers ? ['--max-workers', String(maxWorkers)] : []),
      ...flags,
    ],
    { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } },
  );
  const available = new Map(roles.map((role) => [role, 0]));
  const boots = [];
  /** Where each boot went, from the "ready in" line: { node, code, nats, connect, warmUp, modelWarmUp?, queue, cpuMs }. */
  const steps = [];
  const pids = [];
  let taken = 0;
  let peakAlive = 0;
  let waiters = [];
  let markReady;
  const ready = new Promise((resolve) => (markReady = resolve));
  const settle = () => {
    waiters = waiters.filter((waiter) => (waiter.done() ? (waiter.resolve(), false) : true));
  };
  createInterface({ input: child.stderr }).on('line', (line) => {
    // POLISH_BENCH_HOST_LOG=1: the host's log on this process's standard error, to see why a benchmark stalls.
    if (process.env.POLISH_BENCH_HOST_LOG === '1') process.stderr.write(`${line}\n`);
    const booted = /^worker (\d+) \((\S+)\) ready in (\d+) ms/.exec(line);
    const took = /^worker \d+ \((\S+)\) took task/.exec(line);
    const alive = /; (\d+) alive$/.exec(line);
    if (alive) peakAlive = Math.max(peakAlive, Number(alive[1]));
    const breakdown =
      /: node (\d+), code (\d+), nats (\d+), connect (\d+), warm-up (\d+)(?: \(model (\d+)\))?, queue (\d+) \((\d+) ms CPU\)$/.exec(
        line,
      );
    if (booted) {
      pids.push(Number(booted[1]));
      boots.push(Number(booted[3]));
      if (breakdown) {
        const [node, code, nats, connect, warmUp, modelWarmUp, queue, cpuMs] = breakdown.slice(1).map(Number);
        // modelWarmUp: a model's own warm-up, part of warmUp (an SDK's; none for the script).
        steps.push({ node, code, nats, connect, warmUp, ...(breakdown[6] ? { modelWarmUp } : {}), queue, cpuMs });
      }
      available.set(booted[2], available.get(booted[2]) + reuse);
    } else if (took) {
      taken += 1;
      available.set(took[1], available.get(took[1]) - 1);
    } else if (line.includes('all pools ready')) {
      markReady();
    }
    settle();
  });
  const until = (done) => (done() ? Promise.resolve() : new Promise((resolve) => waiters.push({ done, resolve })));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  await Promise.race([ready, exited.then(() => Promise.reject(new Error('polish worker exited before it was ready')))]);
  return {
    pid: child.pid,
    boots,
    steps,
    pids,
    /** The most worker processes the host had alive at once, from its own log. */
    peakAlive: () => peakAlive,
    /** Resolves once the role has at least `count` ready, unused task slots. */
    warm: (role, count = 1) => until(() => available.get(role) >= count),
    /** Resolves once the host has logged `count` tasks taken in all (its log lags the replies). */
    taken: (count) => until(() => taken >= count),
    async stop() {
      child.kill('SIGTERM');
      await exited;
    },
  };
}
