import { spawn, spawnSync } from 'node:child_process';
import { watchProcess, type WatchedProcess } from './processes.js';
import { setTimeout as delay } from 'node:timers/promises';

/**
 * Separate "machines" on one Linux box: network namespaces joined by veth pairs (needs root
 * and iproute2's `ip`). One hub namespace (where nats-server and the orchestrator run) has a
 * point-to-point link to each host namespace; every address lives only inside the namespaces,
 * so a host namespace reaches the hub across its veth and nothing else (not even the others).
 */

/** A host namespace and its one link to the hub. */
export interface NetnsHost {
  namespace: string;
  /** This host's address on its link, e.g. 10.231.1.2. */
  address: string;
  /** The hub's address on this host's link, e.g. 10.231.1.1: the host reaches NATS there. */
  hubAddress: string;
  /** The veth end inside this host's namespace. */
  link: string;
}

/** A process started inside a namespace, whose stderr lines can be awaited. */
/** A process in a namespace; `waitFor` is bounded (30 s unless told). */
export interface NetnsProcess extends WatchedProcess {
  namespace: string;
}

export interface Network {
  hub: string;
  hosts: NetnsHost[];
  /** Runs `ip <args>` inside a namespace (e.g. `ip link set <veth> down`); throws with its stderr if it fails. */
  ip(namespace: string, ...args: string[]): string;
  /** Starts a command inside a namespace, in its own process group. */
  start(namespace: string, command: string, args: string[], env?: NodeJS.ProcessEnv): NetnsProcess;
  /** Kills every process in the namespaces and deletes them (and so their veths). Safe to call twice. */
  destroy(): Promise<void>;
}

/** Namespace names start with this and the owning test process's pid, so parallel runs never clash. */
const PREFIX = 'polish-mh-';
const DEFAULT_WAIT_MS = 30_000;

function ip(args: string[]): string {
  const outcome = spawnSync('ip', args, { encoding: 'utf8' });
  if (outcome.error) {
    const missing = (outcome.error as NodeJS.ErrnoException).code === 'ENOENT';
    throw new Error(
      missing
        ? "the multi-host test needs iproute2's `ip` (apt-get install iproute2) and root: it builds hosts from network namespaces and veth pairs"
        : `ip ${args.join(' ')}: ${outcome.error.message}`,
    );
  }
  if (outcome.status !== 0)
    throw new Error(`ip ${args.join(' ')} failed (exit ${outcome.status}): ${outcome.stderr.trim()}`);
  return outcome.stdout;
}

const listNamespaces = () =>
  ip(['netns', 'list'])
    .split('\n')
    .map((line) => line.split(' ')[0] ?? '')
    .filter(Boolean);

const namespacePids = (namespace: string) => ip(['netns', 'pids', namespace]).split('\n').filter(Boolean).map(Number);

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Kills everything inside a namespace, waits (bounded) until it is empty, then deletes it. */
async function removeNamespace(namespace: string): Promise<void> {
  for (let round = 0; ; round += 1) {
    const pids = namespacePids(namespace);
    if (pids.length === 0) break;
    if (round >= 100) throw new Error(`processes ${pids.join(', ')} in namespace ${namespace} survived SIGKILL`);
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
    await delay(50);
  }
  ip(['netns', 'del', namespace]);
}

/** Namespaces a killed earlier test run (its pid no longer alive) could not remove. */
async function removeAbandoned(): Promise<void> {
  for (const namespace of listNamespaces()) {
    const owner = new RegExp(`^${PREFIX}(\\d+)-`).exec(namespace)?.[1];
    if (owner && Number(owner) !== process.pid && !isAlive(Number(owner))) await removeNamespace(namespace);
  }
}

/** Starts `command` inside `namespace` (via `ip netns exec`, which execs it: the pid is the command's). */
function startIn(
  namespace: string,
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  cwd: string | undefined,
): NetnsProcess {
  const child = spawn('ip', ['netns', 'exec', namespace, command, ...args], {
    env: { ...process.env, ...env },
    ...(cwd ? { cwd } : {}),
    stdio: ['ignore', 'pipe', 'pipe'],
    // Its own process group, so it can be killed with everything it started in the group.
    detached: true,
  });
  return {
    ...watchProcess(child, { describe: `${command} in ${namespace}`, defaultWaitMs: DEFAULT_WAIT_MS }),
    namespace,
  };
}

