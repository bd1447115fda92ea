import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from './canonical-json.js';
import { decideMemoryProposal, listMemoryProposals, MemoryProposalError, proposeMemory, verifyMemoryLog } from './memory-proposals.js';

// The public sample policy beside the repository when it is there, else the test copy.
const sharedDir = new URL('../../../../../shared/agent-collab/', import.meta.url);
const fixtureDir = new URL('../../../../test/fixtures/agent-collab/', import.meta.url);
const SAMPLE = JSON.parse(readFileSync(new URL('policy.sample.json', existsSync(sharedDir) ? sharedDir : fixtureDir), 'utf8'));
const SECRET = 'correct horse battery staple';
const KEY = 'alice';
const POLICY = { ...SAMPLE, human_authorization: { key_hashes: { [KEY]: createHash('sha256').update(SECRET).digest('hex') } } };
const SECRETS = { [KEY]: SECRET };
const T0 = new Date('2026-09-01T10:00:00Z');
const T1 = new Date('2026-09-01T11:00:00Z');
const ACTION = { operation: 'add' as const, target_ref: 'docs/lessons.md#testing', summary: 'Run the focused test before the whole suite.', evidence_refs: ['.coord/par_tests.yml#cycle-2'] };

const coord = () => mkdtempSync(join(tmpdir(), 'polish-memory-'));
const logLines = (dir: string) => readFileSync(join(dir, 'memory-proposals', 'events.jsonl'), 'utf8').trim().split('\n');
const snapshot = (dir: string) =>
  Object.fromEntries(readdirSync(join(dir, 'memory-proposals')).map((name) => [name, readFileSync(join(dir, 'memory-proposals', name), 'utf8')]));
const approve = (dir: string, id: string, overrides: Record<string, unknown> = {}) =>
  decideMemoryProposal(dir, id, { decision: 'approve', keyId: KEY, rationale: 'matches what we saw', policy: POLICY, secrets: SECRETS, ...overrides }, T1);

