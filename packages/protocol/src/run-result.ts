import { z } from 'zod';
import { CriteriaListSchema } from './criteria.js';
import { ScoreSchema } from './evaluation.js';
import { ModelInfoSchema, UsageSchema } from './usage.js';
import { ErrorCodeSchema } from './errors.js';
import { RevisionReportSchema } from './revision.js';

/** How a run ended. CAP_REACHED is a signal, not a failure. */
export const RunStatusSchema = z.enum(['CONVERGED', 'CAP_REACHED', 'FAILED', 'CANCELLED']);
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
  /** The revision made from this version, if any: its form, edits, claimed criteria and size. */
  revision: RevisionReportSchema.optional(),
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
