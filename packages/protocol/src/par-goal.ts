import { z } from 'zod';
import { ParCheckpointSchema, ParPolicySchema, PolicyDecisionSchema } from './par-policy.js';

// agent-collab-harness v2 files ("goal slices", ../shared/agent-collab/): agent-policy-2,
// task-checkpoint-2 and policy-decision-2. A v2 checkpoint wraps a v1 one (`task`, the current
// slice) with the goal's totals, hash-chained slice history and failure identities. Rules JSON
// Schema cannot express (totals = baseline + slice, the chain, the reviewer reserve) are
// enforced by the goal engine in @polish/orchestrator.

/** The slice counters, read from the v1 task. */
export const GOAL_COUNTERS = ['cycle', 'tool_calls', 'elapsed_seconds', 'children_spawned'] as const;
/** Model usage; null is unknown, never 0. */
export const GOAL_USAGE = ['input_tokens', 'cached_input_tokens', 'output_tokens', 'cost_microusd'] as const;
/** Everything a goal totals, in the harness's order. */
export const GOAL_TOTALS = [...GOAL_COUNTERS, ...GOAL_USAGE] as const;
export type GoalTotalName = (typeof GOAL_TOTALS)[number];

const nonBlank = z.string().min(1).regex(/\S/);
const sha256Hex = z.string().regex(/^[a-f0-9]{64}$/);
const count = z.int().min(0);
const nullableCount = count.nullable();
const seconds = z.number().min(0);

/** Token and cost figures, each of the given type (unknown usage is null in totals, never in limits). */
const usageFields = <T extends z.ZodType>(figure: T) => ({
  input_tokens: figure,
  cached_input_tokens: figure,
  output_tokens: figure,
  cost_microusd: figure,
});
/** What a goal counts, and so what its limits can bound. */
const goalFigures = <T extends z.ZodType>(usage: T) => ({
  cycle: count,
  tool_calls: count,
  elapsed_seconds: seconds,
  children_spawned: count,
  ...usageFields(usage),
});

export const GoalUsageSchema = z.strictObject(usageFields(nullableCount));
export type GoalUsage = z.infer<typeof GoalUsageSchema>;

export const GoalTotalsSchema = z.strictObject(goalFigures(nullableCount));
export type GoalTotals = z.infer<typeof GoalTotalsSchema>;

/** agent-policy-2: a v1 policy (`base_policy`) plus whole-goal budgets and a reviewer's reserved child slot. */
export const GoalPolicySchema = z.strictObject({
  schema_version: z.literal(2),
  policy_id: nonBlank,
  base_policy: ParPolicySchema,
  goal_limits: z.strictObject(goalFigures(count)).partial(),
  reviewer_reserve: count,
});
export type GoalPolicy = z.infer<typeof GoalPolicySchema>;

/** One advanced slice: its totals and task as they were, chained to the slice before. */
export const GoalHistoryEventSchema = z.strictObject({
  slice_id: count,
  request_id: nonBlank,
  previous_sha256: sha256Hex.nullable(),
  sha256: sha256Hex,
  totals: GoalTotalsSchema,
  task_sha256: sha256Hex,
  evidence_refs: z.array(nonBlank),
});
export type GoalHistoryEvent = z.infer<typeof GoalHistoryEventSchema>;

/** A failed action: identity = hash(operation, target), with the inputs it failed on and its error class. */
export const GoalFailureSchema = z.strictObject({
  identity: sha256Hex,
  input_sha256: sha256Hex,
  error_class: nonBlank,
  attempts: count,
  evidence_ref: nonBlank,
  observed_evidence: z.array(nonBlank),
});
export type GoalFailure = z.infer<typeof GoalFailureSchema>;

/** What the host does next: act, diagnose a failure read-only, have the work reviewed, or wait for something outside. */
export const ActionKindSchema = z.enum(['execute', 'diagnose', 'review', 'wait']);

/** task-checkpoint-2. */
export const GoalCheckpointSchema = z.strictObject({
  schema_version: z.literal(2),
  task_id: nonBlank,
  goal_id: nonBlank,
  slice_id: count,
  task: ParCheckpointSchema,
  totals: GoalTotalsSchema,
  baseline: GoalTotalsSchema,
  usage: GoalUsageSchema,
  accepted_evidence: z.array(nonBlank).refine((refs) => new Set(refs).size === refs.length, 'must be unique'),
  history: z.array(GoalHistoryEventSchema),
  next_step: z.string(),
  action_kind: ActionKindSchema,
  review_required: z.boolean(),
  requires_human: z.boolean(),
  source_sha256: sha256Hex,
  failure_history: z.array(GoalFailureSchema),
  active_failure: sha256Hex.nullable(),
});
export type GoalCheckpoint = z.infer<typeof GoalCheckpointSchema>;

/** policy-decision-2: a v1 decision plus its scope and whether the host may advance the slice by itself. */
export const GoalDecisionSchema = z.strictObject({
  ...PolicyDecisionSchema.shape,
  schema_version: z.literal(2),
  reasons: z.array(nonBlank),
  observed_metrics: GoalTotalsSchema,
  scope: z.enum(['goal', 'slice', 'action']),
  auto_continue: z.boolean(),
});
export type GoalDecision = z.infer<typeof GoalDecisionSchema>;
/** A task-checkpoint-2 as read: its `task` keeps the optional v1 fields it was written without. */
export type GoalCheckpointInput = z.input<typeof GoalCheckpointSchema>;

/** Any policy decision: policy-decision-1 (v1 files) or policy-decision-2 (goal slices). */
export type AnyPolicyDecision = z.infer<typeof PolicyDecisionSchema> | GoalDecision;
/** Either decision, as it is read back (events, the final report). */
export const AnyPolicyDecisionSchema = z.union([PolicyDecisionSchema, GoalDecisionSchema]);
