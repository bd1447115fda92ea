import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import type * as nodeFs from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { canonicalJson } from '../par/canonical-json.js';
import { PolishError } from '@polish/protocol';
import { lockFileSettings } from '../lock-file.js';
import { decideMemoryProposal, listMemoryProposals, proposeMemory, verifyMemoryLog } from './memory-proposals.js';
import { approvedLessons } from './approved-lessons.js';

// Lets a test make one fs write fail, as a full disk would, while everything else goes through.
const failing = vi.hoisted(() => ({
  append: undefined as ((write: () => void, text: string) => void) | undefined,
  rename: false,
}));
vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof nodeFs>();
  return {
    ...fs,
    appendFileSync: (path: string, text: string) =>
      failing.append
        ? failing.append(() => fs.appendFileSync(path, text.slice(0, 40)), text)
        : fs.appendFileSync(path, text),
    renameSync: (from: string, to: string) => {
      if (failing.rename) throw Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' });
      fs.renameSync(from, to);
    },
  };
});
afterEach(() => {
  failing.append = undefined;
  failing.rename = false;
  lockFileSettings.timeoutMs = 10_000;
});

// The public sample policy beside the repository when it is there, else the test copy.
const sharedDir = new URL('../../../../../shared/agent-collab/', import.meta.url);
const fixtureDir = new URL('../../../../test/fixtures/agent-collab/', import.meta.url);
const SAMPLE = JSON.parse(
  readFileSync(new URL('policy.sample.json', existsSync(sharedDir) ? sharedDir : fixtureDir), 'utf8'),
);
const SECRET = 'correct horse battery staple';
const KEY = 'alice';
const POLICY = {
  ...SAMPLE,
  human_authorization: { key_hashes: { [KEY]: createHash('sha256').update(SECRET).digest('hex') } },
};
const SECRETS = { [KEY]: SECRET };
const T0 = new Date('2026-09-01T10:00:00Z');
const T1 = new Date('2026-09-01T11:00:00Z');
const ACTION = {
  operation: 'add' as const,
  target_ref: 'docs/lessons.md#testing',
  summary: 'Run the focused test before the whole suite.',
  evidence_refs: ['.coord/par_tests.yml#cycle-2'],
};

const coord = () => mkdtempSync(join(tmpdir(), 'polish-memory-'));
const logLines = (dir: string) =>
  readFileSync(join(dir, 'memory-proposals', 'events.jsonl'), 'utf8')
    .trim()
    .split('\n');
const snapshot = (dir: string) =>
  Object.fromEntries(
    readdirSync(join(dir, 'memory-proposals')).map((name) => [
      name,
      readFileSync(join(dir, 'memory-proposals', name), 'utf8'),
    ]),
  );
const approve = (dir: string, id: string, overrides: Record<string, unknown> = {}) =>
  decideMemoryProposal(
    dir,
    id,
    {
      decision: 'approve',
      keyId: KEY,
      rationale: 'matches what we saw',
      policy: POLICY,
      secrets: SECRETS,
      ...overrides,
    },
    T1,
  );

