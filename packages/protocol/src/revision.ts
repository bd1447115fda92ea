import { z } from 'zod';
import type { RevisePayload } from './roles.js';

/** What a Wave 3 (revise) agent returns in full-text form: the whole revised artifact. */
export const RevisionSchema = z.strictObject({
  artifact: z
    .string()
    .min(1, 'the revised artifact must not be empty')
    .refine((text) => text.trim().length > 0, 'the revised artifact must not be empty'),
});
export type Revision = z.infer<typeof RevisionSchema>;

/**
 * One edit of the artifact the reviser was given: `find` occurs exactly once in it (whitespace
 * exactly as given) and is replaced by `replace`; `criterion_id` names the gap the edit closes.
 */
export const EditSchema = z.strictObject({
  find: z.string().min(1, 'find must not be empty'),
  replace: z.string(),
  criterion_id: z.string().regex(/^C[1-9][0-9]*$/, 'a criterion id looks like "C1"'),
});
export type Edit = z.infer<typeof EditSchema>;

/** What a Wave 3 agent returns in edit form: edits to the artifact it was given, never a new base. */
export const EditsRevisionSchema = z.strictObject({ edits: z.array(EditSchema).min(1, 'give at least one edit') });
export type EditsRevision = z.infer<typeof EditsRevisionSchema>;

/** A Wave 3 answer, in either form. */
export const ReviseAnswerSchema = z.union([RevisionSchema, EditsRevisionSchema]);
export type ReviseAnswer = z.infer<typeof ReviseAnswerSchema>;

/**
 * How the reviser answers: `edits` ({find, replace, criterion_id} list), `full` (the whole text),
 * or `auto`: edits from {@link EDITS_THRESHOLD_CHARS} characters on, else the whole text, and
 * the whole text when edits keep failing.
 */
export const ReviseModeSchema = z.enum(['auto', 'edits', 'full']);
export type ReviseMode = z.infer<typeof ReviseModeSchema>;

/** In `auto` mode, artifacts of at least this many characters are revised by edits. */
export const EDITS_THRESHOLD_CHARS = 4_000;

/** Whether a reviser in this mode answers an artifact of this size with edits (before any fallback). */
export const usesEdits = (mode: ReviseMode, artifact: string) =>
  mode === 'edits' || (mode === 'auto' && artifact.length >= EDITS_THRESHOLD_CHARS);

/** Where each edit's `find` is, or why an edit cannot be applied (zero or several matches, an overlap). */
function locate(artifact: string, edits: readonly Edit[]): { starts: number[] } | { index: number; problem: string } {
  const starts: number[] = [];
  for (const [index, edit] of edits.entries()) {
    const start = artifact.indexOf(edit.find);
    if (start === -1) return { index, problem: `edit ${index + 1}: its find text does not occur in the artifact` };
    if (artifact.indexOf(edit.find, start + 1) !== -1)
      return { index, problem: `edit ${index + 1}: its find text occurs more than once; quote more context` };
    starts.push(start);
  }
  const order = starts.map((start, index) => index).sort((a, b) => (starts[a] ?? 0) - (starts[b] ?? 0));
  for (let rank = 1; rank < order.length; rank += 1) {
    const before = order[rank - 1] as number;
    const after = order[rank] as number;
    if ((starts[before] ?? 0) + (edits[before]?.find.length ?? 0) > (starts[after] ?? 0)) {
      const [first, second] = [before, after].sort((a, b) => a - b) as [number, number];
      return { index: second, problem: `edits ${first + 1} and ${second + 1} overlap; merge them into one edit` };
    }
  }
  return { starts };
}

/**
 * Applies edits to the artifact they were made for. Every `find` must occur exactly once in
 * that artifact and no two may overlap; otherwise nothing is applied and the problem names the
 * failing edit. Edits are located in the original text, so their order does not matter.
 */
export function applyEdits(
  artifact: string,
  edits: readonly Edit[],
): { artifact: string } | { index: number; problem: string } {
  const located = locate(artifact, edits);
  if (!('starts' in located)) return located;
  const order = edits.map((edit, index) => index).sort((a, b) => (located.starts[b] ?? 0) - (located.starts[a] ?? 0));
  let text = artifact;
  for (const index of order) {
    const edit = edits[index] as Edit;
    const start = located.starts[index] as number;
    text = text.slice(0, start) + edit.replace + text.slice(start + edit.find.length);
  }
  return { artifact: text };
}

/** The criterion ids the blocking gaps name ("C2: …" names C2). */
export const gapIds = (gaps: readonly string[]) =>
  gaps.map((gap) => /^(C[1-9][0-9]*)\s*:/.exec(gap)?.[1]).filter((id): id is string => id !== undefined);

/**
 * The edit-form contract for one revise payload: every edit applies exactly once to the
 * artifact given (see {@link applyEdits}), claims a criterion the blocking gaps name, and the
 * result is not empty.
 */
export function editsSchemaFor(payload: Pick<RevisePayload, 'artifact' | 'blocking_gaps'>) {
  const named = new Set(gapIds(payload.blocking_gaps));
  return EditsRevisionSchema.superRefine((answer, ctx) => {
    answer.edits.forEach((edit, index) => {
      if (!named.has(edit.criterion_id))
        ctx.addIssue({
          code: 'custom',
          path: ['edits', index, 'criterion_id'],
          message: `edit ${index + 1} claims ${edit.criterion_id}, which no blocking gap names (gaps: ${[...named].join(', ')})`,
        });
    });
    const applied = applyEdits(payload.artifact, answer.edits);
    if ('problem' in applied)
      ctx.addIssue({ code: 'custom', path: ['edits', applied.index], message: applied.problem });
    else if (applied.artifact.trim() === '')
      ctx.addIssue({ code: 'custom', path: ['edits'], message: 'the edits leave the artifact empty' });
  });
}

/**
 * Characters removed plus characters added between two texts, ignoring what they share at
 * both ends: the size of a change, comparable between an edit and a whole rewrite.
 */
export function charsChanged(before: string, after: string): number {
  let prefix = 0;
  const shorter = Math.min(before.length, after.length);
  while (prefix < shorter && before[prefix] === after[prefix]) prefix += 1;
  let suffix = 0;
  while (suffix < shorter - prefix && before[before.length - 1 - suffix] === after[after.length - 1 - suffix])
    suffix += 1;
  return before.length - prefix - suffix + (after.length - prefix - suffix);
}

/** What a revision changed: its form, the edits and the criterion each claims, and its size. */
export const RevisionReportSchema = z.strictObject({
  form: z.enum(['edits', 'full']),
  /** Edit form: the edits as applied, each naming the criterion whose gap it claims to close. */
  edits: z.array(EditSchema).optional(),
  /** Characters removed plus added (see `charsChanged`). */
  chars_changed: z.int().min(0),
  /** Criterion ids the edits claim to close, in order, once each (empty for a full-text revision). */
  closes: z.array(z.string()),
  /** Auto mode fell back to full text because edits kept failing. */
  fell_back: z.boolean().optional(),
});
export type RevisionReport = z.infer<typeof RevisionReportSchema>;
