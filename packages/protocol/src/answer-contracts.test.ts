// The answer contracts every agent reply is checked against (in the agent's repair loop and
// again by the orchestrator): each rule, with the message that names what is wrong.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CriteriaListSchema, CriteriaResultSchema, CriterionSchema, MAX_CRITERIA } from './criteria.js';
import { evaluationSchemaFor, quoteFound } from './evaluation.js';
import { readTolerantly } from './tolerant-read.js';

const criteria = [
  { id: 'C1', text: 'one' },
  { id: 'C2', text: 'two' },
];
const artifact = 'The limit is\n  100 requests   per minute.';
const pass = (id: string, evidence?: string) => ({ criterion_id: id, pass: true, ...(evidence ? { evidence } : {}) });
const fail = (id: string, gap?: string) => ({ criterion_id: id, pass: false, ...(gap === undefined ? {} : { gap }) });

/** The messages of every issue an answer raises, with their paths. */
function problems(schema: z.ZodType, answer: unknown): string[] {
  const parsed = schema.safeParse(answer);
  return parsed.success ? [] : parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
}

describe('quoteFound', () => {
  it.each([
    ['an exact span', '100 requests', true],
    ['a span across other whitespace', 'limit is 100 requests per minute.', true],
    ['a quote with its own runs of whitespace', '  limit\tis\n100 ', true],
    ['words not in the artifact', '200 requests', false],
    ['words run together that the artifact keeps apart', 'limitis', false],
    ['an empty quote', '', false],
    ['a quote of whitespace only', ' \n\t ', false],
  ])('%s: %s', (_name, quote, expected) => {
    expect(quoteFound(artifact, quote)).toBe(expected);
  });
});

describe('evaluationSchemaFor', () => {
  const schema = evaluationSchemaFor(criteria);

  it('accepts every criterion scored once, in any order', () => {
    expect(problems(schema, { scores: [fail('C2', 'add two'), pass('C1')] })).toEqual([]);
  });

  it.each([
    [
      'an invented id',
      { scores: [pass('C1'), pass('C2'), pass('C3')] },
      ['scores.2.criterion_id: invented criterion id C3'],
    ],
    [
      'a criterion scored twice',
      { scores: [pass('C1'), pass('C2'), pass('C1')] },
      ['scores.2.criterion_id: criterion C1 scored twice'],
    ],
    ['a criterion not scored', { scores: [pass('C2')] }, ['scores: criterion C1 is not scored']],
    ['no scores at all', { scores: [] }, ['scores: criterion C1 is not scored', 'scores: criterion C2 is not scored']],
    [
      'a failure without a gap',
      { scores: [pass('C1'), fail('C2')] },
      ['scores.1.gap: criterion C2 fails without a gap'],
    ],
    [
      'a failure with a blank gap',
      { scores: [pass('C1'), fail('C2', '  ')] },
      ['scores.1.gap: criterion C2 fails without a gap'],
    ],
    ['an unknown field', { scores: [pass('C1'), pass('C2')], overall: true }, [': Unrecognized key: "overall"']],
  ])('refuses %s, naming it', (_name, answer, expected) => {
    expect(problems(schema, answer)).toEqual(expected);
  });

  it('with the artifact: every quote must be in it, whitespace-normalised', () => {
    const withArtifact = evaluationSchemaFor(criteria, { artifact });
    expect(problems(withArtifact, { scores: [pass('C1', 'limit is 100'), pass('C2')] })).toEqual([]);
    expect(problems(withArtifact, { scores: [pass('C1', 'limit is 200'), pass('C2')] })).toEqual([
      'scores.0.evidence: the evidence quoted for C1 is not in the artifact: quote its words exactly',
    ]);
    // A failing score's quote is checked too; a blank quote is no quote.
    expect(problems(withArtifact, { scores: [pass('C1'), fail('C2', 'g')] })).toEqual([]);
    expect(problems(withArtifact, { scores: [pass('C1'), { ...fail('C2', 'g'), evidence: 'not there' }] })).toEqual([
      'scores.1.evidence: the evidence quoted for C2 is not in the artifact: quote its words exactly',
    ]);
    expect(problems(withArtifact, { scores: [pass('C1', '  '), pass('C2')] })).toEqual([]);
  });

  it('without the artifact, quotes are not checked', () => {
    expect(
      problems(evaluationSchemaFor(criteria, { evidence: false }), { scores: [pass('C1', 'anything'), pass('C2')] }),
    ).toEqual([]);
  });

  it('with evidence required: every pass quotes something, and a fail needs none', () => {
    const strict = evaluationSchemaFor(criteria, { artifact, evidence: true });
    expect(problems(strict, { scores: [pass('C1', '100 requests'), fail('C2', 'g')] })).toEqual([]);
    const message = 'passes without evidence: quote the words of the artifact that satisfy it';
    expect(problems(strict, { scores: [pass('C1'), fail('C2', 'g')] })).toEqual([
      `scores.0.evidence: criterion C1 ${message}`,
    ]);
    expect(problems(strict, { scores: [pass('C1', ' '), fail('C2', 'g')] })).toEqual([
      `scores.0.evidence: criterion C1 ${message}`,
    ]);
  });
});

