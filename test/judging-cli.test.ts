import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { RunResultSchema } from '@polish/protocol';
import { polish } from './support/cli.js';
import { FIRST, FIXED, STATUS, lenientScores, judgingFiles, strictScores } from './support/judging-scenario.js';
import { closedInFull, closingEdits, longArtifact, LONG_CRITERIA, longScores } from './support/long-artifact.js';

// `polish run` with judges, evidence, budgets and edit-form revisions: the real CLI, an
// embedded nats-server and single-use worker processes (each judge its own, with its own model).

const { scratch, file, artifact, criteria } = judgingFiles('polish-judging-cli-');
// Scripted judges: each answers every version the same way it would be judged in judging.test.ts.
const judgeScript = (name: string, scores: (artifact: string) => unknown) =>
  file(`${name}.json`, {
    name,
    evaluate: [{ when: { artifact_contains: STATUS }, answer: scores(FIXED) }, { answer: scores(FIRST) }],
  });
const reviser = file('reviser.json', { name: 'reviser', revise: [{ answer: { artifact: FIXED } }] });
/** `polish run` of the rate-limit page with the scripted reviser, and these flags. */
const runLimits = (flags: string[]) =>
  polish([
    'run',
    artifact,
    '--goal',
    'Document the rate limiter.',
    '--criteria',
    criteria,
    '--script',
    reviser,
    ...flags,
  ]);

describe('polish run with a quorum of judges', () => {
  it('--evaluators runs each judge on its own workers and model: majority verdict, agreement in --json', async () => {
    const judges = [
      `scripted:${judgeScript('strict-a', strictScores)}`,
      `scripted:${judgeScript('strict-b', strictScores)}`,
      `scripted:${judgeScript('lenient', lenientScores)}`,
    ];
    const { code, stdout, stderr } = await runLimits(['--evaluators', judges.join(','), '--json']);
    expect(code, stderr).toBe(0);
    const result = RunResultSchema.parse(JSON.parse(stdout));
    expect(result.status).toBe('CONVERGED');
    expect(result.history[0]?.judges?.map((judge) => judge.model.model)).toEqual([
      'scripted:strict-a',
      'scripted:strict-b',
      'scripted:lenient',
    ]);
    expect(result.history[0]?.verdicts?.C2).toBe('fail');
    expect(result.quorum).toMatchObject({ judges: 3, rule: 'majority' });
    expect(stderr).toContain('judges: C1 pass (100% agree), C2 fail (67% agree), C3 pass (100% agree)');
    expect(stderr).toMatch(/judge 3: evaluate: scripted:.*lenient\.json \(SCRIPTED/);
  });
});

describe('polish run with a budget', () => {
  it('exits 8 BUDGET_EXHAUSTED, before any model call, when the budget cannot cover the first evaluation', async () => {
    const out = join(scratch, 'budget-out.md');
    const { code, stderr, stdout } = await runLimits(['--max-tokens', '1000', '--json', '--out', out]);
    expect(code, stderr).toBe(8);
    const result = RunResultSchema.parse(JSON.parse(stdout));
    expect(result.status).toBe('BUDGET_EXHAUSTED');
    expect(result.usage.model_calls).toBe(0);
    expect(stderr).toContain(
      'polish: budget exhausted (the rest of the budget cannot cover the next evaluation at worst)',
    );
    // The best version so far (here the input, nothing being evaluated) is written, like CAP_REACHED's.
    expect(existsSync(out)).toBe(true);
  });
});

describe('polish run revising by edits in worker processes', () => {
  it('--revise-mode edits reaches the revise worker: a 20 KB artifact revised by two edits', async () => {
    const long = longArtifact();
    const script = file('long.json', {
      name: 'long',
      evaluate: [
        { when: { artifact_contains: 'status 429' }, answer: longScores(closedInFull(long)) },
        { answer: longScores(long) },
      ],
      revise: [{ answer: { edits: closingEdits(long) } }],
    });
    const { code, stdout, stderr } = await polish([
      'run',
      file('long.md', long),
      '--goal',
      'Document the traffic limits.',
      '--criteria',
      file('long-criteria.json', LONG_CRITERIA),
      '--script',
      script,
      '--revise-mode',
      'edits',
      '--json',
    ]);
    expect(code, stderr).toBe(0);
    const result = RunResultSchema.parse(JSON.parse(stdout));
    expect(result.artifact).toBe(closedInFull(long));
    expect(result.history[0]?.revision).toMatchObject({ form: 'edits', closes: ['C1', 'C2'] });
    expect(stderr).toContain('revised by 2 edits closing C1, C2');
  });
});

describe('bad judging input: one line naming the flag, exit 2, nothing started', () => {
  const base = ['run', artifact, '--goal', 'g', '--criteria', criteria, '--script', reviser];
  it.each([
    ['an unknown quorum rule', ['--quorum', 'most'], 'quorum: '],
    [
      'six judges',
      ['--evaluators', Array(6).fill(`scripted:${reviser}`).join(',')],
      'evaluators: name 1 to 5 model specs',
    ],
    ['a bad judge spec', ['--evaluators', 'nonsense'], 'evaluators: "nonsense" is not a model spec'],
    ['a budget in words', ['--max-usd', 'ten'], 'max-usd: must be an amount of US dollars above 0'],
    ['a zero token budget', ['--max-tokens', '0'], 'max-tokens: must be a whole number of tokens above 0'],
    ['an unknown revise mode', ['--revise-mode', 'sideways'], 'revise-mode: '],
    [
      'a dollar budget with workers elsewhere and no model named',
      ['--nats', 'nats://127.0.0.1:1', '--max-usd', '1'],
      'max-usd: with --nats the workers’ models are not known here',
    ],
  ])('%s', async (_name, flags, message) => {
    const args = flags.includes('--nats') ? base.filter((arg) => arg !== '--script' && arg !== reviser) : base;
    const { code, stderr } = await polish([...args, ...flags]);
    expect(code).toBe(2);
    expect(stderr).toContain(`polish: invalid input: ${message}`);
    expect(stderr).not.toContain('started nats-server');
  });

  it('a dollar budget for a model without a price refuses to start, naming the model', async () => {
    const { code, stderr } = await polish(
      [
        'run',
        artifact,
        '--goal',
        'g',
        '--criteria',
        criteria,
        '--model',
        'anthropic:claude-unpriced',
        '--max-usd',
        '1',
      ],
      { env: { ...process.env, ANTHROPIC_API_KEY: 'sk-ant-not-used' } },
    );
    expect(code).toBe(2);
    expect(stderr).toContain(
      'polish: invalid input: max-usd: no price for anthropic:claude-unpriced (the evaluate model)',
    );
    expect(stderr).not.toContain('started nats-server');
  });
});
