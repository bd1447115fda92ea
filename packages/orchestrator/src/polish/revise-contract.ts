import { z } from 'zod';
import { diffChars } from 'diff';
import {
  RevisionSchema,
  applyEdits,
  charsChanged,
  editsSchemaFor,
  usesEdits,
  type Edit,
  type ReviseMode,
  type RevisePayload,
  type RevisionReport,
} from '@polish/protocol';

/** A revision as the orchestrator keeps it: the whole new artifact, and what changed. */
export interface AppliedRevision {
  artifact: string;
  revision: RevisionReport;
}

/**
 * Characters removed plus added by a whole-text revision: a character diff, bounded in effort;
 * a rewrite too large to diff cheaply counts everything between its first and last change.
 */
function fullTextChange(before: string, after: string): number {
  const parts = diffChars(before, after, { maxEditLength: 5_000 });
  if (!parts) return charsChanged(before, after);
  return parts.reduce((sum, part) => sum + (part.added || part.removed ? part.value.length : 0), 0);
}

/** Criterion ids in the order edits name them, once each. */
const claimed = (edits: readonly Edit[]) => [...new Set(edits.map((edit) => edit.criterion_id))];

/** An answer of the wrong form for this run: always refused, with what to change. */
const refused = (message: string) => z.custom<never>(() => false, { message });

/**
 * The Wave 3 contract of one payload, chosen by the answer's form. Edits are checked against
 * the artifact that was sent (each `find` exactly once, no overlap, a gap-named criterion) and
 * applied here, to the artifact the orchestrator holds: a worker never supplies the base text,
 * so the new artifact is the one held plus the edits, and nothing else.
 */
export function reviseContract(
  payload: RevisePayload,
  mode: ReviseMode,
): (answer: unknown) => z.ZodType<AppliedRevision> {
  const edits = editsSchemaFor(payload).transform((answer): AppliedRevision => {
    const applied = applyEdits(payload.artifact, answer.edits);
    // editsSchemaFor has checked they apply.
    if (!('artifact' in applied)) throw new Error(applied.problem);
    return {
      artifact: applied.artifact,
      revision: {
        form: 'edits',
        edits: answer.edits,
        chars_changed: answer.edits.reduce((sum, edit) => sum + charsChanged(edit.find, edit.replace), 0),
        closes: claimed(answer.edits),
      },
    };
  });
  const full = RevisionSchema.transform((answer): AppliedRevision => ({
    artifact: answer.artifact,
    revision: {
      form: 'full',
      chars_changed: fullTextChange(payload.artifact, answer.artifact),
      closes: [],
      ...(mode === 'auto' && usesEdits(mode, payload.artifact) ? { fell_back: true } : {}),
    },
  }));
  return (answer) => {
    const isEdits = typeof answer === 'object' && answer !== null && 'edits' in answer;
    if (isEdits && mode === 'full')
      return refused(
        'the reviser answered with edits; this run takes the whole text (revise_mode full): give the reviser the answer setting revise: full',
      );
    if (!isEdits && mode === 'edits')
      return refused(
        'the reviser answered with the whole text; this run takes edits (revise_mode edits): answer {"edits": [{"find", "replace", "criterion_id"}]}',
      );
    return isEdits ? edits : full;
  };
}
