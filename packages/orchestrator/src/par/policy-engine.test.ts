import { createHash, createHmac } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { LIMIT_NAMES } from '@polish/protocol';
import { canonicalJson } from './canonical-json.js';
import { evaluatePolicy } from './evaluate-policy.js';
import { checkCheckpoint, failClosed, isVersionTwo, validateCheckpoint, validatePolicy } from './policy-engine.js';

// The public samples beside the repository when they are there, else the test copies.
const sharedDir = new URL('../../../../../shared/agent-collab/', import.meta.url);
const fixtureDir = new URL('../../../../test/fixtures/agent-collab/', import.meta.url);
const shared = (name: string) =>
  JSON.parse(readFileSync(new URL(name, existsSync(sharedDir) ? sharedDir : fixtureDir), 'utf8'));
const POLICY = shared('policy.sample.json');
const CHECKPOINT = shared('checkpoint.sample.json');
const SECRET = 'correct horse battery staple';
const KEY = 'alice';
const ACTION = 'a'.repeat(64);
const signedPolicy = {
  ...POLICY,
  human_authorization: { key_hashes: { [KEY]: createHash('sha256').update(SECRET).digest('hex') } },
};
const keys = { [KEY]: SECRET };

function sign<T extends Record<string, unknown>>(record: T, secret = SECRET, keyId = KEY) {
  const signature = createHmac('sha256', secret).update(canonicalJson(record)).digest('hex');
  return { ...record, authorization: { scheme: 'hmac-sha256', key_id: keyId, signature } };
}
const decision = (gate: string, verdict: string, timestamp = '2026-08-31T00:00:00Z') =>
  sign({
    gate,
    actor: `human:${KEY}`,
    decision: verdict,
    timestamp,
    rationale: 'looked at it',
    affected_action_hash: ACTION,
  });
const override = (limit: string, value: number, observed: number) =>
  sign({
    limit,
    value,
    observed_value: observed,
    reason: 'more room',
    actor: `human:${KEY}`,
    timestamp: '2026-08-31T00:00:00Z',
    affected_action_hash: ACTION,
  });

const run = (checkpoint: Record<string, unknown>, policy: Record<string, unknown> = signedPolicy) =>
  evaluatePolicy({ policy, checkpoint: { ...CHECKPOINT, ...checkpoint }, policyName: 'sample', humanKeys: keys });

