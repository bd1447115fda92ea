import { afterEach, describe, expect, it } from 'vitest';
import {
  createScriptedProvider,
  handleTask,
  textOf,
  type ModelProvider,
  type ModelRequest,
  type ScriptFunction,
} from '@polish/agents';
import { createInProcessDispatcher, runPolish, type RunPolishOptions } from '@polish/orchestrator';
import type { RunEvent, RunResult, RunSpecInput } from '@polish/protocol';
import { startFakeModelServer, type FakeModelServer, type RecordedRequest } from './support/fake-model-server.js';
import { ANTHROPIC, OPENAI, type SdkDialect } from './support/sdk-dialects.js';
import { roleOf } from './support/fake-llm.js';
import { fencedArtifact } from './support/scenario.js';
import { foreignReply } from './support/foreign-reply.js';
import {
  BROKEN,
  FIRST,
  FIXED,
  JUDGING_CRITERIA,
  LIMIT,
  TITLE,
  lenientScores,
  revised,
  strictScores,
} from './support/judging-scenario.js';

// Judging you can trust (issue 17): a quorum of judges, quoted evidence, no silent regressions,
// budgets, and tolerant reading of answers.

const spec: RunSpecInput = { artifact: FIRST, goal: 'Document the rate limiter.', criteria: JUDGING_CRITERIA };
const failure = (result: RunResult) =>
  result.status === 'FAILED' ? `${result.code}: ${result.reason}` : result.status;
const artifactOf = (request: ModelRequest) => String(request.payload.artifact);
const gapsOf = (request: ModelRequest) => (request.payload.blocking_gaps as string[] | undefined) ?? [];
const roundOf = (request: ModelRequest) => request.messages.filter((message) => message.role === 'assistant').length;

/** A scripted model under a name of its own, every request recorded. */
function scripted(name: string, answer: ScriptFunction) {
  const requests: ModelRequest[] = [];
  const provider = createScriptedProvider((request) => {
    requests.push(request);
    return answer(request);
  });
  const model: ModelProvider = { ...provider, info: { ...provider.info, model: `scripted:${name}` } };
  return { model, requests, dispatcher: createInProcessDispatcher((task) => handleTask(task, model)) };
}

const strictJudge = (name: string) => scripted(name, (request) => strictScores(artifactOf(request)));
const lenientJudge = (name: string) => scripted(name, (request) => lenientScores(artifactOf(request)));
const reviser = (careless = false) =>
  scripted('reviser', (request) =>
    request.role === 'revise'
      ? { artifact: revised(artifactOf(request), gapsOf(request), careless) }
      : strictScores(artifactOf(request)),
  );

async function run(specInput: RunSpecInput, options: Partial<RunPolishOptions> & Pick<RunPolishOptions, 'dispatcher'>) {
  const events: RunEvent[] = [];
  const result = await runPolish(specInput, { ...options, onEvent: (event) => events.push(event) });
  return { result, events };
}

