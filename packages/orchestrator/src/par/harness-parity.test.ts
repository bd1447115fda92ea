import { createHash } from 'node:crypto';
import { canonicalJson } from './canonical-json.js';
import {
  ACTION_HASH,
  AUTH_KEYS,
  authorized,
  checkpoint,
  goalPolicy,
  policy,
  portablePolicy,
} from '../../../../test/support/harness-samples.js';

import { describe, expect, it } from 'vitest';
import { evaluatePolicy, evaluateDocuments } from './evaluate-policy.js';
import { advanceCheckpoint, migrateGoal, newGoal } from './goal-slices.js';
import { refreshTotals, validateGoalCheckpoint } from './goal-engine.js';
import { permitCorrectedAttempt, recordFailure } from './goal-failures.js';
// Where each expected value comes from (WenyuChiou/agent-collab-skills):
const POLICY_PY = 'src/agent_collab_harness/policy.py@4f45b97';
const GOALS_PY = 'src/agent_collab_harness/goals.py@4f45b97';
const GOALS_TEST = 'tests/test_goals_v2.py@536dd6e';
const CONTEXT_TEST = 'tests/test_context_recovery_v2.py@4e8a7fd';
const CLI_TEST = 'tests/test_harness_cli.py@ca20117';

type State = ReturnType<typeof newGoal>;
/** `ready(**kw)` of test_goals_v2.py: a goal around a task with passing evidence. */
const ready = (overrides: Record<string, unknown> = {}) =>
  newGoal(checkpoint({ evidence_refs: ['test:passing'], ...overrides }), {
    goalId: 'goal-1',
    nextStep: 'Continue verification',
  });
const withState = (state: State, change: (state: State) => void) => {
  const copy = structuredClone(state);
  change(copy);
  return copy;
};
const evaluate = (state: unknown, policyDocument: unknown, keys: Record<string, string> = {}) =>
  evaluatePolicy({ policy: policyDocument, checkpoint: state, policyName: 'p', humanKeys: keys });
const signedDecline = () =>
  authorized({
    gate: 'danger',
    actor: 'human:owner',
    decision: 'decline',
    timestamp: '2026-08-31T00:00:00Z',
    rationale: 'not authorized',
    affected_action_hash: ACTION_HASH,
  });
const override = (limit: string, value: number, observed: number) =>
  authorized({
    limit,
    value,
    observed_value: observed,
    reason: 'Fixture',
    actor: 'human:owner',
    timestamp: '2026-09-04T00:00:00Z',
    affected_action_hash: ACTION_HASH,
  });

