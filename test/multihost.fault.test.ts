import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunResultSchema } from '@polish/protocol';
import { natsServerBinary } from '@polish/cli';
import { polish, POLISH, REPO } from './support/cli.js';
import { DEMO_TASK_ROLES } from './support/demo.js';
import { heldScript } from './support/held-script.js';
import { createNetwork, type Network, type NetnsHost, type NetnsProcess } from './support/netns.js';

/**
 * Separate machines for real, on one box: a hub network namespace runs nats-server and the
 * orchestrator (`polish run --nats … --local`), two host namespaces run `polish worker`, and
 * each host reaches the hub only across its own veth link (needs root, iproute2 and tcpdump).
 * Every connection is TLS with NKEY identities and client certificates, set up as the README's
 * "Separate machines" says: `polish nats-config --nkeys --mtls` on the hub, and each worker
 * machine holds only the credentials file, the CA, and the host's and its roles' folders.
 */

const demo = `${REPO}examples/demo`;
const goal = readFileSync(`${demo}/goal.txt`, 'utf8').trim();
const scratch = mkdtempSync(join(tmpdir(), 'polish-multihost-'));
const NATS_PORT = 4222;
/** The hub's folder: everything `polish nats-config` wrote (the orchestrator machine's). */
const deploy = join(scratch, 'deploy');
const ROLES = ['criteria', 'evaluate', 'revise'];
/** What a worker machine holds: the credentials file, the CA, the host's and its roles' folders. */
const machineOf = (host: NetnsHost) => join(scratch, `machine-${host.namespace}`);

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
    const made = await polish([
      'nats-config',
      '--dir',
      deploy,
      '--nkeys',
      '--mtls',
      '--host',
      '0.0.0.0',
      '--port',
      String(NATS_PORT),
      '--tls-names',
      network.hosts.map((host) => host.hubAddress).join(','),
      '--store-dir',
      join(scratch, 'nats'),
    ]);
    expect(made.code, made.stderr).toBe(0);
    for (const host of network.hosts) {
      mkdirSync(machineOf(host), { mode: 0o700 });
      for (const part of ['credentials.json', 'tls/ca.pem', ...['host', ...ROLES].map((role) => `principals/${role}`)])
        cpSync(join(deploy, part), join(machineOf(host), part), { recursive: true });
    }
    nats = network.start(network.hub, natsServerBinary(), ['-c', join(deploy, 'nats-server.conf')]);
    await nats.waitFor(/Server is ready/);
    expect(nats.lines.some((line) => /TLS required for client connections/.test(line))).toBe(true);
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
          `tls://${host.hubAddress}:${NATS_PORT}`,
          '--credentials',
          join(machineOf(host), 'credentials.json'),
          '--roles',
          ROLES.join(','),
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

  /** tcpdump on a host's link to the hub, keeping every packet whole, until `stop` returns the capture. */
  async function capture(host: NetnsHost): Promise<{ stop(): Promise<Buffer> }> {
    const file = join(scratch, `${host.namespace}.pcap`);
    // -Z root: Debian's tcpdump would otherwise drop to a user that cannot write in the scratch folder.
    const dump = net().start(host.namespace, 'tcpdump', [
      '-i',
      host.link,
      '-n',
      '-U',
      '-s',
      '0',
      '-Z',
      'root',
      '-w',
      file,
    ]);
    await dump.waitFor(/listening on/);
    return {
      async stop() {
        dump.child.kill('SIGINT');
        expect(await dump.exited, dump.lines.join('\n')).toEqual({ code: 0, signal: null });
        return readFileSync(file);
      },
    };
  }

  /** What must never cross a link in clear: the artifact's and the run's text, every secret, every identity. */
  function forbiddenOnTheWire(): Map<string, Buffer> {
    const forbidden = new Map<string, Buffer>();
    const text = (label: string, value: string) => forbidden.set(label, Buffer.from(value));
    text('artifact text', 'Draft revision');
    text('artifact heading', '# Rate limits');
    text('the demo artifact', readFileSync(`${demo}/artifact.md`, 'utf8').split('\n')[0] ?? '');
    text('the goal', goal.slice(0, 40));
    text('a criterion', 'The draft is at revision 7.');
    text('a gap', 'The draft is not at revision 7 yet.');
    text('a subject', 'polish.v1.');
    text('a CONNECT', 'CONNECT {');
    const credentials = JSON.parse(readFileSync(join(deploy, 'credentials.json'), 'utf8')) as Record<
      string,
      { nkey?: string; seedFile?: string; tls?: { key: string } }
    >;
    for (const [principal, entry] of Object.entries(credentials)) {
      if (!entry.seedFile || !entry.nkey || !entry.tls) continue;
      text(`the ${principal} seed`, readFileSync(join(deploy, entry.seedFile), 'utf8').trim());
      text(`the ${principal} public key`, entry.nkey);
      const key = readFileSync(join(deploy, entry.tls.key), 'utf8');
      const body = key.replace(/-----[^-]+-----/g, '').replace(/\s+/g, '');
      text(`the ${principal} private key (PEM)`, body);
      forbidden.set(`the ${principal} private key (DER)`, Buffer.from(body, 'base64'));
    }
    return forbidden;
  }

  /** `polish run` in the hub namespace, orchestrating there over the hub's NATS. */
  function startRun(artifact: string, args: string[]): NetnsProcess {
    const natsUrl = `tls://${net().hosts[0]?.hubAddress}:${NATS_PORT}`;
    return net().start(net().hub, process.execPath, [
      POLISH,
      'run',
      artifact,
      '--goal',
      goal,
      '--nats',
      natsUrl,
      '--credentials',
      join(deploy, 'credentials.json'),
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
      // Everything that crosses each link, from before the hosts connect until they have left.
      const captures = await Promise.all(net().hosts.map((host) => capture(host)));
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
      const forbidden = forbiddenOnTheWire();
      expect(forbidden.size).toBe(8 + 4 * 11);
      for (const [index, stopCapture] of captures.entries()) {
        const wire = await stopCapture.stop();
        const host = net().hosts[index] as NetnsHost;
        // The search sees what is sent in clear: NATS greets every client in clear before TLS
        // starts (once per connection: the host's and each worker's).
        const greetings = wire.toString('latin1').split('"tls_required":true').length - 1;
        expect(greetings, `greetings on ${host.namespace}`).toBeGreaterThanOrEqual(4);
        const found = [...forbidden].filter(([, needle]) => wire.includes(needle)).map(([label]) => label);
        expect(found, `found in clear on ${host.link} of ${host.namespace}`).toEqual([]);
      }
    },
  );

  it(
    'across a link, the hub refuses a client without TLS, a client certificate of another CA, and a seed signing in as another principal',
    { timeout: 60_000 },
    async () => {
      const host = net().hosts[0] as NetnsHost;
      const machine = machineOf(host);
      const url = `tls://${host.hubAddress}:${NATS_PORT}`;
      const other = join(scratch, 'other-deployment');
      const made = await polish(['nats-config', '--dir', other, '--mtls']);
      expect(made.code, made.stderr).toBe(0);
      /** Runs the probe on the host's side of its link; it prints one JSON line. */
      const probe = async (...args: string[]) => {
        const probing = net().start(host.namespace, process.execPath, [`${REPO}test/support/nats-probe.mjs`, ...args]);
        expect(await probing.exited, probing.lines.join('\n')).toEqual({ code: 0, signal: null });
        return JSON.parse(probing.stdout()) as { outcome?: string; received?: string };
      };
      const evaluator = {
        caFile: join(machine, 'tls/ca.pem'),
        certFile: join(machine, 'principals/evaluate/cert.pem'),
        keyFile: join(machine, 'principals/evaluate/key.pem'),
        seedFile: join(machine, 'principals/evaluate/seed.nk'),
      };
      // What this machine holds gets it in: the probe itself works across the link.
      expect(await probe('nats', url, JSON.stringify(evaluator))).toEqual({ outcome: 'connected' });

      const plaintext = await probe('plaintext', host.hubAddress, String(NATS_PORT));
      expect(plaintext.received).toMatch(/^INFO \{.*"tls_required":true/);
      expect(plaintext.received).not.toContain('PONG');
      await nats.waitFor(/TLS handshake error.*does not look like a TLS handshake/);

      const foreign = await probe(
        'nats',
        url,
        JSON.stringify({
          ...evaluator,
          certFile: join(other, 'principals/evaluate/cert.pem'),
          keyFile: join(other, 'principals/evaluate/key.pem'),
        }),
      );
      expect(foreign.outcome).not.toBe('connected');
      await nats.waitFor(/TLS handshake error.*unknown authority/);

      // The orchestrator's public key is in every credentials file; signing in as it needs its seed.
      const orchestrator = (
        JSON.parse(readFileSync(join(machine, 'credentials.json'), 'utf8')) as Record<string, { nkey: string }>
      ).orchestrator?.nkey;
      expect(orchestrator).toMatch(/^U/);
      const claimed = await probe('nats', url, JSON.stringify({ ...evaluator, claim: orchestrator }));
      expect(claimed.outcome).toMatch(/Authorization Violation/i);
      // The machine holds no seed but its host's and its roles'.
      expect(readdirSync(join(machine, 'principals')).sort()).toEqual(['host', ...ROLES].sort());
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
        expect(answers.map((answer) => answer.role)).toEqual(DEMO_TASK_ROLES);
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
