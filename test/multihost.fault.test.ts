import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunResultSchema } from '@polish/protocol';
import { natsServerBinary } from '@polish/cli';
import { POLISH, REPO } from './support/cli.js';
import { heldScript } from './support/held-script.js';
import { createNetwork, type Network, type NetnsHost, type NetnsProcess } from './support/netns.js';

/**
 * Separate machines for real, on one box: a hub network namespace runs nats-server and the
 * orchestrator (`polish run --nats … --local`), two host namespaces run `polish worker`, and
 * each host reaches the hub only across its own veth link (needs root and iproute2).
 */

const demo = `${REPO}examples/demo`;
const goal = readFileSync(`${demo}/goal.txt`, 'utf8').trim();
const scratch = mkdtempSync(join(tmpdir(), 'polish-multihost-'));
const NATS_PORT = 4222;

/**
 * A scripted model that converges only at the 8th evaluation (revision 7), so a run has 16
 * tasks: 1 criteria, 8 evaluations, 7 revisions. With two hosts on one queue group, all 16 on
 * one host has odds of at most about 1 in 30,000.
 */
function chainScript(): string {
  const artifact = (revision: number) => ({ artifact: `# Rate limits\n\nDraft revision ${revision}.\n` });
  const script = {
    name: 'chain',
    criteria: [{ answer: { criteria: [{ id: 'C1', text: 'The draft is at revision 7.' }] } }],
    evaluate: [
      {
        when: { artifact_contains: 'revision 7.' },
        answer: { scores: [{ criterion_id: 'C1', pass: true, evidence: 'revision 7.' }] },
      },
      { answer: { scores: [{ criterion_id: 'C1', pass: false, gap: 'The draft is not at revision 7 yet.' }] } },
    ],
    revise: [
      ...[6, 5, 4, 3, 2, 1].map((revision) => ({
        when: { artifact_contains: `revision ${revision}.` },
        answer: artifact(revision + 1),
      })),
      { answer: artifact(1) },
    ],
  };
  const path = join(scratch, 'chain.json');
  writeFileSync(path, JSON.stringify(script));
  return path;
}

interface Host extends NetnsHost {
  worker: NetnsProcess;
  /** Pids of this host's worker processes (from its "ready" lines). */
  pids(): number[];
}

/** One task answer as the orchestrator reports it on stderr. */
interface Answer {
  role: string;
  pid: number;
  dispatches: number;
}

function answersOf(run: NetnsProcess): Answer[] {
  return run.lines.flatMap((line) => {
    const match = /^ {2}(\w+) answered by process (\d+)(?: after (\d+) dispatches)? in /.exec(line);
    return match ? [{ role: match[1] ?? '', pid: Number(match[2]), dispatches: Number(match[3] ?? 1) }] : [];
  });
}

