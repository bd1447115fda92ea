import {
  createScriptedProvider,
  handleTask,
  type ModelRequest,
  type RoleModels,
  type ScriptFunction,
} from '@polish/agents';
import { createInProcessDispatcher, startPolish, type RunPolishOptions } from '@polish/orchestrator';
import type { Criterion, RunEvent, RunResult, RunSpecInput } from '@polish/protocol';

export const CRITERIA: Criterion[] = [
  { id: 'C1', text: 'States the limit.' },
  { id: 'C2', text: 'Names the status code.' },
  { id: 'C3', text: 'Says how long to wait.' },
];

/** A quote any version of an artifact can back a pass with: its first non-blank line. */
export const quoteOf = (artifact: string) =>
  artifact
    .split('\n')
    .find((line) => line.trim() !== '')
    ?.trim() ?? artifact;

/** The version number written in a scenario artifact ("… version 3 …"). */
export const versionOf = (artifact: string) => Number(/version (\d+)/.exec(artifact)?.[1] ?? 0);

/**
 * A scripted model for table tests: Wave 1 returns `criteria`; Wave 2 scores version n of the
 * artifact with `verdicts[n - 1]` (the last row repeats); Wave 3 turns version n into n + 1.
 */
export function scenario(options: { criteria?: Criterion[]; verdicts: boolean[][] }): ScriptFunction {
  const criteria = options.criteria ?? CRITERIA;
  return (request: ModelRequest) => {
    const artifact = String(request.payload.artifact);
    const version = versionOf(artifact);
    switch (request.role) {
      case 'criteria':
        return { criteria };
      case 'evaluate': {
        const row = options.verdicts[Math.min(version, options.verdicts.length) - 1] ?? [];
        return {
          scores: criteria.map((criterion, index) =>
            row[index]
              ? { criterion_id: criterion.id, pass: true, evidence: quoteOf(artifact) }
              : { criterion_id: criterion.id, pass: false, gap: `fix ${criterion.id} in version ${version}` },
          ),
        };
      }
      case 'revise':
        return { artifact: artifact.replace(`version ${version}`, `version ${version + 1}`) };
    }
  };
}

/** Everything a test may want to look at after a scripted run. */
export interface ScriptedRun {
  result: RunResult;
  events: RunEvent[];
  requests: ModelRequest[];
}

/** Runs the polish loop in process with the scripted model answering through the real agent handlers. */
export async function runScripted(
  spec: RunSpecInput,
  script: ScriptFunction,
  options: Partial<RunPolishOptions> = {},
): Promise<ScriptedRun> {
  const requests: ModelRequest[] = [];
  const model = createScriptedProvider((request) => {
    requests.push(request);
    return script(request);
  });
  return { ...(await runWithModels(spec, model, options)), requests };
}

/** Runs the polish loop in process through the real agent handlers with these models. */
export async function runWithModels(spec: RunSpecInput, models: RoleModels, options: Partial<RunPolishOptions> = {}) {
  const events: RunEvent[] = [];
  const run = startPolish(spec, {
    dispatcher: createInProcessDispatcher((task) => handleTask(task, models)),
    onEvent: (event) => events.push(event),
    ...options,
  });
  return { result: await run.result, events };
}

/** The artifact inside a prompt's <artifact> fence. */
export const fencedArtifact = (text: string) => /<artifact>\n([\s\S]*)\n<\/artifact>/.exec(text)?.[1] ?? '';

/** The roles of the model calls made, in order. */
export const rolesOf = (requests: ModelRequest[]) => requests.map((request) => request.role);
