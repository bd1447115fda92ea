import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { canonicalJson } from '@polish/orchestrator';
import { polish } from './support/cli.js';
import { FIXED, SECRET, change, decide, env, plan, resume, run, workspace } from './support/par-workspace.js';

// Issue 15, "gates bound by signature": each red-team case that turned a waiting or changed run
// into PASS on the old code, run against the built CLI. A human decision signs the task id,
// topic, cycle, the gate criteria and the hash of every file it approves; the task spec (and its
// human gates) is hashed and signed when the task is created; resuming checks all of it against
// the workspace whatever the checkpoint's status says. Issue 18: approved lessons reach the planner.

const keyHashes = { alice: createHash('sha256').update(SECRET).digest('hex') };
const GATE = ['--human-gate', 'a maintainer accepts the change'];
const CHECKPOINT = '.coord/task-checkpoint.json';

/** A workspace whose run passed its command critique and now waits for a human on gate H1. */
async function waiting() {
  const ws = workspace({ keyHashes });
  const result = await run(ws, GATE);
  expect(result.code, result.stderr).toBe(5);
  return ws;
}
type Waiting = Awaited<ReturnType<typeof waiting>>;
const edit = (ws: Waiting, path: string, change: (text: string) => string) =>
  writeFileSync(join(ws.directory, path), change(ws.read(path)));
const editJson = (ws: Waiting, path: string, change: (document: Record<string, unknown>) => void) =>
  edit(ws, path, (text) => {
    const document = JSON.parse(text) as Record<string, unknown>;
    change(document);
    return JSON.stringify(document, null, 2);
  });
/** Resumes and expects the run to be refused before any cycle, the checkpoint left as it was. */
async function refused(ws: Waiting, reason: RegExp, topic = 't', checkpoint = CHECKPOINT) {
  const before = ws.read(checkpoint);
  const cycles = ws.task(topic).cycles.length;
  const result = await resume(ws, undefined, topic);
  expect(result.code, result.stderr).toBe(4);
  const outcome = JSON.parse(result.stdout);
  expect(outcome).toMatchObject({ final_status: 'stop', decision: { policy_hash: null } });
  expect(outcome.reason).toMatch(reason);
  expect(ws.read(checkpoint)).toBe(before);
  expect(ws.task(topic).cycles).toHaveLength(cycles);
}

describe('human gates bound by signature (issue 15)', () => {
  it('removing human_gate: true from the task file does not pass the gate', async () => {
    const ws = await waiting();
    edit(ws, '.coord/par_t.yml', (text) => {
      const task = parse(text);
      delete task.acceptance_criteria[1].human_gate;
      return stringify(task);
    });
    await refused(
      ws,
      /task file: its spec \(goal, criteria, human gates, critique, files\) changed since it was created/,
    );
  });

  it('…nor does rewriting the spec hash to match: the spec is signed with a key of the policy', async () => {
    const ws = await waiting();
    edit(ws, '.coord/par_t.yml', (text) => {
      const task = parse(text);
      delete task.acceptance_criteria[1].human_gate;
      const spec = {
        topic: task.topic,
        goal: task.goal,
        policy_ref: task.policy_ref,
        checkpoint_ref: task.checkpoint_ref,
        acceptance_criteria: task.acceptance_criteria,
        critique_source: task.critique_source,
      };
      task.spec_sha256 = createHash('sha256').update(canonicalJson(spec)).digest('hex');
      task.spec_authorization = null;
      return stringify(task);
    });
    await refused(ws, /the policy pins human keys but the task spec is not signed/);
  });

  it('setting the checkpoint status back to running after editing approved files does not pass', async () => {
    const ws = await waiting();
    expect((await decide(ws.directory, '--approve')).code).toBe(0);
    edit(ws, 'add.js', (text) => `${text}// changed after the approval\n`);
    editJson(ws, CHECKPOINT, (checkpoint) => (checkpoint.status = 'running'));
    await refused(ws, /the signed human decisions are about another action/);
  });

  it("an approval (and its pending_action_hash) copied from another topic's checkpoint does not pass", async () => {
    const ws = await waiting();
    // Topic b: the same files, the same gate, its own checkpoint; it waits too.
    const other = await run(ws, [...GATE, '--checkpoint', '.coord/b.json'], undefined, 'b');
    expect(other.code, other.stderr).toBe(5);
    expect((await decide(ws.directory, '--approve')).code).toBe(0);
    const approved = ws.document(CHECKPOINT);
    editJson(ws, '.coord/b.json', (checkpoint) => {
      checkpoint.decisions = approved.decisions;
      checkpoint.pending_action_hash = approved.pending_action_hash;
      checkpoint.status = 'running';
    });
    await refused(ws, /the signed human decisions are about another action/, 'b', '.coord/b.json');
  });

  it('files edited after an approved PASS are not reported as approved on resume', async () => {
    const ws = await waiting();
    expect((await decide(ws.directory, '--approve')).code).toBe(0);
    expect((await resume(ws)).code).toBe(0);
    expect(ws.checkpoint().status).toBe('completed');
    edit(ws, 'add.js', (text) => `${text}// changed after the approval\n`);
    await refused(ws, /the signed human decisions are about another action/);
  });

  it('a task with human gates needs a policy that pins a human key', async () => {
    const ws = workspace();
    const result = await run(ws, GATE);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('human-gate: the policy pins no human key');
    expect(() => ws.read('.coord/par_t.yml')).toThrow();
  });
});

