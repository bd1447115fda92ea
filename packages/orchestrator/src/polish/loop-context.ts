import {
  PolishError,
  ZERO_USAGE,
  addUsage,
  modelKey,
  type Criterion,
  type ErrorCode,
  type IterationRecord,
  type Judgement,
  type ModelInfo,
  type Regression,
  type RevisePayload,
  type RunSpec,
  type Usage,
  type UsageByWave,
} from '@polish/protocol';
import { computeVerdict, regressionsBetween } from './verdict.js';
import { affords, plus, spentOf, worstCase, type Amount, type BudgetPlan } from './budget.js';
import type { WaveBudget, WaveOutput } from './wave-actors.js';

/** Everything the polish loop knows; the artifact only ever changes to a Wave 3 answer. */
export interface PolishContext {
  spec: RunSpec;
  criteria: Criterion[] | null;
  criteriaExtracted: boolean;
  artifact: string;
  iteration: number;
  history: IterationRecord[];
  usage: Usage;
  usageByWave: UsageByWave;
  usageByModel: Record<string, Usage>;
  models: ModelInfo[];
  failure: { code: ErrorCode; reason: string } | null;
  /** The run's budget, priced at start (null: no budget). */
  budget: BudgetPlan | null;
  /** Why the budget stopped the run, and what the wave it stopped before needed at worst. */
  budgetStop: { reason: string; needed?: Amount } | null;
  /** The next revision: the iteration whose version it starts from, and the regressions it must repair. */
  pending: { from: number; regressions: string[] } | null;
  /** The iteration whose version the latest revision started from (for the next evaluation's record). */
  revisedFrom: number | null;
  /** Iterations whose revision was already asked again after a regression: at most once each. */
  reAsked: number[];
  /** Every regression so far. */
  regressions: Regression[];
}

/** The context a new run starts from: the input artifact, no history, nothing spent. */
export function initialContext(spec: RunSpec, budget: BudgetPlan | null = null): PolishContext {
  return {
    spec,
    criteria: spec.criteria ?? null,
    criteriaExtracted: false,
    artifact: spec.artifact,
    iteration: 0,
    history: [],
    usage: ZERO_USAGE,
    usageByWave: { criteria: ZERO_USAGE, evaluate: ZERO_USAGE, revise: ZERO_USAGE },
    usageByModel: {},
    models: [],
    failure: null,
    budget,
    budgetStop: null,
    pending: null,
    revisedFrom: null,
    reAsked: [],
    regressions: [],
  };
}

/** The record of an iteration. */
export function recordOf(context: PolishContext, iteration: number): IterationRecord {
  const record = context.history.find((entry) => entry.iteration === iteration);
  if (!record) throw new Error(`no evaluation recorded for iteration ${iteration}`);
  return record;
}

/** The latest evaluation. */
export function lastRecord(context: PolishContext): IterationRecord {
  const record = context.history.at(-1);
  if (!record) throw new Error('no evaluation recorded yet');
  return record;
}

function withModel(models: ModelInfo[], model: ModelInfo): ModelInfo[] {
  const known = models.some((entry) => entry.provider === model.provider && entry.model === model.model);
  return known ? models : [...models, model];
}

/** Context updates that account one wave's answers: run total, per wave, per model. */
export function accounted(context: PolishContext, wave: keyof UsageByWave, output: WaveOutput<unknown>) {
  const parts = output.parts ?? [{ usage: output.usage, model: output.model }];
  let usageByModel = context.usageByModel;
  let models = context.models;
  for (const part of parts) {
    const key = modelKey(part.model);
    usageByModel = { ...usageByModel, [key]: addUsage(usageByModel[key] ?? ZERO_USAGE, part.usage) };
    models = withModel(models, part.model);
  }
  return {
    usage: addUsage(context.usage, output.usage),
    usageByWave: { ...context.usageByWave, [wave]: addUsage(context.usageByWave[wave], output.usage) },
    usageByModel,
    models,
  };
}

/** Context updates for a wave that failed or ran out of budget: the usage it spent all the same, and why it stopped. */
export function failed(context: PolishContext, wave: keyof UsageByWave, error: unknown) {
  const polishError = PolishError.from(error);
  const spent =
    polishError.usage && polishError.usage.model_calls > 0
      ? accounted(context, wave, {
          value: undefined,
          usage: polishError.usage,
          model: polishError.model ?? { provider: 'unknown', model: 'unknown', scripted: false },
        })
      : {};
  return polishError.code === 'BUDGET_EXHAUSTED'
    ? { ...spent, budgetStop: { reason: polishError.message } }
    : { ...spent, failure: { code: polishError.code, reason: polishError.message } };
}

