import {
  PolishError,
  invalidInput,
  modelKey,
  worstCaseOfTask,
  type BudgetReport,
  type ModelInfo,
  type ModelPrice,
  type PriceTable,
  type Role,
  type RunSpec,
  type Usage,
} from '@polish/protocol';
import { dollarsOf } from './cost.js';

/** One role's (or judge's) declared model, priced. */
export interface PricedLimit {
  model: string;
  max_output_tokens: number;
  /** Null when the table has no price for it (allowed only without max_usd). */
  price: ModelPrice | null;
}

/**
 * A run's budget, resolved at start: its limits and every role's declared model with its price.
 * Kept in the machine's context, so a restored run reserves exactly as before.
 */
export interface BudgetPlan {
  max_usd?: number;
  max_tokens?: number;
  criteria?: PricedLimit;
  /** One per judge (the last repeats). */
  evaluate: PricedLimit[];
  revise?: PricedLimit;
}

/** A sum of money and tokens: what a call may cost at worst, or what was spent. */
export interface Amount {
  usd: number;
  tokens: number;
}

const PER_MILLION = 1_000_000;

function priceOf(prices: PriceTable, model: string): ModelPrice | null {
  return prices[model] ?? prices[`${model.split(':')[0]}:*`] ?? null;
}

/**
 * The budget of a spec, priced from the table; none without one. With `max_usd`, a declared
 * model the table has no price for refuses the run before it starts (INVALID_INPUT naming it):
 * a cost is never guessed.
 */
export function resolveBudget(spec: RunSpec, prices: PriceTable = {}): BudgetPlan | null {
  if (!spec.budget) return null;
  const priced = (role: Role, limit: { model: string; max_output_tokens: number } | undefined) => {
    if (!limit) return undefined;
    const price = priceOf(prices, limit.model);
    if (!price && spec.budget?.max_usd !== undefined)
      throw invalidInput(
        'max-usd',
        `no price for ${limit.model} (the ${role} model): add it under prices: in a config file, or use --max-tokens`,
      );
    return { ...limit, price };
  };
  // In wave order, so a refusal names the first unpriced model a run would use.
  // Given criteria skip Wave 1: its model is not used, so not priced.
  const criteria = priced('criteria', spec.criteria ? undefined : spec.models?.criteria);
  const evaluate = (spec.models?.evaluate ?? []).map((limit) => priced('evaluate', limit) as PricedLimit);
  const revise = priced('revise', spec.models?.revise);
  return {
    ...(spec.budget.max_usd === undefined ? {} : { max_usd: spec.budget.max_usd }),
    ...(spec.budget.max_tokens === undefined ? {} : { max_tokens: spec.budget.max_tokens }),
    ...(criteria ? { criteria } : {}),
    evaluate,
    ...(revise ? { revise } : {}),
  };
}

/** Dollars of some usage at a price; nothing without one (a token budget needs no price). */
const dollars = (usage: Usage, price: ModelPrice | null) => (price ? dollarsOf(usage, price) : 0);

const tokensOf = (usage: Usage) =>
  usage.input_tokens + usage.output_tokens + usage.cache_read_tokens + usage.cache_write_tokens;

/** The declared limit of a role, or of a judge. */
export function limitOf(plan: BudgetPlan, role: Role, judge = 1): PricedLimit {
  const limit = role === 'evaluate' ? (plan.evaluate[judge - 1] ?? plan.evaluate.at(-1)) : plan[role];
  if (!limit) throw new PolishError('INTERNAL', `the budget has no ${role} model`);
  return limit;
}

/**
 * The most one task of a role may cost: every call it may make at its worst (see
 * `worstCaseOfTask`), input priced at the dearer of the input and cache-write prices.
 */
export function worstCase(plan: BudgetPlan, role: Role, payload: unknown, judge = 1): Amount {
  const limit = limitOf(plan, role, judge);
  const worst = worstCaseOfTask(Buffer.byteLength(JSON.stringify(payload)), limit.max_output_tokens);
  const inputPrice = limit.price ? Math.max(limit.price.input, limit.price.cache_write ?? 0) : 0;
  return {
    tokens: worst.input_tokens + worst.output_tokens,
    usd: limit.price ? (worst.input_tokens * inputPrice + worst.output_tokens * limit.price.output) / PER_MILLION : 0,
  };
}

