import { describe, expect, it } from 'vitest';
import { createInProcessDispatcher, startPolish } from '@polish/orchestrator';
import { PolishError, type TaskRole, type TaskEnvelope, type TaskReply } from '@polish/protocol';
import { CRITERIA, rolesOf, runScripted, scenario, versionOf } from './support/scenario.js';
import { foreignReply } from './support/foreign-reply.js';

const T = true;
const F = false;
const spec = { artifact: '# Rate limits\nversion 1\n', goal: 'Document the rate limiter.' };

describe('polish loop: waves, threshold and cap (DESIGN §1)', () => {
  it.each([
    // name, spec overrides, verdicts per version, status, evaluations, best/final version
    ['converges at iteration 1', {}, [[T, T, T]], 'CONVERGED', 1, 1],
    [
      'converges at iteration 2',
      {},
      [
        [T, F, F],
        [T, T, T],
      ],
      'CONVERGED',
      2,
      2,
    ],
    [
      'converges exactly at the cap',
      { cap: 3 },
      [
        [F, F, F],
        [T, F, F],
        [T, T, T],
      ],
      'CONVERGED',
      3,
      3,
    ],
    [
      'cap 4 means 4 evaluations and 3 revisions',
      {},
      [
        [T, F, F],
        [T, T, F],
      ],
      'CAP_REACHED',
      4,
      4,
    ],
    ['cap 1: one evaluation, no revision', { cap: 1 }, [[T, F, F]], 'CAP_REACHED', 1, 1],
    ['cap 8: eight evaluations', { cap: 8 }, [[F, F, F]], 'CAP_REACHED', 8, 8],
    [
      'pass_2 converges with 2 of 3',
      { threshold: 'pass_2' },
      [
        [T, F, F],
        [T, T, F],
      ],
      'CONVERGED',
      2,
      2,
    ],
    ['pass_1 converges with 1 of 3', { threshold: 'pass_1' }, [[F, T, F]], 'CONVERGED', 1, 1],
    ['pass_all is not met by 2 of 3', { cap: 2 }, [[T, T, F]], 'CAP_REACHED', 2, 2],
    [
      'best version: most passes',
      { cap: 3 },
      [
        [T, F, F],
        [T, T, F],
        [F, F, F],
      ],
      'CAP_REACHED',
      3,
      2,
    ],
    [
      // (The same passes each time: a revision that broke a passing criterion would be asked again.)
      'best version: ties go to the later iteration',
      { cap: 4 },
      [
        [T, F, F],
        [T, T, F],
        [T, T, F],
        [F, F, F],
      ],
      'CAP_REACHED',
      4,
      3,
    ],
  ] as const)('%s', async (_name, overrides, verdicts, status, evaluations, version) => {
    const { result, requests } = await runScripted(
      { ...spec, ...overrides },
      scenario({ verdicts: verdicts.map((row) => [...row]) }),
    );
    expect(result.status).toBe(status);
    expect(result.iterations).toBe(evaluations);
    expect(rolesOf(requests).filter((role) => role === 'evaluate')).toHaveLength(evaluations);
    expect(rolesOf(requests).filter((role) => role === 'revise')).toHaveLength(evaluations - 1);
    expect(versionOf(result.artifact)).toBe(version);
    if (result.status === 'CAP_REACHED') {
      expect(result.best_iteration).toBe(version);
      const best = result.history[version - 1];
      expect(result.remaining_gaps).toEqual(best?.blocking_gaps);
      expect(result.remaining_gaps.length).toBeGreaterThan(0);
    }
  });

  it('skips Wave 1 when criteria are given, and locks them as given', async () => {
    const { result, requests, events } = await runScripted(
      { ...spec, criteria: CRITERIA },
      scenario({ verdicts: [[T, T, T]] }),
    );
    expect(rolesOf(requests)).toEqual(['evaluate']);
    expect(result.criteria).toEqual(CRITERIA);
    expect(events.find((event) => event.type === 'criteria.locked')).toMatchObject({
      extracted: false,
      criteria: CRITERIA,
    });
  });

  it('extracts criteria in Wave 1 when none are given, and every evaluation gets exactly those', async () => {
    const { requests, events } = await runScripted(
      spec,
      scenario({
        verdicts: [
          [F, F, F],
          [T, F, F],
          [T, T, T],
        ],
      }),
    );
    expect(rolesOf(requests)).toEqual(['criteria', 'evaluate', 'revise', 'evaluate', 'revise', 'evaluate']);
    expect(events.find((event) => event.type === 'criteria.locked')).toMatchObject({
      extracted: true,
      criteria: CRITERIA,
    });
    for (const request of requests.filter((entry) => entry.role === 'evaluate')) {
      expect(request.payload.criteria).toEqual(CRITERIA);
    }
  });

  it('sends the evaluator exactly artifact + criteria, and the reviser artifact + blocking gaps + goal', async () => {
    const { requests } = await runScripted(
      spec,
      scenario({
        verdicts: [
          [T, F, F],
          [T, T, T],
        ],
      }),
    );
    const evaluate = requests.find((request) => request.role === 'evaluate');
    const revise = requests.find((request) => request.role === 'revise');
    expect(Object.keys(evaluate?.payload ?? {}).sort()).toEqual(['artifact', 'criteria']);
    expect(Object.keys(revise?.payload ?? {}).sort()).toEqual(['artifact', 'blocking_gaps', 'goal']);
    expect(revise?.payload.blocking_gaps).toEqual(['C2: fix C2 in version 1', 'C3: fix C3 in version 1']);
    expect(JSON.stringify(revise?.messages)).not.toContain('States the limit.');
  });

  it('fails with a reason when pass_N asks for more criteria than Wave 1 locked', async () => {
    const { result, requests } = await runScripted(
      { ...spec, threshold: 'pass_4' },
      scenario({ verdicts: [[T, T, T]] }),
    );
    expect(result.status).toBe('FAILED');
    expect(result.status === 'FAILED' && result.code).toBe('INVALID_INPUT');
    expect(result.status === 'FAILED' && result.reason).toContain('pass_4');
    expect(rolesOf(requests)).toEqual(['criteria']);
  });

  it('never edits the artifact: outputs are byte-equal to the input or a Wave 3 answer', async () => {
    const weird = '  version 1 \r\n\ttrailing spaces   \n\n\u00a0';
    const revised = '\n version 2\t\r\n  <b>kept as is</b>  \n';
    const { result } = await runScripted({ artifact: weird, goal: 'g', criteria: CRITERIA, cap: 2 }, (request) => {
      if (request.role === 'revise') return { artifact: revised };
      const pass = String(request.payload.artifact) === revised;
      return {
        scores: CRITERIA.map((c) =>
          pass ? { criterion_id: c.id, pass, evidence: 'kept as is' } : { criterion_id: c.id, pass, gap: 'g' },
        ),
      };
    });
    expect(result.status).toBe('CONVERGED');
    expect(result.artifact).toBe(revised);
    expect(result.history.map((record) => record.artifact)).toEqual([weird, revised]);
  });

  it('reports events in order, from run.started to run.finished', async () => {
    const { events } = await runScripted(
      spec,
      scenario({
        verdicts: [
          [T, F, F],
          [T, T, T],
        ],
      }),
    );
    const types = events.map((event) => event.type).filter((type) => type !== 'state.entered');
    expect(types).toEqual([
      'run.started',
      'wave.started',
      'wave.finished',
      'criteria.locked',
      'wave.started',
      'wave.finished',
      'iteration.evaluated',
      'wave.started',
      'wave.finished',
      'iteration.revised',
      'iteration.finished',
      'wave.started',
      'wave.finished',
      'iteration.evaluated',
      'iteration.finished',
      'run.finished',
    ]);
    const states = events.flatMap((event) => (event.type === 'state.entered' ? [event.state] : []));
    expect(states).toEqual(['extracting', 'evaluating', 'revising', 'evaluating', 'converged']);
  });

  it('labels scripted answers in the result', async () => {
    const { result } = await runScripted(spec, scenario({ verdicts: [[T, T, T]] }));
    expect(result.models).toEqual([{ provider: 'scripted', model: 'scripted:function', scripted: true }]);
    expect(result.usage.model_calls).toBe(2);
  });

  it('rejects an invalid spec before anything runs, naming the field', () => {
    const dispatcher = createInProcessDispatcher(() => Promise.reject(new Error('must not be called')));
    expect(() => startPolish({ ...spec, cap: 9 }, { dispatcher })).toThrow(
      new PolishError('INVALID_INPUT', 'cap: must be at most 8', { field: 'cap' }),
    );
  });

  it('ends CANCELLED, keeping the input artifact, when the caller aborts mid-run', async () => {
    const controller = new AbortController();
    const { result } = await runScripted(
      spec,
      (request) => {
        if (request.role === 'evaluate') controller.abort('user pressed Ctrl-C');
        return scenario({ verdicts: [[F, F, F]] })(request);
      },
      { signal: controller.signal },
    );
    expect(result.status).toBe('CANCELLED');
    expect(result.status === 'CANCELLED' && result.reason).toBe('user pressed Ctrl-C');
    expect(result.artifact).toBe(spec.artifact);
  });

  // Issue 22: a run that stops after evaluations keeps the best version so far, never the input.
  // Version 2 is the best (2 of 3 pass); the run stops while version 2 is being revised.
  const bestIsTwo = scenario({
    verdicts: [
      [F, F, F],
      [T, T, F],
    ],
  });

  it('ends CANCELLED with the best version so far when cancelled after evaluations', async () => {
    const controller = new AbortController();
    const { result } = await runScripted(
      spec,
      (request) => {
        if (request.role === 'revise' && versionOf(String(request.payload.artifact)) === 2)
          controller.abort('user pressed Ctrl-C');
        return bestIsTwo(request);
      },
      { signal: controller.signal },
    );
    expect(result.status).toBe('CANCELLED');
    expect(result.iterations).toBe(2);
    expect(versionOf(result.artifact)).toBe(2);
    expect(result.artifact).toBe(result.history[1]?.artifact);
  });

  it('ends FAILED with the best version so far when a wave fails after evaluations', async () => {
    const { result } = await runScripted(spec, (request) =>
      request.role === 'revise' && versionOf(String(request.payload.artifact)) === 2
        ? 'not JSON at all'
        : bestIsTwo(request),
    );
    expect(result.status).toBe('FAILED');
    expect(result.status === 'FAILED' && result.code).toBe('CONTRACT_VIOLATION');
    expect(result.iterations).toBe(2);
    expect(versionOf(result.artifact)).toBe(2);
    expect(result.artifact).toBe(result.history[1]?.artifact);
  });
});

