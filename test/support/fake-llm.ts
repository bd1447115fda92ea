import { prompts } from '@polish/agents';
import type { Role } from '@polish/protocol';
import { CRITERIA, fencedArtifact, quoteOf, versionOf } from './scenario.js';

/** Which polish role a request is for, read from its system prompt. */
export function roleOf(system: string): Role {
  if (system.includes(prompts.CRITERIA_SYSTEM.slice(0, 60))) return 'criteria';
  if (system.includes(prompts.EVALUATE_SYSTEM.slice(0, 60))) return 'evaluate';
  if (system.includes(prompts.REVISE_SYSTEM.slice(0, 60))) return 'revise';
  throw new Error(`unknown system prompt: ${system.slice(0, 80)}`);
}

/**
 * What the fake servers' "model" answers: the scenario of the table tests, read from the
 * prompt text. Version n of the artifact passes the first n criteria; a revision turns
 * "version n" into "version n+1" and keeps the size of the artifact.
 */
export function fakeAnswer(role: Role, userText: string): unknown {
  const artifact = fencedArtifact(userText);
  const version = versionOf(artifact);
  switch (role) {
    case 'criteria':
      return { criteria: CRITERIA };
    case 'evaluate':
      return {
        scores: CRITERIA.map((criterion, index) =>
          index < version
            ? { criterion_id: criterion.id, pass: true, evidence: quoteOf(artifact) }
            : { criterion_id: criterion.id, pass: false, gap: `fix ${criterion.id}` },
        ),
      };
    case 'revise':
      return { artifact: artifact.replace(`version ${version}`, `version ${version + 1}`) };
  }
}
