import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import type { ParCycleMetrics } from '@polish/protocol';
import { createHash } from 'node:crypto';
import { canonicalJson } from '@polish/orchestrator';
import { EXAMPLE, REVIEWER_FAILS, resume, run, workspace } from './support/par-workspace.js';
import { schemaErrors } from './support/agent-collab-schemas.js';

// Issue 18: every PAR cycle measures what it used (tokens and cost per role, tasks, child tasks,
// time, bytes, context sizes) and feeds the checkpoint, so each limit of a policy can trigger. One
// real run per limit kind (embedded nats-server, worker processes, the scripted model as agent),
// each stopping or checkpointing with the reason the harness gives
// (src/agent_collab_harness/policy.py and goals.py @4f45b97 of WenyuChiou/agent-collab-skills).

/** A v2 goal policy around the workspace's v1 policy. */
const goals =
  (goalLimits: Record<string, number> = {}) =>
  (base: Record<string, unknown>) => ({
    schema_version: 2,
    policy_id: 'par-example-goals',
    base_policy: base,
    goal_limits: goalLimits,
    reviewer_reserve: 1,
  });
const metricsOf = (ws: ReturnType<typeof workspace>) =>
  ws.task().cycles.map((cycle) => cycle.metrics as ParCycleMetrics);
const outcome = (result: { code: number | null; stdout: string; stderr: string }) => {
  expect(result.stdout, result.stderr).not.toBe('');
  return JSON.parse(result.stdout) as { final_status: string; reason: string; decision: { reasons: string[] } };
};

describe('PAR goal slices: waiting on a service', () => {
  it('an infrastructure error makes the goal wait, records no failed retry, and resume tries the action again', async () => {
    // The reviewer has no answer for this task: the par.review worker fails every time.
    const ws = workspace({
      policy: goals(),
      script: REVIEWER_FAILS,
    });
    const first = await run(ws, [], ['--critique', 'review']);
    expect(first.code, first.stderr).toBe(7);
    const waiting = ws.document() as {
      action_kind: string;
      failure_history: unknown[];
      task: { status: string; same_failure_retries: number };
    };
    expect(waiting).toMatchObject({
      action_kind: 'wait',
      failure_history: [],
      task: { status: 'error', same_failure_retries: 0 },
    });
    const again = await resume(ws);
    expect(again.code, again.stderr).toBe(7);
    expect(ws.task().cycles.map((cycle) => cycle.verdict)).toEqual(['error', 'error']);
    expect(ws.document()).toMatchObject({
      action_kind: 'wait',
      failure_history: [],
      task: { same_failure_retries: 0 },
    });
  });
});

