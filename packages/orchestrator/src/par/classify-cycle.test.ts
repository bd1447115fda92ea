import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ParCheckpointSchema } from '@polish/protocol';
import { classifyCycle, type CycleOutcome } from './classify-cycle.js';

const start = ParCheckpointSchema.parse(
  JSON.parse(
    readFileSync(new URL('../../../../test/fixtures/agent-collab/checkpoint.sample.json', import.meta.url), 'utf8'),
  ),
);
const now = new Date('2026-11-30T00:00:00Z');
const cycle = (outcome: Partial<CycleOutcome>): CycleOutcome => ({
  critique: 'command',
  verdict: 'fail',
  evidenceRefs: [],
  toolCalls: 2,
  elapsedSeconds: 1.5,
  transcriptBytes: 100,
  ...outcome,
});

describe('classifyCycle', () => {
  it('passes on an outside critique, citing its evidence, and counts the cycle', () => {
    const result = classifyCycle(
      start,
      cycle({ verdict: 'pass', evidenceRefs: ['test:npm test exit 0'] }),
      undefined,
      now,
    );
    expect(result.status).toBe('pass');
    expect(result.acceptanceEvidence).toEqual(['test:npm test exit 0']);
    expect(result.checkpoint).toMatchObject({
      cycle: 1,
      tool_calls: 2,
      elapsed_seconds: 1.5,
      transcript_bytes: 100,
      status: 'completed',
      updated_at: now.toISOString(),
    });
  });

  it('never passes on self-critique alone', () => {
    const result = classifyCycle(
      start,
      cycle({ critique: 'self', verdict: 'pass', evidenceRefs: ['self:looks good'] }),
      undefined,
      now,
    );
    expect(result.status).toBe('fail');
    expect(result.reason).toBe('self-critique passed, which is never independent acceptance');
  });

  it('counts the same failure again, and resets on a different one', () => {
    // One failing cycle after another, each with fresh evidence.
    const failing = (checkpoint: typeof start, signature: string, evidence: string, previous?: string) =>
      classifyCycle(checkpoint, cycle({ failureSignature: signature, evidenceRefs: [evidence] }), previous, now);
    const first = failing(start, 'test_a', 'run:1');
    const again = failing(first.checkpoint, 'test_a', 'run:2', 'test_a');
    expect(again.checkpoint.same_failure_retries).toBe(1);
    const other = failing(again.checkpoint, 'test_b', 'run:3', 'test_a');
    expect(other.checkpoint.same_failure_retries).toBe(0);
  });

  it('counts a cycle without new evidence, and resets when evidence is new', () => {
    const first = classifyCycle(start, cycle({ evidenceRefs: ['run:1'] }), undefined, now);
    const stale = classifyCycle(first.checkpoint, cycle({ evidenceRefs: ['run:1'] }), undefined, now);
    expect(stale.checkpoint.no_evidence_cycles).toBe(1);
    expect(stale.checkpoint.evidence_refs).toEqual(['run:1']);
    const fresh = classifyCycle(stale.checkpoint, cycle({ evidenceRefs: ['run:2'] }), undefined, now);
    expect(fresh.checkpoint.no_evidence_cycles).toBe(0);
  });

  it('ends the cycle as error on an infrastructure failure', () => {
    const result = classifyCycle(start, cycle({ verdict: 'error' }), undefined, now);
    expect([result.status, result.checkpoint.status]).toEqual(['error', 'error']);
    expect(ParCheckpointSchema.safeParse(result.checkpoint).success).toBe(true);
  });
});

// Issue 22: what the mutation run found unchecked.
describe('classifyCycle, every field', () => {
  it('adds the children a cycle spawned, and takes the context sizes as they are now', () => {
    const spawned = { ...start, children_spawned: 2, task_packet_tokens: 900 };
    const result = classifyCycle(
      spawned,
      cycle({
        childrenSpawned: 3,
        context: { task_packet_tokens: 10, parent_summary_tokens: 1, memory_digest_tokens: 2, child_result_words: 3 },
      }),
      undefined,
      now,
    );
    expect(result.checkpoint).toMatchObject({ children_spawned: 5, task_packet_tokens: 10, child_result_words: 3 });
    expect(classifyCycle(spawned, cycle({}), undefined, now).checkpoint.children_spawned).toBe(2);
  });

  it('an error cites no evidence and says why', () => {
    expect(classifyCycle(start, cycle({ verdict: 'error', evidenceRefs: ['run:1'] }), undefined, now)).toMatchObject({
      acceptanceEvidence: [],
      reason: 'the critique source failed: an infrastructure error ends the cycle',
    });
  });

  it('a pass names the critique that accepted it', () => {
    expect(classifyCycle(start, cycle({ critique: 'review', verdict: 'pass' }), undefined, now).reason).toBe(
      'acceptance satisfied (review critique)',
    );
  });

  it('a failure cites no evidence as acceptance, and says whether it is new or the same again', () => {
    const first = classifyCycle(start, cycle({ failureSignature: 'x', evidenceRefs: ['run:1'] }), undefined, now);
    expect([first.acceptanceEvidence, first.reason]).toEqual([[], 'a new failure']);
    const again = classifyCycle(first.checkpoint, cycle({ failureSignature: 'x' }), 'x', now);
    expect(again.reason).toBe('the same failure as the previous cycle');
  });

  it('is the same failure only for a failing verdict with a signature equal to the previous one', () => {
    const failed = { ...start, same_failure_retries: 2 };
    // No signature: never "the same", even when there was none before either.
    expect(classifyCycle(failed, cycle({}), undefined, now).checkpoint.same_failure_retries).toBe(0);
    // A self-critique that passed is no failure: its signature does not count as a repeat.
    const self = classifyCycle(failed, cycle({ critique: 'self', verdict: 'pass', failureSignature: 'x' }), 'x', now);
    expect([self.status, self.checkpoint.same_failure_retries]).toEqual(['fail', 0]);
    expect(self.reason).toBe('self-critique passed, which is never independent acceptance');
    const self2 = classifyCycle(failed, cycle({ critique: 'self', verdict: 'fail', failureSignature: 'x' }), 'x', now);
    expect([self2.checkpoint.same_failure_retries, self2.reason]).toEqual([
      3,
      'the same failure as the previous cycle',
    ]);
  });
});
