import { z } from 'zod';
import { CriteriaListSchema } from './criteria.js';
import { ScoreSchema } from './evaluation.js';
import { ModelInfoSchema, UsageSchema } from './usage.js';
import { ErrorCodeSchema } from './errors.js';
import { RevisionReportSchema } from './revision.js';
import { CriterionVerdictSchema, JudgementSchema, QuorumRuleSchema, RegressionSchema } from './quorum.js';

/** How a run ended. CAP_REACHED and BUDGET_EXHAUSTED are signals, not failures. */
export const RunStatusSchema = z.enum(['CONVERGED', 'CAP_REACHED', 'BUDGET_EXHAUSTED', 'FAILED', 'CANCELLED']);
export type RunStatus = z.infer<typeof RunStatusSchema>;

/** One evaluated version of the artifact, with the orchestrator's verdict on it. */
export const IterationRecordSchema = z.strictObject({
  iteration: z.int().min(1),
  artifact: z.string(),
  scores: z.array(ScoreSchema),
  passed: z.int().min(0),
  total: z.int().min(1),
  overall: z.enum(['pass', 'fail']),
  blocking_gaps: z.array(z.string()),
  /** Model usage of this iteration: its evaluation, plus the revision that followed it, if any. */
  usage: UsageSchema,
  /**
   * The revision made after this evaluation, if any: its form, edits, claimed criteria and size.
   * It starts from this version, or (re-asked after a regression) from the version this one broke.
   */
  revision: RevisionReportSchema.optional(),
  /** The iteration whose version was revised into this one (not the one before, after a regression). */
  revised_from: z.int().min(1).optional(),
  /** Criteria that passed on the `revised_from` version and fail on this one. */
  regressions: z.array(z.string()).optional(),
  /** With several judges: each judge's scores, each criterion's verdict, and how many judges agreed on it. */
  judges: z.array(JudgementSchema).optional(),
  verdicts: z.record(z.string(), CriterionVerdictSchema).optional(),
  /** Per criterion, the share of judges on the side that got more votes (1 = unanimous). */
  agreement: z.record(z.string(), z.number().min(0).max(1)).optional(),
});
export type IterationRecord = z.infer<typeof IterationRecordSchema>;

/** Usage summed per wave. */
export const UsageByWaveSchema = z.strictObject({ criteria: UsageSchema, evaluate: UsageSchema, revise: UsageSchema });
export type UsageByWave = z.infer<typeof UsageByWaveSchema>;

/** Estimated cost in US dollars from a price table; null where a model has no price. */
export const CostSchema = z.strictObject({
  currency: z.literal('USD'),
  total: z.number().min(0).nullable(),
  by_model: z.record(z.string(), z.number().min(0).nullable()),
});
export type Cost = z.infer<typeof CostSchema>;

/** What a budget allowed, what was spent, and what the wave it stopped before would have needed at worst. */
export const BudgetReportSchema = z.strictObject({
  max_usd: z.number().optional(),
  max_tokens: z.int().optional(),
  spent_usd: z.number().min(0).optional(),
  spent_tokens: z.int().min(0),
  /** The worst case of the next wave, which the rest of the budget could not cover. */
  needed_usd: z.number().min(0).optional(),
  needed_tokens: z.int().min(0).optional(),
});
export type BudgetReport = z.infer<typeof BudgetReportSchema>;

/** How several judges decided, over the whole run. */
export const QuorumReportSchema = z.strictObject({
  judges: z.int().min(2),
  rule: QuorumRuleSchema,
  /** Share of (iteration, criterion) verdicts on which every judge agreed; null when none were given. */
  agreement_rate: z.number().min(0).max(1).nullable(),
  /** Verdicts the rule could not decide (reported, never guessed). */
  undecided: z.int().min(0),
});
export type QuorumReport = z.infer<typeof QuorumReportSchema>;

const common = {
  /** Evaluations performed. */
  iterations: z.int().min(0),
  criteria: CriteriaListSchema.optional(),
  /** Usage of the whole run. */
  usage: UsageSchema,
  usage_by_wave: UsageByWaveSchema,
  /** Usage per model, keyed `provider:model`. */
  usage_by_model: z.record(z.string(), UsageSchema),
  cost: CostSchema.optional(),
  /** Every model that answered, so scripted answers are always visible as such. */
  models: z.array(ModelInfoSchema),
  history: z.array(IterationRecordSchema),
  /** Each criterion's verdict per iteration, in order. */
  criteria_history: z.record(z.string(), z.array(CriterionVerdictSchema)),
  /** Every regression: a criterion a revision broke. */
  regressions: z.array(RegressionSchema),
  quorum: QuorumReportSchema.optional(),
  budget: BudgetReportSchema.optional(),
};

/** The outcome of a polish run (DESIGN §1 outputs). */
export const RunResultSchema = z.discriminatedUnion('status', [
  z.strictObject({
    ...common,
    status: z.literal('CONVERGED'),
    artifact: z.string(),
    scores: z.array(ScoreSchema),
  }),
  z.strictObject({
    ...common,
    status: z.literal('CAP_REACHED'),
    /** The best-scoring version: most criteria passing; ties go to the later iteration. */
    artifact: z.string(),
    best_iteration: z.int().min(1),
    scores: z.array(ScoreSchema),
    remaining_gaps: z.array(z.string()),
  }),
  z.strictObject({
    ...common,
    status: z.literal('BUDGET_EXHAUSTED'),
    /** What the rest of the budget could not cover. */
    reason: z.string(),
    /** The best-scoring version so far (as for CAP_REACHED), or the input when nothing was evaluated. */
    artifact: z.string(),
    best_iteration: z.int().min(1).optional(),
    scores: z.array(ScoreSchema).optional(),
    remaining_gaps: z.array(z.string()),
  }),
  z.strictObject({
    ...common,
    status: z.literal('FAILED'),
    reason: z.string(),
    code: ErrorCodeSchema,
    /** The best evaluated version so far, or the input artifact: no work is lost. */
    artifact: z.string(),
  }),
  z.strictObject({
    ...common,
    status: z.literal('CANCELLED'),
    reason: z.string(),
    artifact: z.string(),
  }),
]);
export type RunResult = z.infer<typeof RunResultSchema>;
