import { describe, expect, it } from 'vitest';
import { applyEdits, charsChanged, editsSchemaFor } from './revision.js';
import { readTolerantly } from './tolerant-read.js';
import { evaluationSchemaFor } from './evaluation.js';

const edit = (find: string, replace: string, criterion_id = 'C1') => ({ find, replace, criterion_id });

describe('applyEdits', () => {
  it('applies edits located in the original text, whatever their order', () => {
    const text = 'alpha beta gamma delta';
    expect(applyEdits(text, [edit('gamma', 'GAMMA'), edit('alpha', 'ALPHA')])).toEqual({
      artifact: 'ALPHA beta GAMMA delta',
    });
  });

  it('takes whitespace exactly as given', () => {
    expect(applyEdits('a  b', [edit('a b', 'x')])).toEqual({
      index: 0,
      problem: 'edit 1: its find text does not occur in the artifact',
    });
  });

  it('allows adjacent edits and refuses overlapping ones, naming both', () => {
    expect(applyEdits('abcdef', [edit('abc', '1'), edit('def', '2')])).toEqual({ artifact: '12' });
    expect(applyEdits('abcdef', [edit('cde', '2'), edit('abcd', '1')])).toEqual({
      index: 1,
      problem: 'edits 1 and 2 overlap; merge them into one edit',
    });
  });
});

describe('editsSchemaFor', () => {
  const payload = { artifact: 'The limit is unstated.', blocking_gaps: ['C2: name the limit'] };

  it('accepts edits that apply once and claim a gap-named criterion', () => {
    expect(editsSchemaFor(payload).safeParse({ edits: [edit('unstated', '100/min', 'C2')] }).success).toBe(true);
  });

  it('refuses an edit leaving the artifact empty', () => {
    const parsed = editsSchemaFor(payload).safeParse({ edits: [edit('The limit is unstated.', ' ', 'C2')] });
    expect(parsed.error?.issues[0]?.message).toBe('the edits leave the artifact empty');
  });
});

describe('charsChanged', () => {
  it('counts removed plus added characters, ignoring what both ends share', () => {
    expect(charsChanged('## H\n', '## H\nnew line\n')).toBe(9);
    expect(charsChanged('abc', 'axc')).toBe(2);
    expect(charsChanged('same', 'same')).toBe(0);
  });
});

describe('readTolerantly', () => {
  const criteria = [{ id: 'C1', text: 'one' }];

  it('drops unknown fields at any depth and reports their paths', () => {
    const read = readTolerantly(evaluationSchemaFor(criteria), {
      scores: [{ criterion_id: 'C1', pass: false, gap: 'g', confidence: 0.9 }],
      overall: 'pass',
      blocking_gaps: [],
    });
    expect(read.success && read.data).toEqual({ scores: [{ criterion_id: 'C1', pass: false, gap: 'g' }] });
    expect(read.dropped.sort()).toEqual(['blocking_gaps', 'overall', 'scores.0.confidence']);
  });

  it('still refuses missing, repeated or invented criterion ids', () => {
    const read = readTolerantly(evaluationSchemaFor(criteria), {
      scores: [{ criterion_id: 'C9', pass: true }],
      overall: 'pass',
    });
    expect(read.success).toBe(false);
    expect(read.dropped).toEqual(['overall']);
  });
});
