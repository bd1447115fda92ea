import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { readQueueStats } from '@polish/orchestrator';
import { RunResultSchema, TaskRoleSchema } from '@polish/protocol';
import { startNatsServer, type EmbeddedNats } from '@polish/cli';
import { startHost, stop, type WatchedProcess, cleanEnvironment } from './support/processes.js';
import { startFakeModelServer, type FakeModelServer, type RecordedRequest } from './support/fake-model-server.js';
import { anthropicDialect } from './support/fake-anthropic.js';
import { openaiDialect } from './support/fake-openai.js';
import { roleOf } from './support/fake-llm.js';
import { fencedArtifact } from './support/scenario.js';
import { anthropicSystem, anthropicUser, openaiSystem, openaiUser } from './support/sdk-requests.js';
import { polish } from './support/cli.js';
import { writeNatsConfig } from './support/nats.js';
import {
  FIRST,
  FIXED,
  JUDGING_CRITERIA,
  lenientScores,
  judgingFiles,
  strictScores,
} from './support/judging-scenario.js';

// A quorum's judges on their own models when the workers run elsewhere (issue 17): over NATS,
// judge i's task goes to the lane of its model, which only `polish worker --lane` hosts serving
// that model take. Real nats-server configured by `polish nats-config` (every process as its own
// user: evaluate workers may pull any evaluate lane and nothing else), real worker hosts and
// processes, the real Anthropic and OpenAI SDKs against local fake servers.

const { scratch, file, artifact, criteria } = judgingFiles('polish-judging-lanes-');
// The reviser (scripted) adds the status line. Its host also serves the plain evaluate queue,
// answering as a third, lenient judge would: a judge's task that reached it would show.
const plainScript = file('plain.json', {
  name: 'plain-evaluate',
  revise: [{ answer: { artifact: FIXED } }],
  evaluate: [{ answer: lenientScores(FIRST) }],
});
const goal = 'Document the rate limiter.';

/** A fake provider whose "model" judges what it is asked to: anything else is refused, and counted. */
async function judgeServer(
  dialect: typeof anthropicDialect,
  system: (request: RecordedRequest) => string,
  user: (request: RecordedRequest) => string,
  judge: (artifact: string) => unknown,
): Promise<FakeModelServer> {
  return startFakeModelServer(dialect, (request) => {
    const role = roleOf(system(request));
    if (role !== 'evaluate') throw new Error(`a judge's model was asked to ${role}`);
    return { answer: judge(fencedArtifact(user(request))) };
  });
}