describe('criteria', () => {
  it.each([
    ['C1', true],
    ['C12', true],
    ['C0', false],
    ['c1', false],
    ['C1a', false],
    ['xC1', false],
    ['C', false],
  ])('a criterion id %s is valid: %s', (id, valid) => {
    expect(CriterionSchema.safeParse({ id, text: 't' }).success).toBe(valid);
  });

  it.each([
    ['empty text', { id: 'C1', text: '' }, 'text: must not be empty'],
    ['blank text', { id: 'C1', text: ' \n ' }, 'text: must not be empty'],
    ['a bad id', { id: 'X1', text: 't' }, 'id: a criterion id looks like "C1"'],
  ])('refuses %s', (_name, criterion, message) => {
    expect(new Set(problems(CriterionSchema, criterion))).toEqual(new Set([message]));
  });

  const list = (count: number) => Array.from({ length: count }, (_, index) => ({ id: `C${index + 1}`, text: 't' }));

  it(`holds 1 to ${MAX_CRITERIA} criteria with distinct ids`, () => {
    expect(MAX_CRITERIA).toBe(8);
    expect(problems(CriteriaListSchema, list(1))).toEqual([]);
    expect(problems(CriteriaListSchema, list(8))).toEqual([]);
    expect(problems(CriteriaListSchema, list(0))).toEqual([': at least 1 criterion is needed']);
    expect(problems(CriteriaListSchema, list(9))).toEqual([': at most 8 criteria are allowed']);
    expect(problems(CriteriaListSchema, [...list(2), { id: 'C1', text: 'again' }])).toEqual([
      '2.id: duplicate criterion id C1',
    ]);
    expect(problems(CriteriaResultSchema, { criteria: list(2), extra: 1 })).toEqual([': Unrecognized key: "extra"']);
  });
});

describe('readTolerantly', () => {
  const schema = evaluationSchemaFor(criteria);

  it('drops unknown fields at any depth, names each, and leaves the answer as it was', () => {
    const answer = {
      overall: 'pass',
      scores: [{ ...pass('C1'), confidence: 0.9, extra: { a: 1 } }, fail('C2', 'g')],
    };
    const before = structuredClone(answer);
    const read = readTolerantly(schema, answer);
    expect(read).toEqual({
      success: true,
      data: { scores: [pass('C1'), fail('C2', 'g')] },
      dropped: ['scores.0.confidence', 'scores.0.extra', 'overall'],
    });
    expect(answer).toEqual(before);
  });

  it('a valid answer drops nothing', () => {
    expect(readTolerantly(schema, { scores: [pass('C1'), pass('C2')] })).toEqual({
      success: true,
      data: { scores: [pass('C1'), pass('C2')] },
      dropped: [],
    });
  });

  it('still fails on what is wrong besides unknown fields, keeping what it dropped', () => {
    const read = readTolerantly(schema, { overall: 1, scores: [pass('C1')] });
    expect(read.success).toBe(false);
    expect(read.dropped).toEqual(['overall']);
    if (!read.success) expect(read.error.issues.map((issue) => issue.message)).toEqual(['criterion C2 is not scored']);
  });

  it('reads again after dropping: fields a later stage of the schema does not know are dropped too', () => {
    // The second schema of the pipe sees the answer only once the first accepts it.
    const staged = z.strictObject({ n: z.unknown() }).pipe(z.strictObject({ n: z.strictObject({ a: z.number() }) }));
    const answer = { x: 1, n: { a: 1, y: 2 } };
    const before = structuredClone(answer);
    expect(readTolerantly(staged, answer)).toEqual({ success: true, data: { n: { a: 1 } }, dropped: ['x', 'n.y'] });
    expect(answer).toEqual(before);
  });

  it('gives up after 8 rounds when a dropped field does not go away (it is not where the schema saw it)', () => {
    // The schema adds the object holding the unknown field: there is nothing to drop it from.
    const filled = z.preprocess(
      (value) => ({ ...(value as object), wrapped: { deep: { a: 1, x: 1 } } }),
      z.strictObject({ wrapped: z.strictObject({ deep: z.strictObject({ a: z.number() }) }) }),
    );
    const read = readTolerantly(filled, {});
    expect(read.success).toBe(false);
    expect(read.dropped).toEqual(Array(8).fill('wrapped.deep.x'));
    // Found where a null stood: nothing to delete from either, and no crash.
    const replaced = z.preprocess(
      (value) => ({ wrapped: (value as { wrapped: unknown }).wrapped ?? { a: 1, x: 1 } }),
      z.strictObject({ wrapped: z.strictObject({ a: z.number() }) }),
    );
    expect(readTolerantly(replaced, { wrapped: null }).success).toBe(false);
  });

  it('an answer that is not an object fails without dropping anything', () => {
    const read = readTolerantly(schema, 'not an object');
    expect(read.success).toBe(false);
    expect(read.dropped).toEqual([]);
  });
});
