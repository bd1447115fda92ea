import {
  GOAL_USAGE,
  ParCheckpointSchema,
  type GoalCheckpointInput,
  type GoalUsage,
  type ParCheckpoint,
  type ParCycleMetrics,
  type ParRoleUsage,
} from '@polish/protocol';
import { refreshTotals, validateGoalCheckpoint } from './goal-engine.js';

// The checkpoint of a PAR run, v1 or v2. The machine works on the v1 task checkpoint (the
// current slice); a v2 file also carries the goal around it (totals, slice history, usage,
// failures), kept here as the "goal envelope" and put back together when the file is written.

/** A task-checkpoint-2 without its task. */
export type GoalEnvelope = Omit<GoalCheckpointInput, 'task'>;

/** A PAR run's checkpoint: the task (slice) and, for v2 files, its goal. */
export interface ParState {
  checkpoint: ParCheckpoint;
  goal: GoalEnvelope | null;
}

/** The state of a validated checkpoint document (v1, or v2 with its task). */
export function parStateOf(document: unknown): ParState {
  if ((document as { schema_version?: unknown }).schema_version !== 2)
    return { checkpoint: ParCheckpointSchema.parse(document), goal: null };
  const { task, ...goal } = validateGoalCheckpoint(document);
  return { checkpoint: ParCheckpointSchema.parse(task), goal };
}

/** The checkpoint document of a state: the task, or the goal around it with its totals brought up to date. */
export function documentOf(state: ParState): ParCheckpoint | GoalCheckpointInput {
  return state.goal ? refreshTotals({ ...state.goal, task: state.checkpoint }) : state.checkpoint;
}

const plus = (a: number | null, b: number | null) => (a === null || b === null ? null : a + b);

/** Two usages of one role added together (unknown stays unknown). */
export function mergeRoleUsage(known: ParRoleUsage | undefined, more: ParRoleUsage): ParRoleUsage {
  if (!known) return more;
  return {
    calls: known.calls + more.calls,
    input_tokens: plus(known.input_tokens, more.input_tokens),
    cached_input_tokens: plus(known.cached_input_tokens, more.cached_input_tokens),
    output_tokens: plus(known.output_tokens, more.output_tokens),
    cost_microusd: plus(known.cost_microusd, more.cost_microusd),
  };
}

/** A role's usage with one more call added. */
export const addRoleUsage = (known: ParRoleUsage | undefined, more: Omit<ParRoleUsage, 'calls'>) =>
  mergeRoleUsage(known, { calls: 1, ...more });

/** A cycle's usage, all roles together, as goal usage. */
export function cycleUsage(metrics: ParCycleMetrics): GoalUsage {
  const roles = Object.values(metrics.by_role);
  return Object.fromEntries(
    GOAL_USAGE.map((key) => [key, roles.reduce<number | null>((sum, role) => plus(sum, role[key]), 0)]),
  ) as GoalUsage;
}

/** The goal with a cycle's usage added to its slice usage. */
export const withUsage = (goal: GoalEnvelope, usage: GoalUsage): GoalEnvelope => ({
  ...goal,
  usage: Object.fromEntries(GOAL_USAGE.map((key) => [key, plus(goal.usage[key], usage[key])])) as GoalUsage,
});