describe('memory proposals', () => {
  it('proposes and lists: a file in state proposed, with a content-derived id, and a first proposed event', () => {
    const dir = coord();
    const proposal = proposeMemory(dir, { source_task: 'task-7', action: ACTION }, T0);
    const expectedId = `mp-${createHash('sha256')
      .update(canonicalJson({ source_task: 'task-7', action: ACTION, created_at: T0.toISOString() }))
      .digest('hex')
      .slice(0, 12)}`;
    expect(proposal).toEqual({
      schema_version: 1,
      proposal_id: expectedId,
      source_task: 'task-7',
      action: ACTION,
      state: 'proposed',
      created_at: '2026-09-01T10:00:00.000Z',
      decision: null,
    });
    expect(listMemoryProposals(dir)).toEqual([proposal]);
    const check = verifyMemoryLog(dir);
    expect(check.ok).toBe(true);
    expect(check.events).toMatchObject([{ seq: 1, type: 'proposed', proposal_id: expectedId, previous_sha256: null }]);
    expect(check.events[0]?.proposal_sha256).toBe(createHash('sha256').update(canonicalJson(proposal)).digest('hex'));
  });

  it('refuses an invalid proposal', () => {
    const dir = coord();
    expect(() => proposeMemory(dir, { source_task: 'task-7', action: { ...ACTION, summary: '  ' } }, T0)).toThrow(
      /proposal: action.summary/,
    );
    expect(() =>
      proposeMemory(dir, { source_task: 'task-7', action: { ...ACTION, evidence_refs: ['a', 'a'] } }, T0),
    ).toThrow(/evidence_refs: must be unique/);
    expect(existsSync(join(dir, 'memory-proposals'))).toBe(false);
  });

  it('approves with a valid key: a signed decision in the file and a second event chained to the first', () => {
    const dir = coord();
    const { proposal_id: id } = proposeMemory(dir, { source_task: 'task-7', action: ACTION }, T0);
    const decided = approve(dir, id);
    expect(decided).toMatchObject({
      state: 'approved',
      decision: {
        decision: 'approve',
        actor: 'human:alice',
        rationale: 'matches what we saw',
        authorization: { scheme: 'hmac-sha256', key_id: KEY },
      },
    });
    expect(listMemoryProposals(dir)).toEqual([decided]);
    const check = verifyMemoryLog(dir, { policy: POLICY, secrets: SECRETS });
    expect(check).toMatchObject({
      ok: true,
      events: [
        { seq: 1, type: 'proposed' },
        { seq: 2, type: 'approved', decision: decided.decision },
      ],
    });
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
    [
      'a key not in the policy',
      { keyId: 'mallory', secrets: { mallory: SECRET } },
      /key mallory is not in the policy's key_hashes/,
    ],
    ['no rationale', { rationale: ' ' }, /a rationale is required/],
    ['an invalid policy', { policy: { ...POLICY, limits: {} } }, /^policy: limits/],
  ])('refuses approval with %s and writes nothing', (_name, overrides, message) => {
    const dir = coord();
    const { proposal_id: id } = proposeMemory(dir, { source_task: 'task-7', action: ACTION }, T0);
    const before = snapshot(dir);
    expect(() => approve(dir, id, overrides)).toThrow(PolishError);
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
    writeFileSync(
      path,
      [lines[0]!.replace('"at":"2026-09-01T10:00:00.000Z"', '"at":"2026-09-01T09:00:00.000Z"'), ...lines.slice(1)].join(
        '\n',
      ) + '\n',
    );
    expect(verifyMemoryLog(dir)).toMatchObject({
      ok: false,
      problem: 'events.jsonl: line 1 was edited: its sha256 does not match its content',
    });
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
    expect(verifyMemoryLog(dir).problem).toBe(
      'events.jsonl ends at line 2 but its head names line 3: lines were removed',
    );
    // With the head moved back too, the proposal file still disagrees with the log.
    const second = JSON.parse(lines[1] as string) as { sha256: string };
    writeFileSync(join(dir, 'memory-proposals', 'events.head.json'), JSON.stringify({ seq: 2, sha256: second.sha256 }));
    expect(verifyMemoryLog(dir).problem).toBe(`${id}.json says approved, the log says proposed`);
  });

  it('detects an approval cut from the end of the log with its proposal set back to proposed (issue 15)', () => {
    const dir = coord();
    const { proposal_id: id } = proposeMemory(dir, { source_task: 'task-7', action: ACTION }, T0);
    const proposed = readFileSync(join(dir, 'memory-proposals', `${id}.json`), 'utf8');
    approve(dir, id);
    const path = join(dir, 'memory-proposals', 'events.jsonl');
    writeFileSync(path, `${logLines(dir)[0]}\n`); // the last line (the approval) dropped
    writeFileSync(join(dir, 'memory-proposals', `${id}.json`), proposed); // and the proposal back to proposed
    expect(verifyMemoryLog(dir, { policy: POLICY, secrets: SECRETS })).toMatchObject({
      ok: false,
      problem: 'events.jsonl ends at line 1 but its head names line 2: lines were removed',
    });
    expect(() => approve(dir, id)).toThrow(/refusing to append to a log that does not verify: .*lines were removed/);
    expect(approvedLessons(dir, 'task-7', POLICY, SECRETS)).toEqual({
      lessons: [],
      problem: 'events.jsonl ends at line 1 but its head names line 2: lines were removed',
    });
  });

  it('gives a planner only the approved lessons of its own topic, from a log whose signatures verify', () => {
    const dir = coord();
    const approved = proposeMemory(dir, { source_task: 'topic-a', action: ACTION }, T0);
    const pending = proposeMemory(dir, { source_task: 'topic-a', action: { ...ACTION, summary: 'Not yet.' } }, T0);
    const other = proposeMemory(dir, { source_task: 'topic-b', action: { ...ACTION, summary: 'Elsewhere.' } }, T0);
    const rejected = proposeMemory(dir, { source_task: 'topic-a', action: { ...ACTION, summary: 'No.' } }, T0);
    approve(dir, approved.proposal_id);
    approve(dir, other.proposal_id);
    approve(dir, rejected.proposal_id, { decision: 'reject' });
    expect(pending.state).toBe('proposed');
    expect(approvedLessons(dir, 'topic-a', POLICY, SECRETS)).toEqual({
      lessons: [{ id: approved.proposal_id, target_ref: ACTION.target_ref, lesson: ACTION.summary }],
    });
    // Without the key's secret no approval can be checked, so none is used.
    expect(approvedLessons(dir, 'topic-a', POLICY, {})).toMatchObject({
      lessons: [],
      problem: /no secret for key alice/,
    });
  });

  it("with the keys, rejects a decision whose signature is not the key holder's", () => {
    const dir = coord();
    const { proposal_id: id } = proposeMemory(dir, { source_task: 'task-7', action: ACTION }, T0);
    approve(dir, id);
    const otherSecret = 'another secret';
    const otherPolicy = {
      ...POLICY,
      human_authorization: { key_hashes: { [KEY]: createHash('sha256').update(otherSecret).digest('hex') } },
    };
    expect(verifyMemoryLog(dir, { policy: otherPolicy, secrets: { [KEY]: otherSecret } })).toMatchObject({
      ok: false,
      problem: 'events.jsonl: line 2: bad signature',
    });
  });
});

