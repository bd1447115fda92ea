import { z } from 'zod';
import type { Criterion } from './criteria.js';

/**
 * One criterion's score. A failing score must carry a specific, actionable gap; a passing one
 * quotes, in `evidence`, the span of the artifact that satisfies the criterion.
 */
export const ScoreSchema = z.strictObject({
  criterion_id: z.string().min(1),
  pass: z.boolean(),
  gap: z.string().optional(),
  evidence: z.string().optional(),
});
export type Score = z.infer<typeof ScoreSchema>;

/** What a Wave 2 (evaluate) agent returns: scores only; `overall` is the orchestrator's to compute. */
export const EvaluationSchema = z.strictObject({ scores: z.array(ScoreSchema) });
export type Evaluation = z.infer<typeof EvaluationSchema>;

/** Text with every run of whitespace made one space, trimmed: how quotes are compared. */
const normalised = (text: string) => text.replace(/\s+/g, ' ').trim();

/** Whether a quote is an exact substring of the artifact, whitespace-normalised (never empty). */
export function quoteFound(artifact: string, quote: string): boolean {
  const needle = normalised(quote);
  return needle !== '' && normalised(artifact).includes(needle);
}

/** What an evaluation is checked against besides the locked criteria. */
export interface EvaluationContract {
  /** The artifact the evaluator was given: every quote must be found in it. */
  artifact?: string;
  /** Every passing score must quote its evidence (default: false here; runs default to true). */
  evidence?: boolean;
}

/**
 * The evaluation contract for a given locked list: every criterion scored exactly once,
 * no invented ids, a non-empty gap on every failing score, and, given the artifact, every
 * quote found in it (with `evidence`, every pass quotes one).
 */
export function evaluationSchemaFor(criteria: readonly Criterion[], contract: EvaluationContract = {}) {
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
      const evidencePath = ['scores', index, 'evidence'];
      if (score.pass && contract.evidence && !score.evidence?.trim()) {
        ctx.addIssue({
          code: 'custom',
          path: evidencePath,
          message: `criterion ${score.criterion_id} passes without evidence: quote the words of the artifact that satisfy it`,
        });
      } else if (
        score.evidence?.trim() &&
        contract.artifact !== undefined &&
        !quoteFound(contract.artifact, score.evidence)
      ) {
        ctx.addIssue({
          code: 'custom',
          path: evidencePath,
          message: `the evidence quoted for ${score.criterion_id} is not in the artifact: quote its words exactly`,
        });
      }
    });
    for (const id of lockedIds) {
      if (!seen.has(id)) ctx.addIssue({ code: 'custom', path: ['scores'], message: `criterion ${id} is not scored` });
    }
  });
}