describe('memory proposals', () => {
  it('proposes and lists: a file in state proposed, with a content-derived id, and a first proposed event', () => {
    const dir = coord();
    const proposal = proposeMemory(dir, { source_task: 'task-7', action: ACTION }, T0);
    const expectedId = `mp-${createHash('sha256').update(canonicalJson({ source_task: 'task-7', action: ACTION, created_at: T0.toISOString() })).digest('hex').slice(0, 12)}`;
    expect(proposal).toEqual({ schema_version: 1, proposal_id: expectedId, source_task: 'task-7', action: ACTION, state: 'proposed', created_at: '2026-09-01T10:00:00.000Z', decision: null });
    expect(listMemoryProposals(dir)).toEqual([proposal]);
    const check = verifyMemoryLog(dir);
    expect(check.ok).toBe(true);
    expect(check.events).toMatchObject([{ seq: 1, type: 'proposed', proposal_id: expectedId, previous_sha256: null }]);
    expect(check.events[0]?.proposal_sha256).toBe(createHash('sha256').update(canonicalJson(proposal)).digest('hex'));
  });

  it('refuses an invalid proposal', () => {
    const dir = coord();
    expect(() => proposeMemory(dir, { source_task: 'task-7', action: { ...ACTION, summary: '  ' } }, T0)).toThrow(/proposal: action.summary/);
    expect(() => proposeMemory(dir, { source_task: 'task-7', action: { ...ACTION, evidence_refs: ['a', 'a'] } }, T0)).toThrow(/evidence_refs: must be unique/);
    expect(existsSync(join(dir, 'memory-proposals'))).toBe(false);
  });

  it('approves with a valid key: a signed decision in the file and a second event chained to the first', () => {
    const dir = coord();
    const { proposal_id: id } = proposeMemory(dir, { source_task: 'task-7', action: ACTION }, T0);
    const decided = approve(dir, id);
    expect(decided).toMatchObject({ state: 'approved', decision: { decision: 'approve', actor: 'human:alice', rationale: 'matches what we saw', authorization: { scheme: 'hmac-sha256', key_id: KEY } } });
    expect(listMemoryProposals(dir)).toEqual([decided]);
    const check = verifyMemoryLog(dir, { policy: POLICY, secrets: SECRETS });
    expect(check).toMatchObject({ ok: true, events: [{ seq: 1, type: 'proposed' }, { seq: 2, type: 'approved', decision: decided.decision }] });
    expect(check.events[1]?.previous_sha256).toBe(check.events[0]?.sha256);
    expect(check.events[1]?.decision?.proposal_sha256).toBe(check.events[0]?.proposal_sha256);
  });

  it('rejects the same way', () => {
    const dir = coord();
    const { proposal_id: id } = proposeMemory(dir, { source_task: 'task-7', action: ACTION }, T0);
    expect(approve(dir, id, { decision: 'reject', rationale: 'one flaky run is no lesson' }).state).toBe('rejected');
    expect(verifyMemoryLog(dir).events.map((event) => event.type)).toEqual(['proposed', 'rejected']);
  });

  it.each([
    ['no secret', { secrets: {} }, /no secret for key alice/],
    ['a wrong secret', { secrets: { [KEY]: 'guess' } }, /does not match the policy's key hash/],
    ['a key not in the policy', { keyId: 'mallory', secrets: { mallory: SECRET } }, /key mallory is not in the policy's key_hashes/],
    ['no rationale', { rationale: ' ' }, /a rationale is required/],
    ['an invalid policy', { policy: { ...POLICY, limits: {} } }, /^policy: limits/],
  ])('refuses approval with %s and writes nothing', (_name, overrides, message) => {
    const dir = coord();
    const { proposal_id: id } = proposeMemory(dir, { source_task: 'task-7', action: ACTION }, T0);
    const before = snapshot(dir);
    expect(() => approve(dir, id, overrides)).toThrow(MemoryProposalError);
    expect(() => approve(dir, id, overrides)).toThrow(message);
    expect(snapshot(dir)).toEqual(before);
  });

  it('refuses a second decision', () => {
    const dir = coord();
    const { proposal_id: id } = proposeMemory(dir, { source_task: 'task-7', action: ACTION }, T0);
    approve(dir, id);
    const before = snapshot(dir);
    expect(() => approve(dir, id)).toThrow(/it is already approved/);
    expect(() => approve(dir, id, { decision: 'reject' })).toThrow(/it is already approved/);
    expect(snapshot(dir)).toEqual(before);
  });

  it('refuses to approve a proposal file edited after proposing', () => {
    const dir = coord();
    const proposal = proposeMemory(dir, { source_task: 'task-7', action: ACTION }, T0);
    const path = join(dir, 'memory-proposals', `${proposal.proposal_id}.json`);
    writeFileSync(path, JSON.stringify({ ...proposal, action: { ...ACTION, summary: 'Something else entirely.' } }));
    expect(() => approve(dir, proposal.proposal_id)).toThrow(/proposal_id: does not match the proposal content/);
    expect(verifyMemoryLog(dir).ok).toBe(false);
  });

  it('detects an edited old log line, and then refuses every further append', () => {
    const dir = coord();
    const first = proposeMemory(dir, { source_task: 'task-7', action: ACTION }, T0);
    const second = proposeMemory(dir, { source_task: 'task-8', action: ACTION }, T0);
    const path = join(dir, 'memory-proposals', 'events.jsonl');
    const lines = logLines(dir);
    writeFileSync(path, [lines[0]!.replace('"at":"2026-09-01T10:00:00.000Z"', '"at":"2026-09-01T09:00:00.000Z"'), ...lines.slice(1)].join('\n') + '\n');
    expect(verifyMemoryLog(dir)).toMatchObject({ ok: false, problem: 'events.jsonl: line 1 was edited: its sha256 does not match its content' });
    const before = snapshot(dir);
    expect(() => approve(dir, second.proposal_id)).toThrow(/refusing to append to a log that does not verify/);
    expect(() => proposeMemory(dir, { source_task: 'task-9', action: ACTION }, T1)).toThrow(/refusing to append/);
    expect(snapshot(dir)).toEqual(before);
    expect(first.proposal_id).not.toBe(second.proposal_id);
  });

  it('detects a dropped line (the chain breaks) and a file that disagrees with the log', () => {
    const dir = coord();
    const { proposal_id: id } = proposeMemory(dir, { source_task: 'task-7', action: ACTION }, T0);
    proposeMemory(dir, { source_task: 'task-8', action: ACTION }, T0);
    const path = join(dir, 'memory-proposals', 'events.jsonl');
    const lines = logLines(dir);
    writeFileSync(path, `${lines[1]}\n`);
    expect(verifyMemoryLog(dir).problem).toBe('events.jsonl: line 1 has seq 2, expected 1');
    writeFileSync(path, `${lines.join('\n')}\n`);
    approve(dir, id);
    writeFileSync(path, `${lines.join('\n')}\n`); // the approval event dropped from the tail
    expect(verifyMemoryLog(dir).problem).toBe(`${id}.json says approved, the log says proposed`);
  });

  it('with the keys, rejects a decision whose signature is not the key holder\'s', () => {
    const dir = coord();
    const { proposal_id: id } = proposeMemory(dir, { source_task: 'task-7', action: ACTION }, T0);
    approve(dir, id);
    const otherSecret = 'another secret';
    const otherPolicy = { ...POLICY, human_authorization: { key_hashes: { [KEY]: createHash('sha256').update(otherSecret).digest('hex') } } };
    expect(verifyMemoryLog(dir, { policy: otherPolicy, secrets: { [KEY]: otherSecret } })).toMatchObject({ ok: false, problem: 'events.jsonl: line 2: bad signature' });
  });
});
