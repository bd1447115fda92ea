import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PolicyDecisionSchema } from '@polish/protocol';
import { polish } from './support/cli.js';
import { AGENT_COLLAB, schemaErrors } from './support/agent-collab-schemas.js';
import {
  ACTION_HASH,
  AUTH_KEYS,
  authorized,
  checkpoint,
  goalPolicy,
  policy,
  portablePolicy,
} from './support/harness-samples.js';

// `polish policy …` against the agent-collab harness's own documented behaviour. Each expected
// value names where it comes from in WenyuChiou/agent-collab-skills:
const CONTRACT =
  'docs/public-harness-contract.md@3a40d48 (exit codes 0 valid/continue, 2 invalid, 3 checkpoint, 4 stop)';
const CLI_TEST = 'tests/test_harness_cli.py@ca20117';
const GOAL_CLI_TEST = 'tests/test_goal_cli.py@536dd6e';
const CLI_PY = 'src/agent_collab_harness/cli.py@e7df8fd';
const STORE_PY = 'src/agent_collab_harness/checkpoint_store.py@536dd6e';

const directory = mkdtempSync(join(tmpdir(), 'polish-policy-'));
const sample = JSON.parse(readFileSync(`${AGENT_COLLAB}checkpoint.sample.json`, 'utf8'));
const file = (name: string, value: unknown) => {
  const path = join(directory, name);
  writeFileSync(path, typeof value === 'string' ? value : JSON.stringify(value));
  return path;
};
const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');
const evaluate = (policyPath: string, checkpointPath: string, env?: NodeJS.ProcessEnv) =>
  polish(['policy', 'evaluate', '--policy', policyPath, '--checkpoint', checkpointPath, '--json'], env ? { env } : {});
const withKeys = { ...process.env, AGENT_COLLAB_HUMAN_KEYS_JSON: JSON.stringify(AUTH_KEYS) };
const policyFile = file('policy.json', policy());
const signed = (record: Record<string, unknown>) =>
  authorized({ actor: 'human:owner', timestamp: '2026-08-31T00:00:00Z', affected_action_hash: ACTION_HASH, ...record });

