import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Criterion } from '@polish/protocol';

// The scenario of the judging tests: a rate-limit page whose first version states the limit
// (C1) and has a title (C3) but names no status code (C2). A strict judge quotes what it finds;
// a lenient one passes everything, quoting the title.

export const JUDGING_CRITERIA: Criterion[] = [
  { id: 'C1', text: 'States the limit.' },
  { id: 'C2', text: 'Names the status code.' },
  { id: 'C3', text: 'Has a title.' },
];

export const TITLE = '# Limits';
export const LIMIT = 'The limit is 100 requests per minute.';
export const STATUS = 'Over the limit: status 429.';
export const FIRST = `${TITLE}\n${LIMIT}\n`;
export const FIXED = `${TITLE}\n${LIMIT}\n${STATUS}\n`;
/** What a careless reviser makes of the first version: C2 fixed, C1 and C3 broken. */
export const BROKEN = `${STATUS}\n`;

const rules: [string, string, string][] = [
  ['C1', LIMIT, 'the page states no limit'],
  ['C2', STATUS, 'no status code is named'],
  ['C3', TITLE, 'the page has no title'],
];

/** A strict judge: a criterion passes when its sentence is there, quoting it. */
export function strictScores(artifact: string) {
  return {
    scores: rules.map(([id, sentence, gap]) =>
      artifact.includes(sentence)
        ? { criterion_id: id, pass: true, evidence: sentence }
        : { criterion_id: id, pass: false, gap },
    ),
  };
}

/** A lenient judge: everything passes, quoting the first line. */
export function lenientScores(artifact: string) {
  const quote = artifact.split('\n')[0] ?? artifact;
  return { scores: rules.map(([id]) => ({ criterion_id: id, pass: true, evidence: quote })) };
}

/** A careful reviser adds the status line; a careless one (before it is told to keep C1) drops the rest. */
export function revised(artifact: string, gaps: readonly string[], careless = false): string {
  if (careless && !gaps.some((gap) => gap.startsWith('C1: keep this satisfied'))) return BROKEN;
  return artifact.includes(STATUS) ? artifact : FIXED;
}

/** A scratch folder of the CLI tests, and a writer of its files (strings as they are, the rest as JSON). */
export function scratchFiles(prefix: string) {
  const scratch = mkdtempSync(join(tmpdir(), prefix));
  const file = (name: string, content: unknown) => {
    const path = join(scratch, name);
    writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
    return path;
  };
  return { scratch, file };
}

/** The scenario's files in a scratch folder: the first version and the criteria, and a writer for more. */
export function judgingFiles(prefix: string) {
  const { scratch, file } = scratchFiles(prefix);
  return { scratch, file, artifact: file('limits.md', FIRST), criteria: file('criteria.json', JUDGING_CRITERIA) };
}
