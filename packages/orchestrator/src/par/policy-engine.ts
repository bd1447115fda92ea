import type { z } from 'zod';
import {
  LIMIT_NAMES,
  firstIssue,
  invalidInput,
  ParCheckpointSchema,
  ParPolicySchema,
  type LimitName,
  type ParCheckpoint,
  type ParPolicy,
  type PolicyDecision,
} from '@polish/protocol';
import { canonicalJson } from './canonical-json.js';
import { sha256 } from '../hash.js';
import { verifyHumanRecord } from './human-records.js';
import { normalizePortablePolicy } from './portable-policy.js';

// The policy engine for agent-collab-harness v1 files, step for step as the harness's
// `evaluate_policy` (agent_collab_harness/policy.py, 0.5.1): validate the checkpoint, then the
// policy, verify every signed record, apply overrides, decide. Version-2 files go to
// goal-engine.ts through `evaluatePolicy`.

/** The metrics a checkpoint reports and the limit each is held against, in the harness's order (HARD_METRICS). */
const REACHED: readonly [keyof ParCheckpoint, LimitName][] = [
  ['cycle', 'max_cycles'],
  ['tool_calls', 'max_tool_calls'],
  ['elapsed_seconds', 'max_elapsed_seconds'],
  ['transcript_bytes', 'max_transcript_bytes'],
  ['same_failure_retries', 'max_same_failure_retries'],
  ['no_evidence_cycles', 'max_no_evidence_cycles'],
  ['task_packet_tokens', 'max_task_packet_tokens'],
  ['parent_summary_tokens', 'max_parent_summary_tokens'],
  ['memory_digest_tokens', 'max_memory_digest_tokens'],
  ['child_result_words', 'max_child_result_words'],
];
/** Limits that stop only when exceeded, in the harness's order. */
const EXCEEDED: readonly [keyof ParCheckpoint, LimitName][] = [
  ['children_spawned', 'max_children_per_parent'],
  ['active_children', 'max_concurrency'],
];
/** The metric each limit is compared with (for overrides): LIMIT_OBSERVED_METRICS. */
const METRIC_OF: Record<LimitName, keyof ParCheckpoint> = {
  ...(Object.fromEntries([...REACHED, ...EXCEEDED].map(([metric, limit]) => [limit, metric])) as Record<
    LimitName,
    keyof ParCheckpoint
  >),
  checkpoint_transcript_bytes: 'transcript_bytes',
};
/** The observed metrics of a decision, in the harness's order (`_observed_metrics`). */
const OBSERVED = [
  'cycle',
  'tool_calls',
  'elapsed_seconds',
  'transcript_bytes',
  'same_failure_retries',
  'no_evidence_cycles',
  'children_spawned',
  'active_children',
  'task_packet_tokens',
  'parent_summary_tokens',
  'memory_digest_tokens',
  'child_result_words',
  'last_checkpoint_transcript_bytes',
] as const satisfies readonly (keyof ParCheckpoint)[];
/** Metrics of the active context: in a v2 evaluation they may shrink below an override's observation. */
export const CONTEXT_METRICS = [
  'child_result_words',
  'memory_digest_tokens',
  'parent_summary_tokens',
  'task_packet_tokens',
  'transcript_bytes',
] as const;

/** A file that does not parse: the field is the file, the problem its first issue. */
export const issueError = (what: string, error: z.ZodError) => {
  const issue = firstIssue(error);
  return invalidInput(what, `${issue.path}: ${issue.message}`);
};

/**
 * Parses and checks a v1 policy: the public form, or the portable-harness form (normalized as the
 * harness does), plus the rules JSON Schema cannot express.
 */
export function validatePolicy(raw: unknown): ParPolicy {
  const parsed = ParPolicySchema.safeParse(normalizePortablePolicy(raw));
  if (!parsed.success) throw issueError('policy', parsed.error);
  const { limits } = parsed.data;
  if (limits.max_transcript_bytes < limits.checkpoint_transcript_bytes) {
    throw invalidInput('policy', 'limits.max_transcript_bytes must be at least limits.checkpoint_transcript_bytes');
  }
  if (limits.max_concurrency > limits.max_children_per_parent) {
    throw invalidInput('policy', 'limits.max_concurrency must be at most limits.max_children_per_parent');
  }
  return parsed.data;
}