describe('hosts on separate network namespaces, linked to the NATS host only by veth pairs', () => {
  let network: Network | undefined;
  let nats: NetnsProcess;

  beforeAll(async () => {
    network = await createNetwork(2, { cwd: REPO });
    nats = network.start(network.hub, natsServerBinary(), [
      '-a',
      '0.0.0.0',
      '-p',
      String(NATS_PORT),
      '-js',
      '-sd',
      join(scratch, 'nats'),
    ]);
    await nats.waitFor(/Server is ready/);
  });

  afterAll(async () => {
    try {
      await network?.destroy();
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  });

  const net = () => {
    if (!network) throw new Error('the network was not built');
    return network;
  };

  /** `polish worker` (one warm worker per role) on every host, each pointed at the hub's address on its own link. */
  async function startHosts(script: string): Promise<Host[]> {
    return Promise.all(
      net().hosts.map(async (host) => {
        const worker = net().start(host.namespace, process.execPath, [
          POLISH,
          'worker',
          '--nats',
          `nats://${host.hubAddress}:${NATS_PORT}`,
          '--roles',
          'criteria,evaluate,revise',
          '--pool',
          '1',
          '--script',
          script,
        ]);
        await worker.waitFor(/all pools ready/);
        const pids = () =>
          worker.lines.flatMap((line) => /^worker (\d+) \(\w+\) ready/.exec(line)?.[1] ?? []).map(Number);
        return { ...host, worker, pids };
      }),
    );
  }

  async function stopHosts(hosts: Host[]): Promise<void> {
    for (const host of hosts)
      if (host.worker.child.exitCode === null && host.worker.child.signalCode === null)
        host.worker.child.kill('SIGTERM');
    await Promise.all(hosts.map((host) => host.worker.exited));
  }

  /** `polish run` in the hub namespace, orchestrating there over the hub's NATS. */
  function startRun(artifact: string, args: string[]): NetnsProcess {
    const natsUrl = `nats://${net().hosts[0]?.hubAddress}:${NATS_PORT}`;
    return net().start(net().hub, process.execPath, [
      POLISH,
      'run',
      artifact,
      '--goal',
      goal,
      '--nats',
      natsUrl,
      '--local',
      '--json',
      ...args,
    ]);
  }

  it('each host namespace has only loopback and its veth to the hub', () => {
    for (const host of net().hosts) {
      const links = net()
        .ip(host.namespace, '-o', 'link', 'show')
        .split('\n')
        .filter(Boolean)
        .map((line) => /^\d+: ([^:@]+)/.exec(line)?.[1]);
      expect(links.sort()).toEqual(['lo', host.link].sort());
      const addresses = net()
        .ip(host.namespace, '-o', '-4', 'addr', 'show')
        .split('\n')
        .filter(Boolean)
        .map((line) => /inet (\S+)/.exec(line)?.[1]);
      expect(addresses.sort()).toEqual([`${host.address}/30`, '127.0.0.1/8'].sort());
    }
  });

  it(
    'a run converges with tasks answered by workers on both hosts, across the links',
    { timeout: 120_000 },
    async () => {
      const hosts = await startHosts(chainScript());
      try {
        const run = startRun(`${demo}/artifact.md`, ['--cap', '8']);
        expect(await run.exited, run.lines.join('\n')).toEqual({ code: 0, signal: null });
        const result = RunResultSchema.parse(JSON.parse(run.stdout()));
        expect([result.status, result.iterations]).toEqual(['CONVERGED', 8]);
        expect(result.artifact).toContain('revision 7.');
        const answers = answersOf(run);
        expect(answers.map((answer) => answer.role)).toEqual([
          'criteria',
          ...Array(7).fill(['evaluate', 'revise']).flat(),
          'evaluate',
        ]);
        // Every answer came from a worker process on one of the hosts: the only way there is its veth.
        const owner = (pid: number) => hosts.find((host) => host.pids().includes(pid))?.namespace;
        expect(answers.filter((answer) => owner(answer.pid) === undefined)).toEqual([]);
        expect(new Set(answers.map((answer) => answer.pid)).size).toBe(answers.length);
        for (const host of hosts)
          expect(
            answers.some((answer) => owner(answer.pid) === host.namespace),
            `no task answered on ${host.namespace}`,
          ).toBe(true);
        for (const host of hosts)
          expect(host.worker.lines.filter((line) => / answered task /.test(line)).length).toBeGreaterThan(0);
      } finally {
        await stopHosts(hosts);
      }
    },
  );

  it(
    'when the link of the host holding a task goes down, the task is retried on the other host and the run completes',
    { timeout: 120_000 },
    async () => {
      const held = heldScript(`${demo}/script.yaml`, scratch);
      const hosts = await startHosts(held.script);
      // Whichever host takes the first evaluation gets its link cut while it holds it.
      const run = startRun(`${demo}/artifact.md`, ['--task-timeout', '3']);
      const taken = await Promise.any(
        hosts.map(async (host) => {
          const [, pid, taskId] = await host.worker.waitFor(/^worker (\d+) \(evaluate\) took task (\S+)/);
          return { host, pid: Number(pid), taskId };
        }),
      ).catch((error: AggregateError) => {
        throw new Error(
          `no host took an evaluate task:\n${error.errors.map((cause: Error) => cause.message).join('\n')}\nrun:\n${run.lines.join('\n')}`,
        );
      });
      const cut = taken.host;
      const other = hosts.find((host) => host !== cut) as Host;
      net().ip(cut.namespace, 'link', 'set', cut.link, 'down');
      expect(net().ip(cut.namespace, '-o', 'link', 'show', cut.link)).toMatch(/state DOWN/);
      held.release();
      try {
        expect(await run.exited, run.lines.join('\n')).toEqual({ code: 0, signal: null });
        const result = RunResultSchema.parse(JSON.parse(run.stdout()));
        expect([result.status, result.iterations]).toEqual(['CONVERGED', 3]);
        const answers = answersOf(run);
        expect(answers.map((answer) => answer.role)).toEqual([
          'criteria',
          'evaluate',
          'revise',
          'evaluate',
          'revise',
          'evaluate',
        ]);
        // The evaluation in the cut host's hands timed out and was dispatched again, to the other host.
        const retried = answers[1] as Answer;
        expect(retried.dispatches).toBeGreaterThanOrEqual(2);
        expect(other.pids()).toContain(retried.pid);
        expect(answers.map((answer) => answer.pid)).not.toContain(taken.pid);
        // After the cut, every task was answered on the other host.
        for (const answer of answers.slice(1)) expect(other.pids()).toContain(answer.pid);
        expect(
          other.worker.lines.some((line) =>
            new RegExp(`^worker ${retried.pid} \\(evaluate\\) answered task \\S+ \\(ok\\)`).test(line),
          ),
        ).toBe(true);
      } finally {
        // The cut host cannot drain over a dead link: it is killed with its namespace in afterAll.
        await stopHosts([other]);
      }
    },
  );
});