/** What some usage of one model cost, priced as the role's declared model. */
export function costOf(plan: BudgetPlan, usage: Usage, role: Role, judge = 1): Amount {
  return { usd: dollars(usage, limitOf(plan, role, judge).price), tokens: tokensOf(usage) };
}

/** What a run has spent so far: its usage per model, priced as declared. */
export function spentOf(plan: BudgetPlan, usageByModel: Readonly<Record<string, Usage>>): Amount {
  const limits = [plan.criteria, ...plan.evaluate, plan.revise].filter((limit): limit is PricedLimit => !!limit);
  let usd = 0;
  let tokens = 0;
  for (const [key, usage] of Object.entries(usageByModel)) {
    const limit = limits.find((candidate) => matches(candidate.model, key));
    usd += dollars(usage, limit?.price ?? null);
    tokens += tokensOf(usage);
  }
  return { usd, tokens };
}

/** Whether a declared model key (`provider:model` or `provider:*`) names a model that answered. */
export function matches(declared: string, reported: string): boolean {
  return declared.endsWith(':*') ? reported.startsWith(declared.slice(0, -1)) : declared === reported;
}

/** Refuses an answer from a model other than the one declared: the budget could not price it. */
export function checkDeclared(plan: BudgetPlan, role: Role, model: ModelInfo, judge?: number): void {
  const declared = limitOf(plan, role, judge).model;
  if (!matches(declared, modelKey(model)))
    throw new PolishError(
      'INVALID_INPUT',
      `models: the ${role}${judge === undefined ? '' : ` (judge ${judge})`} answer came from ${modelKey(model)}, not the declared ${declared}: the budget cannot price it`,
    );
}

/** Whether `needed` fits in what the budget leaves after `spent`. */
export function affords(plan: BudgetPlan, spent: Amount, needed: Amount): boolean {
  return (
    (plan.max_usd === undefined || spent.usd + needed.usd <= plan.max_usd) &&
    (plan.max_tokens === undefined || spent.tokens + needed.tokens <= plan.max_tokens)
  );
}

/** Adds amounts. */
export const plus = (a: Amount, b: Amount): Amount => ({ usd: a.usd + b.usd, tokens: a.tokens + b.tokens });

/** The budget's state for a result or an event: its limits, what was spent, what the next wave needed. */
export function budgetReport(plan: BudgetPlan, spent: Amount, needed?: Amount): BudgetReport {
  const usd = plan.max_usd !== undefined;
  return {
    ...(usd ? { max_usd: plan.max_usd } : {}),
    ...(plan.max_tokens === undefined ? {} : { max_tokens: plan.max_tokens }),
    ...(usd ? { spent_usd: spent.usd } : {}),
    spent_tokens: spent.tokens,
    ...(needed && usd ? { needed_usd: needed.usd } : {}),
    ...(needed ? { needed_tokens: needed.tokens } : {}),
  };
}

/**
 * The part of a budget one wave may use, reserved per send: a send goes out only when its
 * worst case fits beside what the wave has spent and what its other sends hold.
 */
export function createPurse(plan: BudgetPlan, spentBefore: Amount) {
  let held: Amount = { usd: 0, tokens: 0 };
  let spent = spentBefore;
  return {
    /** Holds a send's worst case, or throws BUDGET_EXHAUSTED naming what it needed. */
    reserve(worst: Amount, what: string): void {
      if (!affords(plan, plus(spent, held), worst))
        throw new PolishError('BUDGET_EXHAUSTED', `the budget cannot cover ${what} at worst`);
      held = plus(held, worst);
    },
    /** A send came back: its hold becomes what it actually cost. */
    settle(worst: Amount, actual: Amount): void {
      held = { usd: held.usd - worst.usd, tokens: held.tokens - worst.tokens };
      spent = plus(spent, actual);
    },
  };
}
export type Purse = ReturnType<typeof createPurse>;
