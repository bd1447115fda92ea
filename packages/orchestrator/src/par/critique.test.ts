import { describe, expect, it } from 'vitest';
import { judgeCritique, lastNumber } from './critique.js';

const ran = (exit_code: number | null, output_tail: string, timed_out = false) => ({
  exit_code,
  timed_out,
  output_tail,
  duration_ms: 5,
});
const command = { kind: 'command' as const, command: 'npm test', timeout_seconds: 60 };
const score = { kind: 'score' as const, command: 'node score.js', threshold: 0.8, timeout_seconds: 60 };

describe('judging a critique', () => {
  it('a command passes on exit 0 only; a timeout is a failure; a command that could not start is an error', () => {
    expect(judgeCritique(command, { kind: 'command', result: ran(0, 'ok') }).verdict).toBe('pass');
    expect(judgeCritique(command, { kind: 'command', result: ran(1, 'FAIL x') }).verdict).toBe('fail');
    expect(judgeCritique(command, { kind: 'command', result: ran(null, '', true) })).toMatchObject({
      verdict: 'fail',
      summary: expect.stringContaining('timed out after 60 s'),
    });
    expect(judgeCritique(command, { kind: 'command', result: ran(null, 'spawn failed') }).verdict).toBe('error');
  });

  it('the same output gives the same failure signature and evidence file; another output does not', () => {
    const a = judgeCritique(command, { kind: 'command', result: ran(1, 'FAIL x') });
    const b = judgeCritique(command, { kind: 'command', result: { ...ran(1, 'FAIL x'), duration_ms: 999 } });
    const c = judgeCritique(command, { kind: 'command', result: ran(1, 'FAIL y') });
    expect(b.failureSignature).toBe(a.failureSignature);
    expect(b.evidence[0]?.ref).toBe(a.evidence[0]?.ref);
    expect(c.failureSignature).not.toBe(a.failureSignature);
    expect(a.evidence[0]?.ref).toMatch(/^\.coord\/evidence\/command-[a-f0-9]{16}\.txt$/);
  });

  it('a score is the last number printed, compared with the threshold; no number is an error', () => {
    expect(lastNumber('accuracy 12 of 15 → 0.85\n')).toBe(0.85);
    expect(lastNumber('score: -1.5e-2')).toBe(-0.015);
    expect(judgeCritique(score, { kind: 'score', result: ran(0, 'score 0.85') }).verdict).toBe('pass');
    expect(judgeCritique(score, { kind: 'score', result: ran(0, 'score 0.5') }).verdict).toBe('fail');
    expect(judgeCritique(score, { kind: 'score', result: ran(0, 'no score today') }).verdict).toBe('error');
  });

  it('a review passes when every criterion passed; self-critique is recorded with no evidence', () => {
    const review = (passed: boolean) => ({
      kind: 'review' as const,
      result: {
        results: [
          { id: 'A1', passed: true, evidence: 'e' },
          { id: 'A2', passed, evidence: 'f' },
        ],
      },
    });
    expect(judgeCritique({ kind: 'review' }, review(true)).verdict).toBe('pass');
    expect(judgeCritique({ kind: 'review' }, review(false))).toMatchObject({
      verdict: 'fail',
      summary: 'A1 passed: e\nA2 failed: f',
    });
    expect(
      judgeCritique({ kind: 'self' }, { kind: 'self', result: { passed: true, notes: 'looks done' } }),
    ).toMatchObject({ source: 'self', verdict: 'pass', evidence: [] });
  });
});
