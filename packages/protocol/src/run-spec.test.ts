import { describe, expect, it } from 'vitest';
import { RunSpecSchema } from './run-spec.js';
import { evaluationSchemaFor } from './evaluation.js';
import { CriteriaListSchema } from './criteria.js';

const criteria = [
  { id: 'C1', text: 'one' },
  { id: 'C2', text: 'two' },
];
const base = { artifact: 'text', goal: 'goal' };

function firstIssue(result: { success: boolean; error?: { issues: { path: PropertyKey[]; message: string }[] } }) {
  const issue = result.error?.issues[0];
  return issue ? `${issue.path.join('.')}: ${issue.message}` : 'ok';
}

describe('RunSpecSchema', () => {
  it('applies the defaults: pass_all, cap 4, revise mode auto, one judge, majority, evidence', () => {
    expect(RunSpecSchema.parse(base)).toEqual({
      ...base,
      threshold: 'pass_all',
      cap: 4,
      revise_mode: 'auto',
      judges: 1,
      quorum: 'majority',
      evidence: true,
    });
  });

  it.each([
    [{ ...base, cap: 0 }, 'cap: must be at least 1'],
    [{ ...base, cap: 9 }, 'cap: must be at most 8'],
    [{ ...base, cap: 2.5 }, 'cap: must be a whole number from 1 to 8'],
    [{ ...base, artifact: '  \n' }, 'artifact: must not be empty'],
    [{ ...base, goal: '' }, 'goal: must not be empty'],
    [{ ...base, threshold: 'most' }, 'threshold: must be pass_all or pass_N (e.g. pass_3)'],
    [{ ...base, threshold: 'pass_0', criteria }, 'threshold: pass_N needs N of at least 1'],
    [{ ...base, threshold: 'pass_3', criteria }, 'threshold: pass_3 needs 3 criteria but only 2 are given'],
    [{ ...base, threshold: 'pass_9' }, 'threshold: pass_9 can never be met: Wave 1 locks at most 8 criteria'],
    [{ ...base, criteria: [] }, 'criteria: at least 1 criterion is needed'],
    [{ ...base, criteria: [criteria[0], criteria[0]] }, 'criteria.1.id: duplicate criterion id C1'],
    [{ ...base, criteria: [{ id: 'C1', text: ' ' }] }, 'criteria.0.text: must not be empty'],
    [{ ...base, extra: 1 }, ': Unrecognized key: "extra"'],
    [
      { ...base, judges: 2, judge_models: ['anthropic:claude-a'] },
      'judge_models: names 1 models for 2 judges: give one per judge',
    ],
    [{ ...base, judge_models: [' '] }, 'judge_models.0: gives no lane name: use provider:model'],
    [
      { ...base, judge_models: ['openai:qwen@http://127.0.0.1:8000/v1'] },
      'judge_models.0: names an address (@…): give provider:model alone; where a worker reaches its model is its own',
    ],
    [
      { ...base, judges: 2, judge_models: ['openai:gpt-5.1', 'openai:gpt-5_1'] },
      'judge_models: "openai:gpt-5.1" and "openai:gpt-5_1" would share the lane openai_gpt-5_1: name the models so that they differ in letters, digits, "-" or "_"',
    ],
  ])('rejects %j with "%s"', (spec, message) => {
    expect(firstIssue(RunSpecSchema.safeParse(spec))).toBe(message);
  });

  it("accepts one model per judge, each giving its lane's name", () => {
    expect(
      RunSpecSchema.safeParse({ ...base, judges: 2, judge_models: ['anthropic:claude-a', 'openai:gpt-5.1'] }).success,
    ).toBe(true);
    // The same model twice (two judges of one model) shares its lane by design.
    expect(
      RunSpecSchema.safeParse({ ...base, judges: 2, judge_models: ['openai:gpt-5.1', ' openai:gpt-5.1'] }).success,
    ).toBe(true);
  });

  it('accepts pass_N up to the number of criteria and cap 1..8', () => {
    expect(RunSpecSchema.safeParse({ ...base, criteria, threshold: 'pass_2', cap: 8 }).success).toBe(true);
    expect(RunSpecSchema.safeParse({ ...base, criteria, threshold: 'pass_1', cap: 1 }).success).toBe(true);
  });

  it('rejects more than 8 criteria', () => {
    const nine = Array.from({ length: 9 }, (_, index) => ({ id: `C${index + 1}`, text: 't' }));
    expect(firstIssue(CriteriaListSchema.safeParse(nine))).toBe(': at most 8 criteria are allowed');
  });
});

describe('evaluationSchemaFor (the verdict contract)', () => {
  const schema = evaluationSchemaFor(criteria);
  it.each([
    ['a missing criterion', [{ criterion_id: 'C1', pass: true }], 'scores: criterion C2 is not scored'],
    [
      'a repeated criterion',
      [
        { criterion_id: 'C1', pass: true },
        { criterion_id: 'C1', pass: true },
        { criterion_id: 'C2', pass: true },
      ],
      'scores.1.criterion_id: criterion C1 scored twice',
    ],
    [
      'an invented criterion',
      [
        { criterion_id: 'C1', pass: true },
        { criterion_id: 'C2', pass: true },
        { criterion_id: 'C9', pass: true },
      ],
      'scores.2.criterion_id: invented criterion id C9',
    ],
    [
      'a failure without a gap',
      [
        { criterion_id: 'C1', pass: true },
        { criterion_id: 'C2', pass: false, gap: ' ' },
      ],
      'scores.1.gap: criterion C2 fails without a gap',
    ],
  ])('rejects %s', (_name, scores, message) => {
    expect(firstIssue(schema.safeParse({ scores }))).toBe(message);
  });

  it('rejects a model-supplied overall verdict', () => {
    const result = schema.safeParse({
      scores: [
        { criterion_id: 'C1', pass: true },
        { criterion_id: 'C2', pass: true },
      ],
      overall: 'pass',
    });
    expect(result.success).toBe(false);
  });
});