describe('memory proposals: the lock and the order of writes', () => {
  const lock = (dir: string) => join(dir, 'memory-proposals', '.lock');
  const holdLock = (dir: string, content: string) => {
    mkdirSync(join(dir, 'memory-proposals'), { recursive: true });
    writeFileSync(lock(dir), content);
  };

  it('waits for a live holder and then gives up naming the lock file, having written nothing', () => {
    const dir = coord();
    proposeMemory(dir, { source_task: 'task-7', action: ACTION }, T0);
    holdLock(dir, `${process.pid}\n`);
    const before = snapshot(dir);
    lockFileSettings.timeoutMs = 100;
    expect(() => proposeMemory(dir, { source_task: 'task-8', action: ACTION }, T0)).toThrow(PolishError);
    expect(() => proposeMemory(dir, { source_task: 'task-8', action: ACTION }, T0)).toThrow(
      `waiting for the lock ${lock(dir)} (held by pid ${process.pid})`,
    );
    expect(() => approve(dir, listMemoryProposals(dir)[0]!.proposal_id)).toThrow(
      /timed out after 100 ms waiting for the lock .*\.lock/,
    );
    expect(() => verifyMemoryLog(dir)).toThrow(/waiting for the lock/);
    expect(snapshot(dir)).toEqual(before);
  });

  it('removes the lock of a process that is gone, and one whose holder never wrote its pid', () => {
    const dir = coord();
    const gone = spawnSync(process.execPath, ['-e', '']).pid!;
    holdLock(dir, `${gone}\n`);
    proposeMemory(dir, { source_task: 'task-7', action: ACTION }, T0);
    expect(existsSync(lock(dir))).toBe(false);
    holdLock(dir, '');
    const past = new Date(Date.now() - 60_000);
    utimesSync(lock(dir), past, past);
    proposeMemory(dir, { source_task: 'task-8', action: ACTION }, T0);
    expect(readdirSync(join(dir, 'memory-proposals')).sort()).toEqual(
      ['events.head.json', 'events.jsonl', ...listMemoryProposals(dir).map((p) => `${p.proposal_id}.json`)].sort(),
    );
    expect(verifyMemoryLog(dir).events).toHaveLength(2);
  });

  it('a failed append writes nothing: no proposal file, the log as it was (a partial line cut back), the lock released', () => {
    const dir = coord();
    const { proposal_id: id } = proposeMemory(dir, { source_task: 'task-7', action: ACTION }, T0);
    const before = snapshot(dir);
    failing.append = (writeSome) => {
      writeSome();
      throw Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' });
    };
    expect(() => proposeMemory(dir, { source_task: 'task-8', action: ACTION }, T0)).toThrow(
      'cannot append to events.jsonl (ENOSPC)',
    );
    expect(() => approve(dir, id)).toThrow('cannot append to events.jsonl (ENOSPC)');
    expect(snapshot(dir)).toEqual(before);
    failing.append = undefined;
    expect(verifyMemoryLog(dir).ok).toBe(true);
    expect(approve(dir, id).state).toBe('approved');
  });

  it('the event comes first: a file that then fails to be written is reported as missing, by every operation', () => {
    const dir = coord();
    failing.rename = true;
    expect(() => proposeMemory(dir, { source_task: 'task-7', action: ACTION }, T0)).toThrow(
      /^mp-[a-f0-9]{12} is recorded as proposed in events.jsonl line 1, but mp-[a-f0-9]{12}\.json could not be written \(ENOSPC\)$/,
    );
    failing.rename = false;
    const [event] = logLines(dir).map((line) => JSON.parse(line));
    // No temporary file, no lock; the head still names the empty log (the log is ahead of it by the event).
    expect(readdirSync(join(dir, 'memory-proposals')).sort()).toEqual(['events.head.json', 'events.jsonl']);
    expect(verifyMemoryLog(dir)).toMatchObject({
      ok: false,
      problem: `${event.proposal_id}.json is missing, but events.jsonl line 1 records the proposal`,
    });
    expect(() => approve(dir, event.proposal_id)).toThrow(
      `${event.proposal_id}.json is missing, but events.jsonl line 1 records the proposal`,
    );
    expect(() => proposeMemory(dir, { source_task: 'task-7', action: ACTION }, T0)).toThrow(
      `proposal ${event.proposal_id} already exists`,
    );
    expect(logLines(dir)).toHaveLength(1);

    const other = coord();
    const { proposal_id: id } = proposeMemory(other, { source_task: 'task-7', action: ACTION }, T0);
    failing.rename = true;
    expect(() => approve(other, id)).toThrow(
      `${id} is recorded as approved in events.jsonl line 2, but ${id}.json could not be written (ENOSPC)`,
    );
    failing.rename = false;
    expect(verifyMemoryLog(other).problem).toBe(`${id}.json says proposed, the log says approved`);
    expect(() => approve(other, id)).toThrow(/it is already approved/);
  });

  // Separate processes, each with its own copy of the module, like concurrent `polish memory` runs.
  // They use the built module: `npx tsc -b packages/orchestrator` (or `pnpm build`) first.
  it('keeps the log whole with 6 processes proposing and approving at once', async () => {
    const built = fileURLToPath(new URL('../../dist/memory/memory-proposals.js', import.meta.url));
    const source = fileURLToPath(new URL('memory-proposals.ts', import.meta.url));
    if (!existsSync(built) || statSync(built).mtimeMs < statSync(source).mtimeMs)
      throw new Error(`${built} is missing or older than its source: run npx tsc -b packages/orchestrator`);
    const dir = coord();
    const WORKERS = 6;
    const EACH = 4;
    // Each child imports the module, says ready, and starts only when told to: all of them at once.
    const script = `
      const { proposeMemory, decideMemoryProposal } = await import(process.env.MODULE);
      const { dir, worker, each, action, at, policy, secrets } = JSON.parse(process.env.JOB);
      process.stdout.write('ready\\n');
      process.stdin.once('data', () => {
        const ids = [];
        for (let i = 0; i < each; i += 1) ids.push(proposeMemory(dir, { source_task: 'task-' + worker + '-' + i, action }, new Date(at)).proposal_id);
        decideMemoryProposal(dir, ids[0], { decision: 'approve', keyId: 'alice', rationale: 'seen', policy, secrets }, new Date(at));
        process.stdout.write(JSON.stringify(ids) + '\\n');
        process.exit(0);
      });`;
    const children = Array.from({ length: WORKERS }, (_, worker) => {
      const job = { dir, worker, each: EACH, action: ACTION, at: T0.toISOString(), policy: POLICY, secrets: SECRETS };
      const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
        env: { ...process.env, MODULE: built, JOB: JSON.stringify(job) },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      const ready = new Promise<void>((resolve, reject) => {
        child.stdout.on('data', (chunk: Buffer) => {
          stdout += chunk.toString();
          if (stdout.startsWith('ready\n')) resolve();
        });
        child.once('exit', () => reject(new Error(`worker ${worker} exited before it was ready: ${stderr}`)));
      });
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const exited = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
        child.once('close', (code) => resolve({ code, stdout, stderr })),
      );
      return { child, ready, exited };
    });
    try {
      await Promise.all(children.map(({ ready }) => ready));
      for (const { child } of children) child.stdin.write('go\n');
      const results = await Promise.all(children.map(({ exited }) => exited));
      for (const result of results) expect([result.code, result.stderr]).toEqual([0, '']);
      const ids = results.flatMap((result) => JSON.parse(result.stdout.split('\n')[1]!) as string[]);
      expect(new Set(ids).size).toBe(WORKERS * EACH);

      const check = verifyMemoryLog(dir, { policy: POLICY, secrets: SECRETS });
      expect(check.problem).toBeUndefined();
      expect(check.events.map((event) => event.seq)).toEqual(
        Array.from({ length: WORKERS * (EACH + 1) }, (_, index) => index + 1),
      );
      const proposals = listMemoryProposals(dir);
      expect(proposals.map((proposal) => proposal.proposal_id).sort()).toEqual([...ids].sort());
      expect(proposals.filter((proposal) => proposal.state === 'approved')).toHaveLength(WORKERS);
      expect(readdirSync(join(dir, 'memory-proposals')).sort()).toEqual(
        ['events.head.json', 'events.jsonl', ...ids.map((id) => `${id}.json`)].sort(),
      );
    } finally {
      for (const { child } of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });
});
