import { z } from 'zod';
import { CriteriaListSchema, MAX_CRITERIA } from './criteria.js';
import { ThresholdSchema, requiredPasses } from './threshold.js';
import { ReviseModeSchema } from './revision.js';
import { MAX_JUDGES, QuorumRuleSchema } from './quorum.js';
import { BudgetSchema, DeclaredModelsSchema } from './budget.js';
import { modelLane } from './subjects.js';

/** A model's lane name, or undefined when it gives none. */
const laneOf = (model: string) => {
  try {
    return modelLane(model);
  } catch {
    return undefined;
  }
};

/** Most iterations a run may be given (DESIGN §1). */
export const MAX_CAP = 8;
/** Iterations when the caller names none. */
export const DEFAULT_CAP = 4;

const nonBlank = z
  .string()
  .min(1, 'must not be empty')
  .refine((text) => text.trim().length > 0, 'must not be empty');

/** What a caller submits: the polish loop's inputs. */
export const RunSpecSchema = z
  .strictObject({
    artifact: nonBlank,
    goal: nonBlank,
    criteria: CriteriaListSchema.optional(),
    threshold: ThresholdSchema.default('pass_all'),
    cap: z
      .int('must be a whole number from 1 to 8')
      .min(1, 'must be at least 1')
      .max(MAX_CAP, `must be at most ${MAX_CAP}`)
      .default(DEFAULT_CAP),
    /** How Wave 3 answers are taken: `auto` (default), `edits` only, or `full` text only. */
    revise_mode: ReviseModeSchema.default('auto'),
    /** Judges per evaluation: each scores the same payload in its own process. */
    judges: z
      .int('must be a whole number from 1 to 5')
      .min(1, 'must be at least 1')
      .max(MAX_JUDGES, `must be at most ${MAX_JUDGES}`)
      .default(1),
    /** How the judges' scores of a criterion make its verdict (with more than one judge). */
    quorum: QuorumRuleSchema.default('majority'),
    /** Every passing score quotes the artifact span that satisfies it (checked as a substring). */
    evidence: z.boolean().default(true),
    /** Spending limits: the run stops BUDGET_EXHAUSTED rather than dispatch a wave it cannot afford. */
    budget: BudgetSchema.optional(),
    /** The models the roles use, with their max_tokens: what a budget reserves before each call. */
    models: DeclaredModelsSchema.optional(),
    /**
     * Each judge's model, `provider:model` (over NATS judge i's tasks go to that model's lane,
     * served only by `polish worker --lane` hosts of that model); one per judge.
     */
    judge_models: z
      .array(
        z
          .string()
          .min(1, 'must not be empty')
          .refine((model) => laneOf(model) !== undefined, 'gives no lane name: use provider:model')
          // A worker never names its model with its address, so such a lane would have no worker.
          .refine(
            (model) => !model.includes('@'),
            'names an address (@…): give provider:model alone; where a worker reaches its model is its own',
          ),
      )
      .min(1)
      .max(MAX_JUDGES)
      .optional(),
  })
  .superRefine((spec, ctx) => {
    if (spec.judge_models && spec.judge_models.length !== spec.judges)
      ctx.addIssue({
        code: 'custom',
        path: ['judge_models'],
        message: `names ${spec.judge_models.length} models for ${spec.judges} judge${spec.judges === 1 ? '' : 's'}: give one per judge`,
      });
    // Two models whose names differ only where a lane name cannot hold the character would
    // share a lane, and one model's workers would judge for the other.
    const laneModels = new Map<string, string>();
    for (const model of spec.judge_models ?? []) {
      const lane = laneOf(model);
      const other = lane === undefined ? undefined : laneModels.get(lane);
      if (lane !== undefined && other !== undefined && other !== model.trim())
        ctx.addIssue({
          code: 'custom',
          path: ['judge_models'],
          message: `"${other}" and "${model.trim()}" would share the lane ${lane}: name the models so that they differ in letters, digits, "-" or "_"`,
        });
      else if (lane !== undefined) laneModels.set(lane, model.trim());
    }
    const declared = spec.models?.evaluate?.length;
    if (declared !== undefined && declared !== 1 && declared !== spec.judges)
      ctx.addIssue({
        code: 'custom',
        path: ['models', 'evaluate'],
        message: `declares ${declared} evaluator models for ${spec.judges} judge${spec.judges === 1 ? '' : 's'}: give one, or one per judge`,
      });
    if (!spec.budget) return;
    const roles = [...(spec.criteria ? [] : (['criteria'] as const)), 'evaluate', 'revise'] as const;
    for (const role of roles)
      if (!spec.models?.[role])
        ctx.addIssue({
          code: 'custom',
          path: ['models', role],
          message: `a budget needs the ${role} model and its max_tokens declared, to reserve each call's worst case`,
        });
  })
  .superRefine((spec, ctx) => {
    if (spec.threshold === 'pass_all') return;
    const needed = requiredPasses(spec.threshold, spec.criteria?.length ?? Infinity);
    if (needed < 1) ctx.addIssue({ code: 'custom', path: ['threshold'], message: 'pass_N needs N of at least 1' });
    if (!spec.criteria && needed > MAX_CRITERIA) {
      ctx.addIssue({
        code: 'custom',
        path: ['threshold'],
        message: `${spec.threshold} can never be met: Wave 1 locks at most ${MAX_CRITERIA} criteria`,
      });
    }
    if (spec.criteria && needed > spec.criteria.length) {
      ctx.addIssue({
        code: 'custom',
        path: ['threshold'],
        message: `${spec.threshold} needs ${needed} criteria but only ${spec.criteria.length} are given`,
      });
    }
  });
export type RunSpec = z.infer<typeof RunSpecSchema>;
export type RunSpecInput = z.input<typeof RunSpecSchema>;
