import { describe, expect, it } from 'vitest';
import { RunSpecSchema, worstCaseOfTask, PROMPT_OVERHEAD_TOKENS, REASK_OVERHEAD_TOKENS } from '@polish/protocol';
import { affords, createPurse, resolveBudget, worstCase } from './budget.js';

const spec = (budget: Record<string, number>, model = 'anthropic:claude-test') =>
  RunSpecSchema.parse({
    artifact: 'text',
    goal: 'goal',
    criteria: [{ id: 'C1', text: 'one' }],
    budget,
    models: {
      evaluate: [{ model, max_output_tokens: 100 }],
      revise: { model, max_output_tokens: 100 },
    },
  });
const prices = { 'anthropic:claude-test': { input: 1, output: 10 } };

describe('budgets', () => {
  it('refuses a budget in dollars for a model without a price, naming it; tokens need no price', () => {
    expect(() => resolveBudget(spec({ max_usd: 1 }, 'anthropic:unpriced'), prices)).toThrow(
      'max-usd: no price for anthropic:unpriced (the evaluate model)',
    );
    expect(resolveBudget(spec({ max_tokens: 1000 }, 'anthropic:unpriced'), prices)?.evaluate[0]?.price).toBeNull();
  });

  it('reserves every call a task may make: the payload and prompt each time, and each earlier answer and re-ask', () => {
    const worst = worstCaseOfTask(1000, 100);
    expect(worst.output_tokens).toBe(300);
    expect(worst.input_tokens).toBe(3 * (1000 + PROMPT_OVERHEAD_TOKENS) + (1 + 2) * (100 + REASK_OVERHEAD_TOKENS));
    const plan = resolveBudget(spec({ max_usd: 1 }), prices);
    const payload = { artifact: 'x'.repeat(100), criteria: [] };
    const bytes = Buffer.byteLength(JSON.stringify(payload));
    const task = worstCaseOfTask(bytes, 100);
    expect(plan && worstCase(plan, 'evaluate', payload)).toEqual({
      tokens: task.input_tokens + task.output_tokens,
      usd: (task.input_tokens * 1 + task.output_tokens * 10) / 1e6,
    });
  });

  it('a purse holds each send’s worst case until it is settled at its cost, and refuses what does not fit', () => {
    const plan = resolveBudget(spec({ max_tokens: 1000 }), prices);
    if (!plan) throw new Error('no plan');
    const purse = createPurse(plan, { usd: 0, tokens: 200 });
    const send = { usd: 0, tokens: 500 };
    purse.reserve(send, 'the first');
    expect(() => purse.reserve(send, 'a second')).toThrow('the budget cannot cover a second at worst');
    purse.settle(send, { usd: 0, tokens: 100 });
    purse.reserve(send, 'a second');
    expect(affords(plan, { usd: 0, tokens: 500 }, { usd: 0, tokens: 500 })).toBe(true);
    expect(affords(plan, { usd: 0, tokens: 501 }, { usd: 0, tokens: 500 })).toBe(false);
  });
});