describe('memory that is used (issue 18)', () => {
  it('gives the planner the approved lessons of its own topic, and only those, and records them in the cycle', async () => {
    const ws = workspace({
      keyHashes,
      script: {
        'par.plan': [
          { when: { lessons_contain: 'UNAPPROVED' }, answer: plan('wrong: an unapproved lesson was used') },
          { when: { lessons_contain: 'OTHER TOPIC' }, answer: plan("wrong: another topic's lesson was used") },
          { when: { lessons_contain: 'Return a + b' }, answer: plan('add the operands, as the approved lesson says') },
          { answer: plan('swap the operands') },
        ],
        'par.act': [{ answer: change(FIXED) }],
      },
    });
    const coord = join(ws.directory, '.coord');
    const propose = async (topic: string, summary: string) => {
      const proposed = await polish([
        'memory',
        'propose',
        '--coord',
        coord,
        '--source-task',
        topic,
        '--operation',
        'add',
        '--target',
        'docs/lessons.md#add',
        '--summary',
        summary,
      ]);
      expect(proposed.code, proposed.stderr).toBe(0);
      return JSON.parse(proposed.stdout).proposal_id as string;
    };
    const approve = async (id: string) => {
      const approved = await polish(
        [
          'memory',
          'approve',
          id,
          '--coord',
          coord,
          '--policy',
          join(ws.directory, 'policy.json'),
          '--key-id',
          'alice',
          '--rationale',
          'seen twice',
        ],
        { env: env({ alice: SECRET }) },
      );
      expect(approved.code, approved.stderr).toBe(0);
    };
    const lesson = await propose('t', 'Return a + b: the test adds its operands.');
    await approve(lesson);
    await propose('t', 'UNAPPROVED: subtract instead.');
    await approve(await propose('other', 'OTHER TOPIC: multiply.'));

    const result = await run(ws);
    expect(result.code, result.stderr).toBe(0);
    const [cycle] = ws.task().cycles;
    expect(cycle).toMatchObject({
      plan_summary: 'add the operands, as the approved lesson says',
      verdict: 'pass',
      lessons: [lesson],
    });
    expect(cycle?.evidence_refs).toContain(`memory:${lesson}`);
    expect(cycle?.metrics?.memory_digest_tokens).toBeGreaterThan(0);
    expect(ws.read('.coord/par_t_final.md')).toContain(`Approved lessons given to the planner: ${lesson}.`);
    expect(readFileSync(join(coord, 'memory-proposals', `${lesson}.json`), 'utf8')).toContain('"state": "approved"');
  });
});
