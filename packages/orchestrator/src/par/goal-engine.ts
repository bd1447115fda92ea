import {
  GOAL_COUNTERS,
  GOAL_TOTALS,
  GoalCheckpointSchema,
  GoalPolicySchema,
  invalidInput,
  type GoalCheckpointInput,
  type GoalDecision,
  type GoalPolicy,
  type GoalTotals,
  type ParPolicy,
} from '@polish/protocol';
import {
  CONTEXT_METRICS,
  checkCheckpoint,
  decide,
  documentHash,
  effectiveLimits,
  isVersionTwo,
  issueError,
  validatePolicy,
  verifyAuthorizations,
} from './policy-engine.js';

// Version-2 ("goal slice") policies and checkpoints, rule for rule as the harness's
// agent_collab_harness/goals.py (0.5.1, commit 4f45b97): validation, and `evaluate_goal`. Slice
// counters (cycle, tool calls, time, children) are checkpoint boundaries, not goal caps; goal
// limits and human gates stop the goal; repeated failures and context limits stop the action.

const refused = (problem: string) => invalidInput('checkpoint', problem);
const clone = <T>(value: T): T => structuredClone(value);

/** Parses and checks a goal policy: its v1 base, its goal limits, and a reserve that leaves an executor slot. */
export function validateGoalPolicy(raw: unknown): GoalPolicy {
  const parsed = GoalPolicySchema.safeParse(raw);
  if (!parsed.success) throw issueError('policy', parsed.error);
  validatePolicy(parsed.data.base_policy);
  if (parsed.data.reviewer_reserve >= parsed.data.base_policy.limits.max_children_per_parent)
    throw invalidInput('policy', 'reviewer_reserve must leave an executor slot (below max_children_per_parent)');
  // The document itself: goal limits are weighed in the order they were written, as the harness does.
  return clone(raw) as GoalPolicy;
}

/** The policy that holds the human keys: a v1 policy, or the base of a v2 one. Throws INVALID_INPUT when it is invalid. */
export function trustPolicy(raw: unknown): ParPolicy {
  return isVersionTwo(raw) ? validateGoalPolicy(raw).base_policy : validatePolicy(raw);
}

/** The slice's own counters and usage: what `totals` adds to `baseline`. */
const sliceMetrics = (state: GoalCheckpointInput): GoalTotals => ({
  ...(Object.fromEntries(GOAL_COUNTERS.map((key) => [key, state.task[key] ?? 0])) as Pick<
    GoalTotals,
    (typeof GOAL_COUNTERS)[number]
  >),
  ...state.usage,
});

/** The totals for the slice's counters: baseline + slice, unknown (null) when either is. Never resets the baseline. */
export function refreshTotals<T extends GoalCheckpointInput>(state: T): T {
  const slice = sliceMetrics(state);
  const totals = Object.fromEntries(
    GOAL_TOTALS.map((key) => {
      const before = state.baseline[key];
      const now = slice[key];
      return [key, now === null || before === null ? null : now + before];
    }),
  ) as GoalTotals;
  return { ...clone(state), totals };
}

const canonicalHash = documentHash;
const historyPayload = ({ sha256: _sha256, ...payload }: GoalCheckpointInput['history'][number]) => payload;
/** A failure record's id: hash of identity, inputs and error class. */
export const failureId = (failure: { identity: string; input_sha256: string; error_class: string }) =>
  canonicalHash([failure.identity, failure.input_sha256, failure.error_class]);

/** Parses and checks a goal checkpoint: its v1 task, totals = baseline + slice, the history chain, failures. */
export function validateGoalCheckpoint(raw: unknown): GoalCheckpointInput {
  const parsed = GoalCheckpointSchema.safeParse(raw);
  if (!parsed.success) throw issueError('checkpoint', parsed.error);
  const state = clone(raw) as GoalCheckpointInput;
  checkCheckpoint(state.task);
  if (state.task_id !== state.task.task_id) throw refused('task_id does not match task.task_id');
  if (JSON.stringify(orderedTotals(refreshTotals(state).totals)) !== JSON.stringify(orderedTotals(state.totals)))
    throw refused('totals must equal baseline plus slice');
  const requests = new Set<string>();
  state.history.forEach((event, index) => {
    const previous = index === 0 ? null : (state.history[index - 1]?.sha256 ?? null);
    if (event.slice_id !== index || event.previous_sha256 !== previous)
      throw refused('history sequence or chain mismatch');
    if (requests.has(event.request_id)) throw refused('duplicate advance request');
    requests.add(event.request_id);
    if (event.sha256 !== canonicalHash(historyPayload(event))) throw refused('history hash mismatch');
    const prior = state.history[index - 1]?.totals;
    if (prior && GOAL_TOTALS.some((key) => regressed(prior[key], event.totals[key])))
      throw refused('history totals regressed');
  });
  if (state.history.length !== state.slice_id) throw refused('slice id does not match history');
  const baseline = state.history.at(-1)?.totals ?? zeroTotals();
  if (JSON.stringify(orderedTotals(state.baseline)) !== JSON.stringify(orderedTotals(baseline)))
    throw refused('baseline differs from history');
  const accepted = new Set(state.history.flatMap((event) => event.evidence_refs));
  if (accepted.size !== state.accepted_evidence.length || state.accepted_evidence.some((ref) => !accepted.has(ref)))
    throw refused('accepted evidence differs from transition receipts');
  const ids = new Set<string>();
  for (const failure of state.failure_history) {
    const id = failureId(failure);
    if (ids.has(id)) throw refused('duplicate failure identity');
    ids.add(id);
    if (id === state.active_failure && state.task.same_failure_retries < failure.attempts - 1)
      throw refused('retry counter regressed from failure history');
  }
  if (state.active_failure !== null && !ids.has(state.active_failure))
    throw refused('active failure missing from history');
  return state;
}

