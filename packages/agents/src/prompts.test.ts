import { describe, expect, it } from 'vitest';
import {
  EditsRevisionSchema,
  EvaluationSchema,
  MAX_MODEL_CALLS_PER_TASK,
  PROMPT_OVERHEAD_TOKENS,
  REASK_OVERHEAD_TOKENS,
  RevisionSchema,
  CriteriaResultSchema,
} from '@polish/protocol';
import * as prompts from './prompts.js';
import { DEFAULT_MAX_REPAIRS, MAX_CITED_PROBLEM_CHARS, reaskText } from './generate-validated.js';
import { answerJsonSchema } from './handlers/handler.js';

// A budget reserves each call's worst case from the payload's size plus a fixed bound on what
// the prompt adds: these tests keep the agents' prompts inside the protocol's bounds.

const bytes = (text: string) => Buffer.byteLength(text);
const framing = (payload: Record<string, unknown>, user: string) => bytes(user) - bytes(JSON.stringify(payload));

describe('prompts stay within what a budget reserves', () => {
  const criteria = Array.from({ length: 8 }, (_, index) => ({ id: `C${index + 1}`, text: 'x' }));
  const payloads = {
    criteria: { artifact: 'a', goal: 'g' },
    evaluate: { artifact: 'a', criteria },
    revise: { artifact: 'a', blocking_gaps: ['C1: g'], goal: 'g' },
  };
  const users = {
    criteria: prompts.criteriaPrompt(payloads.criteria),
    evaluate: prompts
      .evaluatePrompt(payloads.evaluate)
      .map((part) => part.text)
      .join(''),
    revise: prompts.revisePrompt(payloads.revise),
  };

  it.each([
    ['criteria', prompts.CRITERIA_SYSTEM, CriteriaResultSchema],
    ['evaluate', prompts.EVALUATE_SYSTEM, EvaluationSchema],
    ['revise', prompts.REVISE_SYSTEM, RevisionSchema],
    ['revise', prompts.REVISE_EDITS_SYSTEM, EditsRevisionSchema],
  ] as const)(
    '%s: system prompt, answer schema and framing under PROMPT_OVERHEAD_TOKENS bytes',
    (role, system, schema) => {
      const added =
        bytes(system) +
        bytes(JSON.stringify(answerJsonSchema(schema))) +
        Math.max(0, framing(payloads[role], users[role]));
      expect(added).toBeLessThan(PROMPT_OVERHEAD_TOKENS);
    },
  );

  it('a re-ask cites at most MAX_CITED_PROBLEM_CHARS of the problem, within REASK_OVERHEAD_TOKENS', () => {
    const reask = reaskText(`${'x'.repeat(MAX_CITED_PROBLEM_CHARS)} (and more)`);
    expect(bytes(reask)).toBeLessThan(REASK_OVERHEAD_TOKENS);
  });

  it('a task makes at most MAX_MODEL_CALLS_PER_TASK model calls', () => {
    expect(1 + DEFAULT_MAX_REPAIRS).toBe(MAX_MODEL_CALLS_PER_TASK);
  });
});
