import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { canonicalJson } from './canonical-json.js';
import { artifactDigest, judgeCritique, lastNumber, normalizeOutput } from './critique.js';

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

// Every field of every judgement, written out (issue 22: the critique classifier's mutants).
describe('judging a critique, field by field', () => {
  const hash = (text: string) => createHash('sha256').update(text).digest('hex');
  const evidenceRef = (kind: string, extension: string, content: string) =>
    `.coord/evidence/${kind}-${hash(normalizeOutput(content)).slice(0, 16)}.${extension}`;

  it('a failing command: its status and output tail, evidence without the duration, signature of the masked output', () => {
    const output = 'FAIL add\n  took 12 ms at 10:11:12\n';
    const content = `command: npm test\nexit code: 1\ntimed out: false\n--- output (tail) ---\n${output}\n`;
    expect(judgeCritique(command, { kind: 'command', result: ran(1, output) })).toEqual({
      source: 'command',
      verdict: 'fail',
      failureSignature: hash(`exit 1\n${normalizeOutput(output)}`),
      evidence: [{ ref: evidenceRef('command', 'txt', content), content }],
      summary: '`npm test`: exit 1\nFAIL add\n  took 12 ms at 10:11:12',
    });
    expect(normalizeOutput(output)).toBe('FAIL add\n  took <duration> at <time>\n');
  });

  it('a passing command has no signature; an empty output adds no line to the summary', () => {
    expect(judgeCritique(command, { kind: 'command', result: ran(0, '  \n') })).toMatchObject({
      verdict: 'pass',
      failureSignature: null,
      summary: '`npm test`: exit 0',
    });
  });

  it('a timed-out command fails, saying so, with "none (killed)" as its exit code in the evidence', () => {
    const judged = judgeCritique(command, { kind: 'command', result: ran(null, 'slow', true) });
    expect(judged).toMatchObject({ verdict: 'fail', summary: '`npm test`: timed out after 60 s\nslow' });
    expect(judged.evidence[0]?.content).toBe(
      'command: npm test\nexit code: none (killed)\ntimed out: true\n--- output (tail) ---\nslow\n',
    );
    // Exit 0 after the time was up is still a timeout.
    expect(judgeCritique(command, { kind: 'command', result: ran(0, 'ok', true) }).verdict).toBe('fail');
  });

  it.each([
    [null, 'exit none'],
    [126, 'exit 126'],
    [127, 'exit 127'],
  ])('a command that could not run (exit %s) is an error, not a failure', (code, status) => {
    expect(judgeCritique(command, { kind: 'command', result: ran(code, ' sh: npm: not found \n') })).toEqual({
      source: 'command',
      verdict: 'error',
      failureSignature: null,
      evidence: [],
      summary: `the command could not run (${status}): sh: npm: not found`,
    });
  });

  it('the summary keeps only the last 600 characters of the output', () => {
    const output = `${'a'.repeat(700)}${'b'.repeat(600)}`;
    expect(judgeCritique(command, { kind: 'command', result: ran(1, output) }).summary).toBe(
      `\`npm test\`: exit 1\n${'b'.repeat(600)}`,
    );
  });

  it('a score: pass at the threshold, fail below it, each with its evidence and summary', () => {
    const content = (value: number) =>
      `command: node score.js\nexit code: 0\ntimed out: false\nscore: ${value} (threshold 0.8)\n--- output (tail) ---\nscore ${value}\n`;
    expect(judgeCritique(score, { kind: 'score', result: ran(0, 'score 0.8') })).toEqual({
      source: 'score',
      verdict: 'pass',
      failureSignature: null,
      evidence: [{ ref: evidenceRef('score', 'txt', content(0.8)), content: content(0.8) }],
      summary: 'score 0.8 ≥ threshold 0.8',
    });
    expect(judgeCritique(score, { kind: 'score', result: ran(0, 'score 0.5') })).toEqual({
      source: 'score',
      verdict: 'fail',
      failureSignature: hash('score 0.5'),
      evidence: [{ ref: evidenceRef('score', 'txt', content(0.5)), content: content(0.5) }],
      summary: 'score 0.5 < threshold 0.8',
    });
  });

  it('a score command that printed no number, or timed out, is an error', () => {
    expect(judgeCritique(score, { kind: 'score', result: ran(0, ' no score ') })).toEqual({
      source: 'score',
      verdict: 'error',
      failureSignature: null,
      evidence: [],
      summary: 'the score command printed no score (exit 0): no score',
    });
    expect(judgeCritique(score, { kind: 'score', result: ran(null, 'score 0.9', true) })).toMatchObject({
      verdict: 'error',
      summary: 'the score command printed no score (timed out after 60 s): score 0.9',
    });
  });

  it('a review: evidence is the whole review; the signature names the failing criteria only', () => {
    const results = [
      { id: 'A1', passed: true, evidence: 'e' },
      { id: 'A2', passed: false, evidence: 'f' },
    ];
    const content = `${JSON.stringify({ results }, null, 2)}\n`;
    const failing = judgeCritique({ kind: 'review' }, { kind: 'review', result: { results } });
    expect(failing).toEqual({
      source: 'review',
      verdict: 'fail',
      failureSignature: hash(canonicalJson([results[1]])),
      evidence: [{ ref: evidenceRef('review', 'json', content), content }],
      summary: 'A1 passed: e\nA2 failed: f',
    });
    const passing = judgeCritique({ kind: 'review' }, { kind: 'review', result: { results: [results[0]!] } });
    expect([passing.verdict, passing.failureSignature]).toEqual(['pass', null]);
  });

  it('self-critique: its notes are the signature of a failure, and it is never evidence', () => {
    expect(judgeCritique({ kind: 'self' }, { kind: 'self', result: { passed: false, notes: 'half done' } })).toEqual({
      source: 'self',
      verdict: 'fail',
      failureSignature: hash('half done'),
      evidence: [],
      summary: 'self-assessment (not acceptance): not yet: half done',
    });
    expect(judgeCritique({ kind: 'self' }, { kind: 'self', result: { passed: true, notes: 'done' } }).summary).toBe(
      'self-assessment (not acceptance): passed: done',
    );
  });

  it.each([
    [{ kind: 'review' as const }, { kind: 'command' as const, result: ran(0, 'ok') }, 'command', 'review'],
    [command, { kind: 'review' as const, result: { results: [] } }, 'review', 'command'],
    [command, { kind: 'self' as const, result: { passed: true, notes: 'n' } }, 'self', 'command'],
  ])('an answer of another kind than the source is an error (%#)', (source, answer, kind, expected) => {
    const judged = judgeCritique(source, answer);
    if (answer.kind === 'command')
      expect(judged).toEqual({
        source: expected,
        verdict: 'error',
        failureSignature: null,
        evidence: [],
        summary: `the ${kind} critique does not match the ${expected} source`,
      });
    else expect(judged.source).toBe(kind);
  });

  it.each([
    ['2026-11-30T10:11:12.345Z done', '<time> done'],
    ['2026-11-30T10:11:12 done', '<time> done'],
    ['at 9:05:07 and 10:11:12', 'at <time> and <time>'],
    ['12ms 1.5 s 3 seconds 4 milliseconds 5us 6µs 7ns 8sec 9secs', Array(9).fill('<duration>').join(' ')],
    ['duration_ms: 1234.5 Duration=7 duration 8', 'duration_ms: <duration> Duration=<duration> duration <duration>'],
    ['42 tests, 3 failed', '42 tests, 3 failed'],
    ['took 1.25 s, duration: 1.25', 'took <duration>, duration: <duration>'],
    ['x12ms 2026-1-1T1:1:1', 'x12ms 2026-1-1T1:1:1'],
  ])('normalizeOutput(%j) masks times and durations only', (text, expected) => {
    expect(normalizeOutput(text)).toBe(expected);
  });

  it.each([
    ['12 of 15', 15],
    ['1.25e3 points', 1250],
    ['2E+2', 200],
    ['-7', -7],
    ['1e12', 1e12],
    ['3.5', 3.5],
    ['none', undefined],
  ])('lastNumber(%j) is %s', (text, expected) => {
    expect(lastNumber(text)).toBe(expected);
  });

  it('an artifact is identified by the hash of its files in canonical JSON, whatever their order', () => {
    expect(artifactDigest({ 'b.js': '2', 'a.js': '1' })).toBe(hash(canonicalJson({ 'a.js': '1', 'b.js': '2' })));
  });
});
