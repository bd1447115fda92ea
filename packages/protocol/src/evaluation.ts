import { z } from 'zod';
import type { Criterion } from './criteria.js';

/** One criterion's score. A failing score must carry a specific, actionable gap. */
export const ScoreSchema = z.strictObject({
  criterion_id: z.string().min(1),
  pass: z.boolean(),
  gap: z.string().optional(),
});
export type Score = z.infer<typeof ScoreSchema>;

/** What a Wave 2 (evaluate) agent returns: scores only; `overall` is the orchestrator's to compute. */
export const EvaluationSchema = z.strictObject({ scores: z.array(ScoreSchema) });
export type Evaluation = z.infer<typeof EvaluationSchema>;

/**
 * The evaluation contract for a given locked list: every criterion scored exactly once,
 * no invented ids, and a non-empty gap on every failing score.
 */
export function evaluationSchemaFor(criteria: readonly Criterion[]) {
  const lockedIds = new Set(criteria.map((criterion) => criterion.id));
  return EvaluationSchema.superRefine((evaluation, ctx) => {
    const seen = new Set<string>();
    evaluation.scores.forEach((score, index) => {
      const path = ['scores', index, 'criterion_id'];
      if (!lockedIds.has(score.criterion_id)) {
        ctx.addIssue({ code: 'custom', path, message: `invented criterion id ${score.criterion_id}` });
      } else if (seen.has(score.criterion_id)) {
        ctx.addIssue({ code: 'custom', path, message: `criterion ${score.criterion_id} scored twice` });
      }
      seen.add(score.criterion_id);
      if (!score.pass && !score.gap?.trim()) {
        ctx.addIssue({
          code: 'custom',
          path: ['scores', index, 'gap'],
          message: `criterion ${score.criterion_id} fails without a gap`,
        });
      }
    });
    for (const id of lockedIds) {
      if (!seen.has(id)) ctx.addIssue({ code: 'custom', path: ['scores'], message: `criterion ${id} is not scored` });
    }
  });
}
