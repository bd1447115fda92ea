import { describe, expect, it } from 'vitest';
import { ZERO_USAGE, type IterationRecord, type Score } from '@polish/protocol';
import { bestVersion, computeVerdict, decide, regressionsBetween } from './verdict.js';

const criteria = [
  { id: 'C1', text: 'one' },
  { id: 'C2', text: 'two' },
  { id: 'C3', text: 'three' },
];
const two = criteria.slice(0, 2);
const model = { provider: 'scripted', model: 'j', scripted: true };

/** The verdict on iteration 1 of artifact 'a' under pass_all, against the first two criteria unless told. */
const verdictOn = (input: Partial<Parameters<typeof computeVerdict>[0]>) =>
  computeVerdict({ iteration: 1, artifact: 'a', criteria: two, threshold: 'pass_all', ...input });
/** One judge's answer in a quorum. */
const judge = (id: number, scores: Score[]) => ({ judge: id, model, scores });

describe('computeVerdict', () => {
  const scores = [
    { criterion_id: 'C3', pass: false, gap: 'add three' },
    { criterion_id: 'C1', pass: true },
    { criterion_id: 'C2', pass: false, gap: 'add two' },
  ];

  it('computes passes and blocking gaps in the locked order, whatever order the scores came in', () => {
    const record = verdictOn({ criteria, scores });
    expect(record.passed).toBe(1);
    expect(record.total).toBe(3);
    expect(record.overall).toBe('fail');
    expect(record.blocking_gaps).toEqual(['C2: add two', 'C3: add three']);
    expect(record.scores.map((score) => score.criterion_id)).toEqual(['C1', 'C2', 'C3']);
  });

  it.each([
    ['pass_1', 'pass'],
    ['pass_2', 'fail'],
    ['pass_all', 'fail'],
  ] as const)('with %s one pass of three is %s', (threshold, overall) => {
    expect(verdictOn({ criteria, scores, threshold }).overall).toBe(overall);
  });
});

describe('bestVersion', () => {
  const record = (iteration: number, passed: number): IterationRecord => ({
    iteration,
    artifact: `v${iteration}`,
    scores: [],
    passed,
    total: 3,
    overall: 'fail',
    blocking_gaps: [],
    usage: ZERO_USAGE,
  });

  it.each([
    ['most passes wins', [record(1, 1), record(2, 2), record(3, 1)], 2],
    ['ties go to the later iteration', [record(1, 2), record(2, 1), record(3, 2)], 3],
    ['a regression never wins', [record(1, 2), record(2, 0)], 1],
    ['a single version', [record(1, 0)], 1],
  ])('%s', (_name, history, expected) => {
    expect(bestVersion(history)?.iteration).toBe(expected);
  });

  it('is undefined with no evaluation', () => {
    expect(bestVersion([])).toBeUndefined();
  });
});

describe('quorum', () => {
  it.each([
    // rule, passes of 3 judges → verdict
    ['majority', 3, 'pass'],
    ['majority', 2, 'pass'],
    ['majority', 1, 'fail'],
    ['unanimous', 3, 'pass'],
    ['unanimous', 2, 'undecided'],
    ['unanimous', 0, 'fail'],
    ['any-fail', 3, 'pass'],
    ['any-fail', 2, 'fail'],
  ] as const)('%s with %i of 3 judges passing: %s', (rule, passes, verdict) => {
    expect(decide(rule, passes, 3)).toBe(verdict);
  });

  it('reports a tie the majority cannot decide as undecided, never as a pass or a fail', () => {
    expect(decide('majority', 1, 2)).toBe('undecided');
    expect(decide('majority', 2, 4)).toBe('undecided');
  });

  it('combines judges: each criterion by the rule, a pass quoting a passing judge, a fail with the failing judges’ gaps', () => {
    const record = verdictOn({
      rule: 'majority',
      judges: [
        judge(1, [
          { criterion_id: 'C1', pass: true, evidence: 'quote one' },
          { criterion_id: 'C2', pass: false, gap: 'missing two' },
        ]),
        judge(2, [
          { criterion_id: 'C2', pass: false, gap: 'no two' },
          { criterion_id: 'C1', pass: true, evidence: 'quote one again' },
        ]),
        judge(3, [
          { criterion_id: 'C1', pass: false, gap: 'lenient about nothing' },
          { criterion_id: 'C2', pass: true, evidence: 'two?' },
        ]),
      ],
    });
    expect(record.verdicts).toEqual({ C1: 'pass', C2: 'fail' });
    expect(record.agreement).toEqual({ C1: 2 / 3, C2: 2 / 3 });
    expect(record.scores).toEqual([
      { criterion_id: 'C1', pass: true, evidence: 'quote one' },
      { criterion_id: 'C2', pass: false, gap: 'missing two / no two' },
    ]);
    expect(record.passed).toBe(1);
    expect(record.blocking_gaps).toEqual(['C2: missing two / no two']);
    expect(record.judges?.[1]?.scores.map((score) => score.criterion_id)).toEqual(['C1', 'C2']);
  });
});

