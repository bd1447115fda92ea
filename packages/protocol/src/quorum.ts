import { z } from 'zod';
import { ModelInfoSchema } from './usage.js';
import { ScoreSchema } from './evaluation.js';

/** Most judges one evaluation may have. */
export const MAX_JUDGES = 5;

/**
 * How a quorum of judges decides a criterion: `majority` (more than half agree; a tie is
 * undecided), `unanimous` (all agree; any split is undecided), `any-fail` (one fail fails it).
 */
export const QuorumRuleSchema = z.enum(['majority', 'unanimous', 'any-fail']);
export type QuorumRule = z.infer<typeof QuorumRuleSchema>;

/** The verdict on one criterion: a split the rule cannot decide is `undecided`, never guessed. */
export const CriterionVerdictSchema = z.enum(['pass', 'fail', 'undecided']);
export type CriterionVerdict = z.infer<typeof CriterionVerdictSchema>;

/** One judge's answer, as it came (after its contract checks). */
export const JudgementSchema = z.strictObject({
  judge: z.int().min(1),
  model: ModelInfoSchema,
  scores: z.array(ScoreSchema),
});
export type Judgement = z.infer<typeof JudgementSchema>;

/** A criterion that passed on the version a revision started from and fails on the revised one. */
export const RegressionSchema = z.strictObject({
  criterion_id: z.string(),
  /** The iteration whose version passed it: the version the revision started from. */
  passed_in: z.int().min(1),
  /** The iteration whose version fails it. */
  failed_in: z.int().min(1),
  /** Whether the reviser was asked again, from the passing version, with the regression as a gap. */
  re_asked: z.boolean(),
});
export type Regression = z.infer<typeof RegressionSchema>;