/**
 * Builds a hub namespace and `hostCount` host namespaces, host k linked to the hub by a veth
 * pair with 10.231.k.1/30 on the hub's end and 10.231.k.2/30 on the host's. Throws a clear
 * error (never skips) when namespaces cannot be made, e.g. without root or without `ip`.
 * Whatever was built is removed again if building fails part way.
 */
export async function createNetwork(hostCount: number, options: { cwd?: string } = {}): Promise<Network> {
  if (hostCount < 1 || hostCount > 200) throw new Error(`hostCount must be 1..200, not ${hostCount}`);
  try {
    ip(['netns', 'list']);
  } catch (error) {
    throw new Error(`cannot use network namespaces: ${(error as Error).message}`);
  }
  await removeAbandoned();
  const base = `${PREFIX}${process.pid}-${Date.now().toString(36)}`;
  const hub = `${base}-hub`;
  const made: string[] = [];
  const processes = new Set<NetnsProcess>();
  let destroyed: Promise<void> | undefined;

  const destroy = () =>
    (destroyed ??= (async () => {
      // Process groups of what the test started, then anything else in the namespaces (workers
      // run in their own process groups), then the namespaces: their veths go with them.
      for (const started of processes) {
        const pid = started.child.pid;
        if (pid !== undefined && started.child.exitCode === null && started.child.signalCode === null) {
          try {
            process.kill(-pid, 'SIGKILL');
          } catch {
            // Already gone.
          }
        }
      }
      const failures: string[] = [];
      for (const namespace of [...made].reverse()) {
        try {
          await removeNamespace(namespace);
        } catch (error) {
          failures.push((error as Error).message);
        }
      }
      await Promise.all([...processes].map((started) => started.exited));
      if (failures.length > 0) throw new Error(`could not clean up: ${failures.join('; ')}`);
    })());

  const hosts: NetnsHost[] = [];
  try {
    try {
      ip(['netns', 'add', hub]);
    } catch (error) {
      throw new Error(
        `cannot create a network namespace (the multi-host test must run as root): ${(error as Error).message}`,
      );
    }
    made.push(hub);
    ip(['-n', hub, 'link', 'set', 'lo', 'up']);
    for (let index = 1; index <= hostCount; index += 1) {
      const namespace = `${base}-h${index}`;
      ip(['netns', 'add', namespace]);
      made.push(namespace);
      ip(['-n', namespace, 'link', 'set', 'lo', 'up']);
      // Created inside the hub with its peer moved straight into the host: the names exist only in those namespaces.
      const hubLink = `to-h${index}`;
      const link = 'to-hub';
      ip(['-n', hub, 'link', 'add', hubLink, 'type', 'veth', 'peer', 'name', link, 'netns', namespace]);
      const host: NetnsHost = { namespace, address: `10.231.${index}.2`, hubAddress: `10.231.${index}.1`, link };
      ip(['-n', hub, 'addr', 'add', `${host.hubAddress}/30`, 'dev', hubLink]);
      ip(['-n', namespace, 'addr', 'add', `${host.address}/30`, 'dev', link]);
      ip(['-n', hub, 'link', 'set', hubLink, 'up']);
      ip(['-n', namespace, 'link', 'set', link, 'up']);
      hosts.push(host);
    }
  } catch (error) {
    await destroy().catch(() => undefined);
    throw error;
  }

  return {
    hub,
    hosts,
    ip: (namespace, ...args) => ip(['-n', namespace, ...args]),
    start(namespace, command, args, env = {}) {
      if (destroyed) throw new Error('the network was destroyed');
      const started = startIn(namespace, command, args, env, options.cwd);
      processes.add(started);
      return started;
    },
    destroy,
  };
}
