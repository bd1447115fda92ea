import { z } from 'zod';
import { GoalUsageSchema } from './par-goal.js';

// Plan-act-reflect (DESIGN §2): the roles, the payloads that cross the wire, and the answers.
// The artifact of a PAR run is a small project: a map of relative path → UTF-8 text.

/** The PAR roles: one agent plans and acts; critique sources review or run a command. */
export const ParRoleSchema = z.enum(['par.plan', 'par.act', 'par.review', 'par.command']);
export type ParRole = z.infer<typeof ParRoleSchema>;

const nonBlank = z.string().min(1).regex(/\S/, 'must not be blank');

/** A path inside the workspace: relative, `/`-separated, no `..`, not into `.git` or `.coord`. */
export const WorkspacePathSchema = z
  .string()
  .min(1)
  .max(512)
  .refine(
    (path) =>
      !path.startsWith('/') &&
      !path.includes('\\') &&
      !path.includes('\0') &&
      path.split('/').every((part) => part !== '' && part !== '.' && part !== '..') &&
      !['.git', '.coord'].includes(path.split('/')[0] ?? ''),
    'a relative path inside the workspace (no "..", not under .git or .coord)',
  );

/** The artifact: the workspace's text files, path → content. */
export const ParFilesSchema = z.record(WorkspacePathSchema, z.string());
export type ParFiles = z.infer<typeof ParFilesSchema>;

/** One acceptance criterion. A human gate can only be passed by a signed human approval. */
export const AcceptanceCriterionSchema = z.strictObject({
  id: z.string().regex(/^[A-Za-z][A-Za-z0-9_-]{0,31}$/, 'an id like "A1" or "api-review"'),
  text: nonBlank,
  human_gate: z.boolean().optional(),
});
export type AcceptanceCriterion = z.infer<typeof AcceptanceCriterionSchema>;

export const AcceptanceListSchema = z
  .array(AcceptanceCriterionSchema)
  .min(1)
  .max(16)
  .refine(
    (list) => new Set(list.map((criterion) => criterion.id)).size === list.length,
    'acceptance criterion ids must be unique',
  );

/** What the agent remembers of an earlier cycle: its own plan and what the critique said. */
export const CycleMemorySchema = z.strictObject({
  cycle: z.int().min(1),
  plan_summary: z.string(),
  verdict: z.enum(['pass', 'fail', 'error', 'needs-human']),
  critique: z.string(),
});
export type CycleMemory = z.infer<typeof CycleMemorySchema>;

/** A lesson a human approved (a memory proposal of the same topic), as the planner is given it. */
export const ParLessonSchema = z.strictObject({
  /** The memory proposal it comes from (`mp-…`). */
  id: z.string().regex(/^mp-[a-f0-9]{12}$/),
  target_ref: nonBlank,
  lesson: nonBlank.max(2000),
});
export type ParLesson = z.infer<typeof ParLessonSchema>;

/** `par.plan` input: the goal, the criteria, the artifact, the agent's own earlier cycles, and approved lessons. */
export const ParPlanPayloadSchema = z.strictObject({
  goal: nonBlank,
  acceptance_criteria: AcceptanceListSchema,
  artifact: ParFilesSchema,
  history: z.array(CycleMemorySchema),
  lessons: z.array(ParLessonSchema).max(32).optional(),
});
/** The smallest action that could add acceptance evidence, and a one-line summary of it. */
export const ParPlanSchema = z.strictObject({
  plan_summary: nonBlank.max(200),
  action: nonBlank.max(8000),
});
export type ParPlan = z.infer<typeof ParPlanSchema>;

