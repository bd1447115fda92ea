// The run result from each final state (DESIGN §1 outputs): which version is returned, what it
// is reported with, and the defaults when a reason is missing. Contexts are built by hand here;
// test/polish-loop.test.ts checks the same through whole runs.
import { describe, expect, it } from 'vitest';
import { RunSpecSchema, ZERO_USAGE, type IterationRecord } from '@polish/protocol';
import { resolveBudget } from './budget.js';
import { initialContext, type PolishContext } from './loop-context.js';
import { toRunResult } from './run-result.js';
import { computeVerdict } from './verdict.js';

const criteria = [
  { id: 'C1', text: 'one' },
  { id: 'C2', text: 'two' },
];
const spec = RunSpecSchema.parse({ artifact: 'input', goal: 'g', criteria });
const score = (id: string, pass: boolean) =>
  pass ? { criterion_id: id, pass } : { criterion_id: id, pass, gap: `fix ${id}` };
/** Version n of the artifact, scored with these passes. */
const evaluated = (iteration: number, passes: boolean[]): IterationRecord =>
  computeVerdict({
    iteration,
    artifact: `version ${iteration}`,
    criteria,
    threshold: 'pass_all',
    scores: criteria.map((criterion, index) => score(criterion.id, passes[index] ?? false)),
  });

const context = (overrides: Partial<PolishContext> = {}): PolishContext => ({
  ...initialContext(spec),
  ...overrides,
});
// Version 2 passes the most; version 3 is the latest.
const history = [evaluated(1, [false, false]), evaluated(2, [true, false]), evaluated(3, [false, false])];