describe('polish policy evaluate (v1)', () => {
  it.each([
    ['continue', sample, 0, 'continue'],
    ['checkpoint', { ...sample, transcript_bytes: 100000 }, 3, 'checkpoint'],
    ['stop', { ...sample, cycle: 3 }, 4, 'stop'],
  ])('evaluate prints the decision (%s) and exits with its code', async (_name, state, code, decision) => {
    const run = await evaluate(`${AGENT_COLLAB}policy.sample.json`, file(`${_name}.json`, state));
    expect(run.code).toBe(code);
    expect(PolicyDecisionSchema.parse(JSON.parse(run.stdout)).decision).toBe(decision);
  });

  // Every evaluation error is a `stop` (exit 4) with the fail-closed decision, as the harness's `_policy_evaluate`.
  it.each([
    [
      CLI_TEST,
      'a checkpoint at its tool-call limit',
      policy(),
      checkpoint({ tool_calls: 10 }),
      'limit_reached:tool_calls=10:max_tool_calls=10',
    ],
    [
      CLI_PY,
      'invalid limits',
      policy({ max_concurrency: 9 }),
      checkpoint(),
      'evaluation_error:policy: limits.max_concurrency must be at most limits.max_children_per_parent',
    ],
    [CLI_PY, 'a negative value', policy(), checkpoint({ cycle: -1 }), 'evaluation_error:checkpoint: cycle:'],
    [CLI_PY, 'a bad status', policy(), checkpoint({ status: 'sleeping' }), 'evaluation_error:checkpoint: status:'],
    [
      CLI_PY,
      'a dropped field',
      policy(),
      { ...checkpoint(), stop_reason: undefined },
      'evaluation_error:checkpoint: stop_reason:',
    ],
    [
      CLI_TEST,
      'a decision without the key',
      policy(),
      checkpoint({ decisions: [signed({ gate: 'H0', decision: 'approve', rationale: 'ok' })] }),
      'evaluation_error:checkpoint: decisions.0: no secret for key owner',
    ],
    [
      CLI_PY,
      'an unauthorized override',
      policy(),
      checkpoint({
        overrides: [
          { ...signed({ limit: 'max_cycles', value: 5, observed_value: 0, reason: 'r' }), actor: 'human:mallory' },
        ],
      }),
      'evaluation_error:checkpoint: overrides.0: authorization.key_id is not the actor',
    ],
    [
      CLI_PY,
      'a lowering override',
      policy(),
      checkpoint({ overrides: [signed({ limit: 'max_cycles', value: 2, observed_value: 0, reason: 'r' })] }),
      'evaluation_error:checkpoint: overrides.0: an override only raises a limit',
    ],
    [
      CLI_TEST,
      'a duplicate JSON key',
      policy(),
      '{"schema_version": 1, "schema_version": 1}',
      'evaluation_error:cannot read JSON object',
    ],
    [CLI_PY, 'broken JSON', policy(), '{ nope', 'evaluation_error:cannot read JSON object'],
  ])('%s: %s: stop, exit 4', async (_source, _name, policyDocument, state, reason) => {
    // The trusted host's keys are configured, except to show what a record is without them.
    const keyless = reason.includes('no secret');
    const run = await evaluate(file('p.json', policyDocument), file('c.json', state), keyless ? undefined : withKeys);
    expect(run.code, run.stderr).toBe(4);
    const decision = JSON.parse(run.stdout);
    expect(decision.decision).toBe('stop');
    expect(decision.reasons[0]).toContain(reason);
    expect(schemaErrors('policy-decision-1', decision)).toEqual([]);
    if (reason.startsWith('evaluation_error:'))
      expect(decision).toMatchObject({
        policy_hash: null,
        spawn_allowed: false,
        effective_limits: {},
        observed_metrics: {},
        policy_id: 'p',
      });
  });

  it(`${CLI_TEST}: human authorization is verified with the trusted host's keys, and a portable policy validates`, async () => {
    const approved = file(
      'approved.json',
      checkpoint({ decisions: [signed({ gate: 'H0', decision: 'approve', rationale: 'Approved baseline.' })] }),
    );
    const configured = await evaluate(policyFile, approved, withKeys);
    expect([configured.code, JSON.parse(configured.stdout)]).toMatchObject([
      0,
      { policy_id: 'test-policy', decision: 'continue' },
    ]);
    const portable = await polish([
      'policy',
      'validate',
      '--policy',
      file('agent-budget.yaml', portablePolicy()),
      '--json',
    ]);
    expect([portable.code, JSON.parse(portable.stdout).policy_id]).toEqual([0, 'portable-harness-agent-budget-v1']);
  });

  it(`a path that cannot be read is a command that cannot run: the stop decision, exit 2 (${CONTRACT} says 4: polish keeps 2 for an unusable command line, issue 18)`, async () => {
    const run = await evaluate(join(directory, 'missing.json'), file('c.json', checkpoint()));
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/invalid input: cannot read JSON object .*missing.json: ENOENT/);
    const decision = JSON.parse(run.stdout);
    expect(decision).toMatchObject({
      decision: 'stop',
      spawn_allowed: false,
      policy_hash: null,
      effective_limits: {},
      policy_id: 'missing',
    });
    expect(schemaErrors('policy-decision-1', decision)).toEqual([]);
    // A blank file name gives the harness's placeholder id.
    const blank = await evaluate(file('   .json', '{ nope'), file('c.json', checkpoint()));
    expect([blank.code, JSON.parse(blank.stdout).policy_id]).toEqual([4, 'unreadable-policy']);
    const missingFlag = await polish(['policy', 'evaluate', '--policy', policyFile]);
    expect([missingFlag.code, missingFlag.stderr]).toEqual([
      2,
      'polish: invalid input: checkpoint: required: --checkpoint file.json\n',
    ]);
  });

  it('prints JSON as the harness does: keys sorted, indented by 2', async () => {
    const run = await evaluate(policyFile, file('c.json', checkpoint()));
    const decision = JSON.parse(run.stdout);
    expect(Object.keys(decision)).toEqual([...Object.keys(decision)].sort());
    expect(run.stdout).toBe(`${JSON.stringify(decision, null, 2)}\n`);
  });
});

