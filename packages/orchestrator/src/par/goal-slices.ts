import { GOAL_COUNTERS, GOAL_TOTALS, GOAL_USAGE, invalidInput, type GoalCheckpointInput } from '@polish/protocol';
import { CONTEXT_METRICS, checkCheckpoint, documentHash, evaluateV1 } from './policy-engine.js';
import { evaluateGoal, refreshTotals, validateGoalCheckpoint, validateGoalPolicy } from './goal-engine.js';

// Goal-slice transitions, as the harness's agent_collab_harness/goals.py (0.5.1, commit 4f45b97):
// a new goal from a v1 checkpoint, advancing an eligible slice (idempotent by request id, each
// slice a hash-chained receipt), and migrating a v1 checkpoint whose only blocker is a slice or
// context limit.

const refused = (problem: string) => invalidInput('checkpoint', problem);
const nonBlank = (value: string, what: string) => {
  if (!/\S/.test(value)) throw invalidInput(what, 'must not be blank');
};

/**
 * A goal checkpoint around a v1 checkpoint (`new_goal`): slice 0, a zero baseline, and usage as
 * known: null (unknown, never 0) unless the caller measured it from the start.
 */
export function newGoal(
  task: unknown,
  options: { goalId: string; nextStep: string; usageKnown?: boolean },
): GoalCheckpointInput {
  if ((task as { schema_version?: unknown } | null)?.schema_version !== 1)
    throw refused('a new goal starts from a version-1 checkpoint');
  const checked = checkCheckpoint(task);
  const raw = structuredClone(task) as GoalCheckpointInput['task'];
  const state: GoalCheckpointInput = {
    schema_version: 2,
    task_id: checked.task_id,
    goal_id: options.goalId,
    slice_id: 0,
    task: raw,
    totals: zero(),
    baseline: zero(),
    usage: Object.fromEntries(GOAL_USAGE.map((key) => [key, options.usageKnown ? 0 : null])) as never,
    accepted_evidence: [],
    history: [],
    next_step: options.nextStep,
    action_kind: 'execute',
    review_required: false,
    requires_human: false,
    source_sha256: documentHash(raw),
    failure_history: [],
    active_failure: null,
  };
  return validateGoalCheckpoint(refreshTotals(state));
}

const zero = () => Object.fromEntries(GOAL_TOTALS.map((key) => [key, 0])) as GoalCheckpointInput['totals'];

/**
 * Advances an eligible slice (`advance_checkpoint`): a request id already in the history returns
 * the state unchanged; otherwise the decision must be a slice checkpoint that may auto-continue.
 * The slice's totals become the baseline, its evidence accepted, its counters and usage zero.
 */
export function advanceCheckpoint(
  raw: unknown,
  policy: unknown,
  requestId: string,
  secrets: Record<string, string>,
): GoalCheckpointInput {
  const state = validateGoalCheckpoint(raw);
  nonBlank(requestId, 'request-id');
  if (state.history.some((event) => event.request_id === requestId)) return state;
  const decision = evaluateGoal(state, policy, secrets);
  if (decision.decision !== 'checkpoint' || !decision.auto_continue)
    throw refused(`advance not authorized by slice decision (${decision.decision}: ${decision.reasons.join(', ')})`);
  const body = {
    slice_id: state.slice_id,
    request_id: requestId,
    previous_sha256: state.history.at(-1)?.sha256 ?? null,
    totals: structuredClone(state.totals),
    task_sha256: documentHash(state.task),
    evidence_refs: [...state.task.evidence_refs],
  };
  // Signed overrides bind the observations they were made on: they are not carried through a reset.
  if (state.task.overrides.length > 0) throw refused('signed slice overrides require explicit migration');
  const task = { ...state.task, ...Object.fromEntries(GOAL_COUNTERS.map((key) => [key, 0])) };
  return validateGoalCheckpoint(
    refreshTotals({
      ...state,
      history: [...state.history, { ...body, sha256: documentHash(body) }],
      slice_id: state.slice_id + 1,
      baseline: structuredClone(state.totals),
      accepted_evidence: [...new Set([...state.accepted_evidence, ...state.task.evidence_refs])].sort(),
      task,
      usage: Object.fromEntries(GOAL_USAGE.map((key) => [key, 0])) as GoalCheckpointInput['usage'],
    }),
  );
}

/** Reasons that may have exhausted a v1 budget a goal slice would have renewed (context limits too, from 0.5.1). */
const RENEWABLE = [
  ...CONTEXT_METRICS.map((metric) => `limit_reached:${metric}=`),
  'task_status:budget_exhausted',
  'limit_reached:cycle=',
  'limit_reached:tool_calls=',
  'limit_reached:elapsed_seconds=',
  'limit_exceeded:children_spawned=',
];

/**
 * A goal checkpoint from a v1 one (`migrate_goal`), keeping every observation. Only a
 * `budget_exhausted` task whose recorded stop reason is one of its slice or context limits, and
 * nothing else stood in the way, becomes `running`; `source_sha256` binds the original.
 */
export function migrateGoal(
  task: unknown,
  policy: unknown,
  metadata: { goalId: string; nextStep: string },
  secrets: Record<string, string>,
): GoalCheckpointInput {
  const goalPolicy = validateGoalPolicy(policy);
  const old = evaluateV1(goalPolicy.base_policy, task, secrets);
  const checked = checkCheckpoint(task);
  let source = structuredClone(task) as GoalCheckpointInput['task'];
  if (checked.status === 'budget_exhausted') {
    const metricReasons = old.reasons.filter((reason) => reason !== 'task_status:budget_exhausted');
    if (
      metricReasons.length > 0 &&
      old.reasons.every((reason) => RENEWABLE.some((prefix) => reason.startsWith(prefix))) &&
      checked.stop_reason !== null &&
      metricReasons.includes(checked.stop_reason)
    )
      source = { ...source, status: 'running', stop_reason: null };
  }
  const state = newGoal(source, metadata);
  return validateGoalCheckpoint({ ...state, source_sha256: documentHash(task) });
}