describe('v1 decisions, as the harness gives them', () => {
  it.each([
    [CLI_TEST, checkpoint(), 'continue', []],
    [
      CLI_TEST,
      checkpoint({ transcript_bytes: 100 }),
      'checkpoint',
      ['checkpoint_required:transcript_growth=100:checkpoint_transcript_bytes=100'],
    ],
    [CLI_TEST, checkpoint({ tool_calls: 10 }), 'stop', ['limit_reached:tool_calls=10:max_tool_calls=10']],
    [GOALS_TEST, checkpoint({ cycle: 3 }), 'stop', ['limit_reached:cycle=3:max_cycles=3']],
    [
      CONTEXT_TEST,
      checkpoint({ transcript_bytes: 200 }),
      'stop',
      ['limit_reached:transcript_bytes=200:max_transcript_bytes=200'],
    ],
  ])('%s: %j', (_source, document, decision, reasons) => {
    expect(evaluate(document, policy())).toMatchObject({ schema_version: 1, decision, reasons });
  });

  it(`orders the reasons as ${POLICY_PY} does: status, gates, every limit reached in HARD_METRICS order, then children and concurrency exceeded`, () => {
    const everything = checkpoint({
      status: 'blocked',
      decisions: [signedDecline()],
      cycle: 3,
      tool_calls: 10,
      elapsed_seconds: 60,
      transcript_bytes: 200,
      same_failure_retries: 2,
      no_evidence_cycles: 2,
      task_packet_tokens: 500,
      parent_summary_tokens: 100,
      memory_digest_tokens: 100,
      child_result_words: 50,
      children_spawned: 5,
      active_children: 3,
    });
    expect(evaluate(everything, policy(), AUTH_KEYS).reasons).toEqual([
      'task_status:blocked',
      'human_gate:danger:decline',
      'limit_reached:cycle=3:max_cycles=3',
      'limit_reached:tool_calls=10:max_tool_calls=10',
      'limit_reached:elapsed_seconds=60:max_elapsed_seconds=60',
      'limit_reached:transcript_bytes=200:max_transcript_bytes=200',
      'limit_reached:same_failure_retries=2:max_same_failure_retries=2',
      'limit_reached:no_evidence_cycles=2:max_no_evidence_cycles=2',
      'limit_reached:task_packet_tokens=500:max_task_packet_tokens=500',
      'limit_reached:parent_summary_tokens=100:max_parent_summary_tokens=100',
      'limit_reached:memory_digest_tokens=100:max_memory_digest_tokens=100',
      'limit_reached:child_result_words=50:max_child_result_words=50',
      'limit_exceeded:children_spawned=5:max_children_per_parent=4',
      'limit_exceeded:active_children=3:max_concurrency=2',
    ]);
  });

  it(`${CLI_TEST}: a portable-harness policy is read as the public one it stands for`, () => {
    const decision = evaluate(checkpoint(), portablePolicy());
    expect(decision).toMatchObject({ policy_id: 'portable-harness-agent-budget-v1', decision: 'continue' });
    expect(decision.effective_limits).toEqual(policy().limits);
    // Its trust root is empty: it can authorize no human record.
    expect(evaluate(checkpoint({ decisions: [signedDecline()] }), portablePolicy(), AUTH_KEYS).reasons[0]).toMatch(
      /^evaluation_error:.*key owner is not in the policy's key_hashes/,
    );
  });

  it(`${CLI_TEST}: an approval counts only with the trusted host's key`, () => {
    const approved = checkpoint({ decisions: [{ ...signedDecline(), decision: 'approve' }] });
    const signed = checkpoint({
      decisions: [authorized({ ...signedDecline(), authorization: undefined, decision: 'approve' })],
    });
    expect(evaluate(approved, policy(), AUTH_KEYS).reasons[0]).toMatch(/^evaluation_error:.*bad signature/);
    expect(evaluate(signed, policy()).reasons[0]).toMatch(/^evaluation_error:.*no secret for key owner/);
    expect(evaluate(signed, policy(), AUTH_KEYS)).toMatchObject({ decision: 'continue', reasons: [] });
  });

  it(`${POLICY_PY}: two decisions of a gate at one time are ambiguous only when both would be the latest`, () => {
    const at = (timestamp: string, decision: string) =>
      authorized({ ...signedDecline(), authorization: undefined, timestamp, decision });
    const [early, late] = ['2026-08-31T00:00:00Z', '2026-08-31T01:00:00Z'];
    const replayed = checkpoint({ decisions: [at(early, 'decline'), at(late, 'approve'), at(early, 'revise')] });
    expect(evaluate(replayed, policy(), AUTH_KEYS)).toMatchObject({ decision: 'continue', reasons: [] });
    const ambiguous = checkpoint({ decisions: [at(early, 'approve'), at(early, 'decline')] });
    expect(evaluate(ambiguous, policy(), AUTH_KEYS).reasons[0]).toMatch(
      /two decisions of gate danger at the same time/,
    );
  });
});

/** A table row: source, state, policy, [decision, scope, auto_continue, spawn_allowed], reasons. */
type Row = readonly [string, State, unknown, readonly [string, string, boolean, boolean], readonly string[]];