describe('polish policy validate, checkpoint validate, doctor', () => {
  it(`${CLI_TEST}: validate emits the harness's JSON; exit 0 valid, 2 invalid (a duplicate key too)`, async () => {
    const valid = await polish(['policy', 'validate', '--policy', `${AGENT_COLLAB}policy.sample.json`]);
    expect([valid.code, JSON.parse(valid.stdout)]).toMatchObject([
      0,
      { schema_version: 1, ok: true, kind: 'policy', policy_id: 'example-policy', errors: [] },
    ]);
    const sampleLimits = JSON.parse(readFileSync(`${AGENT_COLLAB}policy.sample.json`, 'utf8'));
    const broken = await polish([
      'policy',
      'validate',
      '--policy',
      file('bad.json', { ...sampleLimits, limits: { ...sampleLimits.limits, max_concurrency: 99 } }),
    ]);
    expect([broken.code, JSON.parse(broken.stdout).error, JSON.parse(broken.stdout).ok]).toEqual([
      2,
      'policy: limits.max_concurrency must be at most limits.max_children_per_parent',
      false,
    ]);
    const duplicate = await polish([
      'policy',
      'validate',
      '--policy',
      file('dup.json', '{"schema_version": 1, "schema_version": 1}'),
      '--json',
    ]);
    expect([duplicate.code, JSON.parse(duplicate.stdout).ok, JSON.parse(duplicate.stdout).errors[0]]).toEqual([
      2,
      false,
      expect.stringContaining('duplicate JSON key: schema_version'),
    ]);
    const goal = await polish(['policy', 'validate', '--policy', file('goal.json', goalPolicy())]);
    expect([goal.code, JSON.parse(goal.stdout).policy_id]).toEqual([0, 'test-policy-goals']);
    const reserve = await polish([
      'policy',
      'validate',
      '--policy',
      file('reserve.json', { ...goalPolicy(), reviewer_reserve: 4 }),
    ]);
    expect([reserve.code, JSON.parse(reserve.stdout).errors[0]]).toEqual([
      2,
      expect.stringContaining('reviewer_reserve must leave an executor slot'),
    ]);
  });

  it(`${CLI_TEST}: checkpoint validate names the task; doctor reports the configured policy and keys`, async () => {
    const valid = await polish([
      'policy',
      'checkpoint',
      'validate',
      '--checkpoint',
      file('c.json', checkpoint()),
      '--json',
    ]);
    expect([valid.code, JSON.parse(valid.stdout)]).toMatchObject([
      0,
      { ok: true, kind: 'checkpoint', task_id: 'task-1' },
    ]);
    const invalid = await polish([
      'policy',
      'checkpoint',
      'validate',
      '--checkpoint',
      file('bad-c.json', checkpoint({ status: 'sleeping' })),
    ]);
    expect([invalid.code, JSON.parse(invalid.stdout).ok]).toEqual([2, false]);
    const doctor = await polish(['policy', 'doctor', '--json'], {
      env: { ...process.env, AGENT_COLLAB_POLICY: '', AGENT_COLLAB_HUMAN_KEYS_JSON: undefined },
    });
    const report = JSON.parse(doctor.stdout);
    expect([doctor.code, report.status]).toEqual([0, 'ok']);
    expect(report.checks).toContainEqual({
      check: 'configured_policy',
      status: 'SKIP',
      detail: 'AGENT_COLLAB_POLICY is not set',
    });
    const misconfigured = await polish(['policy', 'doctor', '--json'], {
      env: { ...withKeys, AGENT_COLLAB_POLICY: join(directory, 'missing.json') },
    });
    expect([misconfigured.code, JSON.parse(misconfigured.stdout).status]).toEqual([2, 'misconfigured']);
    expect(JSON.parse(misconfigured.stdout).checks).toContainEqual({
      check: 'human_authorization_keys',
      status: 'OK',
      detail: '1 key id(s) configured; secrets not displayed',
    });
    expect(misconfigured.stdout).not.toContain(AUTH_KEYS.owner);
  });
});