const regressed = (prior: number | null, now: number | null) =>
  (prior === null && now !== null) || (prior !== null && now !== null && now < prior);
const zeroTotals = (): GoalTotals => Object.fromEntries(GOAL_TOTALS.map((key) => [key, 0])) as GoalTotals;
const orderedTotals = (totals: GoalTotals) => GOAL_TOTALS.map((key) => totals[key]);

/** Reasons about the active context (transcript, packets, summaries, digests, child results). */
const CONTEXT_PREFIXES = CONTEXT_METRICS.map((metric) => `limit_reached:${metric}=`);
const isContextReason = (reason: string) => CONTEXT_PREFIXES.some((prefix) => reason.startsWith(prefix));
const ACTION_PREFIXES = [
  'limit_reached:same_failure_retries=',
  'limit_reached:no_evidence_cycles=',
  'limit_exceeded:active_children=',
];
const isActionReason = (reason: string) =>
  reason === 'task_status:error' ||
  reason === 'task_status:timed_out' ||
  isContextReason(reason) ||
  ACTION_PREFIXES.some((prefix) => reason.startsWith(prefix));
/** The slice quotas and the limit each is held against. */
const BOUNDARIES = [
  ['cycle', 'max_cycles'],
  ['tool_calls', 'max_tool_calls'],
  ['elapsed_seconds', 'max_elapsed_seconds'],
  ['children_spawned', 'max_children_per_parent'],
] as const;

/**
 * The decision for a goal checkpoint (`evaluate_goal`): the slice's task weighed by the v1 rules
 * with its slice counters cleared, then goal limits, human requirements, completion, slice
 * boundaries (auto-continue with new evidence, a next step and no active children), concurrency
 * and the reviewer's reserved child slot. Throws INVALID_INPUT on invalid input.
 */
export function evaluateGoal(rawState: unknown, rawPolicy: unknown, secrets: Record<string, string>): GoalDecision {
  const state = validateGoalCheckpoint(rawState);
  const policy = validateGoalPolicy(rawPolicy);
  const original = checkCheckpoint(state.task);
  const task = { ...original, cycle: 0, tool_calls: 0, elapsed_seconds: 0, children_spawned: 0 };
  if (state.action_kind === 'diagnose' || state.action_kind === 'wait') {
    task.same_failure_retries = 0;
    task.no_evidence_cycles = 0;
    if (task.status === 'error' || task.status === 'timed_out') task.status = 'running';
  }
  // Signatures keep their original payload; the active context may shrink below an override's observation.
  verifyAuthorizations(original, policy.base_policy, secrets);
  const limit = effectiveLimits(original, policy.base_policy, { contextCanShrink: true });
  const base = { ...policy.base_policy, limits: limit };
  const old = decide(base, { ...task, overrides: [] }, limit, documentHash(base));
  const reasons = [...old.reasons];
  let decision = old.decision;
  let scope: GoalDecision['scope'] = decision === 'stop' ? 'goal' : 'action';
  let auto = false;
  const contextReasons = reasons.filter(isContextReason);
  const contextPending = contextReasons.length > 0 || old.decision === 'checkpoint';
  if (reasons.length > 0 && reasons.every(isActionReason)) scope = 'action';
  if (contextReasons.length > 0 && contextReasons.length === reasons.length) decision = 'checkpoint';
  if (contextPending) reasons.push('context_compaction_required');
  const stopGoal = (reason: string) => {
    decision = 'stop';
    scope = 'goal';
    reasons.push(reason);
  };
  if (state.requires_human) stopGoal('human_authorization_required');
  for (const [key, maximum] of Object.entries(policy.goal_limits)) {
    const observed = state.totals[key as keyof GoalTotals];
    if (observed === null || observed >= (maximum as number)) stopGoal(`goal_limit:${key}:unknown_or_reached`);
  }
  if (original.status === 'completed' && (original.evidence_refs.length === 0 || state.next_step))
    stopGoal('completion_missing_acceptance_or_work_remains');
  const reached = BOUNDARIES.filter(([key, cap]) => original[key] >= limit[cap]).map(([key]) => key);
  if (decision !== 'stop' && reached.length > 0 && !contextPending) {
    decision = 'checkpoint';
    scope = 'slice';
    reasons.push(...reached.map((key) => `slice_limit:${key}`));
    const accepted = new Set(state.accepted_evidence);
    const fresh = original.evidence_refs.some((ref) => !accepted.has(ref));
    auto = fresh && state.next_step !== '' && original.active_children === 0;
    if (!auto) reasons.push('slice_needs_evidence_next_step_or_children_completion');
  }
  if (original.active_children > limit.max_concurrency) {
    scope = decision === 'stop' && scope === 'goal' ? 'goal' : 'action';
    decision = 'stop';
    auto = false;
    reasons.push('concurrency_exceeded');
  }
  const reserved = state.review_required && state.action_kind !== 'review' ? policy.reviewer_reserve : 0;
  const spawn =
    decision === 'continue' &&
    old.spawn_allowed &&
    original.children_spawned < limit.max_children_per_parent - reserved &&
    state.action_kind !== 'wait';
  return {
    schema_version: 2,
    policy_id: policy.policy_id,
    policy_hash: documentHash(policy),
    decision,
    spawn_allowed: spawn,
    checkpoint_required: decision === 'checkpoint',
    reasons,
    effective_limits: limit,
    observed_metrics: state.totals as GoalTotals,
    scope,
    auto_continue: auto,
  };
}
