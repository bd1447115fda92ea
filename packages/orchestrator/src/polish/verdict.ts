import {
  ZERO_USAGE,
  requiredPasses,
  type Criterion,
  type IterationRecord,
  type Score,
  type Threshold,
  type Usage,
} from '@polish/protocol';

/**
 * The orchestrator's verdict on one evaluated version. `overall` and `blocking_gaps`
 * are computed here from the scores, never taken from the model. Scores must already
 * satisfy `evaluationSchemaFor(criteria)`; they are reordered to the locked order.
 */
export function computeVerdict(input: {
  iteration: number;
  artifact: string;
  criteria: readonly Criterion[];
  scores: readonly Score[];
  threshold: Threshold;
  usage?: Usage;
}): IterationRecord {
  const byId = new Map(input.scores.map((score) => [score.criterion_id, score]));
  const scores = input.criteria.map((criterion) => {
    const score = byId.get(criterion.id);
    if (!score) throw new Error(`criterion ${criterion.id} is not scored`);
    return score;
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
  };
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