/** Checks a v1 checkpoint's shape and the rules between its fields, as the harness's `validate_checkpoint`. */
export function checkCheckpoint(raw: unknown): ParCheckpoint {
  const parsed = ParCheckpointSchema.safeParse(raw);
  if (!parsed.success) throw issueError('checkpoint', parsed.error);
  const checkpoint = parsed.data;
  const overridden = new Set<string>();
  checkpoint.overrides.forEach((override, index) => {
    if (overridden.has(override.limit))
      throw invalidInput(`checkpoint: overrides.${index}`, `a second override of ${override.limit}`);
    overridden.add(override.limit);
  });
  const records = [...checkpoint.decisions, ...checkpoint.overrides];
  if (records.length > 0) {
    if (!checkpoint.pending_action_hash)
      throw invalidInput('checkpoint', 'pending_action_hash is required when decisions or overrides exist');
    if (records.some((record) => record.affected_action_hash !== checkpoint.pending_action_hash))
      throw invalidInput('checkpoint', 'a record does not concern the pending action (affected_action_hash)');
  }
  return checkpoint;
}

/** Verifies the signature of every decision and override (`_verify_authorizations`). */
export function verifyAuthorizations(checkpoint: ParCheckpoint, policy: ParPolicy, secrets: Record<string, string>) {
  checkpoint.decisions.forEach((decision, index) =>
    verifyHumanRecord(decision, policy, secrets, `checkpoint: decisions.${index}`),
  );
  checkpoint.overrides.forEach((override, index) =>
    verifyHumanRecord(override, policy, secrets, `checkpoint: overrides.${index}`),
  );
}

/** The metrics a decision reports, in the harness's order. */
export const observedMetrics = (checkpoint: ParCheckpoint): Record<(typeof OBSERVED)[number], number> =>
  Object.fromEntries(OBSERVED.map((metric) => [metric, Number(checkpoint[metric])])) as never;

/**
 * The limits after the checkpoint's signed overrides (`_effective_limits`): an override must have
 * been authorized before its limit was exhausted, may not claim more than is observed (in v2 the
 * active context may shrink), and only raises a limit.
 */
export function effectiveLimits(
  checkpoint: ParCheckpoint,
  policy: ParPolicy,
  options: { contextCanShrink?: boolean } = {},
): Record<LimitName, number> {
  const limits: Record<LimitName, number> = { ...policy.limits };
  const metrics = observedMetrics(checkpoint);
  checkpoint.overrides.forEach((override, index) => {
    const where = `checkpoint: overrides.${index}`;
    const metric = METRIC_OF[override.limit] as (typeof OBSERVED)[number];
    const limit = limits[override.limit];
    if (!(override.observed_value < limit))
      throw invalidInput(where, `observed_value must be below the policy's ${override.limit} (${limit})`);
    const shrinkable = options.contextCanShrink && (CONTEXT_METRICS as readonly string[]).includes(metric);
    if (override.observed_value > metrics[metric] && !shrinkable)
      throw invalidInput(where, `observed_value must not exceed the current ${metric}`);
    if (override.value < limit) throw invalidInput(where, `an override only raises a limit (value ≥ ${limit})`);
    limits[override.limit] = override.value;
  });
  return limits;
}

/** Parses and checks a checkpoint against its policy: shape, signatures, overrides. */
export function validateCheckpoint(raw: unknown, policy: ParPolicy, secrets: Record<string, string>): ParCheckpoint {
  const checkpoint = checkCheckpoint(raw);
  verifyAuthorizations(checkpoint, policy, secrets);
  effectiveLimits(checkpoint, policy);
  latestDecisions(checkpoint);
  return checkpoint;
}

/**
 * The latest decision of each gate, in the order gates first appear. Two decisions of one gate at
 * the same time are ambiguous only when they would both be the latest so far (as the harness reads them).
 */
