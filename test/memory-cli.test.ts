import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { polish, REPO } from './support/cli.js';

// The public sample policy beside the repository when it is there, else the test copy.
const shared = existsSync(`${REPO}../shared/agent-collab/`)
  ? `${REPO}../shared/agent-collab/`
  : `${REPO}test/fixtures/agent-collab/`;
const SECRET = 'correct horse battery staple';
const sample = JSON.parse(readFileSync(`${shared}policy.sample.json`, 'utf8'));
const policyWithKey = {
  ...sample,
  human_authorization: { key_hashes: { alice: createHash('sha256').update(SECRET).digest('hex') } },
};

function workspace() {
  const directory = mkdtempSync(join(tmpdir(), 'polish-memory-cli-'));
  const policy = join(directory, 'policy.json');
  writeFileSync(policy, JSON.stringify(policyWithKey));
  const coord = join(directory, '.coord');
  const files = () =>
    Object.fromEntries(
      readdirSync(join(coord, 'memory-proposals')).map((name) => [
        name,
        readFileSync(join(coord, 'memory-proposals', name), 'utf8'),
      ]),
    );
  return { directory, policy, coord, files };
}
const withKeys = (keys: Record<string, string>) => ({
  ...process.env,
  AGENT_COLLAB_HUMAN_KEYS_JSON: JSON.stringify(keys),
});
const propose = (coord: string) =>
  polish([
    'memory',
    'propose',
    '--coord',
    coord,
    '--source-task',
    'task-7',
    '--operation',
    'add',
    '--target',
    'docs/lessons.md#testing',
    '--summary',
    'Run the focused test first.',
    '--evidence',
    'a.log',
    '--evidence',
    'b.log',
  ]);

describe('polish memory', () => {
  it('propose → list → approve: the decision is signed and the log holds two chained events', async () => {
    const { policy, coord } = workspace();
    const proposed = await propose(coord);
    expect(proposed.code).toBe(0);
    const proposal = JSON.parse(proposed.stdout);
    expect(proposal).toMatchObject({
      schema_version: 1,
      state: 'proposed',
      decision: null,
      action: { operation: 'add', evidence_refs: ['a.log', 'b.log'] },
    });
    expect(proposal.proposal_id).toMatch(/^mp-[a-f0-9]{12}$/);

    const listed = await polish(['memory', 'list', '--coord', coord]);
    expect([listed.code, listed.stdout]).toEqual([
      0,
      `${proposal.proposal_id}  proposed  add     docs/lessons.md#testing  Run the focused test first.\n`,
    ]);

    const approved = await polish(
      [
        'memory',
        'approve',
        proposal.proposal_id,
        '--coord',
        coord,
        '--policy',
        policy,
        '--key-id',
        'alice',
        '--rationale',
        'seen twice',
      ],
      { env: withKeys({ alice: SECRET }) },
    );
    expect([approved.code, approved.stderr]).toEqual([0, '']);
    expect(JSON.parse(approved.stdout)).toMatchObject({
      state: 'approved',
      decision: { decision: 'approve', actor: 'human:alice', rationale: 'seen twice' },
    });

    const events = readFileSync(join(coord, 'memory-proposals', 'events.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(events.map((event) => [event.seq, event.type])).toEqual([
      [1, 'proposed'],
      [2, 'approved'],
    ]);
    expect(events[0].previous_sha256).toBeNull();
    expect(events[1].previous_sha256).toBe(events[0].sha256);

    const checked = await polish(['memory', 'list', '--coord', coord, '--json', '--policy', policy], {
      env: withKeys({ alice: SECRET }),
    });
    expect(checked.code).toBe(0);
    expect(JSON.parse(checked.stdout).log).toEqual({ ok: true, events: 2 });
  });

  it('approve with a bad key exits 2 with one line and writes nothing', async () => {
    const { policy, coord, files } = workspace();
    const { proposal_id: id } = JSON.parse((await propose(coord)).stdout);
    const before = files();
    const approve = (keyId: string, keys: Record<string, string>) =>
      polish(['memory', 'approve', id, '--coord', coord, '--policy', policy, '--key-id', keyId, '--rationale', 'ok'], {
        env: withKeys(keys),
      });
    const wrong = await approve('alice', { alice: 'guess' });
    expect([wrong.code, wrong.stdout, wrong.stderr]).toEqual([
      2,
      '',
      `polish: invalid input: approve ${id}: the secret of key alice does not match the policy's key hash\n`,
    ]);
    const unknown = await approve('mallory', { mallory: SECRET });
    expect([unknown.code, unknown.stderr]).toEqual([
      2,
      `polish: invalid input: approve ${id}: key mallory is not in the policy's key_hashes\n`,
    ]);
    expect(files()).toEqual(before);
  });

  it('list exits 2 naming the problem when an old log line was edited', async () => {
    const { coord } = workspace();
    await propose(coord);
    const log = join(coord, 'memory-proposals', 'events.jsonl');
    writeFileSync(log, readFileSync(log, 'utf8').replace('"type":"proposed"', '"type":"approved"'));
    const listed = await polish(['memory', 'list', '--coord', coord]);
    expect(listed.code).toBe(2);
    expect(listed.stderr).toMatch(/^polish: invalid input: the memory log does not verify: events\.jsonl: line 1/);
  });
});
