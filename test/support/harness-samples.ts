import { createHash, createHmac } from 'node:crypto';
import { canonicalJson } from '@polish/orchestrator';

// The agent-collab harness's own test samples (tests/harness_samples.py at commit ca20117 of
// WenyuChiou/agent-collab-skills), written again here so that the table tests feed polish the
// very documents the harness's tests feed it.

export const ACTION_HASH = 'a'.repeat(64);
export const AUTH_KEYS = { owner: 'test-owner-secret' };
const AUTH_KEY_HASHES = { owner: createHash('sha256').update(AUTH_KEYS.owner).digest('hex') };

/** `authorized(record)`: the record signed with the owner's key. */
export function authorized<T extends Record<string, unknown>>(record: T) {
  const signature = createHmac('sha256', AUTH_KEYS.owner).update(canonicalJson(record), 'utf8').digest('hex');
  return { ...record, authorization: { scheme: 'hmac-sha256', key_id: 'owner', signature } };
}

/** The limits the policy and the portable policy name alike, with the same values in both samples. */
const LIMITS_NAMED_ALIKE = {
  checkpoint_transcript_bytes: 100,
  max_transcript_bytes: 200,
  max_same_failure_retries: 2,
  max_no_evidence_cycles: 2,
  max_children_per_parent: 4,
  max_concurrency: 2,
};

/** `policy(**limit_overrides)`. */
export function policy(limits: Record<string, number> = {}) {
  return {
    schema_version: 1,
    policy_id: 'test-policy',
    limits: {
      max_cycles: 3,
      max_tool_calls: 10,
      max_elapsed_seconds: 60,
      ...LIMITS_NAMED_ALIKE,
      max_task_packet_tokens: 500,
      max_parent_summary_tokens: 100,
      max_memory_digest_tokens: 100,
      max_child_result_words: 50,
      ...limits,
    },
    human_authorization: { key_hashes: AUTH_KEY_HASHES },
  };
}

/** `portable_policy()`. */
export const portablePolicy = () => ({
  version: 1,
  limits: {
    max_plan_act_reflect_cycles: 3,
    max_tool_calls: 10,
    max_wall_time_seconds: 60,
    ...LIMITS_NAMED_ALIKE,
  },
  context: { task_packet_tokens: 500, parent_summary_tokens: 100, memory_digest_tokens: 100, child_result_words: 50 },
  terminal_states: ['completed', 'blocked', 'budget_exhausted', 'error', 'cancelled'],
});

/** `checkpoint(**overrides)`: pending_action_hash follows the first record, as in the harness. */
export function checkpoint(overrides: Record<string, unknown> = {}) {
  const result: Record<string, unknown> = {
    schema_version: 1,
    task_id: 'task-1',
    parent_id: null,
    status: 'running',
    cycle: 0,
    tool_calls: 0,
    elapsed_seconds: 0,
    transcript_bytes: 0,
    same_failure_retries: 0,
    no_evidence_cycles: 0,
    active_children: 0,
    children_spawned: 0,
    last_checkpoint_transcript_bytes: 0,
    task_packet_tokens: 0,
    parent_summary_tokens: 0,
    memory_digest_tokens: 0,
    child_result_words: 0,
    evidence_refs: [],
    decisions: [],
    overrides: [],
    stop_reason: null,
    updated_at: '2026-08-31T00:00:00Z',
    ...overrides,
  };
  const records = [...(result.decisions as { affected_action_hash: string }[]), ...(result.overrides as never[])];
  if (records.length > 0 && !('pending_action_hash' in overrides))
    result.pending_action_hash = (records[0] as { affected_action_hash: string }).affected_action_hash;
  return result;
}

/** `goal_policy(base, goal_limits=…)` (goals.py): the v2 policy the harness builds from a v1 one. */
export const goalPolicy = (base = policy(), goalLimits: Record<string, number> = {}) => ({
  schema_version: 2,
  policy_id: `${base.policy_id}-goals`,
  base_policy: base,
  goal_limits: goalLimits,
  reviewer_reserve: 1,
});