const criteriaLines = JUDGING_CRITERIA.map((criterion) => `${criterion.id}: ${criterion.text}`).join('\n');
/** The wire proof: an evaluator request is the locked criteria and the artifact, nothing else. */
const stateless = (text: string) => `Locked criteria:\n${criteriaLines}\n\n<artifact>\n${text}\n</artifact>`;

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('judges routed to their models over NATS (model lanes)', () => {
  let server: EmbeddedNats;
  let credentials: string;
  let claude: FakeModelServer;
  let gpt: FakeModelServer;
  const hosts: WatchedProcess[] = [];
  /** `polish run` of the scenario over NATS with these judges, as the orchestrator's user. */
  const runJudged = (evaluators: string, extra: string[] = []) =>
    polish(
      [
        'run',
        artifact,
        '--goal',
        goal,
        '--criteria',
        criteria,
        '--evaluators',
        evaluators,
        '--nats',
        server.url,
        '--credentials',
        credentials,
        ...extra,
        '--json',
      ],
      { env: cleanEnvironment() },
    );
  /** A host serving one judge model's lane, holding only that model's key. */
  const laneHost = (model: string, key: NodeJS.ProcessEnv) =>
    startHost(
      server.url,
      ['--credentials', credentials, '--roles', 'evaluate', '--evaluator-model', model, '--lane', '--pool', '1'],
      cleanEnvironment(key),
    );
  beforeAll(async () => {
    const files = await writeNatsConfig(join(scratch, 'nats'), join(scratch, 'jetstream'));
    credentials = files.credentials;
    expect(Object.keys(JSON.parse(readFileSync(credentials, 'utf8')))).toContain('evaluate');
    server = await startNatsServer({ storeDir: join(scratch, 'jetstream'), configFile: files.config });
    // Two model families: a strict Claude and a lenient GPT, so each judge's scores tell whose they are.
    claude = await judgeServer(anthropicDialect, anthropicSystem, anthropicUser, strictScores);
    gpt = await judgeServer(openaiDialect, openaiSystem, openaiUser, lenientScores);
    // Three machines' worth of hosts: one per judge model (each only with its own key), one for the rest.
    hosts.push(
      await laneHost(`anthropic:claude-judge@${claude.url}`, { ANTHROPIC_API_KEY: 'sk-ant-judge' }),
      await laneHost(`openai:gpt-judge@${gpt.url}/v1`, { OPENAI_API_KEY: 'sk-openai-judge' }),
      await startHost(
        server.url,
        ['--credentials', credentials, '--roles', 'evaluate,revise', '--script', plainScript, '--pool', '1'],
        cleanEnvironment(),
      ),
    );
  });
  afterAll(async () => {
    for (const host of hosts) await stop(host);
    await Promise.all([claude?.stop(), gpt?.stop()]);
    await server?.stop();
  });

  it('--evaluators naming two families: each judge is answered by its own model’s workers, and only those', async () => {
    const run = await runJudged('anthropic:claude-judge,openai:gpt-judge');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain('judge 1: anthropic:claude-judge, lane anthropic_claude-judge');
    expect(run.stderr).toContain('judge 2: openai:gpt-judge, lane openai_gpt-judge');
    const result = RunResultSchema.parse(JSON.parse(run.stdout));
    expect(result.status).toBe('CONVERGED');
    expect(result.iterations).toBe(2);
    // Both judges' scores, each from its own model: the strict Claude fails C2, the lenient GPT passes it.
    for (const record of result.history)
      expect(record.judges?.map((judge) => `${judge.model.provider}:${judge.model.model}`)).toEqual([
        'anthropic:claude-judge',
        'local:gpt-judge',
      ]);
    const first = result.history[0];
    expect(first?.judges?.map((judge) => judge.scores.find((score) => score.criterion_id === 'C2')?.pass)).toEqual([
      false,
      true,
    ]);
    expect(first?.verdicts?.C2).toBe('undecided');
    expect(result.history[1]?.verdicts).toEqual({ C1: 'pass', C2: 'pass', C3: 'pass' });
    expect(result.quorum).toMatchObject({ judges: 2, rule: 'majority' });

    // Each fake server's log holds exactly its lane's judge requests: one per version, each only
    // the artifact and the locked criteria; the plain evaluate queue's worker took nothing.
    expect(claude.requests.map(anthropicUser)).toEqual([stateless(FIRST), stateless(FIXED)]);
    expect(gpt.requests.map(openaiUser)).toEqual([stateless(FIRST), stateless(FIXED)]);
    const [claudeHost, gptHost, plainHost] = hosts as [WatchedProcess, WatchedProcess, WatchedProcess];
    expect(claudeHost.lines).toContain(
      'polish worker: evaluate workers serve lane anthropic_claude-judge (the judges of runs whose --evaluators name anthropic:claude-judge), not the plain evaluate queue',
    );
    expect(claudeHost.lines.filter((line) => /\(evaluate\) took task/.test(line))).toHaveLength(2);
    expect(gptHost.lines.filter((line) => /\(evaluate\) took task/.test(line))).toHaveLength(2);
    expect(plainHost.lines.filter((line) => /\(evaluate\) took task/.test(line))).toHaveLength(0);
    expect(plainHost.lines.filter((line) => /\(revise\) took task/.test(line))).toHaveLength(1);
  });

  it('one --evaluators spec: the lone judge goes to its model’s lane too; criteria and revise stay on their queues', async () => {
    const before = gpt.requests.length;
    const plainRevisions = (hosts[2] as WatchedProcess).lines.filter((line) =>
      /\(revise\) took task/.test(line),
    ).length;
    const run = await runJudged('openai:gpt-judge');
    const result = RunResultSchema.parse(JSON.parse(run.stdout));
    // The lenient GPT passes the first version: one evaluation, by GPT, no revision.
    expect([result.status, result.iterations], run.stderr).toEqual(['CONVERGED', 1]);
    expect(result.models).toEqual([{ provider: 'local', model: 'gpt-judge', scripted: false }]);
    expect(gpt.requests.slice(before).map(openaiUser)).toEqual([stateless(FIRST)]);
    expect((hosts[2] as WatchedProcess).lines.filter((line) => /\(evaluate\) took task/.test(line))).toHaveLength(0);
    expect((hosts[2] as WatchedProcess).lines.filter((line) => /\(revise\) took task/.test(line))).toHaveLength(
      plainRevisions,
    );
  });

  it('a judge whose model no host serves: the run fails naming the lane, the model and how to serve it', async () => {
    const run = await runJudged('anthropic:claude-judge,openai:gpt-nobody-serves', ['--worker-wait', '1']);
    expect(run.code, run.stderr).toBe(4);
    const result = RunResultSchema.parse(JSON.parse(run.stdout));
    expect(result.status === 'FAILED' && [result.code, result.reason]).toEqual([
      'NO_RESPONDERS',
      expect.stringContaining(
        'no evaluate workers of lane openai_gpt-nobody-serves (model openai:gpt-nobody-serves) pulled tasks within 1 s ' +
          '(nobody serves polish.v1.lane.evaluate.openai_gpt-nobody-serves); start one where that model is reachable: ' +
          'polish worker --roles evaluate --evaluator-model SPEC --lane, SPEC being openai:gpt-nobody-serves ' +
          'as that worker reaches it (with its @baseURL, or for a script its path)',
      ),
    ]);
    // The plain evaluate worker never stood in for the missing judge.
    expect((hosts[2] as WatchedProcess).lines.filter((line) => /\(evaluate\) took task/.test(line))).toHaveLength(0);
  });

  it('the inspector’s user reads each lane’s figures beside the role queues’ (queue panel, polish status)', async () => {
    const inspector = (JSON.parse(readFileSync(credentials, 'utf8')) as Record<string, Record<string, string>>)
      .inspector as Record<string, string>;
    const connection = await connect({
      servers: server.url,
      user: inspector.user,
      pass: inspector.password,
      inboxPrefix: inspector.inboxPrefix,
    });
    try {
      const queues = await readQueueStats(await jetstreamManager(connection), 'polish');
      // The lanes the runs above opened, each named; the role queues are all still there.
      expect(queues.filter((queue) => queue.lane).map((queue) => [queue.role, queue.lane])).toEqual(
        expect.arrayContaining([
          ['evaluate', 'anthropic_claude-judge'],
          ['evaluate', 'openai_gpt-judge'],
          ['evaluate', 'openai_gpt-nobody-serves'],
        ]),
      );
      expect(queues.filter((queue) => !queue.lane).map((queue) => queue.role)).toEqual(TaskRoleSchema.options);
      // The lane hosts' workers are waiting on their lanes; nobody pulls the unserved one.
      const lane = (name: string) => queues.find((queue) => queue.lane === name);
      expect(lane('anthropic_claude-judge')?.pulling).toBeGreaterThan(0);
      expect(lane('openai_gpt-nobody-serves')?.pulling).toBe(0);
    } finally {
      await connection.close();
    }
  });
});

describe('polish worker --lane', () => {
  it('refuses hosts with no evaluate role, exit 2, naming the flag', async () => {
    const run = await polish(
      ['worker', '--roles', 'revise', '--lane', '--nats', 'nats://127.0.0.1:1', '--script', plainScript],
      {
        env: cleanEnvironment(),
      },
    );
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('lane: only evaluate workers serve lanes; --roles revise has none');
  });
});