/** The record of a new evaluation, and the regressions it shows against the version its revision started from. */
export function evaluated(context: PolishContext, output: WaveOutput<{ judges: Judgement[] }>) {
  const record: IterationRecord = computeVerdict({
    iteration: context.iteration,
    artifact: context.artifact,
    criteria: context.criteria ?? [],
    judges: output.value.judges,
    rule: context.spec.quorum,
    threshold: context.spec.threshold,
    usage: output.usage,
  });
  if (context.revisedFrom === null) return { history: [...context.history, record] };
  const from = context.revisedFrom;
  const broken = regressionsBetween(recordOf(context, from), record);
  return {
    history: [...context.history, { ...record, revised_from: from, ...(broken.length ? { regressions: broken } : {}) }],
    regressions: [
      ...context.regressions,
      ...broken.map((id) => ({ criterion_id: id, passed_in: from, failed_in: record.iteration, re_asked: false })),
    ],
  };
}

/** Whether the latest revision broke criteria and its starting version has not been revised again yet. */
export function shouldReAsk(context: PolishContext): boolean {
  const record = lastRecord(context);
  return (
    (record.regressions?.length ?? 0) > 0 &&
    record.revised_from !== undefined &&
    !context.reAsked.includes(record.revised_from)
  );
}

/** The revision to ask again: from the version the latest one broke, its regressions named as extra gaps. */
export function reAskUpdates(context: PolishContext) {
  const record = lastRecord(context);
  const from = record.revised_from as number;
  return {
    pending: { from, regressions: record.regressions ?? [] },
    reAsked: [...context.reAsked, from],
    regressions: context.regressions.map((regression) =>
      regression.failed_in === record.iteration ? { ...regression, re_asked: true } : regression,
    ),
  };
}

/**
 * The revise payload: the version the revision starts from, its blocking gaps, and after a
 * regression one more gap per broken criterion (still gaps only: never scores or history).
 */
export function revisePayload(context: PolishContext): RevisePayload {
  const pending = context.pending ?? { from: lastRecord(context).iteration, regressions: [] };
  const base = recordOf(context, pending.from);
  const now = lastRecord(context);
  const broken = pending.regressions.map((id) => {
    const gap = now.scores.find((score) => score.criterion_id === id)?.gap ?? '';
    return `${id}: keep this satisfied while closing the other gaps (a revision that closed them broke it: ${gap})`;
  });
  return { artifact: base.artifact, blocking_gaps: [...base.blocking_gaps, ...broken], goal: context.spec.goal };
}

/** The evaluate payload of the current version. */
export const evaluatePayload = (context: PolishContext) => ({
  artifact: context.artifact,
  criteria: context.criteria ?? [],
});

/** What a wave is told of the budget: the plan and what the run has spent so far. */
export function waveBudget(context: PolishContext): { budget?: WaveBudget } {
  return context.budget
    ? { budget: { plan: context.budget, spent: spentOf(context.budget, context.usageByModel) } }
    : {};
}

/** The worst case of one evaluation wave of this artifact: every judge's task. */
function evaluationWorst(plan: BudgetPlan, context: PolishContext, artifact: string): Amount {
  const payload = { artifact, criteria: context.criteria ?? [] };
  let total: Amount = { usd: 0, tokens: 0 };
  for (let judge = 1; judge <= context.spec.judges; judge += 1)
    total = plus(total, worstCase(plan, 'evaluate', payload, judge));
  return total;
}

/**
 * What the next step needs at worst, or null when the budget covers it (or there is none).
 * A revision is only worth its cost with the evaluation after it, so it needs both (the next
 * version is assumed the size of this one; the evaluation is checked again once it exists).
 */
export function shortfall(context: PolishContext, step: 'criteria' | 'evaluate' | 'revise'): Amount | null {
  const plan = context.budget;
  if (!plan) return null;
  let needed: Amount;
  if (step === 'criteria')
    needed = plus(
      worstCase(plan, 'criteria', { artifact: context.artifact, goal: context.spec.goal }),
      // Criteria are not known yet: assume the most Wave 1 may lock, each as long as the goal.
      evaluationWorst(plan, { ...context, criteria: placeholderCriteria(context.spec.goal) }, context.artifact),
    );
  else if (step === 'evaluate') needed = evaluationWorst(plan, context, context.artifact);
  else {
    // The revision the loop would ask for next: after a regression, from the version it broke.
    const next = shouldReAsk(context) ? { ...context, pending: reAskUpdates(context).pending } : context;
    needed = plus(worstCase(plan, 'revise', revisePayload(next)), evaluationWorst(plan, context, context.artifact));
  }
  return affords(plan, spentOf(plan, context.usageByModel), needed) ? null : needed;
}

const placeholderCriteria = (goal: string): Criterion[] =>
  Array.from({ length: 8 }, (_, index) => ({ id: `C${index + 1}`, text: goal }));

const WHAT: Record<'criteria' | 'evaluate' | 'revise', string> = {
  criteria: 'criteria extraction and a first evaluation',
  evaluate: 'the next evaluation',
  revise: 'the next revision and its evaluation',
};

/** Context updates for a run the budget stops before a step. */
export function stopped(context: PolishContext, step: 'criteria' | 'evaluate' | 'revise') {
  const needed = shortfall(context, step) ?? { usd: 0, tokens: 0 };
  return { budgetStop: { reason: `the rest of the budget cannot cover ${WHAT[step]} at worst`, needed } };
}