describe('a quorum of judges (scripted)', () => {
  it('three judges, one lenient: the majority decides, each judge’s scores and the agreement are reported', async () => {
    const judges = [strictJudge('strict-a'), strictJudge('strict-b'), lenientJudge('lenient')];
    const { result, events } = await run(
      { ...spec, judges: 3 },
      { dispatcher: reviser().dispatcher, judges: judges.map((judge) => judge.dispatcher) },
    );
    expect(result.status, failure(result)).toBe('CONVERGED');
    expect(result.iterations).toBe(2);
    const first = result.history[0];
    // The lenient judge passed C2; two strict ones failed it: it fails, and is revised.
    expect(first?.verdicts).toEqual({ C1: 'pass', C2: 'fail', C3: 'pass' });
    expect(first?.agreement).toEqual({ C1: 1, C2: 2 / 3, C3: 1 });
    expect(first?.blocking_gaps).toEqual(['C2: no status code is named']);
    expect(first?.judges?.map((judge) => judge.model.model)).toEqual([
      'scripted:strict-a',
      'scripted:strict-b',
      'scripted:lenient',
    ]);
    expect(first?.judges?.[2]?.scores.find((score) => score.criterion_id === 'C2')).toEqual({
      criterion_id: 'C2',
      pass: true,
      evidence: TITLE,
    });
    expect(result.quorum).toEqual({ judges: 3, rule: 'majority', agreement_rate: 5 / 6, undecided: 0 });
    expect(events.at(-1)).toMatchObject({ type: 'run.finished', quorum: result.quorum });
    expect(result.criteria_history).toEqual({ C1: ['pass', 'pass'], C2: ['fail', 'pass'], C3: ['pass', 'pass'] });

    const evaluated = events.filter((event) => event.type === 'iteration.evaluated');
    expect(evaluated[0]).toMatchObject({ verdicts: first?.verdicts, agreement: first?.agreement });
    const started = events.filter((event) => event.type === 'wave.started' && event.role === 'evaluate');
    expect(started.map((event) => event.type === 'wave.started' && event.judge)).toEqual([1, 2, 3, 1, 2, 3]);

    // Each judge got the same stateless payload: exactly the artifact and the criteria.
    for (const judge of judges) {
      expect(judge.requests.map((request) => Object.keys(request.payload).sort())).toEqual([
        ['artifact', 'criteria'],
        ['artifact', 'criteria'],
      ]);
      expect(judge.requests.map(artifactOf)).toEqual([FIRST, FIXED]);
    }
  });

  it('a split the rule cannot decide is reported as undecided, never counted as a pass', async () => {
    const judges = [strictJudge('strict'), lenientJudge('lenient')];
    const { result } = await run(
      { ...spec, judges: 2, cap: 1 },
      { dispatcher: reviser().dispatcher, judges: judges.map((judge) => judge.dispatcher) },
    );
    expect(result.status).toBe('CAP_REACHED');
    expect(result.history[0]?.verdicts).toEqual({ C1: 'pass', C2: 'undecided', C3: 'pass' });
    expect(result.history[0]?.passed).toBe(2);
    expect(result.history[0]?.blocking_gaps).toEqual(['C2: no status code is named']);
    expect(result.quorum).toMatchObject({ judges: 2, undecided: 1 });
    expect(result.criteria_history.C2).toEqual(['undecided']);
  });

  it('any-fail fails a criterion one judge fails; unanimous leaves a split undecided', async () => {
    const judges = () => [lenientJudge('lenient-a'), strictJudge('strict'), lenientJudge('lenient-b')];
    const anyFail = await run(
      { ...spec, judges: 3, quorum: 'any-fail', cap: 1 },
      { dispatcher: reviser().dispatcher, judges: judges().map((judge) => judge.dispatcher) },
    );
    expect(anyFail.result.history[0]?.verdicts?.C2).toBe('fail');
    const unanimous = await run(
      { ...spec, judges: 3, quorum: 'unanimous', cap: 1 },
      { dispatcher: reviser().dispatcher, judges: judges().map((judge) => judge.dispatcher) },
    );
    expect(unanimous.result.history[0]?.verdicts?.C2).toBe('undecided');
  });
});

