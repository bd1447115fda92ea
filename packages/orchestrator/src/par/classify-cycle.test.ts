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