export function latestDecisions(checkpoint: ParCheckpoint): Map<string, ParCheckpoint['decisions'][number]> {
  const latest = new Map<string, ParCheckpoint['decisions'][number]>();
  for (const decision of checkpoint.decisions) {
    const current = latest.get(decision.gate);
    const at = Date.parse(decision.timestamp);
    if (!current || at > Date.parse(current.timestamp)) latest.set(decision.gate, decision);
    else if (at === Date.parse(current.timestamp))
      throw invalidInput('checkpoint', `two decisions of gate ${decision.gate} at the same time`);
  }
  return latest;
}

/** The decision for a valid policy and checkpoint with these effective limits (pure). */
export function decide(
  policy: ParPolicy,
  checkpoint: ParCheckpoint,
  limits: Record<LimitName, number>,
  hash: string,
): PolicyDecision {
  const reasons: string[] = [];
  if (checkpoint.status !== 'running') reasons.push(`task_status:${checkpoint.status}`);
  for (const [gate, { decision }] of latestDecisions(checkpoint))
    if (decision !== 'approve') reasons.push(`human_gate:${gate}:${decision}`);
  for (const [metric, limit] of REACHED) {
    const observed = Number(checkpoint[metric]);
    if (observed >= limits[limit]) reasons.push(`limit_reached:${metric}=${observed}:${limit}=${limits[limit]}`);
  }
  for (const [metric, limit] of EXCEEDED) {
    const observed = Number(checkpoint[metric]);
    if (observed > limits[limit]) reasons.push(`limit_exceeded:${metric}=${observed}:${limit}=${limits[limit]}`);
  }
  let decision: PolicyDecision['decision'] = reasons.length > 0 ? 'stop' : 'continue';
  if (decision === 'continue') {
    const growth = checkpoint.transcript_bytes - checkpoint.last_checkpoint_transcript_bytes;
    if (growth >= limits.checkpoint_transcript_bytes) {
      decision = 'checkpoint';
      reasons.push(
        `checkpoint_required:transcript_growth=${growth}:checkpoint_transcript_bytes=${limits.checkpoint_transcript_bytes}`,
      );
    }
  }
  return {
    schema_version: 1,
    policy_id: policy.policy_id,
    policy_hash: hash,
    decision,
    spawn_allowed:
      decision === 'continue' &&
      checkpoint.children_spawned < limits.max_children_per_parent &&
      checkpoint.active_children < limits.max_concurrency,
    checkpoint_required: decision === 'checkpoint',
    reasons,
    effective_limits: Object.fromEntries(LIMIT_NAMES.map((name) => [name, limits[name]])),
    observed_metrics: observedMetrics(checkpoint),
  };
}

/** A v1 evaluation of raw documents: validate, verify, decide. Throws INVALID_INPUT naming the problem. */
export function evaluateV1(rawPolicy: unknown, rawCheckpoint: unknown, secrets: Record<string, string>) {
  const checkpoint = checkCheckpoint(rawCheckpoint);
  const policy = validatePolicy(rawPolicy);
  verifyAuthorizations(checkpoint, policy, secrets);
  return decide(policy, checkpoint, effectiveLimits(checkpoint, policy), documentHash(rawPolicy));
}

/** The decision a failure to read or validate the input gives: stop, with the reason. */
export function failClosed(policyId: string, message: string): PolicyDecision {
  return {
    schema_version: 1,
    policy_id: policyId.trim() || 'unreadable-policy',
    policy_hash: null,
    decision: 'stop',
    spawn_allowed: false,
    checkpoint_required: false,
    reasons: [`evaluation_error:${message}`],
    effective_limits: {},
    observed_metrics: {},
  };
}

/** SHA-256 of a document's canonical JSON: how a decision names its policy (of the file as written). */
export const documentHash = (document: unknown) => sha256(canonicalJson(document));
/** The hash a decision names its policy by. */
export const policyHash = documentHash;

/** Whether a policy or checkpoint document is a version-2 ("goal slice") one. */
export const isVersionTwo = (document: unknown) =>
  (document as { schema_version?: unknown } | null)?.schema_version === 2;
