import type { ParCheckpoint } from '@polish/protocol';

/** Where a cycle's critique came from, most objective first (DESIGN §2). */
export type CritiqueSource = 'command' | 'review' | 'score' | 'self';

/** What one plan-act-reflect cycle produced, as the machine saw it. */
export interface CycleOutcome {
  critique: CritiqueSource;
  /** The critique's verdict on the acceptance criteria; `error` is an infrastructure failure. */
  verdict: 'pass' | 'fail' | 'error';
  /** A stable summary of the failure (e.g. the failing test names), compared across cycles. */
  failureSignature?: string;
  /** Evidence this cycle produced: artifact, test result, source, decision or blocker refs. */
  evidenceRefs: string[];
  toolCalls: number;
  elapsedSeconds: number;
  transcriptBytes: number;
  /** Child tasks the cycle spawned (a reviewer or a command critique). */
  childrenSpawned?: number;
  /** The sizes of what the agent was given and of the child's result: current values, not sums. */
  context?: Pick<
    ParCheckpoint,
    'task_packet_tokens' | 'parent_summary_tokens' | 'memory_digest_tokens' | 'child_result_words'
  >;
}

/** How the cycle is classified, and the checkpoint it leaves. */
export interface CycleClassification {
  status: 'pass' | 'fail' | 'error';
  /** For PASS: the evidence it cites. */
  acceptanceEvidence: string[];
  checkpoint: ParCheckpoint;
  reason: string;
}

/**
 * Classifies a cycle and records it in the checkpoint (pure). Acceptance satisfied by an
 * outside critique ⇒ PASS citing its evidence; self-critique is never enough for PASS. The
 * same failure as the previous cycle ⇒ `same_failure_retries` + 1, a different one resets it;
 * no new evidence ⇒ `no_evidence_cycles` + 1, new evidence resets it. An infrastructure error
 * ends the cycle as `error`: evidence of an error, not permission to retry.
 */
export function classifyCycle(
  checkpoint: ParCheckpoint,
  outcome: CycleOutcome,
  previousFailure: string | undefined,
  now: Date,
): CycleClassification {
  const known = new Set(checkpoint.evidence_refs);
  const fresh = outcome.evidenceRefs.filter((ref) => !known.has(ref));
  const base: ParCheckpoint = {
    ...checkpoint,
    cycle: checkpoint.cycle + 1,
    tool_calls: checkpoint.tool_calls + outcome.toolCalls,
    elapsed_seconds: checkpoint.elapsed_seconds + outcome.elapsedSeconds,
    transcript_bytes: checkpoint.transcript_bytes + outcome.transcriptBytes,
    children_spawned: checkpoint.children_spawned + (outcome.childrenSpawned ?? 0),
    ...outcome.context,
    evidence_refs: [...checkpoint.evidence_refs, ...new Set(fresh)],
    no_evidence_cycles: fresh.length > 0 ? 0 : checkpoint.no_evidence_cycles + 1,
    updated_at: now.toISOString(),
  };
  if (outcome.verdict === 'error') {
    return {
      status: 'error',
      acceptanceEvidence: [],
      checkpoint: { ...base, status: 'error' },
      reason: 'the critique source failed: an infrastructure error ends the cycle',
    };
  }
  if (outcome.verdict === 'pass' && outcome.critique !== 'self') {
    return {
      status: 'pass',
      acceptanceEvidence: outcome.evidenceRefs,
      checkpoint: { ...base, same_failure_retries: 0, status: 'completed' },
      reason: `acceptance satisfied (${outcome.critique} critique)`,
    };
  }
  const same =
    outcome.verdict === 'fail' &&
    outcome.failureSignature !== undefined &&
    outcome.failureSignature === previousFailure;
  return {
    status: 'fail',
    acceptanceEvidence: [],
    checkpoint: { ...base, same_failure_retries: same ? checkpoint.same_failure_retries + 1 : 0 },
    reason:
      outcome.verdict === 'pass'
        ? 'self-critique passed, which is never independent acceptance'
        : same
          ? 'the same failure as the previous cycle'
          : 'a new failure',
  };
}