describe('polish policy checkpoint migrate|advance (v2 goal slices)', () => {
  const migrate = (checkpointFile: string, policyFile: string, metadataFile: string, output: string) =>
    polish([
      'policy',
      'checkpoint',
      'migrate',
      '--checkpoint',
      checkpointFile,
      '--policy',
      policyFile,
      '--metadata',
      metadataFile,
      '--output',
      output,
    ]);

  it(`${GOAL_CLI_TEST}: migrate writes a v2 copy and leaves the source; advance once per request id; a stale hash changes nothing (${STORE_PY})`, async () => {
    const source = file('old.json', checkpoint({ cycle: 3, evidence_refs: ['test:pass'] }));
    const original = readFileSync(source, 'utf8');
    const goalPolicyFile = file('goal-policy.json', goalPolicy());
    const metadata = file('metadata.json', { goal_id: 'goal', next_step: 'review' });
    const target = join(directory, 'new.json');
    const migrated = await migrate(source, goalPolicyFile, metadata, target);
    expect(migrated.code, migrated.stdout).toBe(0);
    expect(readFileSync(source, 'utf8')).toBe(original);
    const created = JSON.parse(readFileSync(target, 'utf8'));
    expect(schemaErrors('task-checkpoint-2', created)).toEqual([]);
    expect(JSON.parse(migrated.stdout)).toEqual({
      schema_version: 2,
      ok: true,
      task_id: 'task-1',
      slice_id: 0,
      totals: created.totals,
    });

    // The slice's decision: a checkpoint (exit 3) that may auto-continue, valid policy-decision-2.
    const decided = await evaluate(goalPolicyFile, target);
    const decision = JSON.parse(decided.stdout);
    expect([decided.code, decision.scope, decision.auto_continue, decision.reasons]).toEqual([
      3,
      'slice',
      true,
      ['slice_limit:cycle'],
    ]);
    expect(schemaErrors('policy-decision-2', decision)).toEqual([]);

    // `checkpoint advance` of the target under the goal policy, as request `requestId`, expecting `sha`.
    const advance = (requestId: string, sha: string) =>
      polish([
        'policy',
        'checkpoint',
        'advance',
        '--checkpoint',
        target,
        '--policy',
        goalPolicyFile,
        '--request-id',
        requestId,
        '--expected-sha256',
        sha,
      ]);
    const stale = await advance('next', '0'.repeat(64));
    expect(stale.code).toBe(2);
    expect(JSON.parse(stale.stdout).errors[0]).toMatch(/checkpoint hash conflict: expected 0{64}, found [a-f0-9]{64}/);
    expect(JSON.parse(readFileSync(target, 'utf8'))).toEqual(created);

    const digest = sha256(target);
    const first = await advance('next', digest);
    expect(first.code, first.stdout).toBe(0);
    expect(JSON.parse(first.stdout).slice_id).toBe(1);
    const saved = readFileSync(target, 'utf8');
    expect(schemaErrors('task-checkpoint-2', JSON.parse(saved))).toEqual([]);
    const duplicate = await advance('next', digest);
    expect([duplicate.code, JSON.parse(duplicate.stdout).slice_id]).toEqual([0, 1]);
    expect(readFileSync(target, 'utf8')).toBe(saved);
    // The same stale hash with a new request id is refused: the file changed since it was read.
    const again = await advance('other', digest);
    expect(again.code).toBe(2);
    expect(readFileSync(target, 'utf8')).toBe(saved);
  });

  it(`${GOAL_CLI_TEST}: migrate never overwrites its destination`, async () => {
    const target = file('target.json', { user: 'data' });
    const run = await migrate(
      file('old2.json', checkpoint()),
      file('gp.json', goalPolicy()),
      file('m.json', { goal_id: 'goal', next_step: 'review' }),
      target,
    );
    expect(run.code).toBe(2);
    expect(JSON.parse(readFileSync(target, 'utf8'))).toEqual({ user: 'data' });
    const extra = await migrate(
      file('old3.json', checkpoint()),
      file('gp.json', goalPolicy()),
      file('m2.json', { goal_id: 'g', next_step: 'r', extra: 1 }),
      join(directory, 'never.json'),
    );
    expect([extra.code, JSON.parse(extra.stdout).errors]).toEqual([
      2,
      ['migration metadata requires goal_id and next_step only'],
    ]);
  });
});