describe('v2 goal slices, as the harness decides them', () => {
  const p = goalPolicy();
  it.each<Row>([
    [GOALS_TEST, ready({ cycle: 3 }), p, ['checkpoint', 'slice', true, false], ['slice_limit:cycle']],
    [GOALS_TEST, ready({ tool_calls: 10 }), p, ['checkpoint', 'slice', true, false], ['slice_limit:tool_calls']],
    [
      GOALS_TEST,
      ready({ elapsed_seconds: 60 }),
      p,
      ['checkpoint', 'slice', true, false],
      ['slice_limit:elapsed_seconds'],
    ],
    [
      GOALS_TEST,
      ready({ children_spawned: 4 }),
      p,
      ['checkpoint', 'slice', true, false],
      ['slice_limit:children_spawned'],
    ],
    [
      GOALS_TEST,
      ready({ same_failure_retries: 2 }),
      p,
      ['stop', 'action', false, false],
      ['limit_reached:same_failure_retries=2:max_same_failure_retries=2'],
    ],
    [
      GOALS_TEST,
      withState(ready({ same_failure_retries: 2 }), (s) => (s.action_kind = 'diagnose')),
      p,
      ['continue', 'action', false, true],
      [],
    ],
    [
      GOALS_TEST,
      withState(ready({ children_spawned: 3 }), (s) => (s.review_required = true)),
      p,
      ['continue', 'action', false, false],
      [],
    ],
    [
      GOALS_TEST,
      withState(ready({ children_spawned: 3 }), (s) =>
        Object.assign(s, { review_required: true, action_kind: 'review' }),
      ),
      p,
      ['continue', 'action', false, true],
      [],
    ],
    ...(['cancelled', 'declined', 'waiting_for_human', 'blocked'] as const).map(
      (status) =>
        [
          GOALS_TEST,
          ready({ cycle: 3, status }),
          p,
          ['stop', 'goal', false, false],
          [`task_status:${status}`],
        ] as const,
    ),
    [
      GOALS_TEST,
      ready({ tool_calls: 7 }),
      goalPolicy(policy(), { tool_calls: 7 }),
      ['stop', 'goal', false, false],
      ['goal_limit:tool_calls:unknown_or_reached'],
    ],
    [
      GOALS_TEST,
      ready(),
      goalPolicy(policy(), { cost_microusd: 1 }),
      ['stop', 'goal', false, false],
      ['goal_limit:cost_microusd:unknown_or_reached'],
    ],
    [
      GOALS_TEST,
      withState(ready({ cycle: 3 }), (s) => (s.task.evidence_refs = [])),
      p,
      ['checkpoint', 'slice', false, false],
      ['slice_limit:cycle', 'slice_needs_evidence_next_step_or_children_completion'],
    ],
    [
      GOALS_TEST,
      withState(ready({ cycle: 3 }), (s) => (s.requires_human = true)),
      p,
      ['stop', 'goal', false, false],
      ['human_authorization_required'],
    ],
    [
      GOALS_TEST,
      ready({ active_children: 3, status: 'cancelled' }),
      p,
      ['stop', 'goal', false, false],
      ['task_status:cancelled', 'limit_exceeded:active_children=3:max_concurrency=2', 'concurrency_exceeded'],
    ],
    [
      GOALS_TEST,
      withState(ready({ active_children: 3 }), (s) => (s.requires_human = true)),
      p,
      ['stop', 'goal', false, false],
      ['limit_exceeded:active_children=3:max_concurrency=2', 'human_authorization_required', 'concurrency_exceeded'],
    ],
    [
      GOALS_TEST,
      ready({ active_children: 3 }),
      goalPolicy(policy(), { tool_calls: 0 }),
      ['stop', 'goal', false, false],
      [
        'limit_exceeded:active_children=3:max_concurrency=2',
        'goal_limit:tool_calls:unknown_or_reached',
        'concurrency_exceeded',
      ],
    ],
    [
      GOALS_TEST,
      ready({ status: 'error', same_failure_retries: 2 }),
      p,
      ['stop', 'action', false, false],
      ['task_status:error', 'limit_reached:same_failure_retries=2:max_same_failure_retries=2'],
    ],
    [
      GOALS_TEST,
      withState(ready({ status: 'error', same_failure_retries: 2 }), (s) => (s.action_kind = 'diagnose')),
      p,
      ['continue', 'action', false, true],
      [],
    ],
    ...(
      [
        ['transcript_bytes', 200, 'max_transcript_bytes'],
        ['task_packet_tokens', 500, 'max_task_packet_tokens'],
        ['parent_summary_tokens', 100, 'max_parent_summary_tokens'],
        ['memory_digest_tokens', 100, 'max_memory_digest_tokens'],
        ['child_result_words', 50, 'max_child_result_words'],
      ] as const
    ).map(
      ([metric, value, limit]) =>
        [
          CONTEXT_TEST,
          ready({ [metric]: value }),
          p,
          ['checkpoint', 'action', false, false],
          [`limit_reached:${metric}=${value}:${limit}=${value}`, 'context_compaction_required'],
        ] as const,
    ),
    [
      CONTEXT_TEST,
      ready({ cycle: 3, transcript_bytes: 100 }),
      p,
      ['checkpoint', 'action', false, false],
      ['checkpoint_required:transcript_growth=100:checkpoint_transcript_bytes=100', 'context_compaction_required'],
    ],
    [
      CONTEXT_TEST,
      ready({ transcript_bytes: 200, same_failure_retries: 2, status: 'error' }),
      p,
      ['stop', 'action', false, false],
      [
        'task_status:error',
        'limit_reached:transcript_bytes=200:max_transcript_bytes=200',
        'limit_reached:same_failure_retries=2:max_same_failure_retries=2',
        'context_compaction_required',
      ],
    ],
  ])('%s: case %#', (_source, state, policyDocument, [decision, scope, auto, spawn], reasons) => {
    const result = evaluateDocuments(policyDocument, state, AUTH_KEYS);
    expect([
      result.decision,
      'scope' in result && result.scope,
      'auto_continue' in result && result.auto_continue,
      result.spawn_allowed,
    ]).toEqual([decision, scope, auto, spawn]);
    expect(result.reasons).toEqual(reasons);
    expect(result).toMatchObject({ schema_version: 2, policy_id: 'test-policy-goals', observed_metrics: state.totals });
  });

  it(`${CONTEXT_TEST}: a real gate dominates context recovery, whatever the action kind`, () => {
    const base = ready({ cycle: 3, transcript_bytes: 200 });
    const gates: [string, (s: State) => void, unknown][] = [
      ...(['cancelled', 'declined', 'waiting_for_human', 'blocked', 'budget_exhausted'] as const).map(
        (status) => [status, (s: State) => (s.task.status = status), p] as [string, (s: State) => void, unknown],
      ),
      ['requires_human', (s) => (s.requires_human = true), p],
      ['hard_budget', () => undefined, goalPolicy(policy(), { tool_calls: 0 })],
      ['unknown_cost', () => undefined, goalPolicy(policy(), { cost_microusd: 1 })],
      [
        'signed_decline',
        (s) => Object.assign(s.task, { pending_action_hash: ACTION_HASH, decisions: [signedDecline()] }),
        p,
      ],
    ];
    for (const [gate, change, policyDocument] of gates)
      for (const action of ['execute', 'diagnose', 'wait'] as const) {
        const state = withState(base, (s) => {
          s.action_kind = action;
          change(s);
        });
        const result = evaluateDocuments(policyDocument, state, AUTH_KEYS);
        expect([gate, action, result.decision, 'scope' in result && result.scope, result.spawn_allowed]).toEqual([
          gate,
          action,
          'stop',
          'goal',
          false,
        ]);
        expect(() => advanceCheckpoint(state, policyDocument, 'blocked', AUTH_KEYS)).toThrow(/advance not authorized/);
      }
  });

  it(`${CONTEXT_TEST}: a signed context override survives compaction; others never relax`, () => {
    const record = override('max_transcript_bytes', 400, 199);
    const state = withState(
      ready({ overrides: [record], transcript_bytes: 400 }),
      (s) => (s.task.transcript_bytes = 1),
    );
    state.task.last_checkpoint_transcript_bytes = 1;
    expect(evaluateDocuments(p, state, AUTH_KEYS).decision).toBe('continue');
    expect(() => evaluateDocuments(p.base_policy, state.task, AUTH_KEYS)).toThrow(/observed_value must not exceed/);
    expect(() => evaluateDocuments(p, state, {})).toThrow(/no secret for key owner/);
    const tools = ready({ overrides: [override('max_tool_calls', 20, 9)], tool_calls: 0 });
    expect(() => evaluateDocuments(p, tools, AUTH_KEYS)).toThrow(
      /observed_value must not exceed the current tool_calls/,
    );
  });
});