/** `par.act` input: as for planning, plus the plan to carry out. */
export const ParActPayloadSchema = z.strictObject({ ...ParPlanPayloadSchema.shape, plan: ParPlanSchema });
/** Whole-file writes, and the agent's own view of the result (self-critique, never acceptance). */
export const ParActionSchema = z.strictObject({
  changes: z
    .array(z.strictObject({ path: WorkspacePathSchema, content: z.string() }))
    .max(64)
    .refine(
      (changes) => new Set(changes.map((change) => change.path)).size === changes.length,
      'each path is changed at most once',
    ),
  self_assessment: z.strictObject({ passed: z.boolean(), notes: z.string().max(4000) }),
});
export type ParAction = z.infer<typeof ParActionSchema>;

/** `par.review` input: exactly the artifact and the criteria a reviewer may judge (like Wave 2). */
export const ParReviewPayloadSchema = z.strictObject({
  artifact: ParFilesSchema,
  acceptance_criteria: AcceptanceListSchema,
});
export const ParReviewSchema = z.strictObject({
  results: z.array(z.strictObject({ id: z.string().min(1), passed: z.boolean(), evidence: nonBlank.max(4000) })).min(1),
});
export type ParReview = z.infer<typeof ParReviewSchema>;

/** A review must judge exactly the criteria it was given, each once. */
export function parReviewSchemaFor(criteria: readonly AcceptanceCriterion[]) {
  const ids = criteria.map((criterion) => criterion.id).sort();
  return ParReviewSchema.refine(
    (review) => JSON.stringify(review.results.map((result) => result.id).sort()) === JSON.stringify(ids),
    `the review must judge exactly ${ids.join(', ')}, each once`,
  );
}

/** `par.command` input: the artifact, written to a temporary workspace, and the command to run there. */
export const ParCommandPayloadSchema = z.strictObject({
  artifact: ParFilesSchema,
  command: nonBlank.max(4000),
  timeout_ms: z.int().min(100).max(3_600_000),
});
/** What the command did: exit code (null when killed), whether it timed out, and its output's tail. */
export const ParCommandResultSchema = z.strictObject({
  exit_code: z.int().nullable(),
  timed_out: z.boolean(),
  output_tail: z.string(),
  duration_ms: z.int().min(0),
});
export type ParCommandResult = z.infer<typeof ParCommandResultSchema>;

export type ParPlanPayload = z.infer<typeof ParPlanPayloadSchema>;
export type ParActPayload = z.infer<typeof ParActPayloadSchema>;
export type ParReviewPayload = z.infer<typeof ParReviewPayloadSchema>;
export type ParCommandPayload = z.infer<typeof ParCommandPayloadSchema>;

/** Where a cycle's critique comes from, most objective first. `self` is a fallback and never enough for PASS. */
export const CritiqueSourceSchema = z.discriminatedUnion('kind', [
  z.strictObject({
    kind: z.literal('command'),
    command: nonBlank,
    timeout_seconds: z.number().positive().max(3600).default(300),
  }),
  z.strictObject({ kind: z.literal('review') }),
  z.strictObject({
    kind: z.literal('score'),
    command: nonBlank,
    threshold: z.number(),
    timeout_seconds: z.number().positive().max(3600).default(300),
  }),
  z.strictObject({ kind: z.literal('self') }),
]);
export type CritiqueSourceSpec = z.infer<typeof CritiqueSourceSchema>;

/** What a PAR run or cycle ended with. */
export const ParFinalStatusSchema = z.enum(['pass', 'checkpoint', 'stop', 'error', 'needs-human']);
export type ParFinalStatus = z.infer<typeof ParFinalStatusSchema>;

const tokens = z.int().min(0);
/** What one role used in a cycle: model tokens (cached input apart) and cost; null is unknown, never 0. */
export const ParRoleUsageSchema = z.strictObject({ calls: z.int().min(0), ...GoalUsageSchema.shape });
export type ParRoleUsage = z.infer<typeof ParRoleUsageSchema>;

/**
 * What a cycle used, measured: per role usage, dispatched tasks, child tasks (a reviewer or a
 * command critique), time, transcript bytes, and the sizes of what the agent was given (tokens
 * estimated as ⌈UTF-8 bytes / 4⌉) and of the child's result (words).
 */