describe('quoted evidence (scripted)', () => {
  const invented = 'The limit is 500 requests per minute.';
  const quoting = (evidence: (round: number) => string | undefined) =>
    scripted('judge', (request) => {
      if (request.role === 'revise') return { artifact: revised(artifactOf(request), gapsOf(request)) };
      const scores = strictScores(artifactOf(request)).scores.map((score) =>
        score.criterion_id === 'C1' ? { ...score, evidence: evidence(roundOf(request)) } : score,
      );
      return { scores };
    });

  it('a pass quoting text not in the artifact is re-asked, then the run ends FAILED if it persists', async () => {
    const judge = quoting(() => invented);
    const { result } = await run(spec, { dispatcher: judge.dispatcher });
    expect(result.status).toBe('FAILED');
    expect(failure(result)).toContain('CONTRACT_VIOLATION: evaluate answer still invalid after 2 repairs');
    expect(failure(result)).toContain('the evidence quoted for C1 is not in the artifact');
    expect(judge.requests).toHaveLength(3);
    expect(textOf(judge.requests[1]?.messages.at(-1)?.content ?? '')).toContain(
      'the evidence quoted for C1 is not in the artifact',
    );
    expect(result.history).toEqual([]);
  });

  it('a quote fixed on re-ask is accepted; whitespace is compared normalised', async () => {
    const judge = quoting((round) => (round === 0 ? invented : 'The limit is 100\n   requests per minute.'));
    const { result } = await run(spec, { dispatcher: judge.dispatcher });
    expect(result.status, failure(result)).toBe('CONVERGED');
    expect(result.history[0]?.scores[0]).toMatchObject({ criterion_id: 'C1', pass: true });
  });

  it('a pass without a quote is a contract violation; with evidence off it is accepted', async () => {
    const judge = quoting(() => undefined);
    const required = await run(spec, { dispatcher: judge.dispatcher });
    expect(failure(required.result)).toContain('criterion C1 passes without evidence');
    const relaxed = quoting(() => undefined);
    const model = { ...relaxed.model, answers: { evidence: false } };
    const off = await run(
      { ...spec, evidence: false },
      { dispatcher: createInProcessDispatcher((task) => handleTask(task, model)) },
    );
    expect(off.result.status, failure(off.result)).toBe('CONVERGED');
  });

  it('the orchestrator checks quotes again: a foreign evaluator inventing one is re-sent once, then the run fails', async () => {
    const answers: unknown[] = [];
    const dispatcher = createInProcessDispatcher(async (task) => {
      const scores = strictScores(FIRST).scores.map((score) =>
        score.criterion_id === 'C1' ? { ...score, evidence: invented } : score,
      );
      answers.push(scores);
      return foreignReply(task, { scores });
    });
    const { result } = await run(spec, { dispatcher });
    expect(answers).toHaveLength(2);
    expect(failure(result)).toBe(
      'CONTRACT_VIOLATION: evaluate agent broke the contract 2 times: scores.0.evidence: the evidence quoted for C1 is not in the artifact: quote its words exactly',
    );
  });
});

describe('no silent regressions (scripted)', () => {
  it('a reviser that breaks C1 while fixing C2 is asked again once, from the version it broke, with C1 as a gap', async () => {
    const model = reviser(true);
    const { result, events } = await run(spec, { dispatcher: model.dispatcher });
    expect(result.status, failure(result)).toBe('CONVERGED');
    expect(result.artifact).toBe(FIXED);
    const revisions = model.requests.filter((request) => request.role === 'revise');
    expect(revisions).toHaveLength(2);
    // Asked again from the first version, its gaps plus the regression as one more gap: gaps only.
    expect(revisions[1]?.payload).toEqual({
      artifact: FIRST,
      blocking_gaps: [
        'C2: no status code is named',
        'C1: keep this satisfied while closing the other gaps (a revision that closed them broke it: the page states no limit)',
        'C3: keep this satisfied while closing the other gaps (a revision that closed them broke it: the page has no title)',
      ],
      goal: spec.goal,
    });
    const prompt = textOf(revisions[1]?.messages[0]?.content ?? '');
    expect(prompt).not.toMatch(/"pass"|score|evidence/i);
    for (const criterion of JUDGING_CRITERIA) expect(prompt).not.toContain(criterion.text);

    expect(result.history.map((record) => record.artifact)).toEqual([FIRST, BROKEN, FIXED]);
    expect(result.history[1]?.regressions).toEqual(['C1', 'C3']);
    expect(result.history[2]?.revised_from).toBe(1);
    expect(result.regressions).toEqual([
      { criterion_id: 'C1', passed_in: 1, failed_in: 2, re_asked: true },
      { criterion_id: 'C3', passed_in: 1, failed_in: 2, re_asked: true },
    ]);
    expect(result.criteria_history).toEqual({
      C1: ['pass', 'fail', 'pass'],
      C2: ['fail', 'pass', 'pass'],
      C3: ['pass', 'fail', 'pass'],
    });
    expect(events.find((event) => event.type === 'regression.re_ask')).toMatchObject({
      iteration: 2,
      from: 1,
      criteria: ['C1', 'C3'],
    });
  });

  it('when the regression persists the run goes on, and CAP_REACHED returns the version with the most passes', async () => {
    const model = scripted('stubborn', (request) =>
      request.role === 'revise' ? { artifact: BROKEN } : strictScores(artifactOf(request)),
    );
    const { result } = await run({ ...spec, cap: 4 }, { dispatcher: model.dispatcher });
    expect(result.status).toBe('CAP_REACHED');
    if (result.status !== 'CAP_REACHED') return;
    expect(result.best_iteration).toBe(1);
    expect(result.artifact).toBe(FIRST);
    expect(result.remaining_gaps).toEqual(['C2: no status code is named']);
    // Asked again once (from iteration 1); the second regression of the same version is not re-asked.
    expect(result.regressions).toEqual([
      { criterion_id: 'C1', passed_in: 1, failed_in: 2, re_asked: true },
      { criterion_id: 'C3', passed_in: 1, failed_in: 2, re_asked: true },
      { criterion_id: 'C1', passed_in: 1, failed_in: 3, re_asked: false },
      { criterion_id: 'C3', passed_in: 1, failed_in: 3, re_asked: false },
    ]);
    expect(result.history.map((record) => record.revised_from)).toEqual([undefined, 1, 1, 3]);
    expect(result.criteria_history.C1).toEqual(['pass', 'fail', 'fail', 'fail']);
  });
});

