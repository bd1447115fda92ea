import { afterEach, describe, expect, it } from 'vitest';
import { createScriptedProvider, handleTask, textOf, type ModelProvider, type ModelRequest } from '@polish/agents';
import { createInProcessDispatcher, runPolish } from '@polish/orchestrator';
import { type Edit, type ReviseMode, type RunEvent, type RunResult, type TaskEnvelope } from '@polish/protocol';
import { startFakeModelServer, type FakeModelServer, type RecordedRequest } from './support/fake-model-server.js';
import { SDK_DIALECTS } from './support/sdk-dialects.js';
import { roleOf } from './support/fake-llm.js';
import { fencedArtifact, runWithModels } from './support/scenario.js';
import { foreignReply } from './support/foreign-reply.js';
import {
  LIMIT_SENTENCE,
  LONG_CRITERIA,
  STATUS_SENTENCE,
  asksForEdits,
  closedInFull,
  closingEdits,
  longAnswer,
  longArtifact,
  overlappingEdits,
} from './support/long-artifact.js';

// Wave 3 in edit form (issue 21): the reviser answers {find, replace, criterion_id} edits, code
// applies them to the artifact the orchestrator holds, and the result carries what changed.

const artifact = longArtifact();
const spec = (mode: ReviseMode) => ({
  artifact,
  goal: 'Document the traffic limits.',
  criteria: LONG_CRITERIA,
  revise_mode: mode,
});
const styled = (model: ModelProvider, mode: ReviseMode): ModelProvider => ({ ...model, answers: { revise: mode } });
const failure = (result: RunResult) =>
  result.status === 'FAILED' ? `${result.code}: ${result.reason}` : result.status;
const artifactOf = (request: ModelRequest) => String(request.payload.artifact);

/** The scripted model of these tests, with every request recorded. */
function scripted(
  answer: (request: ModelRequest) => unknown = (request) =>
    longAnswer(request.role, request.system, artifactOf(request)),
) {
  const requests: ModelRequest[] = [];
  const model = createScriptedProvider((request) => {
    requests.push(request);
    return answer(request);
  });
  return { model, requests };
}

const reviseRequests = (requests: ModelRequest[]) => requests.filter((request) => request.role === 'revise');

