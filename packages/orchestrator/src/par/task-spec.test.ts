import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ParTaskFileSchema, type ParPolicy } from '@polish/protocol';
import { freshCheckpoint } from './par-task.js';
import { checkTaskSpec, pendingActionHash, signTaskSpec, specHash } from './task-spec.js';

// What a human decision and a task's gates are bound to (issue 15).

const task = ParTaskFileSchema.parse({
  schema_version: 2,
  topic: 't',
  goal: 'make add() add',
  policy_ref: 'policy.json',
  checkpoint_ref: '.coord/task-checkpoint.json',
  acceptance_criteria: [
    { id: 'A1', text: 'node test.js passes' },
    { id: 'H1', text: 'a maintainer accepts', human_gate: true },
  ],
  critique_source: { kind: 'command', command: 'node test.js' },
  cycles: [],
  final_status: null,
});
const checkpoint = {
  ...freshCheckpoint('t', new Date('2026-11-30T00:00:00Z')),
  status: 'waiting_for_human' as const,
  cycle: 2,
  tool_calls: 6,
  elapsed_seconds: 1,
  transcript_bytes: 10,
};
const files = { 'add.js': 'return a + b', 'test.js': 'assert' };
const SECRET = 'an approver secret';
const policy = {
  schema_version: 1,
  policy_id: 'p',
  limits: {},
  human_authorization: { key_hashes: { alice: createHash('sha256').update(SECRET).digest('hex') } },
} as unknown as ParPolicy;

describe('the pending action a decision signs', () => {
  it('changes with the task id, topic, cycle, spec, gates and every file, and with nothing else', () => {
    const hash = pendingActionHash(task, checkpoint, files);
    expect(pendingActionHash(task, { ...checkpoint, status: 'running', tool_calls: 9 }, { ...files })).toBe(hash);
    const changed = [
      pendingActionHash(task, { ...checkpoint, task_id: 'u' }, files),
      pendingActionHash({ ...task, topic: 'u' }, checkpoint, files),
      pendingActionHash(task, { ...checkpoint, cycle: 3 }, files),
      pendingActionHash({ ...task, goal: 'another goal' }, checkpoint, files),
      pendingActionHash({ ...task, acceptance_criteria: [task.acceptance_criteria[0]!] }, checkpoint, files),
      pendingActionHash(task, checkpoint, { ...files, 'add.js': 'return a - b' }),
      pendingActionHash(task, checkpoint, { ...files, 'new.js': '' }),
    ];
    expect(new Set([hash, ...changed]).size).toBe(changed.length + 1);
  });
});

describe('the anchored task spec', () => {
  const now = new Date('2026-11-30T00:00:00Z');
  it('is signed under a policy that pins keys, and any edit of it is refused', () => {
    const anchored = { ...task, spec_sha256: specHash(task), spec_authorization: null };
    const signed = { ...anchored, spec_authorization: signTaskSpec(anchored, policy, { alice: SECRET }, { now }) };
    expect(() => checkTaskSpec(signed, policy, { alice: SECRET })).not.toThrow();
    const ungated = { ...signed, acceptance_criteria: [task.acceptance_criteria[0]!] };
    expect(() => checkTaskSpec(ungated, policy, { alice: SECRET })).toThrow(/its spec .* changed since it was created/);
    const rehashed = { ...ungated, spec_sha256: specHash(ungated) };
    expect(() => checkTaskSpec(rehashed, policy, { alice: SECRET })).toThrow(/the signed spec is not this spec/);
    expect(() => checkTaskSpec({ ...rehashed, spec_authorization: null }, policy, { alice: SECRET })).toThrow(
      /the policy pins human keys but the task spec is not signed/,
    );
    expect(() => checkTaskSpec(signed, policy, {})).toThrow(/no secret for key alice/);
  });

  it('cannot be signed without a secret of the policy, and gates need a policy with keys', () => {
    expect(() => signTaskSpec(task, policy, {}, { now })).toThrow(/the task spec is signed when the task is created/);
    const keyless = { ...policy, human_authorization: { key_hashes: {} } };
    expect(() => signTaskSpec(task, keyless, {}, { now })).toThrow(/the policy pins no human key/);
    const ungated = { ...task, acceptance_criteria: [task.acceptance_criteria[0]!] };
    expect(signTaskSpec(ungated, keyless, {}, { now })).toBeNull();
  });
});
