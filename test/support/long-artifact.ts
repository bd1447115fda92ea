import { prompts } from '@polish/agents';
import type { Criterion, Edit } from '@polish/protocol';

// A 20 KB artifact with two gaps, for Wave 3 in edit form: C1 and C2 fail until one sentence
// each is added (in sections 7 and 23), C3 passes throughout.

export const LONG_CRITERIA: Criterion[] = [
  { id: 'C1', text: 'States the limit.' },
  { id: 'C2', text: 'Names the status code.' },
  { id: 'C3', text: 'Has an overview.' },
];

export const LIMIT_SENTENCE = 'The limit is 100 requests per minute per key.';
export const STATUS_SENTENCE = 'A request over the limit gets status 429 Too Many Requests.';
const OVERVIEW = 'Overview: this page documents how the gateway meters traffic.';

const WORDS = 'gateway bucket token window client header budget burst replica shard queue drain'.split(' ');

/** About 20 KB of sections, deterministic, with neither sentence in it. */
export function longArtifact(): string {
  const sections = Array.from({ length: 42 }, (_, section) => {
    const sentences = Array.from({ length: 6 }, (_, index) => {
      const words = Array.from({ length: 12 }, (_, word) => WORDS[(section * 7 + index * 3 + word) % WORDS.length]);
      return `${words.join(' ')} (${section + 1}.${index + 1}).`;
    });
    return `## Section ${section + 1}\n${sentences.join(' ')}\n`;
  });
  return `# Traffic metering\n${OVERVIEW}\n\n${sections.join('\n')}`;
}

/** The two edits that close C1 and C2, as a reviser in edit form answers them. */
export function closingEdits(artifact: string): Edit[] {
  const edits: Edit[] = [];
  if (!artifact.includes(LIMIT_SENTENCE))
    edits.push({ find: '## Section 7\n', replace: `## Section 7\n${LIMIT_SENTENCE}\n`, criterion_id: 'C1' });
  if (!artifact.includes(STATUS_SENTENCE))
    edits.push({ find: '## Section 23\n', replace: `## Section 23\n${STATUS_SENTENCE}\n`, criterion_id: 'C2' });
  return edits;
}

/** Two edits whose finds overlap: section 7's heading, and that heading's last words with the next line's start. */
export function overlappingEdits(artifact: string): Edit[] {
  const start = artifact.indexOf('## Section 7\n');
  return [
    { find: '## Section 7\n', replace: `## Section 7\n${LIMIT_SENTENCE}\n`, criterion_id: 'C1' },
    { find: artifact.slice(start + 3, start + 30), replace: 'Section 7 (revised)\n', criterion_id: 'C2' },
  ];
}

/** The same revision as the whole text. */
export function closedInFull(artifact: string): string {
  let text = artifact;
  for (const edit of closingEdits(artifact)) text = text.replace(edit.find, edit.replace);
  return text;
}

/** The evaluator's answer: C1 and C2 pass once their sentence is there, each quoting it. */
export function longScores(artifact: string) {
  const quoted = (id: string, sentence: string, gap: string) =>
    artifact.includes(sentence)
      ? { criterion_id: id, pass: true, evidence: sentence }
      : { criterion_id: id, pass: false, gap };
  return {
    scores: [
      quoted('C1', LIMIT_SENTENCE, 'section 7 does not state the limit'),
      quoted('C2', STATUS_SENTENCE, 'section 23 does not name the status code'),
      { criterion_id: 'C3', pass: true, evidence: OVERVIEW },
    ],
  };
}

/** Whether a Wave 3 system prompt asks for edits (else the whole text). */
export const asksForEdits = (system: string) => system.includes(prompts.REVISE_EDITS_SYSTEM.split('\n').at(-3) ?? '');

/** The "model" of these tests: evaluates with {@link longScores}, revises in the form the prompt asks. */
export function longAnswer(role: string, system: string, artifact: string): unknown {
  if (role === 'evaluate') return longScores(artifact);
  if (role === 'criteria') return { criteria: LONG_CRITERIA };
  return asksForEdits(system) ? { edits: closingEdits(artifact) } : { artifact: closedInFull(artifact) };
}