describe('contract repair inside the agent (re-ask with the validation error cited)', () => {
  const valid = { scores: CRITERIA.map((c) => ({ criterion_id: c.id, pass: true, evidence: '# Rate limits' })) };

  it('repairs an invalid answer, then succeeds', async () => {
    const { result, requests } = await runScripted({ ...spec, criteria: CRITERIA }, (request) => {
      const round = request.messages.filter((message) => message.role === 'assistant').length;
      return round === 0 ? 'not JSON at all' : valid;
    });
    expect(result.status).toBe('CONVERGED');
    expect(requests).toHaveLength(2);
    expect(requests[1]?.messages.at(-1)?.content).toContain('the answer is not JSON');
    expect(result.usage.model_calls).toBe(2);
  });

  it.each([
    ['a missing criterion', { scores: [{ criterion_id: 'C1', pass: true }] }, 'criterion C2 is not scored'],
    [
      'an invented criterion',
      { scores: [...valid.scores, { criterion_id: 'C7', pass: true }] },
      'invented criterion id C7',
    ],
    [
      'a failure without a gap',
      { scores: [{ criterion_id: 'C1', pass: false }, ...valid.scores.slice(1)] },
      'C1 fails without a gap',
    ],
  ])('gives up after 2 repairs on %s and the run ends FAILED with that reason', async (_name, answer, problem) => {
    const { result, requests } = await runScripted({ ...spec, criteria: CRITERIA }, () => answer);
    expect(requests).toHaveLength(3);
    expect(requests[2]?.messages.at(-1)?.content).toContain(problem);
    expect(result.status).toBe('FAILED');
    if (result.status !== 'FAILED') return;
    expect(result.code).toBe('CONTRACT_VIOLATION');
    expect(result.reason).toContain('evaluate answer still invalid after 2 repairs');
    expect(result.reason).toContain(problem);
    expect(result.history).toEqual([]);
  });

  it.each([
    [
      'nine criteria',
      { criteria: Array.from({ length: 9 }, (_, i) => ({ id: `C${i + 1}`, text: 't' })) },
      'at most 8 criteria',
    ],
    ['duplicate ids', { criteria: [CRITERIA[0], CRITERIA[0]] }, 'duplicate criterion id C1'],
    ['empty text', { criteria: [{ id: 'C1', text: '' }] }, 'must not be empty'],
    ['no criteria', { criteria: [] }, 'at least 1 criterion'],
  ])('fails the run when Wave 1 keeps returning %s', async (_name, answer, problem) => {
    const { result } = await runScripted(spec, () => answer);
    expect(result.status).toBe('FAILED');
    expect(result.status === 'FAILED' && result.reason).toContain(problem);
  });
});