describe('toRunResult', () => {
  it('CONVERGED returns the last version and its scores', () => {
    const done = [...history, evaluated(4, [true, true])];
    expect(toRunResult('converged', context({ history: done }))).toMatchObject({
      status: 'CONVERGED',
      artifact: 'version 4',
      scores: done[3]?.scores,
      iterations: 4,
    });
  });

  it('CAP_REACHED returns the best version, its iteration, scores and gaps', () => {
    expect(toRunResult('capReached', context({ history }))).toMatchObject({
      status: 'CAP_REACHED',
      artifact: 'version 2',
      best_iteration: 2,
      scores: history[1]?.scores,
      remaining_gaps: ['C2: fix C2'],
    });
  });

  it.each([['converged'], ['capReached']] as const)('%s without an evaluation is a bug, said so', (state) => {
    expect(() => toRunResult(state, context())).toThrow(/without an evaluation$/);
  });

  it.each([
    [
      'failed',
      { failure: { code: 'CONTRACT_VIOLATION' as const, reason: 'broken' } },
      { code: 'CONTRACT_VIOLATION', reason: 'broken' },
    ],
    ['failed', {}, { code: 'INTERNAL', reason: 'the run failed without a recorded reason' }],
    ['cancelled', { failure: { code: 'CANCELLED' as const, reason: 'Ctrl-C' } }, { reason: 'Ctrl-C' }],
    ['cancelled', {}, { reason: 'cancelled' }],
  ] as const)('%s keeps the best version so far, with its reason (%o)', (state, overrides, expected) => {
    const result = toRunResult(state, context({ history, ...overrides }));
    expect(result).toMatchObject({ ...expected, artifact: 'version 2', iterations: 3 });
    // Before any evaluation there is no better version than the input.
    expect(toRunResult(state, context(overrides)).artifact).toBe('input');
  });

  it('BUDGET_EXHAUSTED keeps the best version so far, or the input, with the budget spent and needed', () => {
    const model = { model: 'scripted:x', max_output_tokens: 100 };
    const budget = resolveBudget(
      RunSpecSchema.parse({ ...spec, budget: { max_tokens: 1000 }, models: { evaluate: [model], revise: model } }),
    );
    const stop = { reason: 'the next evaluate task could need 900 tokens', needed: { tokens: 900, usd: 0 } };
    const usageByModel = { 'scripted:x': { ...ZERO_USAGE, input_tokens: 200, output_tokens: 50 } };
    const result = toRunResult('budgetExhausted', context({ history, budget, budgetStop: stop, usageByModel }));
    expect(result).toMatchObject({
      status: 'BUDGET_EXHAUSTED',
      reason: stop.reason,
      artifact: 'version 2',
      best_iteration: 2,
      scores: history[1]?.scores,
      remaining_gaps: ['C2: fix C2'],
      budget: { max_tokens: 1000, needed_tokens: 900 },
    });
    const early = toRunResult('budgetExhausted', context({ budget }));
    expect(early).toEqual(
      expect.objectContaining({ artifact: 'input', reason: 'the budget is spent', remaining_gaps: [] }),
    );
    expect(early).not.toHaveProperty('best_iteration');
    expect(early).not.toHaveProperty('scores');
    expect(early).toHaveProperty('budget');
    expect(early).not.toHaveProperty('budget.needed_tokens');
    expect(toRunResult('capReached', context({ history }))).not.toHaveProperty('budget');
  });

  it('criteria_history: every locked criterion, with its verdict per iteration', () => {
    expect(toRunResult('capReached', context({ history })).criteria_history).toEqual({
      C1: ['fail', 'pass', 'fail'],
      C2: ['fail', 'fail', 'fail'],
    });
    // Before any evaluation, each criterion is there with no verdict yet; without criteria, none is.
    expect(toRunResult('cancelled', context()).criteria_history).toEqual({ C1: [], C2: [] });
    expect(toRunResult('cancelled', context({ criteria: null })).criteria_history).toEqual({});
    // Verdicts of criteria the context does not list (none in practice) are kept, not dropped.
    expect(
      toRunResult('cancelled', context({ criteria: null, history: history.slice(0, 1) })).criteria_history,
    ).toEqual({
      C1: ['fail'],
      C2: ['fail'],
    });
    expect(toRunResult('cancelled', context({ criteria: null }))).not.toHaveProperty('criteria');
  });

  it('a quorum reports how often the judges all agreed and how many verdicts stayed undecided', () => {
    const judge = (model: string, passes: boolean[]) => ({
      judge: model.charCodeAt(0) - 96,
      model: { provider: 'scripted', model, scripted: true },
      scores: criteria.map((criterion, index) => score(criterion.id, passes[index] ?? false)),
    });
    const record = computeVerdict({
      iteration: 1,
      artifact: 'version 1',
      criteria,
      threshold: 'pass_all',
      rule: 'majority',
      // C1: all three pass; C2: 1 pass, 2 fail (decided fail).
      judges: [judge('a', [true, true]), judge('b', [true, false]), judge('c', [true, false])],
    });
    const evenSplit = computeVerdict({
      iteration: 2,
      artifact: 'version 2',
      criteria,
      threshold: 'pass_all',
      rule: 'majority',
      judges: [judge('a', [true, true]), judge('b', [true, false])],
    });
    const agreed = computeVerdict({
      iteration: 3,
      artifact: 'version 3',
      criteria,
      threshold: 'pass_all',
      rule: 'majority',
      judges: [judge('a', [true, false]), judge('b', [true, false])],
    });
    const quorum = { ...spec, judges: 3, quorum: 'majority' as const };
    expect(toRunResult('capReached', context({ spec: quorum, history: [record, evenSplit, agreed] })).quorum).toEqual({
      judges: 3,
      rule: 'majority',
      // Cells: C1 unanimous three times; C2 2 of 3, then 1 of 2 (undecided), then unanimous.
      agreement_rate: 4 / 6,
      undecided: 1,
    });
    // Two judges are a quorum too.
    expect(toRunResult('cancelled', context({ spec: { ...spec, judges: 2 } })).quorum).toMatchObject({ judges: 2 });
    // No verdict given (cancelled before any evaluation): no agreement to report, not a perfect one.
    expect(toRunResult('cancelled', context({ spec: quorum })).quorum).toEqual({
      judges: 3,
      rule: 'majority',
      agreement_rate: null,
      undecided: 0,
    });
    expect(toRunResult('capReached', context({ spec: { ...spec, judges: 1 }, history }))).not.toHaveProperty('quorum');
  });
});