describe('edit-form revisions with the scripted model', () => {
  it('revises a 20 KB artifact with two gaps by edits; the final artifact equals the full-text mode’s', async () => {
    expect(artifact.length).toBeGreaterThanOrEqual(20_000);
    const edits = scripted();
    const full = scripted();
    const byEdits = await runWithModels(spec('edits'), styled(edits.model, 'edits'));
    const inFull = await runWithModels(spec('full'), styled(full.model, 'full'));
    expect([byEdits.result.status, inFull.result.status]).toEqual(['CONVERGED', 'CONVERGED']);
    expect(byEdits.result.artifact).toBe(inFull.result.artifact);
    expect(byEdits.result.artifact).toBe(closedInFull(artifact));
    expect(byEdits.result.artifact).toContain(LIMIT_SENTENCE);
    expect(byEdits.result.artifact).toContain(STATUS_SENTENCE);

    // The reviser answered with edits in one mode and the whole text in the other.
    expect(asksForEdits(reviseRequests(edits.requests)[0]?.system ?? '')).toBe(true);
    expect(asksForEdits(reviseRequests(full.requests)[0]?.system ?? '')).toBe(false);
    // Far fewer output tokens in edit form.
    expect(byEdits.result.usage_by_wave.revise.output_tokens * 10).toBeLessThan(
      inFull.result.usage_by_wave.revise.output_tokens,
    );
  });

  it('puts each revision’s edits, characters changed and claimed criteria in the result and the events', async () => {
    const { model } = scripted();
    const { result, events } = await runWithModels(spec('edits'), styled(model, 'edits'));
    const revision = result.history[0]?.revision;
    expect(revision).toEqual({
      form: 'edits',
      edits: closingEdits(artifact),
      chars_changed: LIMIT_SENTENCE.length + 1 + STATUS_SENTENCE.length + 1,
      closes: ['C1', 'C2'],
    });
    expect(result.history[1]?.revision).toBeUndefined();
    const revised = events.filter((event) => event.type === 'iteration.revised');
    expect(revised).toEqual([expect.objectContaining({ iteration: 1, ...revision })]);

    // The full-text form reports its size too, and claims nothing.
    const full = await runWithModels(spec('full'), styled(scripted().model, 'full'));
    expect(full.result.history[0]?.revision).toEqual({
      form: 'full',
      chars_changed: LIMIT_SENTENCE.length + 1 + STATUS_SENTENCE.length + 1,
      closes: [],
    });
  });

  it('auto mode uses edits from 4,000 characters on and the whole text below', async () => {
    const long = scripted();
    await runWithModels({ ...spec('auto'), revise_mode: undefined }, long.model);
    expect(asksForEdits(reviseRequests(long.requests)[0]?.system ?? '')).toBe(true);
    const short = scripted((request) =>
      request.role === 'evaluate'
        ? {
            scores: LONG_CRITERIA.map((criterion) =>
              artifactOf(request).includes('fixed')
                ? { criterion_id: criterion.id, pass: true, evidence: 'fixed' }
                : { criterion_id: criterion.id, pass: false, gap: 'not fixed' },
            ),
          }
        : { artifact: 'fixed' },
    );
    const { result } = await runWithModels({ ...spec('auto'), artifact: 'a short page' }, short.model);
    expect(result.status, failure(result)).toBe('CONVERGED');
    expect(asksForEdits(reviseRequests(short.requests)[0]?.system ?? '')).toBe(false);
    expect(result.history[0]?.revision?.form).toBe('full');
  });

  it.each([
    ['matches twice', { find: '## Section', replace: '## Part', criterion_id: 'C1' }, 'occurs more than once'],
    ['matches nowhere', { find: 'No such text.', replace: LIMIT_SENTENCE, criterion_id: 'C1' }, 'does not occur'],
  ])(
    'an edit whose find %s is re-asked citing the edit, and the run goes on once it is fixed',
    async (_name, bad, problem) => {
      const { model, requests } = scripted((request) => {
        if (request.role !== 'revise') return longAnswer(request.role, request.system, artifactOf(request));
        const round = request.messages.filter((message) => message.role === 'assistant').length;
        return round === 0 ? { edits: [bad] } : { edits: closingEdits(artifactOf(request)) };
      });
      const { result } = await runWithModels(spec('edits'), styled(model, 'edits'));
      expect(result.status, failure(result)).toBe('CONVERGED');
      const revisions = reviseRequests(requests);
      expect(revisions).toHaveLength(2);
      expect(textOf(revisions[1]?.messages.at(-1)?.content ?? '')).toContain(`edit 1: its find text ${problem}`);
    },
  );

  it.each([
    [
      'matches twice',
      { find: '## Section', replace: '## Part', criterion_id: 'C1' },
      'edit 1: its find text occurs more than once',
    ],
    [
      'matches nowhere',
      { find: 'No such text.', replace: LIMIT_SENTENCE, criterion_id: 'C1' },
      'edit 1: its find text does not occur',
    ],
    ['overlaps another', overlappingEdits(artifact), 'edits 1 and 2 overlap'],
  ])(
    'an edit that %s, if it persists, ends the run FAILED after bounded repair, the artifact untouched',
    async (_name, bad, problem) => {
      const edits: Edit[] = Array.isArray(bad) ? bad : [bad];
      const { model, requests } = scripted((request) =>
        request.role === 'revise' ? { edits } : longAnswer(request.role, request.system, artifactOf(request)),
      );
      const { result } = await runWithModels(spec('edits'), styled(model, 'edits'));
      expect(result.status).toBe('FAILED');
      if (result.status !== 'FAILED') return;
      expect(result.code).toBe('CONTRACT_VIOLATION');
      expect(result.reason).toContain(problem);
      // Re-asked twice in the agent, citing the edit each time; then the run ends with the agent's reason.
      expect(reviseRequests(requests)).toHaveLength(3);
      for (const request of reviseRequests(requests).slice(1))
        expect(textOf(request.messages.at(-1)?.content ?? '')).toContain(problem);
      expect(result.artifact).toBe(artifact);
      expect(result.history.map((record) => record.artifact)).toEqual([artifact]);
    },
  );

  it('auto mode falls back to the whole text when edits keep failing', async () => {
    const { model, requests } = scripted((request) => {
      if (request.role !== 'revise') return longAnswer(request.role, request.system, artifactOf(request));
      return asksForEdits(request.system)
        ? { edits: [{ find: '## Section', replace: '## Part', criterion_id: 'C1' }] }
        : { artifact: closedInFull(artifactOf(request)) };
    });
    const { result } = await runWithModels(spec('auto'), model);
    expect(result.status, failure(result)).toBe('CONVERGED');
    const revisions = reviseRequests(requests);
    expect(revisions.map((request) => asksForEdits(request.system))).toEqual([true, true, false]);
    expect(result.history[0]?.revision).toMatchObject({ form: 'full', fell_back: true });
    expect(result.artifact).toBe(closedInFull(artifact));
  });

  it('edits mode refuses a whole-text answer, and full mode refuses edits', async () => {
    const full = scripted();
    const refusedFull = await runWithModels(spec('edits'), styled(full.model, 'full'));
    expect(refusedFull.result.status).toBe('FAILED');
    expect(failure(refusedFull.result)).toContain('this run takes edits (revise_mode edits)');
    const edits = scripted();
    const refusedEdits = await runWithModels(spec('full'), styled(edits.model, 'edits'));
    expect(failure(refusedEdits.result)).toContain('this run takes the whole text (revise_mode full)');
  });

  it('an edit claiming a criterion no gap names is re-asked', async () => {
    const { model, requests } = scripted((request) => {
      if (request.role !== 'revise') return longAnswer(request.role, request.system, artifactOf(request));
      const round = request.messages.filter((message) => message.role === 'assistant').length;
      const edits = closingEdits(artifactOf(request));
      return round === 0 ? { edits: edits.map((edit) => ({ ...edit, criterion_id: 'C3' })) } : { edits };
    });
    const { result } = await runWithModels(spec('edits'), styled(model, 'edits'));
    expect(result.status, failure(result)).toBe('CONVERGED');
    expect(textOf(reviseRequests(requests)[1]?.messages.at(-1)?.content ?? '')).toContain(
      'edit 1 claims C3, which no blocking gap names',
    );
  });
});