describe('tolerant reading (scripted)', () => {
  it('an evaluator answering in the seed’s shape {scores, overall, blocking_gaps}: the run converges on the code’s verdict', async () => {
    const model = scripted('seed-shaped', (request) => {
      if (request.role === 'revise') return { artifact: revised(artifactOf(request), gapsOf(request)) };
      // Its own overall and gaps say the opposite of its scores: only the scores count.
      const { scores } = strictScores(artifactOf(request));
      const passing = scores.every((score) => score.pass);
      return { scores, overall: passing ? 'fail' : 'pass', blocking_gaps: passing ? ['C9: invented'] : [] };
    });
    const { result, events } = await run(spec, { dispatcher: model.dispatcher });
    expect(result.status, failure(result)).toBe('CONVERGED');
    expect(result.iterations).toBe(2);
    expect(result.history[0]?.overall).toBe('fail');
    expect(result.history[0]?.blocking_gaps).toEqual(['C2: no status code is named']);
    expect(model.requests.filter((request) => request.role === 'evaluate')).toHaveLength(2);
    const dropped = events.flatMap((event) =>
      event.type === 'wave.finished' && event.role === 'evaluate' ? [event.dropped_fields] : [],
    );
    expect(dropped).toEqual([
      ['overall', 'blocking_gaps'],
      ['overall', 'blocking_gaps'],
    ]);
  });
});

describe('budgets (scripted)', () => {
  const declared = {
    evaluate: [{ model: 'scripted:*', max_output_tokens: 200 }],
    revise: { model: 'scripted:*', max_output_tokens: 200 },
  };

  it('a budget that cannot cover the first evaluation ends BUDGET_EXHAUSTED before any model call', async () => {
    const model = reviser();
    const { result, events } = await run(
      { ...spec, budget: { max_tokens: 1000 }, models: declared },
      { dispatcher: model.dispatcher },
    );
    expect(result.status).toBe('BUDGET_EXHAUSTED');
    if (result.status !== 'BUDGET_EXHAUSTED') return;
    expect(model.requests).toHaveLength(0);
    expect(result.iterations).toBe(0);
    expect(result.artifact).toBe(FIRST);
    expect(result.reason).toBe('the rest of the budget cannot cover the next evaluation at worst');
    expect(result.budget).toMatchObject({ max_tokens: 1000, spent_tokens: 0 });
    expect(result.budget?.needed_tokens).toBeGreaterThan(1000);
    expect(events.map((event) => event.type)).toContain('budget.exhausted');
  });

  it('refuses an answer from a model other than the one declared: it could not be priced', async () => {
    const { result } = await run(
      {
        ...spec,
        budget: { max_tokens: 10_000_000 },
        models: { ...declared, evaluate: [{ model: 'anthropic:x', max_output_tokens: 200 }] },
      },
      { dispatcher: reviser().dispatcher },
    );
    expect(failure(result)).toBe(
      'INVALID_INPUT: models: the evaluate answer came from scripted:scripted:reviser, not the declared anthropic:x: the budget cannot price it',
    );
  });
});

