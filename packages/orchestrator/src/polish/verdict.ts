import {
  ZERO_USAGE,
  requiredPasses,
  type Criterion,
  type CriterionVerdict,
  type IterationRecord,
  type Judgement,
  type QuorumRule,
  type Score,
  type Threshold,
  type Usage,
} from '@polish/protocol';

/** One criterion's verdict from the judges' votes under a rule; a split the rule cannot decide is undecided. */
export function decide(rule: QuorumRule, passes: number, judges: number): CriterionVerdict {
  const fails = judges - passes;
  switch (rule) {
    case 'majority':
      return passes * 2 > judges ? 'pass' : fails * 2 > judges ? 'fail' : 'undecided';
    case 'unanimous':
      return passes === judges ? 'pass' : fails === judges ? 'fail' : 'undecided';
    case 'any-fail':
      return fails > 0 ? 'fail' : 'pass';
  }
}

/** Each judge's scores in the locked order (they already satisfy `evaluationSchemaFor(criteria)`). */
function inLockedOrder(criteria: readonly Criterion[], scores: readonly Score[]): Score[] {
  const byId = new Map(scores.map((score) => [score.criterion_id, score]));
  return criteria.map((criterion) => {
    const score = byId.get(criterion.id);
    if (!score) throw new Error(`criterion ${criterion.id} is not scored`);
    return score;
  });
}

/**
 * The orchestrator's combined score of one criterion: a pass quotes a passing judge's evidence;
 * anything else carries the failing judges' gaps (distinct ones, in judge order).
 */
function combined(criterion: Criterion, votes: readonly Score[], verdict: CriterionVerdict): Score {
  if (verdict === 'pass') {
    const evidence = votes.find((vote) => vote.pass && vote.evidence)?.evidence;
    return { criterion_id: criterion.id, pass: true, ...(evidence ? { evidence } : {}) };
  }
  const gaps = [...new Set(votes.filter((vote) => !vote.pass).map((vote) => vote.gap?.trim() ?? ''))].filter(Boolean);
  return { criterion_id: criterion.id, pass: false, gap: gaps.join(' / ') };
}

/**
 * The orchestrator's verdict on one evaluated version. `overall` and `blocking_gaps` are
 * computed here from the scores, never taken from a model. With several judges, each
 * criterion's verdict follows the quorum rule; only decided passes count toward the threshold,
 * and every criterion not decided pass is a blocking gap. Scores must already satisfy
 * `evaluationSchemaFor(criteria)`; they are reordered to the locked order.
 */
export function computeVerdict(input: {
  iteration: number;
  artifact: string;
  criteria: readonly Criterion[];
  threshold: Threshold;
  /** One judge's scores, or: */
  scores?: readonly Score[];
  /** every judge's answer (more than one makes a quorum). */
  judges?: readonly Judgement[];
  rule?: QuorumRule;
  usage?: Usage;
}): IterationRecord {
  const judgements = input.judges ?? [];
  const single = judgements.length <= 1;
  const ordered = judgements.map((judgement) => inLockedOrder(input.criteria, judgement.scores));
  const verdicts: Record<string, CriterionVerdict> = {};
  const agreement: Record<string, number> = {};
  const scores = single
    ? inLockedOrder(input.criteria, input.scores ?? judgements[0]?.scores ?? [])
    : input.criteria.map((criterion, index) => {
        const votes = ordered.map((judge) => judge[index] as Score);
        const passes = votes.filter((vote) => vote.pass).length;
        const verdict = decide(input.rule ?? 'majority', passes, votes.length);
        verdicts[criterion.id] = verdict;
        agreement[criterion.id] = Math.max(passes, votes.length - passes) / votes.length;
        return combined(criterion, votes, verdict);
      });
  const passed = scores.filter((score) => score.pass).length;
  const total = input.criteria.length;
  return {
    iteration: input.iteration,
    artifact: input.artifact,
    scores,
    passed,
    total,
    overall: passed >= requiredPasses(input.threshold, total) ? 'pass' : 'fail',
    blocking_gaps: scores.filter((score) => !score.pass).map((score) => `${score.criterion_id}: ${score.gap ?? ''}`),
    usage: input.usage ?? ZERO_USAGE,
    ...(single
      ? {}
      : {
          judges: judgements.map((judgement, index) => ({ ...judgement, scores: ordered[index] as Score[] })),
          verdicts,
          agreement,
        }),
  };
}

/** A record's verdict on each criterion: its quorum's, or its one judge's pass or fail. */
export function verdictsOf(record: IterationRecord): Record<string, CriterionVerdict> {
  return (
    record.verdicts ??
    Object.fromEntries(record.scores.map((score) => [score.criterion_id, score.pass ? 'pass' : 'fail'] as const))
  );
}

/** Criteria that pass on `before` and fail (decided) on `after`: what a revision broke. */
export function regressionsBetween(before: IterationRecord, after: IterationRecord): string[] {
  const was = verdictsOf(before);
  const now = verdictsOf(after);
  return Object.keys(now).filter((id) => was[id] === 'pass' && now[id] === 'fail');
}

/**
 * The version CAP_REACHED returns: the one with the most criteria passing.
 * Tie rule: the later iteration wins, since it has had more gaps addressed at equal coverage.
 */
export function bestVersion(history: readonly IterationRecord[]): IterationRecord | undefined {
  let best: IterationRecord | undefined;
  for (const record of history) {
    if (!best || record.passed >= best.passed) best = record;
  }
  return best;
}
