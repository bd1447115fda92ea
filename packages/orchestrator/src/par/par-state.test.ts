import { describe, expect, it } from 'vitest';
import { newGoal } from './goal-slices.js';
import { freshCheckpoint } from './par-task.js';
import { addRoleUsage, cycleUsage, documentOf, parStateOf, withUsage } from './par-state.js';
import type { ParCycleMetrics } from '@polish/protocol';

// Unknown usage stays unknown (null), never 0: one call without a price makes every total it
// is part of unknown, through the cycle, the goal's slice usage and its totals.

const fresh = freshCheckpoint('t', new Date('2026-11-30T00:00:00Z'));
const priced = { input_tokens: 100, cached_input_tokens: 10, output_tokens: 20, cost_microusd: 300 };
const metrics = (byRole: ParCycleMetrics['by_role']): ParCycleMetrics => ({
  by_role: byRole,
  tool_calls: 2,
  children_spawned: 0,
  elapsed_seconds: 1,
  transcript_bytes: 10,
  task_packet_tokens: 0,
  parent_summary_tokens: 0,
  memory_digest_tokens: 0,
  child_result_words: 0,
});

describe('PAR usage', () => {
  it('adds calls of a role, and a call without a price makes its cost unknown', () => {
    const twice = addRoleUsage(addRoleUsage(undefined, priced), priced);
    expect(twice).toEqual({
      calls: 2,
      input_tokens: 200,
      cached_input_tokens: 20,
      output_tokens: 40,
      cost_microusd: 600,
    });
    expect(addRoleUsage(twice, { ...priced, cost_microusd: null })).toMatchObject({
      calls: 3,
      input_tokens: 300,
      cost_microusd: null,
    });
  });

  it("keeps an unknown cost unknown in the goal's usage and totals, and known tokens counted", () => {
    const state = parStateOf(newGoal(fresh, { goalId: 'g', nextStep: 'go', usageKnown: true }));
    const cycle = cycleUsage(
      metrics({
        'par.plan': addRoleUsage(undefined, priced),
        'par.act': addRoleUsage(undefined, { ...priced, cost_microusd: null }),
      }),
    );
    expect(cycle).toEqual({ input_tokens: 200, cached_input_tokens: 20, output_tokens: 40, cost_microusd: null });
    const goal = withUsage(state.goal!, cycle);
    const document = documentOf({ checkpoint: state.checkpoint, goal: withUsage(goal, cycle) }) as {
      totals: Record<string, unknown>;
    };
    expect(document.totals).toMatchObject({ input_tokens: 400, output_tokens: 80, cost_microusd: null });
  });

  it('a goal migrated without measurements keeps unknown usage unknown after measured cycles', () => {
    const state = parStateOf(newGoal(fresh, { goalId: 'g', nextStep: 'go' }));
    const goal = withUsage(state.goal!, cycleUsage(metrics({ 'par.plan': addRoleUsage(undefined, priced) })));
    expect(goal.usage).toEqual({
      input_tokens: null,
      cached_input_tokens: null,
      output_tokens: null,
      cost_microusd: null,
    });
  });
});