describe('regressionsBetween', () => {
  const record = (passes: boolean[]): IterationRecord =>
    verdictOn({
      criteria,
      scores: passes.map((pass, index) =>
        pass ? { criterion_id: `C${index + 1}`, pass } : { criterion_id: `C${index + 1}`, pass, gap: 'g' },
      ),
    });

  it('names the criteria that passed before and fail now, and nothing else', () => {
    expect(regressionsBetween(record([true, true, false]), record([false, true, true]))).toEqual(['C1']);
    expect(regressionsBetween(record([false, false, false]), record([false, false, false]))).toEqual([]);
  });
});

// Issue 22: what the mutation run found unchecked in computeVerdict.
describe('computeVerdict, the remaining rules', () => {
  it('refuses scores that miss a locked criterion, naming it', () => {
    expect(() =>
      verdictOn({
        scores: [{ criterion_id: 'C1', pass: true }],
      }),
    ).toThrow('criterion C2 is not scored');
  });

  it('one judge given as a judgement is no quorum: no verdicts, no agreement, its scores as they are', () => {
    const record = verdictOn({
      judges: [
        judge(1, [
          { criterion_id: 'C2', pass: false, gap: 'g' },
          { criterion_id: 'C1', pass: true },
        ]),
      ],
    });
    expect(record).not.toHaveProperty('verdicts');
    expect(record).not.toHaveProperty('judges');
    expect(record.scores.map((score) => score.criterion_id)).toEqual(['C1', 'C2']);
    expect(record.usage).toEqual(ZERO_USAGE);
  });

  it('combines: a pass quotes the first passing judge that quoted; gaps are trimmed, distinct, blank ones left out; the rule defaults to majority', () => {
    const record = verdictOn({
      judges: [
        judge(1, [
          { criterion_id: 'C1', pass: false, gap: 'a failing judge’s words', evidence: 'not a pass' },
          { criterion_id: 'C2', pass: false, gap: ' same gap ' },
        ]),
        judge(2, [
          { criterion_id: 'C1', pass: true },
          { criterion_id: 'C2', pass: false, gap: 'same gap' },
        ]),
        judge(3, [
          { criterion_id: 'C1', pass: true, evidence: 'the quote' },
          { criterion_id: 'C2', pass: false, gap: '  ' },
        ]),
      ],
    });
    expect(record.verdicts).toEqual({ C1: 'pass', C2: 'fail' });
    expect(record.scores).toEqual([
      { criterion_id: 'C1', pass: true, evidence: 'the quote' },
      { criterion_id: 'C2', pass: false, gap: 'same gap' },
    ]);
  });

  it('a pass no passing judge quoted carries no evidence; a fail whose judges gave no gap has an empty one', () => {
    const record = verdictOn({
      rule: 'unanimous',
      usage: { ...ZERO_USAGE, model_calls: 2 },
      judges: [1, 2].map((id) =>
        judge(id, [
          { criterion_id: 'C1', pass: true },
          { criterion_id: 'C2', pass: false },
        ]),
      ),
    });
    expect(record.scores).toEqual([
      { criterion_id: 'C1', pass: true },
      { criterion_id: 'C2', pass: false, gap: '' },
    ]);
    expect(record.blocking_gaps).toEqual(['C2: ']);
    expect(record.usage.model_calls).toBe(2);
  });

  it('a failing criterion takes its gaps from failing judges only; no scores at all is refused; a fail without gap is a blank blocking gap', () => {
    const record = verdictOn({
      rule: 'unanimous',
      judges: [
        judge(1, [
          { criterion_id: 'C1', pass: true, gap: 'a passing judge’s aside' },
          { criterion_id: 'C2', pass: true },
        ]),
        judge(2, [
          { criterion_id: 'C1', pass: false, gap: 'the real gap' },
          { criterion_id: 'C2', pass: true },
        ]),
      ],
    });
    expect(record.scores[0]).toEqual({ criterion_id: 'C1', pass: false, gap: 'the real gap' });
    expect(() => verdictOn({})).toThrow('criterion C1 is not scored');
    const single = verdictOn({
      scores: [
        { criterion_id: 'C1', pass: true },
        { criterion_id: 'C2', pass: false },
      ],
    });
    expect(single.blocking_gaps).toEqual(['C2: ']);
  });
});