describe('the orchestrator applies edits to the artifact it holds, and checks them again', () => {
  /** A protocol peer answering revise with whatever it is given, without @polish/agents' checks. */
  function foreignReviser(answers: unknown[]) {
    const model = createScriptedProvider((request) => longAnswer(request.role, request.system, artifactOf(request)));
    let revisions = 0;
    return createInProcessDispatcher(async (task: TaskEnvelope) => {
      if (task.role !== 'revise') return handleTask(task, model);
      const result = answers[Math.min(revisions, answers.length - 1)];
      revisions += 1;
      return foreignReply(task, result);
    });
  }

  it('re-sends once when a foreign worker’s edit matches twice, then fails the run', async () => {
    const bad = { edits: [{ find: '## Section', replace: '## Part', criterion_id: 'C1' }] };
    const result = await runPolish(spec('edits'), { dispatcher: foreignReviser([bad]) });
    expect(result.status).toBe('FAILED');
    expect(failure(result)).toContain('revise agent broke the contract 2 times');
    expect(failure(result)).toContain('edit 1: its find text occurs more than once');
  });

  it('applies a valid foreign answer to its own copy of the artifact', async () => {
    const events: RunEvent[] = [];
    const result = await runPolish(spec('edits'), {
      dispatcher: foreignReviser([{ edits: closingEdits(artifact) }]),
      onEvent: (event) => events.push(event),
    });
    expect(result.status, failure(result)).toBe('CONVERGED');
    expect(result.artifact).toBe(closedInFull(artifact));
    // What crossed the wire was the edits, not a new base text.
    const finished = events.find((event) => event.type === 'wave.finished' && event.role === 'revise');
    expect(finished?.type === 'wave.finished' && finished.result).toEqual({ edits: closingEdits(artifact) });
  });
});