export const ParCycleMetricsSchema = z.strictObject({
  by_role: z.record(z.string(), ParRoleUsageSchema),
  tool_calls: z.int().min(0),
  children_spawned: z.int().min(0),
  elapsed_seconds: z.number().min(0),
  transcript_bytes: z.int().min(0),
  task_packet_tokens: tokens,
  parent_summary_tokens: tokens,
  memory_digest_tokens: tokens,
  child_result_words: tokens,
});
export type ParCycleMetrics = z.infer<typeof ParCycleMetricsSchema>;

/** One cycle as `.coord/par_<topic>.yml` records it. */
export const ParCycleRecordSchema = z.strictObject({
  cycle: z.int().min(1),
  plan_summary: z.string(),
  artifact_refs: z.array(z.string()),
  evidence_refs: z.array(z.string()),
  verdict: z.enum(['pass', 'fail', 'error', 'needs-human']),
  next_action: z.enum(['continue', 'checkpoint', 'stop', 'wait-for-human', 'done']),
  /** What the critique said, briefly: what the agent sees of this cycle next time. */
  critique: z.string(),
  /** Identifies the failure, so the same failure next cycle counts as a retry. */
  failure_signature: z.string().nullable(),
  /** The policy decision's reasons after this cycle. */
  policy_reasons: z.array(z.string()),
  /** What the cycle used (absent in files written before polish measured it). */
  metrics: ParCycleMetricsSchema.optional(),
  /** The approved lessons the planner was given (memory proposal ids). */
  lessons: z.array(z.string()).optional(),
});
export type ParCycleRecord = z.infer<typeof ParCycleRecordSchema>;

/** A human's signature over the task spec (goal, criteria and human gates, critique, files), made when the task is created. */
export const SpecAuthorizationSchema = z.strictObject({
  spec_sha256: z.string().regex(/^[a-f0-9]{64}$/),
  actor: z.string().regex(/^human:\S+$/),
  timestamp: z.iso.datetime({ offset: true }),
  authorization: z.strictObject({
    scheme: z.literal('hmac-sha256'),
    key_id: z.string().regex(/^\S+$/),
    signature: z.string().regex(/^[a-f0-9]{64}$/),
  }),
});
export type SpecAuthorization = z.infer<typeof SpecAuthorizationSchema>;

/** `.coord/par_<topic>.yml` (schema_version 2): the task, and every cycle so far. */
export const ParTaskFileSchema = z.strictObject({
  schema_version: z.literal(2),
  topic: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, 'a topic is lower-case letters, digits, - and _ (at most 64)'),
  goal: nonBlank,
  /** The policy file (agent-policy-1 or agent-policy-2), relative to the workspace. */
  policy_ref: nonBlank,
  /** The checkpoint file (task-checkpoint-1, or -2 with a v2 policy), relative to the workspace. */
  checkpoint_ref: nonBlank,
  acceptance_criteria: AcceptanceListSchema,
  critique_source: CritiqueSourceSchema,
  /**
   * SHA-256 of the task spec (topic, goal, policy_ref, checkpoint_ref, acceptance_criteria with
   * their human gates, critique_source) when the task was created: editing any of it later is
   * refused. Polish writes it; a hand-written file gets it when it is started.
   */
  spec_sha256: z
    .string()
    .regex(/^[a-f0-9]{64}$/)
    .optional(),
  /** The spec signed by a key of the policy (required when the policy pins human keys). */
  spec_authorization: SpecAuthorizationSchema.nullable().optional(),
  cycles: z.array(ParCycleRecordSchema),
  final_status: ParFinalStatusSchema.nullable(),
});
export type ParTaskFile = z.infer<typeof ParTaskFileSchema>;
export type ParTaskFileInput = z.input<typeof ParTaskFileSchema>;