// The same, through the real SDKs against local fake servers.

let servers: FakeModelServer[] = [];
afterEach(async () => {
  await Promise.all(servers.map((server) => server.stop()));
  servers = [];
});

/** A fake provider whose "model" answers from the prompt: `judge` scores, a careful or careless reviser revises. */
async function fakeModel(
  sdk: SdkDialect,
  judge: (artifact: string, request: RecordedRequest) => unknown = strictScores,
  options: { careless?: boolean } = {},
) {
  const server = await startFakeModelServer(sdk.dialect, (request) => {
    const role = roleOf(sdk.system(request));
    const text = sdk.user(request);
    const artifact = fencedArtifact(text);
    const told = text.includes('C1: keep this satisfied') ? ['C1: keep this satisfied'] : [];
    if (role === 'revise') return { answer: { artifact: revised(artifact, told, options.careless) } };
    return { answer: judge(artifact, request) };
  });
  servers.push(server);
  return server;
}
const through = (provider: ModelProvider) => createInProcessDispatcher((task) => handleTask(task, provider));

describe('judging through the real SDKs (local fake servers)', () => {
  it('three judges from two providers, one lenient: the majority decides; each judge’s requests hold only the artifact and the criteria', async () => {
    const strictClaude = await fakeModel(ANTHROPIC);
    const strictGpt = await fakeModel(OPENAI);
    const lenientClaude = await fakeModel(ANTHROPIC, lenientScores);
    const judges = [
      ANTHROPIC.provider(strictClaude.url, 'claude-strict'),
      OPENAI.provider(strictGpt.url, 'gpt-strict'),
      ANTHROPIC.provider(lenientClaude.url, 'claude-lenient'),
    ];
    const { result } = await run(
      { ...spec, judges: 3 },
      { dispatcher: through(judges[0] as ModelProvider), judges: judges.map(through) },
    );
    expect(result.status, failure(result)).toBe('CONVERGED');
    expect(result.history[0]?.verdicts).toEqual({ C1: 'pass', C2: 'fail', C3: 'pass' });
    expect(result.history[0]?.agreement?.C2).toBeCloseTo(2 / 3);
    expect(result.history[0]?.judges?.map((judge) => `${judge.model.provider}:${judge.model.model}`)).toEqual([
      'anthropic:claude-strict',
      'local:gpt-strict',
      'anthropic:claude-lenient',
    ]);
    expect(result.quorum?.agreement_rate).toBeCloseTo(5 / 6);

    // The wire proof, for every judge: each evaluator request is the criteria and the artifact, nothing else.
    const criteriaLines = JUDGING_CRITERIA.map((criterion) => `${criterion.id}: ${criterion.text}`).join('\n');
    const expected = (artifact: string) => `Locked criteria:\n${criteriaLines}\n\n<artifact>\n${artifact}\n</artifact>`;
    for (const [server, sdk] of [
      [strictClaude, ANTHROPIC],
      [strictGpt, OPENAI],
      [lenientClaude, ANTHROPIC],
    ] as const) {
      const evaluations = server.requests.filter((request) => roleOf(sdk.system(request)) === 'evaluate');
      expect(evaluations.map((request) => sdk.user(request))).toEqual([expected(FIRST), expected(FIXED)]);
    }
  });

  it.each([ANTHROPIC, OPENAI])('$name: an invented quote is re-asked, then the run ends FAILED', async (sdk) => {
    const server = await fakeModel(sdk, (artifact) => ({
      scores: strictScores(artifact).scores.map((score) =>
        score.pass ? { ...score, evidence: 'words the page never had' } : score,
      ),
    }));
    const { result } = await run(spec, { dispatcher: through(sdk.provider(server.url, 'judge')) });
    expect(failure(result)).toContain('the evidence quoted for C1 is not in the artifact');
    expect(server.requests).toHaveLength(3);
    expect(sdk.user(server.requests[2] as RecordedRequest)).toContain(
      'the evidence quoted for C1 is not in the artifact',
    );
  });

  it.each([ANTHROPIC, OPENAI])(
    '$name: a reviser that breaks C1 while fixing C2 is asked again once; the regression is in the result',
    async (sdk) => {
      const server = await fakeModel(sdk, strictScores, { careless: true });
      const { result } = await run(spec, { dispatcher: through(sdk.provider(server.url, 'model')) });
      expect(result.status, failure(result)).toBe('CONVERGED');
      expect(result.regressions.map((regression) => [regression.criterion_id, regression.re_asked])).toEqual([
        ['C1', true],
        ['C3', true],
      ]);
      const revisions = server.requests.filter((request) => roleOf(sdk.system(request)) === 'revise');
      expect(revisions).toHaveLength(2);
      const second = sdk.user(revisions[1] as RecordedRequest);
      expect(fencedArtifact(second).trim()).toBe(FIRST.trim());
      expect(second).toContain('C1: keep this satisfied while closing the other gaps');
      expect(second).not.toMatch(/"pass"|score|evidence/i);
    },
  );

  it.each([ANTHROPIC, OPENAI])(
    '$name: an evaluator adding overall and blocking_gaps converges on the code’s verdict',
    async (sdk) => {
      const server = await fakeModel(sdk, (artifact) => ({
        ...strictScores(artifact),
        overall: 'pass',
        blocking_gaps: [],
      }));
      const events: RunEvent[] = [];
      const result = await runPolish(spec, {
        dispatcher: through(sdk.provider(server.url, 'model')),
        onEvent: (event) => events.push(event),
      });
      expect(result.status, failure(result)).toBe('CONVERGED');
      expect(result.iterations).toBe(2);
      expect(result.history[0]?.overall).toBe('fail');
      expect(
        events.filter((event) => event.type === 'wave.finished' && event.role === 'evaluate' && event.dropped_fields),
      ).toHaveLength(2);
    },
  );
});

