import { invalidInput } from '@polish/protocol';

// The portable-harness form of agent-policy-1 (`version`, `limits`, `context`,
// `terminal_states`), which the harness normalizes in memory into the public form
// (agent_collab_harness/validation.py `_normalize_portable_policy`). Its trust root is empty:
// it can authorize no human record.

const PORTABLE_KEYS = ['context', 'limits', 'terminal_states', 'version'];
const TERMINAL_STATES = ['completed', 'blocked', 'budget_exhausted', 'error', 'cancelled'];
/** Public limit ← portable limit (from `limits`, or from `context`). */
const FROM_LIMITS = {
  max_cycles: 'max_plan_act_reflect_cycles',
  max_tool_calls: 'max_tool_calls',
  max_elapsed_seconds: 'max_wall_time_seconds',
  checkpoint_transcript_bytes: 'checkpoint_transcript_bytes',
  max_transcript_bytes: 'max_transcript_bytes',
  max_same_failure_retries: 'max_same_failure_retries',
  max_no_evidence_cycles: 'max_no_evidence_cycles',
  max_children_per_parent: 'max_children_per_parent',
  max_concurrency: 'max_concurrency',
} as const;
const FROM_CONTEXT = {
  max_task_packet_tokens: 'task_packet_tokens',
  max_parent_summary_tokens: 'parent_summary_tokens',
  max_memory_digest_tokens: 'memory_digest_tokens',
  max_child_result_words: 'child_result_words',
} as const;

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const sameKeys = (value: Record<string, unknown>, keys: readonly string[]) =>
  JSON.stringify(Object.keys(value).sort()) === JSON.stringify([...keys].sort());
const isCount = (value: unknown) => Number.isInteger(value) && (value as number) >= 0;

/**
 * A portable-harness policy as the public v1 form it stands for (policy id
 * `portable-harness-agent-budget-v1`, no keys); any other document is returned as it is.
 */
export function normalizePortablePolicy(document: unknown): unknown {
  if (!isObject(document) || !sameKeys(document, PORTABLE_KEYS)) return document;
  const { version, limits, context, terminal_states: terminal } = document;
  if (version !== 1) throw invalidInput('policy', 'portable policy.version must be 1');
  if (!isObject(limits) || !sameKeys(limits, Object.values(FROM_LIMITS)))
    throw invalidInput('policy', `portable policy.limits must have exactly ${Object.values(FROM_LIMITS).join(', ')}`);
  if (!isObject(context) || !sameKeys(context, Object.values(FROM_CONTEXT)))
    throw invalidInput('policy', `portable policy.context must have exactly ${Object.values(FROM_CONTEXT).join(', ')}`);
  for (const [key, value] of [...Object.entries(limits), ...Object.entries(context)])
    if (!isCount(value)) throw invalidInput('policy', `portable policy ${key} must be a non-negative integer`);
  if (JSON.stringify(terminal) !== JSON.stringify(TERMINAL_STATES))
    throw invalidInput('policy', 'portable policy.terminal_states must match the supported canonical v1 set');
  return {
    schema_version: 1,
    policy_id: 'portable-harness-agent-budget-v1',
    limits: {
      ...Object.fromEntries(Object.entries(FROM_LIMITS).map(([name, from]) => [name, limits[from]])),
      ...Object.fromEntries(Object.entries(FROM_CONTEXT).map(([name, from]) => [name, context[from]])),
    },
    human_authorization: { key_hashes: {} },
  };
}
