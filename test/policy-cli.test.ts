import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PolicyDecisionSchema } from '@polish/protocol';
import { polish, REPO } from './support/cli.js';

// The public samples beside the repository when they are there, else the test copies.
const shared = existsSync(`${REPO}../shared/agent-collab/`)
  ? `${REPO}../shared/agent-collab/`
  : `${REPO}test/fixtures/agent-collab/`;
const directory = mkdtempSync(join(tmpdir(), 'polish-policy-'));
const checkpoint = JSON.parse(readFileSync(`${shared}checkpoint.sample.json`, 'utf8'));
const file = (name: string, value: unknown) => {
  const path = join(directory, name);
  writeFileSync(path, typeof value === 'string' ? value : JSON.stringify(value));
  return path;
};

describe('polish policy', () => {
  it.each([
    ['continue', checkpoint, 0, 'continue'],
    ['checkpoint', { ...checkpoint, transcript_bytes: 100000 }, 3, 'checkpoint'],
    ['stop', { ...checkpoint, cycle: 3 }, 4, 'stop'],
  ])('evaluate prints the decision (%s) and exits with its code', async (_name, state, code, decision) => {
    const run = await polish([
      'policy',
      'evaluate',
      '--policy',
      `${shared}policy.sample.json`,
      '--checkpoint',
      file(`${_name}.json`, state),
    ]);
    expect(run.code).toBe(code);
    expect(PolicyDecisionSchema.parse(JSON.parse(run.stdout)).decision).toBe(decision);
  });

  it('fails closed on unreadable input: stop, no hash, the policy file name as id, exit 2', async () => {
    const run = await polish([
      'policy',
      'evaluate',
      '--policy',
      file('broken-policy.json', '{ nope'),
      '--checkpoint',
      `${shared}checkpoint.sample.json`,
    ]);
    expect(run.code).toBe(2);
    const decision = PolicyDecisionSchema.parse(JSON.parse(run.stdout));
    expect(decision).toMatchObject({
      decision: 'stop',
      policy_hash: null,
      policy_id: 'broken-policy',
      effective_limits: {},
      observed_metrics: {},
    });
    expect(decision.reasons[0]).toMatch(/^evaluation_error:broken-policy.json is not JSON/);
  });

  it('validate: exit 0 for the shared sample, 2 for a broken policy, and a clear refusal of version-2 files', async () => {
    expect((await polish(['policy', 'validate', '--policy', `${shared}policy.sample.json`])).code).toBe(0);
    const sample = JSON.parse(readFileSync(`${shared}policy.sample.json`, 'utf8'));
    const broken = await polish([
      'policy',
      'validate',
      '--policy',
      file('bad.json', { ...sample, limits: { ...sample.limits, max_concurrency: 99 } }),
    ]);
    expect([broken.code, JSON.parse(broken.stdout).error]).toEqual([
      2,
      'policy: limits.max_concurrency must be at most limits.max_children_per_parent',
    ]);
    const v2 = await polish([
      'policy',
      'validate',
      '--policy',
      file('goal.json', { schema_version: 2, policy_id: 'g' }),
    ]);
    expect([v2.code, JSON.parse(v2.stdout).error]).toEqual([
      2,
      'version-2 ("goal slice") files are recognised but their rules are not implemented in polish yet',
    ]);
  });
});
