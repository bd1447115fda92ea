import { describe, expect, it } from 'vitest';
import { createScriptedProvider, type ModelRequest } from '@polish/agents';
import { buildRunView } from '@polish/inspector';
import { runWithModels } from './support/scenario.js';
import { LONG_CRITERIA, closingEdits, longAnswer, longArtifact } from './support/long-artifact.js';

// What the inspector page shows of a run, computed from the run's own events.

const artifactOf = (request: ModelRequest) => String(request.payload.artifact);

describe('the inspector view of a run', () => {
  it('shows each revision’s edits, claimed criteria and size on the version it made', async () => {
    const artifact = longArtifact();
    const model = createScriptedProvider((request) => longAnswer(request.role, request.system, artifactOf(request)));
    const { events } = await runWithModels(
      { artifact, goal: 'Document the traffic limits.', criteria: LONG_CRITERIA, revise_mode: 'edits' },
      { ...model, answers: { revise: 'edits' } },
    );
    const view = buildRunView('run', events);
    expect(view.versions.map((version) => version.label)).toEqual(['iteration 1', 'iteration 2']);
    expect(view.versions[0]?.revision).toBeUndefined();
    expect(view.versions[1]?.revision).toMatchObject({ form: 'edits', closes: ['C1', 'C2'] });
    expect(view.versions[1]?.revision?.edits).toEqual(closingEdits(artifact));
    expect(view.versions[1]?.diff.filter((part) => part.kind !== 'same').length).toBeGreaterThan(0);
  });
});