describe('a budget that allows exactly two iterations (real Anthropic SDK, priced)', () => {
  const prices = { 'anthropic:claude-test': { input: 3, output: 15, cache_read: 0.3, cache_write: 3.75 } };
  const declared = {
    evaluate: [{ model: 'anthropic:claude-test', max_output_tokens: 1024 }],
    revise: { model: 'anthropic:claude-test', max_output_tokens: 1024 },
  };
  const stepwise = {
    ...spec,
    artifact: `${TITLE}\n`,
  };
  const dollars = (usage: {
    input_tokens: number;
    output_tokens: number;
    cache_read_tokens: number;
    cache_write_tokens: number;
  }) =>
    (usage.input_tokens * 3 +
      usage.output_tokens * 15 +
      usage.cache_read_tokens * 0.3 +
      usage.cache_write_tokens * 3.75) /
    1e6;

  it('stops BUDGET_EXHAUSTED after two evaluations with the best version; the fake server saw no call beyond the budget', async () => {
    // Unlimited, the run takes 3 evaluations: the title only, + the limit, + the status code.
    const growing = (artifact: string) => (artifact.includes(LIMIT) ? FIXED : `${TITLE}\n${LIMIT}\n`);
    const answer = (sdk: SdkDialect) => async () => {
      const server = await startFakeModelServer(sdk.dialect, (request) => {
        const artifact = fencedArtifact(sdk.user(request));
        return roleOf(sdk.system(request)) === 'revise'
          ? { answer: { artifact: growing(artifact) } }
          : { answer: strictScores(artifact) };
      });
      servers.push(server);
      return server;
    };
    const free = await answer(ANTHROPIC)();
    const unlimited = await run(stepwise, { dispatcher: through(ANTHROPIC.provider(free.url, 'claude-test')) });
    expect([unlimited.result.status, unlimited.result.iterations]).toEqual(['CONVERGED', 3]);

    // The budget: the first evaluation as it cost, then the worst case of one revision and the
    // evaluation after it (which is what the run reserves before revising).
    const { resolveBudget, worstCase } = await import('@polish/orchestrator');
    const { RunSpecSchema } = await import('@polish/protocol');
    const parsed = RunSpecSchema.parse({ ...stepwise, budget: { max_usd: 1 }, models: declared });
    const plan = resolveBudget(parsed, prices);
    if (!plan) throw new Error('no plan');
    const firstEvaluation = unlimited.events.find(
      (event) => event.type === 'wave.finished' && event.role === 'evaluate' && event.iteration === 1,
    );
    if (firstEvaluation?.type !== 'wave.finished') throw new Error('no first evaluation');
    const firstGaps = unlimited.result.history[0]?.blocking_gaps ?? [];
    const budget =
      dollars(firstEvaluation.usage) +
      worstCase(plan, 'revise', { artifact: stepwise.artifact, blocking_gaps: firstGaps, goal: spec.goal }).usd +
      worstCase(plan, 'evaluate', { artifact: stepwise.artifact, criteria: JUDGING_CRITERIA }).usd +
      1e-9; // not to lose the exact boundary to floating-point rounding
    expect(dollars(unlimited.result.usage)).toBeLessThan(budget); // what it spent was never the limit: the worst case is

    const metered = await answer(ANTHROPIC)();
    const { result, events } = await run(
      { ...stepwise, budget: { max_usd: budget }, models: declared },
      { dispatcher: through(ANTHROPIC.provider(metered.url, 'claude-test')), prices },
    );
    expect(result.status).toBe('BUDGET_EXHAUSTED');
    if (result.status !== 'BUDGET_EXHAUSTED') return;
    expect(result.iterations).toBe(2);
    expect(result.best_iteration).toBe(2);
    expect(result.artifact).toBe(`${TITLE}\n${LIMIT}\n`);
    expect(result.remaining_gaps).toEqual(['C2: no status code is named']);
    expect(result.reason).toBe('the rest of the budget cannot cover the next revision and its evaluation at worst');
    // Exactly three calls reached the server (evaluate, revise, evaluate), and they cost no more than the budget.
    expect(metered.requests.map((request) => roleOf(ANTHROPIC.system(request)))).toEqual([
      'evaluate',
      'revise',
      'evaluate',
    ]);
    expect(dollars(metered.reported)).toBeLessThanOrEqual(budget);
    expect(result.budget?.spent_usd).toBeCloseTo(dollars(metered.reported), 12);
    expect((result.budget?.spent_usd ?? 0) + (result.budget?.needed_usd ?? 0)).toBeGreaterThan(budget);
    expect(events.at(-1)).toMatchObject({ type: 'run.finished', status: 'BUDGET_EXHAUSTED', iterations: 2 });
  });

  it('refuses a dollar budget when a model has no price, before any call', async () => {
    const server = await fakeModel(ANTHROPIC);
    expect(() =>
      runPolish(
        {
          ...spec,
          budget: { max_usd: 1 },
          models: { ...declared, revise: { model: 'anthropic:unpriced', max_output_tokens: 1 } },
        },
        { dispatcher: through(ANTHROPIC.provider(server.url, 'claude-test')), prices },
      ),
    ).toThrow('max-usd: no price for anthropic:unpriced (the revise model)');
    expect(server.requests).toHaveLength(0);
  });
});