// The real SDKs against local fake servers: the fake "model" reads the prompt and answers in
// the form the system prompt asks for.
let servers: FakeModelServer[] = [];
afterEach(async () => {
  await Promise.all(servers.map((server) => server.stop()));
  servers = [];
});

describe.each(SDK_DIALECTS)('edit-form revisions through the real $name SDK (local fake server)', (sdk) => {
  async function fakeServer(bad?: unknown) {
    const server = await startFakeModelServer(sdk.dialect, (request) => {
      const role = roleOf(sdk.system(request));
      if (bad !== undefined && role === 'revise') return { answer: bad };
      return { answer: longAnswer(role, sdk.system(request), fencedArtifact(sdk.user(request))) };
    });
    servers.push(server);
    return server;
  }

  it('revises by edits to the same artifact as full-text mode, with ≥ 10× fewer revise output tokens', async () => {
    const editServer = await fakeServer();
    const fullServer = await fakeServer();
    const byEdits = await runWithModels(spec('edits'), styled(sdk.provider(editServer.url, 'model', 8192), 'edits'));
    const inFull = await runWithModels(spec('full'), styled(sdk.provider(fullServer.url, 'model', 8192), 'full'));
    expect(byEdits.result.status, failure(byEdits.result)).toBe('CONVERGED');
    expect(inFull.result.status, failure(inFull.result)).toBe('CONVERGED');
    expect(byEdits.result.artifact).toBe(inFull.result.artifact);
    expect(byEdits.result.artifact).toBe(closedInFull(artifact));
    expect(byEdits.result.history[0]?.revision?.closes).toEqual(['C1', 'C2']);
    expect(byEdits.result.usage_by_wave.revise.output_tokens * 10).toBeLessThan(
      inFull.result.usage_by_wave.revise.output_tokens,
    );

    // The wire: the reviser's request holds the artifact, the gaps and the goal; no score, no criterion text.
    const revision = editServer.requests.find((request) => roleOf(sdk.system(request)) === 'revise');
    const text = sdk.user(revision as RecordedRequest);
    expect(fencedArtifact(text)).toBe(artifact);
    expect(text).toContain('C1: section 7 does not state the limit');
    expect(text).toContain('Document the traffic limits.');
    expect(text).not.toMatch(/"pass"|score|evidence/i);
    for (const criterion of LONG_CRITERIA) expect(text).not.toContain(criterion.text);
  });

  it('re-asks an edit whose find matches twice, and fails the run when it persists', async () => {
    const server = await fakeServer({ edits: [{ find: '## Section', replace: '## Part', criterion_id: 'C1' }] });
    const { result } = await runWithModels(spec('edits'), styled(sdk.provider(server.url, 'model', 8192), 'edits'));
    expect(result.status).toBe('FAILED');
    expect(failure(result)).toContain('edit 1: its find text occurs more than once');
    const revisions = server.requests.filter((request) => roleOf(sdk.system(request)) === 'revise');
    expect(revisions).toHaveLength(3);
    expect(sdk.user(revisions[1] as RecordedRequest)).toContain('edit 1: its find text occurs more than once');
  });

  it('refuses an overlapping pair of edits', async () => {
    const server = await fakeServer({ edits: overlappingEdits(artifact) });
    const { result } = await runWithModels(spec('edits'), styled(sdk.provider(server.url, 'model', 8192), 'edits'));
    expect(failure(result)).toContain('edits 1 and 2 overlap');
    expect(result.artifact).toBe(artifact);
  });
});