describe('orchestrator-side contract check (a foreign worker that skips validation)', () => {
  /** A protocol peer written without @polish/agents, answering evaluate with whatever it is given. */
  function foreignWorker(evaluations: unknown[]) {
    const dispatched: TaskRole[] = [];
    const handler = async (task: TaskEnvelope): Promise<TaskReply> => {
      dispatched.push(task.role);
      const result =
        task.role === 'evaluate' ? evaluations.shift() : { artifact: `${task.payload.artifact} version 2` };
      return foreignReply(task, result);
    };
    return { dispatcher: createInProcessDispatcher(handler), dispatched };
  }
  const pass = CRITERIA.map((c) => ({ criterion_id: c.id, pass: true, evidence: 'version 1' }));

  it.each([
    ['misses', { scores: pass.slice(1) }, 'criterion C1 is not scored'],
    ['repeats', { scores: [...pass, pass[0]] }, 'criterion C1 scored twice'],
    ['invents', { scores: [...pass, { criterion_id: 'C4', pass: true }] }, 'invented criterion id C4'],
    [
      'fails without a gap',
      { scores: [{ criterion_id: 'C1', pass: false }, ...pass.slice(1)] },
      'C1 fails without a gap',
    ],
  ])(
    'a verdict that %s a criterion is re-dispatched, then fails the run with the reason',
    async (_name, bad, problem) => {
      const { dispatcher, dispatched } = foreignWorker([bad, bad, bad]);
      const result = await startPolish({ ...spec, criteria: CRITERIA }, { dispatcher, maxContractRedispatch: 2 })
        .result;
      expect(dispatched).toEqual(['evaluate', 'evaluate', 'evaluate']);
      expect(result.status).toBe('FAILED');
      expect(result.status === 'FAILED' && result.code).toBe('CONTRACT_VIOLATION');
      expect(result.status === 'FAILED' && result.reason).toContain(problem);
    },
  );

  it('re-dispatches only the failing agent, and goes on when the next answer is valid', async () => {
    const { dispatcher, dispatched } = foreignWorker([{ scores: pass.slice(1) }, { scores: pass }]);
    const result = await startPolish({ ...spec, criteria: CRITERIA }, { dispatcher }).result;
    expect(result.status).toBe('CONVERGED');
    expect(dispatched).toEqual(['evaluate', 'evaluate']);
  });
});