describe('PAR limits, one run per kind', () => {
  it('tool calls: a cycle dispatches plan, act and the command (3), and max_tool_calls 3 stops it', async () => {
    const ws = workspace({ limits: { max_tool_calls: 3 } });
    const result = await run(ws);
    expect(result.code, result.stderr).toBe(4);
    expect(outcome(result).decision.reasons).toEqual(['limit_reached:tool_calls=3:max_tool_calls=3']);
    expect(ws.checkpoint()).toMatchObject({ status: 'budget_exhausted', tool_calls: 3, children_spawned: 1, cycle: 1 });
    const [metrics] = metricsOf(ws);
    expect(metrics).toMatchObject({ tool_calls: 3, children_spawned: 1 });
    expect(Object.keys(metrics?.by_role ?? {}).sort()).toEqual(['par.act', 'par.command', 'par.plan']);
    // A command runs no model: its usage is a known zero, not unknown.
    expect(metrics?.by_role['par.command']).toEqual({
      calls: 1,
      input_tokens: 0,
      cached_input_tokens: 0,
      output_tokens: 0,
      cost_microusd: 0,
    });
  });

  it('children (v1): the command critique is a child task; with max_children_per_parent 1 no second one is spawned', async () => {
    const ws = workspace({ limits: { max_children_per_parent: 1, max_concurrency: 1 } });
    const result = await run(ws);
    expect(result.code, result.stderr).toBe(4);
    const { reason } = outcome(result);
    // The policy says continue but allows no spawn (policy.py: spawn_allowed needs children_spawned < the limit).
    expect(reason).toBe('spawn_not_allowed:children_spawned=1:max_children_per_parent=1');
    expect(ws.checkpoint()).toMatchObject({ status: 'budget_exhausted', children_spawned: 1, stop_reason: reason });
    expect(ws.task().cycles).toHaveLength(1);
  });

  it('children (v2): goal_limits.children_spawned stops the goal', async () => {
    const ws = workspace({ policy: goals({ children_spawned: 1 }) });
    const result = await run(ws);
    expect(result.code, result.stderr).toBe(4);
    expect(outcome(result).decision.reasons).toEqual(['goal_limit:children_spawned:unknown_or_reached']);
    const document = ws.document();
    expect(schemaErrors('task-checkpoint-2', document)).toEqual([]);
    expect(document).toMatchObject({ totals: { children_spawned: 1 }, task: { status: 'budget_exhausted' } });
  });

  it('time: a plan that takes over a second stops at max_elapsed_seconds 1', async () => {
    const script = parse(readFileSync(`${EXAMPLE}script.yaml`, 'utf8'));
    for (const rule of script['par.plan']) rule.delay_ms = 1100;
    const ws = workspace({ limits: { max_elapsed_seconds: 1 }, script });
    const result = await run(ws);
    expect(result.code, result.stderr).toBe(4);
    const [reason] = outcome(result).decision.reasons;
    expect(reason).toMatch(/^limit_reached:elapsed_seconds=\d+\.\d+:max_elapsed_seconds=1$/);
    expect(metricsOf(ws)[0]?.elapsed_seconds).toBeGreaterThanOrEqual(1.1);
  });

  it('tokens (v2): the input tokens every role used are totalled, and goal_limits.input_tokens stops the goal', async () => {
    const ws = workspace({ policy: goals({ input_tokens: 100 }) });
    const result = await run(ws);
    expect(result.code, result.stderr).toBe(4);
    expect(outcome(result).decision.reasons).toEqual(['goal_limit:input_tokens:unknown_or_reached']);
    const [metrics] = metricsOf(ws);
    const used = Object.values(metrics?.by_role ?? {}).reduce((sum, role) => sum + (role.input_tokens ?? 0), 0);
    expect(used).toBeGreaterThan(100);
    const document = ws.document() as { totals: Record<string, number>; usage: Record<string, number> };
    expect([document.totals.input_tokens, document.usage.input_tokens]).toEqual([used, used]);
    expect(schemaErrors('task-checkpoint-2', document)).toEqual([]);
  });

  it('tokens (v1): the task packet sent to the agent is measured, and max_task_packet_tokens stops the run', async () => {
    const ws = workspace({ limits: { max_task_packet_tokens: 50 } });
    const result = await run(ws);
    expect(result.code, result.stderr).toBe(4);
    const [reason] = outcome(result).decision.reasons;
    const packet = metricsOf(ws)[0]?.task_packet_tokens ?? 0;
    expect(packet).toBeGreaterThan(50);
    expect(reason).toBe(`limit_reached:task_packet_tokens=${packet}:max_task_packet_tokens=50`);
  });

  it('cost (v2): each call is priced, and goal_limits.cost_microusd stops the goal', async () => {
    const ws = workspace({ policy: goals({ cost_microusd: 1000 }) });
    const config = join(ws.directory, '..', `${ws.directory.split('/').at(-1)}-config.json`);
    // US dollars per million tokens: a token then costs 2 (input) or 3 (output) micro-dollars.
    writeFileSync(config, JSON.stringify({ prices: { 'scripted:*': { input: 2, output: 3 } } }));
    const result = await run(ws, ['--config', config]);
    expect(result.code, result.stderr).toBe(4);
    expect(outcome(result).decision.reasons).toEqual(['goal_limit:cost_microusd:unknown_or_reached']);
    const roles = Object.values(metricsOf(ws)[0]?.by_role ?? {});
    const expected = roles.reduce((sum, role) => sum + 2 * (role.input_tokens ?? 0) + 3 * (role.output_tokens ?? 0), 0);
    expect((ws.document() as { totals: { cost_microusd: number } }).totals.cost_microusd).toBe(expected);
    expect(roles.map((role) => role.cost_microusd)).toEqual(
      roles.map((role) => 2 * (role.input_tokens ?? 0) + 3 * (role.output_tokens ?? 0)),
    );
  });

  it('a v2 slice quota is a checkpoint, not a cap: the slice advances itself and the goal goes on to PASS', async () => {
    const ws = workspace({ limits: { max_cycles: 1 }, policy: goals() });
    const result = await run(ws);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain('par: goal slice 0 done: advanced to slice 1');
    expect(ws.task().cycles.map((cycle) => [cycle.cycle, cycle.verdict])).toEqual([
      [1, 'fail'],
      [2, 'pass'],
    ]);
    const document = ws.document() as {
      slice_id: number;
      history: { request_id: string; totals: { cycle: number } }[];
      totals: { cycle: number; tool_calls: number };
      task: { cycle: number; status: string };
      next_step: string;
    };
    expect(schemaErrors('task-checkpoint-2', document)).toEqual([]);
    expect(document).toMatchObject({
      slice_id: 1,
      totals: { cycle: 2, tool_calls: 6 },
      task: { cycle: 1, status: 'completed' },
      next_step: '',
    });
    expect(document.history.map((event) => [event.request_id, event.totals.cycle])).toEqual([['par-t-slice-0', 1]]);
    // Cycle 1's failure is recorded by what failed (the command critique), not by model or session.
    const failures = (ws.document() as { failure_history: { identity: string; attempts: number }[] }).failure_history;
    expect(failures.map((failure) => [failure.identity, failure.attempts])).toEqual([
      [
        createHash('sha256')
          .update(canonicalJson(['critique:command', 'node test.js']))
          .digest('hex'),
        1,
      ],
    ]);
    // Resuming a finished goal runs no cycle and advances no slice.
    expect((await resume(ws)).code).toBe(0);
    expect([ws.task().cycles.length, ws.document().slice_id]).toEqual([2, 1]);
  });
});