describe('v2 slice transitions, as the harness makes them', () => {
  const p = goalPolicy();
  it(`${GOALS_TEST}: advancing keeps the totals, clears the slice, and the same request id changes nothing`, () => {
    const state = ready({ cycle: 3, tool_calls: 7, elapsed_seconds: 20 });
    const advanced = advanceCheckpoint(state, p, 'step-1', {});
    expect([advanced.task.cycle, advanced.totals.tool_calls, advanced.slice_id]).toEqual([0, 7, 1]);
    expect(advanced.history[0]).toMatchObject({
      slice_id: 0,
      request_id: 'step-1',
      previous_sha256: null,
      evidence_refs: ['test:passing'],
    });
    expect(advanceCheckpoint(advanced, p, 'step-1', {})).toEqual(advanced);
    expect(state.task.cycle).toBe(3);
    expect(validateGoalCheckpoint(advanced)).toEqual(advanced);
  });

  it(`${GOALS_TEST}: a second slice needs new evidence, and totals accumulate`, () => {
    let state = advanceCheckpoint(ready({ cycle: 3, tool_calls: 7 }), p, 'first', {});
    state = refreshTotals(withState(state, (s) => Object.assign(s.task, { cycle: 3, tool_calls: 9 })));
    expect(evaluateDocuments(p, state, {})).toMatchObject({ auto_continue: false });
    state.task.evidence_refs.push('test:new');
    state = advanceCheckpoint(state, p, 'second', {});
    expect([state.totals.tool_calls, state.totals.cycle, state.history[1]?.previous_sha256]).toEqual([
      16,
      6,
      state.history[0]?.sha256,
    ]);
  });

  it(`${GOALS_TEST}: edited totals, erased receipts or an edited chain do not validate`, () => {
    const state = ready({ tool_calls: 2 });
    expect(() => validateGoalCheckpoint(withState(state, (s) => (s.totals.tool_calls = 0)))).toThrow(
      /totals must equal baseline plus slice/,
    );
    const advanced = advanceCheckpoint(ready({ cycle: 3 }), p, 'accepted', {});
    expect(() => validateGoalCheckpoint(withState(advanced, (s) => (s.accepted_evidence = [])))).toThrow(
      /accepted evidence differs/,
    );
    expect(() => validateGoalCheckpoint(withState(advanced, (s) => (s.history[0]!.request_id = 'other')))).toThrow(
      /history hash mismatch/,
    );
    for (const invalid of [[], {}])
      expect(() => validateGoalCheckpoint({ ...state, active_failure: invalid })).toThrow();
  });

  it(`${GOALS_TEST}: a failure's identity survives slices and input revisions`, () => {
    const failure = {
      operation: 'test',
      target: 'suite',
      inputSha256: 'a'.repeat(64),
      errorClass: 'assertion',
      evidenceRef: 'failure:1',
    };
    let state = ready();
    for (let attempt = 0; attempt < 3; attempt += 1) state = recordFailure(state, failure);
    expect(evaluateDocuments(p, state, {}).decision).toBe('stop');
    expect(() => permitCorrectedAttempt(state, { inputSha256: 'a'.repeat(64), evidenceRef: 'test:passing' })).toThrow();
    state.task.evidence_refs.push('fix:b');
    const corrected = permitCorrectedAttempt(state, { inputSha256: 'b'.repeat(64), evidenceRef: 'fix:b' });
    expect(evaluateDocuments(p, corrected, {}).decision).toBe('continue');
    corrected.task.evidence_refs.push('fix:restore');
    const restored = permitCorrectedAttempt(corrected, { inputSha256: 'a'.repeat(64), evidenceRef: 'fix:restore' });
    expect(evaluateDocuments(p, restored, {}).decision).toBe('stop');
    expect(restored.failure_history[0]?.attempts).toBe(3);
    expect(() => permitCorrectedAttempt(restored, { inputSha256: 'c'.repeat(64), evidenceRef: 'fix:b' })).toThrow(
      /already consumed/,
    );
  });

  it(`${GOALS_TEST} and ${CONTEXT_TEST}: migration keeps the source and its real blockers`, () => {
    const task = checkpoint({
      cycle: 3,
      status: 'budget_exhausted',
      evidence_refs: ['test:passed'],
      stop_reason: 'limit_reached:cycle=3:max_cycles=3',
    });
    const migrated = migrateGoal(task, p, { goalId: 'existing', nextStep: 'review' }, {});
    expect(migrated.source_sha256).toBe(createHash('sha256').update(canonicalJson(task)).digest('hex'));
    expect([task.status, migrated.task.status]).toEqual(['budget_exhausted', 'running']);
    expect(evaluateDocuments(p, migrated, {})).toMatchObject({ auto_continue: true });
    const blocked = migrateGoal(
      { ...task, stop_reason: 'Permission denied' },
      p,
      { goalId: 'existing', nextStep: 'review' },
      {},
    );
    expect(evaluateDocuments(p, blocked, {}).decision).toBe('stop');
    const context = checkpoint({
      status: 'budget_exhausted',
      transcript_bytes: 200,
      stop_reason: 'limit_reached:transcript_bytes=200:max_transcript_bytes=200',
    });
    const compacting = migrateGoal(context, p, { goalId: 'existing', nextStep: 'Compact then verify' }, {});
    expect(compacting.task.status).toBe('running');
    expect(evaluateDocuments(p, compacting, {})).toMatchObject({
      scope: 'action',
      decision: 'checkpoint',
      spawn_allowed: false,
    });
    for (const change of [{ same_failure_retries: 2 }, { status: 'blocked' }, { status: 'waiting_for_human' }])
      expect(
        evaluateDocuments(p, migrateGoal({ ...context, ...change }, p, { goalId: 'g', nextStep: 'Inspect' }, {}), {}),
      ).toMatchObject({ scope: 'goal' });
  });

  it(`${CONTEXT_TEST}: a hundred slices keep cumulative usage, and unknown cost stays null`, () => {
    let state = ready();
    for (let index = 0; index < 100; index += 1) {
      Object.assign(state.task, { cycle: 3, tool_calls: 2, transcript_bytes: 200 });
      state.task.evidence_refs.push(`test:round-${index}`);
      state = refreshTotals(state);
      expect(evaluateDocuments(p, state, {})).toMatchObject({ scope: 'action', decision: 'checkpoint' });
      state.task.transcript_bytes = 0;
      state = advanceCheckpoint(state, p, `slice-${index}`, {});
    }
    expect([state.slice_id, state.totals.cycle, state.totals.tool_calls, state.totals.cost_microusd]).toEqual([
      100,
      300,
      200,
      null,
    ]);
  });

  it(`${GOALS_PY}: checkpoint and policy versions must match`, () => {
    expect(evaluate(ready(), policy()).reasons).toEqual([
      'evaluation_error:checkpoint: checkpoint and policy versions must match',
    ]);
    expect(evaluate(checkpoint(), p).reasons).toEqual([
      'evaluation_error:checkpoint: checkpoint and policy versions must match',
    ]);
    expect(() => goalPolicyWithReserve(4)).toThrow(/reviewer_reserve must leave an executor slot/);
  });
});

const goalPolicyWithReserve = (reserve: number) =>
  evaluateDocuments({ ...goalPolicy(), reviewer_reserve: reserve }, ready(), {});
