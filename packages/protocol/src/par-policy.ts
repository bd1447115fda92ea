import { z } from 'zod';

// agent-collab-harness v1 files (../shared/agent-collab/): agent-policy-1 (public form),
// task-checkpoint-1 and policy-decision-1. Rules JSON Schema cannot express are enforced by
// the policy engine in @polish/orchestrator.

/** The 13 limits of a policy, in the harness's order. */
export const LIMIT_NAMES = [
  'max_cycles',
  'max_tool_calls',
  'max_elapsed_seconds',
  'checkpoint_transcript_bytes',
  'max_transcript_bytes',
  'max_same_failure_retries',
  'max_no_evidence_cycles',
  'max_children_per_parent',
  'max_concurrency',
  'max_task_packet_tokens',
  'max_parent_summary_tokens',
  'max_memory_digest_tokens',
  'max_child_result_words',
] as const;
export type LimitName = (typeof LIMIT_NAMES)[number];

const nonBlank = z.string().min(1).regex(/\S/);
const sha256Hex = z.string().regex(/^[a-f0-9]{64}$/);
const count = z.int().min(0);
const dateTime = z.iso.datetime({ offset: true });

/** agent-policy-1, public form. */
export const ParPolicySchema = z.strictObject({
  schema_version: z.literal(1),
  policy_id: nonBlank,
  limits: z.strictObject(
    Object.fromEntries(LIMIT_NAMES.map((name) => [name, count])) as Record<LimitName, typeof count>,
  ),
  human_authorization: z.strictObject({ key_hashes: z.record(z.string().regex(/^\S+$/), sha256Hex) }),
});
export type ParPolicy = z.infer<typeof ParPolicySchema>;

const AuthorizationSchema = z.strictObject({
  scheme: z.literal('hmac-sha256'),
  key_id: z.string().regex(/^\S+$/),
  signature: sha256Hex,
});
const humanActor = z.string().regex(/^human:\S+$/);

/** What every signed human record carries: who, when, about which pending action, and the signature. */
const signedRecord = {
  actor: humanActor,
  timestamp: dateTime,
  affected_action_hash: sha256Hex,
  authorization: AuthorizationSchema,
};

/** A signed human decision on a gate. */
export const HumanDecisionSchema = z.strictObject({
  gate: nonBlank,
  decision: z.enum(['approve', 'decline', 'revise']),
  rationale: nonBlank,
  ...signedRecord,
});
export type HumanDecision = z.infer<typeof HumanDecisionSchema>;

/** A signed human override that raises one limit. */
export const LimitOverrideSchema = z.strictObject({
  limit: z.enum(LIMIT_NAMES),
  value: count,
  observed_value: z.number().min(0),
  reason: nonBlank,
  ...signedRecord,
});
export type LimitOverride = z.infer<typeof LimitOverrideSchema>;

/** task-checkpoint-1. */
export const ParCheckpointSchema = z.strictObject({
  schema_version: z.literal(1),
  task_id: nonBlank,
  parent_id: nonBlank.nullable(),
  status: z.enum([
    'running',
    'waiting_for_human',
    'completed',
    'blocked',
    'budget_exhausted',
    'error',
    'cancelled',
    'declined',
    'timed_out',
  ]),
  cycle: count,
  tool_calls: count,
  elapsed_seconds: z.number().min(0),
  transcript_bytes: count,
  same_failure_retries: count,
  no_evidence_cycles: count,
  active_children: count,
  children_spawned: count.default(0),
  last_checkpoint_transcript_bytes: count.default(0),
  task_packet_tokens: count.default(0),
  parent_summary_tokens: count.default(0),
  memory_digest_tokens: count.default(0),
  child_result_words: count.default(0),
  pending_action_hash: sha256Hex.nullable().default(null),
  evidence_refs: z.array(nonBlank).refine((refs) => new Set(refs).size === refs.length, 'evidence_refs must be unique'),
  decisions: z.array(HumanDecisionSchema),
  overrides: z.array(LimitOverrideSchema),
  stop_reason: nonBlank.nullable(),
  updated_at: dateTime,
});
export type ParCheckpoint = z.infer<typeof ParCheckpointSchema>;

/** policy-decision-1: what the policy engine says, and why. */
export const PolicyDecisionSchema = z.strictObject({
  schema_version: z.literal(1),
  policy_id: nonBlank,
  policy_hash: sha256Hex.nullable(),
  decision: z.enum(['continue', 'checkpoint', 'stop']),
  spawn_allowed: z.boolean(),
  checkpoint_required: z.boolean(),
  reasons: z.array(z.string().min(1)),
  effective_limits: z.record(z.string(), count),
  observed_metrics: z.record(z.string(), z.number().min(0)),
});
export type PolicyDecision = z.infer<typeof PolicyDecisionSchema>;