describe('policy engine (agent-collab-harness v1)', () => {
  it('gives continue with the 13 effective limits for the shared samples', () => {
    const result = evaluatePolicy({ policy: POLICY, checkpoint: CHECKPOINT, policyName: 'policy.sample' });
    expect(result).toMatchObject({
      decision: 'continue',
      spawn_allowed: true,
      checkpoint_required: false,
      reasons: [],
      policy_id: 'example-policy',
    });
    expect(Object.keys(result.effective_limits)).toEqual([...LIMIT_NAMES]);
    expect(result.effective_limits).toEqual(POLICY.limits);
    expect(Object.keys(result.observed_metrics)).toHaveLength(13);
    expect(result.policy_hash).toBe(createHash('sha256').update(canonicalJson(POLICY)).digest('hex'));
  });

  it.each([
    ['cycle', 3, 'limit_reached:cycle=3:max_cycles=3'],
    ['tool_calls', 25, 'limit_reached:tool_calls=25:max_tool_calls=20'],
    ['elapsed_seconds', 600.5, 'limit_reached:elapsed_seconds=600.5:max_elapsed_seconds=600'],
    ['transcript_bytes', 200000, 'limit_reached:transcript_bytes=200000:max_transcript_bytes=200000'],
    ['same_failure_retries', 2, 'limit_reached:same_failure_retries=2:max_same_failure_retries=2'],
    ['no_evidence_cycles', 2, 'limit_reached:no_evidence_cycles=2:max_no_evidence_cycles=2'],
    ['task_packet_tokens', 2000, 'limit_reached:task_packet_tokens=2000:max_task_packet_tokens=2000'],
    ['parent_summary_tokens', 1000, 'limit_reached:parent_summary_tokens=1000:max_parent_summary_tokens=1000'],
    ['memory_digest_tokens', 500, 'limit_reached:memory_digest_tokens=500:max_memory_digest_tokens=500'],
    ['child_result_words', 250, 'limit_reached:child_result_words=250:max_child_result_words=250'],
    ['children_spawned', 5, 'limit_exceeded:children_spawned=5:max_children_per_parent=4'],
    ['active_children', 3, 'limit_exceeded:active_children=3:max_concurrency=2'],
  ])('stops when %s is %s', (metric, value, reason) => {
    const result = run({
      [metric]: value,
      ...(metric === 'transcript_bytes' ? { last_checkpoint_transcript_bytes: 200000 } : {}),
    });
    expect([result.decision, result.reasons]).toEqual(['stop', [reason]]);
    expect(result.spawn_allowed).toBe(false);
  });

  it('does not stop at children_spawned or active_children equal to their limits, but allows no spawn', () => {
    const result = run({ children_spawned: 4, active_children: 2 });
    expect([result.decision, result.spawn_allowed]).toEqual(['continue', false]);
  });

  it('lists reasons in order: status, human gates, limits reached, limits exceeded', () => {
    const result = run({
      status: 'blocked',
      cycle: 9,
      active_children: 3,
      pending_action_hash: ACTION,
      decisions: [decision('deploy', 'decline')],
    });
    expect(result.reasons).toEqual([
      'task_status:blocked',
      'human_gate:deploy:decline',
      'limit_reached:cycle=9:max_cycles=3',
      'limit_exceeded:active_children=3:max_concurrency=2',
    ]);
  });

  it('asks for a checkpoint when the transcript grew by checkpoint_transcript_bytes', () => {
    const result = run({ transcript_bytes: 150000, last_checkpoint_transcript_bytes: 50000 });
    expect(result).toMatchObject({
      decision: 'checkpoint',
      checkpoint_required: true,
      spawn_allowed: false,
      reasons: ['checkpoint_required:transcript_growth=100000:checkpoint_transcript_bytes=100000'],
    });
  });

  it('obeys the latest signed decision of each gate', () => {
    const later = '2026-08-31T01:00:00Z';
    expect(
      run({ pending_action_hash: ACTION, decisions: [decision('g', 'decline'), decision('g', 'approve', later)] })
        .decision,
    ).toBe('continue');
    expect(
      run({ pending_action_hash: ACTION, decisions: [decision('g', 'approve'), decision('g', 'revise', later)] })
        .reasons,
    ).toEqual(['human_gate:g:revise']);
  });

  it('raises a limit with a valid signed override', () => {
    const result = run({ cycle: 3, pending_action_hash: ACTION, overrides: [override('max_cycles', 5, 2)] });
    expect(result.decision).toBe('continue');
    expect(result.effective_limits.max_cycles).toBe(5);
  });

  it.each([
    [
      'a policy missing a limit',
      {},
      { ...signedPolicy, limits: { ...POLICY.limits, max_cycles: undefined } },
      'policy: limits.max_cycles',
    ],
    [
      'a negative limit',
      {},
      { ...signedPolicy, limits: { ...POLICY.limits, max_cycles: -1 } },
      'policy: limits.max_cycles',
    ],
    [
      'max_transcript_bytes below checkpoint_transcript_bytes',
      {},
      { ...signedPolicy, limits: { ...POLICY.limits, max_transcript_bytes: 10 } },
      'max_transcript_bytes must be at least',
    ],
    [
      'max_concurrency above max_children_per_parent',
      {},
      { ...signedPolicy, limits: { ...POLICY.limits, max_concurrency: 9 } },
      'max_concurrency must be at most',
    ],
    [
      'a key hash that is not SHA-256 hex',
      {},
      { ...signedPolicy, human_authorization: { key_hashes: { [KEY]: 'nope' } } },
      'policy: human_authorization.key_hashes',
    ],
    [
      'decisions without pending_action_hash',
      { decisions: [decision('g', 'approve')] },
      signedPolicy,
      'pending_action_hash is required',
    ],
    [
      'a record about another action',
      { pending_action_hash: 'b'.repeat(64), decisions: [decision('g', 'approve')] },
      signedPolicy,
      'does not concern the pending action',
    ],
    [
      'a bad signature',
      { pending_action_hash: ACTION, decisions: [{ ...decision('g', 'approve'), rationale: 'edited after signing' }] },
      signedPolicy,
      'bad signature',
    ],
    [
      'a key not in the policy',
      { pending_action_hash: ACTION, decisions: [decision('g', 'approve')] },
      POLICY,
      'key alice is not in the policy',
    ],
    [
      'two decisions of one gate at the same time',
      { pending_action_hash: ACTION, decisions: [decision('g', 'approve'), decision('g', 'decline')] },
      signedPolicy,
      'two decisions of gate g',
    ],
    [
      'two overrides of one limit',
      { pending_action_hash: ACTION, overrides: [override('max_cycles', 5, 0), override('max_cycles', 6, 0)] },
      signedPolicy,
      'a second override of max_cycles',
    ],
    [
      'an override that lowers a limit',
      { pending_action_hash: ACTION, overrides: [override('max_cycles', 2, 0)] },
      signedPolicy,
      'an override only raises a limit',
    ],
    [
      'an override observed above the metric',
      { cycle: 1, pending_action_hash: ACTION, overrides: [override('max_cycles', 5, 2)] },
      signedPolicy,
      'observed_value must not exceed the current cycle',
    ],
    ['an unknown status', { status: 'sleeping' }, signedPolicy, 'checkpoint: status'],
  ])('fails closed on %s', (_name, checkpoint, policy, message) => {
    const result = run(checkpoint, policy as Record<string, unknown>);
    expect(result).toMatchObject({
      decision: 'stop',
      policy_hash: null,
      spawn_allowed: false,
      checkpoint_required: false,
      effective_limits: {},
      observed_metrics: {},
      policy_id: 'sample',
    });
    expect(result.reasons).toHaveLength(1);
    expect(result.reasons[0]).toMatch(/^evaluation_error:/);
    expect(result.reasons[0]).toContain(message);
  });

  // Issue 22: a limit override counts only with a valid signature of a key the policy pins.
  it.each([
    [
      'unsigned (a made-up signature)',
      () => ({
        ...override('max_cycles', 5, 2),
        authorization: { scheme: 'hmac-sha256', key_id: KEY, signature: '0'.repeat(64) },
      }),
    ],
    ['tampered (the value raised after signing)', () => ({ ...override('max_cycles', 5, 2), value: 50 })],
    [
      'forged (signed with another secret)',
      () => sign({ ...override('max_cycles', 5, 2), authorization: undefined }, 'not the secret'),
    ],
    [
      'signed by a key the policy does not pin',
      () =>
        sign(
          { ...override('max_cycles', 5, 2), authorization: undefined, actor: 'human:mallory' },
          'mallory',
          'mallory',
        ),
    ],
  ])('fails closed on a limit override that is %s, instead of raising the limit', (_name, record) => {
    const result = run({ cycle: 3, pending_action_hash: ACTION, overrides: [record()] });
    expect(result).toMatchObject({ decision: 'stop', policy_hash: null, effective_limits: {} });
    expect(result.reasons[0]).toMatch(/^evaluation_error:checkpoint: overrides\.0: /);
  });

  it('fails closed when the secret does not hash to the policy key hash', () => {
    const result = evaluatePolicy({
      policy: signedPolicy,
      checkpoint: { ...CHECKPOINT, pending_action_hash: ACTION, decisions: [decision('g', 'approve')] },
      policyName: 'sample',
      humanKeys: { [KEY]: 'some other secret' },
    });
    expect(result.reasons[0]).toContain('does not match the policy');
  });
});

