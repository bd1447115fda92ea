import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '@polish/orchestrator';
import { createHmac } from 'node:crypto';
import { parse } from 'yaml';
import { polish } from './support/cli.js';
import {
  BUGGY,
  EXAMPLE,
  FIXED,
  REVIEWER_FAILS,
  SECRET,
  basePolicy,
  change,
  COMMAND_CRITIQUE,
  decide,
  parRunArgs,
  plan,
  resume,
  run,
  workspace,
} from './support/par-workspace.js';
import { startPolish } from './support/processes.js';

// Plan-act-reflect end to end: `polish par` with an embedded nats-server, real worker processes
// (par.plan, par.act, and par.command running `node test.js` in a temporary copy), and the
// scripted model as the agent. The sample project has a failing test the agent must fix.

describe('polish par', () => {
  it('fixes a failing test: cycle 1 fails its command critique, cycle 2 passes, and PASS cites the command output', async () => {
    const ws = workspace();
    execFileSync('git', ['init', '-q', ws.directory]);
    const outcome = await run(ws, ['--git']);
    expect(outcome.code, outcome.stderr).toBe(0);
    expect(JSON.parse(outcome.stdout)).toMatchObject({ final_status: 'pass', cycles: 2 });
    const task = ws.task();
    expect(task.final_status).toBe('pass');
    expect(task.cycles.map((cycle) => cycle.verdict)).toEqual(['fail', 'pass']);
    expect(task.cycles[0]?.critique).toContain('FAIL add(2, 3) returned 1, expected 5');
    expect(ws.read('add.js')).toContain('return a + b');
    // PASS cites its evidence: the command's output, kept as an evidence file and quoted in the report.
    const evidence = task.cycles[1]?.evidence_refs.find((ref) => ref.startsWith('.coord/evidence/command-')) ?? '';
    expect(ws.read(evidence)).toContain('exit code: 0');
    expect(ws.read(evidence)).toContain('ok: 3 cases pass');
    const report = ws.read('.coord/par_t_final.md');
    expect(report).toContain('**pass**');
    expect(report).toContain(evidence);
    expect(report).toContain('ok: 3 cases pass');
    expect(report).toMatch(/Unsuccessful attempts\n\n- cycle 1: swap the operands in add\(\) → fail/);
    expect(ws.checkpoint()).toMatchObject({ status: 'completed', cycle: 2, same_failure_retries: 0 });
    // --git: one commit per cycle, named after its plan.
    const log = execFileSync('git', ['-C', ws.directory, 'log', '--format=%s'], { encoding: 'utf8' })
      .trim()
      .split('\n')
      .reverse();
    expect(log.slice(0, 2)).toEqual([
      'par(iter-1): swap the operands in add()',
      'par(iter-2): add the operands in add()',
    ]);
  });

  it('the same failure repeated stops at max_same_failure_retries', async () => {
    // Each cycle writes a different file (so there is new evidence) with the same bug.
    const attempts = [0, 1, 2, 3, 4].map((n) => ({
      when: { history_length: n },
      answer: change(`// attempt ${n}\n${BUGGY}`),
    }));
    const ws = workspace({
      limits: { max_same_failure_retries: 2, max_no_evidence_cycles: 5 },
      script: { 'par.plan': [{ answer: plan('try again') }], 'par.act': attempts },
    });
    const outcome = await run(ws);
    expect(outcome.code, outcome.stderr).toBe(4);
    const result = JSON.parse(outcome.stdout);
    expect(result.final_status).toBe('stop');
    expect(result.decision.reasons).toEqual(['limit_reached:same_failure_retries=2:max_same_failure_retries=2']);
    expect(ws.checkpoint()).toMatchObject({
      status: 'budget_exhausted',
      cycle: 3,
      same_failure_retries: 2,
      no_evidence_cycles: 0,
    });
    expect(ws.task().cycles.map((cycle) => cycle.verdict)).toEqual(['fail', 'fail', 'fail']);
  });

  it('no new evidence stops at max_no_evidence_cycles', async () => {
    // The agent writes the same file every cycle: no new artifact, no new test result.
    const ws = workspace({
      limits: { max_same_failure_retries: 10, max_no_evidence_cycles: 2 },
      script: { 'par.plan': [{ answer: plan('tidy add()') }], 'par.act': [{ answer: change(`// tidied\n${BUGGY}`) }] },
    });
    const outcome = await run(ws);
    expect(outcome.code, outcome.stderr).toBe(4);
    expect(JSON.parse(outcome.stdout).decision.reasons).toEqual([
      'limit_reached:no_evidence_cycles=2:max_no_evidence_cycles=2',
    ]);
    expect(ws.checkpoint()).toMatchObject({ cycle: 3, no_evidence_cycles: 2, same_failure_retries: 2 });
  });

  it('transcript growth hands back at a checkpoint, and resume continues from it to PASS', async () => {
    const ws = workspace({ limits: { checkpoint_transcript_bytes: 1000, max_transcript_bytes: 1_000_000 } });
    const first = await run(ws);
    expect(first.code, first.stderr).toBe(3);
    const handedBack = JSON.parse(first.stdout);
    expect(handedBack.final_status).toBe('checkpoint');
    expect(handedBack.decision.checkpoint_required).toBe(true);
    expect(handedBack.decision.reasons[0]).toMatch(
      /^checkpoint_required:transcript_growth=\d+:checkpoint_transcript_bytes=1000$/,
    );
    const saved = ws.checkpoint();
    expect(saved).toMatchObject({ status: 'running', cycle: 1 });
    expect(saved.last_checkpoint_transcript_bytes).toBe(saved.transcript_bytes);
    expect(ws.task().final_status).toBe('checkpoint');

    const resumed = await resume(ws);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(JSON.parse(resumed.stdout)).toMatchObject({ final_status: 'pass', cycles: 2 });
    // The resumed cycle is cycle 2: it saw cycle 1's critique (the script's second answer).
    expect(ws.task().cycles.map((cycle) => [cycle.cycle, cycle.verdict])).toEqual([
      [1, 'fail'],
      [2, 'pass'],
    ]);
    expect(ws.checkpoint().cycle).toBe(2);
  });

  it('self-critique alone never yields PASS, even when the agent says it passed and the fix is right', async () => {
    const ws = workspace({
      limits: { max_cycles: 2 },
      script: { 'par.plan': [{ answer: plan('add the operands') }], 'par.act': [{ answer: change(FIXED, true) }] },
    });
    const outcome = await run(ws, [], ['--critique', 'self']);
    expect(outcome.code, outcome.stderr).toBe(4);
    const result = JSON.parse(outcome.stdout);
    expect(result.final_status).toBe('stop');
    expect(
      ws
        .task()
        .cycles.every(
          (cycle) => cycle.verdict === 'fail' && cycle.critique.startsWith('self-assessment (not acceptance)'),
        ),
    ).toBe(true);
    expect(ws.read('.coord/par_t_final.md')).toContain('never independent acceptance');
  });

  it('a human gate waits; a signed approval lets it finish, a decline stops it, and a bad signature fails closed', async () => {
    const keyHashes = { alice: createHash('sha256').update(SECRET).digest('hex') };
    const ws = workspace({ keyHashes });
    const waiting = await run(ws, ['--human-gate', 'a maintainer accepts the change']);
    expect(waiting.code, waiting.stderr).toBe(5);
    expect(JSON.parse(waiting.stdout)).toMatchObject({ final_status: 'needs-human', pending_gates: ['H1'] });
    expect(waiting.stderr).toContain('polish par decide --topic t --gate H1');
    const pending = ws.checkpoint();
    expect(pending.status).toBe('waiting_for_human');
    expect(pending.pending_action_hash).toMatch(/^[a-f0-9]{64}$/);
    expect(ws.task().cycles.at(-1)?.verdict).toBe('needs-human');
    expect(ws.read('.coord/par_t_final.md')).toContain('polish par decide --topic t --gate H1');

    // Still waiting without a decision; no cycle is run.
    const again = await resume(ws);
    expect(again.code).toBe(5);
    expect(ws.task().cycles).toHaveLength(2);

    // Two copies of the waiting state: one approved, one declined, one tampered with.
    const declined = mkdtempSync(join(tmpdir(), 'polish-par-declined-'));
    cpSync(ws.directory, declined, { recursive: true });

    expect((await decide(ws.directory, '--approve', { keys: { alice: 'the wrong secret' } })).code).toBe(2);
    expect(ws.checkpoint().decisions).toHaveLength(0);
    const approved = await decide(ws.directory, '--approve');
    expect(approved.code, approved.stderr).toBe(0);
    const signed = ws.checkpoint().decisions[0];
    expect(signed).toMatchObject({
      gate: 'H1',
      actor: 'human:alice',
      decision: 'approve',
      affected_action_hash: pending.pending_action_hash,
    });

    const tampered = mkdtempSync(join(tmpdir(), 'polish-par-tampered-'));
    cpSync(ws.directory, tampered, { recursive: true });
    const finished = await resume(ws);
    expect(finished.code, finished.stderr).toBe(0);
    expect(JSON.parse(finished.stdout)).toMatchObject({ final_status: 'pass', cycles: 2 });
    expect(ws.checkpoint().status).toBe('completed');
    expect(ws.read('.coord/par_t_final.md')).toContain('human gate H1: approved by human:alice');

    expect((await decide(declined, '--decline')).code).toBe(0);
    const stopped = await resume({ ...ws, directory: declined });
    expect(stopped.code, stopped.stderr).toBe(4);
    expect(JSON.parse(stopped.stdout).decision.reasons).toEqual(['human_gate:H1:decline']);
    expect(JSON.parse(readFileSync(join(declined, '.coord/task-checkpoint.json'), 'utf8')).status).toBe('declined');

    const checkpointPath = join(tampered, '.coord/task-checkpoint.json');
    const forged = JSON.parse(readFileSync(checkpointPath, 'utf8'));
    forged.decisions[0].authorization.signature = 'f'.repeat(64);
    writeFileSync(checkpointPath, JSON.stringify(forged));
    const before = readFileSync(checkpointPath, 'utf8');
    const failedClosed = await resume({ ...ws, directory: tampered });
    expect(failedClosed.code).toBe(4);
    const result = JSON.parse(failedClosed.stdout);
    expect(result.decision).toMatchObject({ decision: 'stop', policy_hash: null, policy_id: 'policy' });
    expect(result.decision.reasons).toEqual(['evaluation_error:checkpoint: decisions.0: bad signature']);
    expect(readFileSync(checkpointPath, 'utf8')).toBe(before);
  });

  it('a review critique: a stateless reviewer worker judges the criteria, and its evidence is cited', async () => {
    const verdict = (passed: boolean) => ({
      results: [{ id: 'A1', passed, evidence: passed ? 'add.js returns a + b' : 'add.js subtracts' }],
    });
    const ws = workspace({
      script: {
        'par.plan': [
          { when: { history_length: 0 }, answer: plan('swap the operands') },
          { answer: plan('add the operands') },
        ],
        'par.act': [
          { when: { history_length: 0 }, answer: change(BUGGY.replace('a - b', 'b - a'), false) },
          { answer: change(FIXED) },
        ],
        'par.review': [{ when: { artifact_contains: 'a + b' }, answer: verdict(true) }, { answer: verdict(false) }],
      },
    });
    const outcome = await run(ws, [], ['--critique', 'review']);
    expect(outcome.code, outcome.stderr).toBe(0);
    const task = ws.task();
    expect(task.cycles.map((cycle) => cycle.verdict)).toEqual(['fail', 'pass']);
    expect(task.cycles[0]?.critique).toBe('A1 failed: add.js subtracts');
    const evidence = task.cycles[1]?.evidence_refs.find((ref) => ref.startsWith('.coord/evidence/review-')) ?? '';
    expect(JSON.parse(ws.read(evidence))).toEqual(verdict(true));
    expect(JSON.parse(outcome.stdout).models).toEqual([
      `scripted:${ws.script.split('/').at(-1)} (scripted, not an LLM)`,
    ]);
  });

  it('a score critique passes when the last number the command prints reaches the threshold', async () => {
    const ws = workspace();
    writeFileSync(
      join(ws.directory, 'score.js'),
      "const { add } = require('./add.js');\nconsole.log('score:', add(2, 3) === 5 ? 0.95 : 0.2);\n",
    );
    const outcome = await run(ws, [], ['--critique', 'score', '--command', 'node score.js', '--threshold', '0.9']);
    expect(outcome.code, outcome.stderr).toBe(0);
    expect(ws.task().cycles.map((cycle) => cycle.critique)).toEqual([
      'score 0.2 < threshold 0.9',
      'score 0.95 ≥ threshold 0.9',
    ]);
  });

  it('Ctrl-C mid-cycle loses nothing: the last checkpoint stands (exit 3) and resume finishes the task', async () => {
    const release = join(tmpdir(), `polish-par-release-${Date.now()}`);
    const script = parse(readFileSync(`${EXAMPLE}script.yaml`, 'utf8'));
    // The second cycle's action is held until the test says so: the run is interrupted while it waits.
    script['par.act'][1].hold_until_file = release;
    const ws = workspace({ script });
    const running = startPolish(
      parRunArgs({
        directory: ws.directory,
        goal: 'g',
        critique: COMMAND_CRITIQUE,
        script: ws.script,
      }),
    );
    await running.waitFor(/^par: plan: add the operands/);
    running.child.kill('SIGINT');
    expect((await running.exited).code).toBe(3);
    expect(ws.checkpoint()).toMatchObject({ status: 'running', cycle: 1 });
    expect(ws.task().cycles).toHaveLength(1);
    expect(ws.read('add.js')).toContain('return b - a');
    writeFileSync(release, '');
    const resumed = await resume(ws);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(ws.task().cycles.map((cycle) => cycle.verdict)).toEqual(['fail', 'pass']);
  });

  it('an infrastructure error ends the cycle as error (exit 7), and is not permission to retry', async () => {
    // The reviewer has no answer for this task: the par.review worker fails, so the critique is missing.
    const ws = workspace({
      script: REVIEWER_FAILS,
    });
    const outcome = await run(ws, [], ['--critique', 'review']);
    expect(outcome.code, outcome.stderr).toBe(7);
    expect(JSON.parse(outcome.stdout)).toMatchObject({
      final_status: 'error',
      decision: { decision: 'stop', reasons: ['task_status:error'] },
    });
    expect(ws.task().cycles.map((cycle) => cycle.verdict)).toEqual(['error']);
    expect(ws.task().cycles[0]?.critique).toMatch(
      /^infrastructure error: critique: scripted model .* has no par.review rule/,
    );
    expect(ws.checkpoint()).toMatchObject({ status: 'error', cycle: 1 });
    const again = await resume(ws);
    expect(again.code).toBe(7);
    expect(ws.task().cycles).toHaveLength(1);
  });

  it('a revise decision stops the task for rework; a decision is refused while the run is not waiting', async () => {
    const keyHashes = { alice: createHash('sha256').update(SECRET).digest('hex') };
    const ws = workspace({ keyHashes, limits: { checkpoint_transcript_bytes: 1000, max_transcript_bytes: 1_000_000 } });
    // Cycle 1 hands back at a checkpoint (transcript growth): nothing asks a human yet.
    expect((await run(ws, ['--human-gate', 'a maintainer accepts the change'])).code).toBe(3);
    const early = await decide(ws.directory, '--approve', { rationale: 'too early' });
    expect(early.code).toBe(2);
    expect(early.stderr).toContain('is not waiting for a human decision');
    expect(ws.checkpoint().decisions).toHaveLength(0);
    // Cycle 2 passes the command and waits; the human asks for a revision.
    expect((await resume(ws)).code).toBe(5);
    const revise = await decide(ws.directory, '--revise', { rationale: 'rename add' });
    expect(revise.code, revise.stderr).toBe(0);
    const stopped = await resume(ws);
    expect(stopped.code).toBe(4);
    expect(JSON.parse(stopped.stdout).decision.reasons).toEqual(['human_gate:H1:revise']);
    expect(ws.checkpoint().status).toBe('blocked');
  });

  it('a run stopped at a limit continues on resume once a signed override raises it', async () => {
    const keyHashes = { alice: createHash('sha256').update(SECRET).digest('hex') };
    const ws = workspace({ keyHashes, limits: { max_cycles: 1 } });
    const stopped = await run(ws);
    expect(stopped.code).toBe(4);
    expect(JSON.parse(stopped.stdout).decision.reasons).toEqual(['limit_reached:cycle=1:max_cycles=1']);
    const checkpoint = ws.checkpoint();
    expect(checkpoint.status).toBe('budget_exhausted');
    expect(checkpoint.pending_action_hash).toMatch(/^[a-f0-9]{64}$/);
    // Without an override, resume stops again for the same reason.
    expect((await resume(ws)).code).toBe(4);
    const unsigned = {
      limit: 'max_cycles',
      value: 3,
      observed_value: 0,
      reason: 'one more try',
      actor: 'human:alice',
      timestamp: '2026-11-30T12:00:00Z',
      affected_action_hash: checkpoint.pending_action_hash,
    };
    const signature = createHmac('sha256', SECRET).update(canonicalJson(unsigned), 'utf8').digest('hex');
    const path = join(ws.directory, '.coord/task-checkpoint.json');
    writeFileSync(
      path,
      JSON.stringify({
        ...ws.checkpoint(),
        overrides: [{ ...unsigned, authorization: { scheme: 'hmac-sha256', key_id: 'alice', signature } }],
      }),
    );
    const resumed = await resume(ws);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(JSON.parse(resumed.stdout).decision.effective_limits.max_cycles).toBe(3);
    expect(ws.task().cycles.map((cycle) => cycle.verdict)).toEqual(['fail', 'pass']);
  });

  it('a command critique that outlives its timeout is killed and recorded as a failure, run once', async () => {
    const ws = workspace({ limits: { max_cycles: 1 } });
    const outcome = await run(
      ws,
      ['--critique-timeout', '1'],
      ['--critique', 'command', '--command', 'echo started; sleep 30'],
    );
    expect(outcome.code, outcome.stderr).toBe(4);
    const [cycle] = ws.task().cycles;
    expect(cycle?.verdict).toBe('fail');
    expect(cycle?.critique).toMatch(/^`echo started; sleep 30`: timed out after 1 s\nstarted/);
    expect(outcome.stderr.match(/command critique/g)).toHaveLength(1);
  });

  it('the agent cannot write its own policy: the cycle ends as an error', async () => {
    const ws = workspace({
      script: {
        'par.plan': [{ answer: plan('raise my limits') }],
        'par.act': [
          {
            answer: { changes: [{ path: 'policy.json', content: '{}' }], self_assessment: { passed: true, notes: '' } },
          },
        ],
      },
    });
    const outcome = await run(ws);
    expect(outcome.code).toBe(7);
    expect(ws.task().cycles[0]?.critique).toContain(
      'the agent may not write the policy or the checkpoint (policy.json)',
    );
    expect(JSON.parse(ws.read('policy.json')).limits.max_cycles).toBe(basePolicy.limits.max_cycles);
  });

  it('refuses bad input with one line naming the problem, and writes nothing', async () => {
    const ws = workspace();
    const parRun = (critique: string, policy: string) =>
      polish(
        parRunArgs({ directory: ws.directory, goal: 'g', acceptance: 'a', critique: ['--critique', critique], policy }),
      );
    const noCommand = await parRun('command', 'policy.json');
    expect(noCommand.code).toBe(2);
    expect(noCommand.stderr).toMatch(/invalid input: command: required with --critique command/);
    const badPolicy = await parRun('self', 'missing.json');
    expect(badPolicy.code).toBe(2);
    expect(badPolicy.stderr).toMatch(/policy: cannot read .*missing.json/);
    const noTopic = await polish(['par', 'resume', '--topic', 'nothing-here', '--workspace', ws.directory]);
    expect(noTopic.code).toBe(2);
    expect(() => ws.read('.coord/par_t.yml')).toThrow();
  });

  it('an invalid policy fails closed: the policy engine stops the task (exit 4), and nothing is written (issue 18)', async () => {
    const ws = workspace();
    writeFileSync(
      join(ws.directory, 'policy.json'),
      JSON.stringify({ ...basePolicy, limits: { ...basePolicy.limits, max_concurrency: 99 } }),
    );
    const outcome = await run(ws);
    expect(outcome.code).toBe(4);
    expect(JSON.parse(outcome.stdout)).toMatchObject({
      final_status: 'stop',
      decision: {
        decision: 'stop',
        policy_hash: null,
        reasons: ['evaluation_error:policy: limits.max_concurrency must be at most limits.max_children_per_parent'],
      },
    });
    expect(outcome.stderr).toContain('STOP before any cycle (nothing written)');
    expect(() => ws.read('.coord/par_t.yml')).toThrow();
    expect(() => ws.read('.coord/task-checkpoint.json')).toThrow();
  });
});
