import { describe, expect, it } from 'vitest';
import { ZERO_USAGE, type IterationRecord } from '@polish/protocol';
import { bestVersion, computeVerdict } from './verdict.js';

const criteria = [
  { id: 'C1', text: 'one' },
  { id: 'C2', text: 'two' },
  { id: 'C3', text: 'three' },
];

describe('computeVerdict', () => {
  const scores = [
    { criterion_id: 'C3', pass: false, gap: 'add three' },
    { criterion_id: 'C1', pass: true },
    { criterion_id: 'C2', pass: false, gap: 'add two' },
  ];

  it('computes passes and blocking gaps in the locked order, whatever order the scores came in', () => {
    const record = computeVerdict({ iteration: 1, artifact: 'a', criteria, scores, threshold: 'pass_all' });
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
    expect(computeVerdict({ iteration: 1, artifact: 'a', criteria, scores, threshold }).overall).toBe(overall);
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