// Issue 22: what the mutation run found unchecked: exact reasons, every boundary.
describe('policy engine, exact reasons and boundaries', () => {
  const reason = (checkpoint: Record<string, unknown>, policy: Record<string, unknown> = signedPolicy) =>
    run(checkpoint, policy).reasons;
  const limits = (changes: Record<string, number>) => ({ ...signedPolicy, limits: { ...POLICY.limits, ...changes } });
  const otherAction = sign({
    gate: 'h',
    actor: `human:${KEY}`,
    decision: 'approve',
    timestamp: '2026-08-31T00:00:00Z',
    rationale: 'r',
    affected_action_hash: 'b'.repeat(64),
  });

  it.each([
    [
      'a transcript limit below the checkpoint interval',
      {},
      limits({ max_transcript_bytes: 99_999 }),
      'policy: limits.max_transcript_bytes must be at least limits.checkpoint_transcript_bytes',
    ],
    [
      'more concurrency than children',
      {},
      limits({ max_concurrency: 5 }),
      'policy: limits.max_concurrency must be at most limits.max_children_per_parent',
    ],
    [
      'two overrides of one limit',
      { pending_action_hash: ACTION, overrides: [override('max_cycles', 5, 0), override('max_cycles', 6, 0)] },
      signedPolicy,
      'checkpoint: overrides.1: a second override of max_cycles',
    ],
    [
      'decisions without pending_action_hash',
      { decisions: [decision('g', 'approve')] },
      signedPolicy,
      'checkpoint: pending_action_hash is required when decisions or overrides exist',
    ],
    [
      'one record of two about another action',
      { pending_action_hash: ACTION, decisions: [decision('g', 'approve'), otherAction] },
      signedPolicy,
      'checkpoint: a record does not concern the pending action (affected_action_hash)',
    ],
    [
      'an override observed at its limit already',
      { cycle: 3, pending_action_hash: ACTION, overrides: [override('max_cycles', 5, 3)] },
      signedPolicy,
      "checkpoint: overrides.0: observed_value must be below the policy's max_cycles (3)",
    ],
    [
      'an override observed above the metric',
      { cycle: 1, pending_action_hash: ACTION, overrides: [override('max_cycles', 5, 2)] },
      signedPolicy,
      'checkpoint: overrides.0: observed_value must not exceed the current cycle',
    ],
    [
      'two decisions of one gate at the same time',
      { pending_action_hash: ACTION, decisions: [decision('g', 'approve'), decision('g', 'decline')] },
      signedPolicy,
      'checkpoint: two decisions of gate g at the same time',
    ],
    [
      'a checkpoint-interval override observed above the transcript',
      {
        transcript_bytes: 10,
        pending_action_hash: ACTION,
        overrides: [override('checkpoint_transcript_bytes', 150_000, 50)],
      },
      signedPolicy,
      'checkpoint: overrides.0: observed_value must not exceed the current transcript_bytes',
    ],
  ])('fails closed on %s, with exactly that reason', (_name, checkpoint, policy, expected) => {
    expect(reason(checkpoint, policy)).toEqual([`evaluation_error:${expected}`]);
  });

  it('names the decision whose signature is wrong', () => {
    const forged = { ...decision('g', 'approve'), rationale: 'edited after signing' };
    expect(reason({ pending_action_hash: ACTION, decisions: [decision('h', 'approve'), forged] })[0]).toMatch(
      /^evaluation_error:checkpoint: decisions\.1: /,
    );
  });

  it('takes limits at their boundaries: a transcript limit equal to the interval, concurrency equal to children, an override equal to the limit', () => {
    expect(run({}, limits({ max_transcript_bytes: 100_000 })).decision).toBe('continue');
    expect(run({}, limits({ max_concurrency: 4 })).decision).toBe('continue');
    const equal = run({ cycle: 2, pending_action_hash: ACTION, overrides: [override('max_cycles', 3, 2)] });
    expect([equal.decision, equal.effective_limits.max_cycles]).toEqual(['continue', 3]);
  });

  it.each([
    [{ children_spawned: 3 }, true],
    [{ children_spawned: 4 }, false],
    [{ active_children: 1, children_spawned: 1 }, true],
    [{ active_children: 2, children_spawned: 2 }, false],
  ])('spawning is allowed below both child limits only (%o: %s)', (checkpoint, allowed) => {
    const result = run(checkpoint);
    expect([result.decision, result.spawn_allowed]).toEqual(['continue', allowed]);
  });

  it('a policy with no readable id fails closed as unreadable-policy; an id is trimmed', () => {
    expect(failClosed('  ', 'm').policy_id).toBe('unreadable-policy');
    expect(failClosed(' sample ', 'm')).toMatchObject({ policy_id: 'sample', reasons: ['evaluation_error:m'] });
  });

  it('tells version-2 documents from others, null included', () => {
    expect([isVersionTwo({ schema_version: 2 }), isVersionTwo({ schema_version: 1 }), isVersionTwo(null)]).toEqual([
      true,
      false,
      false,
    ]);
  });

  it('validateCheckpoint (what a PAR run checks each cycle): the checkpoint when valid, INVALID_INPUT naming the problem when not', () => {
    const policy = validatePolicy(signedPolicy);
    const valid = { ...CHECKPOINT, pending_action_hash: ACTION, overrides: [override('max_cycles', 5, 0)] };
    expect(validateCheckpoint(valid, policy, keys)).toEqual(checkCheckpoint(valid));
    expect(() =>
      validateCheckpoint({ ...valid, overrides: [{ ...override('max_cycles', 5, 0), value: 9 }] }, policy, keys),
    ).toThrow(/^checkpoint: overrides\.0: /);
    expect(() => validateCheckpoint({ ...valid, overrides: [override('max_cycles', 2, 0)] }, policy, keys)).toThrow(
      'checkpoint: overrides.0: an override only raises a limit (value ≥ 3)',
    );
    expect(() =>
      validateCheckpoint(
        { ...valid, overrides: [], decisions: [decision('g', 'approve'), decision('g', 'decline')] },
        policy,
        keys,
      ),
    ).toThrow('checkpoint: two decisions of gate g at the same time');
  });
});
