import type { CriterionVerdict, QuorumReport, RunEvent, RunResult } from '@polish/protocol';
import { bestVersion, verdictsOf } from './verdict.js';
import { budgetReport, spentOf } from './budget.js';
import type { PolishContext } from './loop-context.js';

/** The final state names of the polish machine. */
export type PolishFinalState = 'converged' | 'capReached' | 'budgetExhausted' | 'failed' | 'cancelled';

/** Each criterion's verdict per iteration, in order. */
function criteriaHistory(context: PolishContext): Record<string, CriterionVerdict[]> {
  const history: Record<string, CriterionVerdict[]> = {};
  for (const criterion of context.criteria ?? []) history[criterion.id] = [];
  for (const record of context.history)
    for (const [id, verdict] of Object.entries(verdictsOf(record))) (history[id] ??= []).push(verdict);
  return history;
}

/** With several judges: how often they all agreed, and how many verdicts stayed undecided. */
function quorumReport(context: PolishContext): QuorumReport | undefined {
  if (context.spec.judges < 2) return undefined;
  const cells = context.history.flatMap((record) => Object.values(record.agreement ?? {}));
  const undecided = context.history.flatMap((record) =>
    Object.values(record.verdicts ?? {}).filter((verdict) => verdict === 'undecided'),
  ).length;
  return {
    judges: context.spec.judges,
    rule: context.spec.quorum,
    agreement_rate: cells.length === 0 ? null : cells.filter((share) => share === 1).length / cells.length,
    undecided,
  };
}

/** Builds the run result (DESIGN §1 outputs) from the machine's final state and context. */
export function toRunResult(state: PolishFinalState, context: PolishContext): RunResult {
  const quorum = quorumReport(context);
  const budget = context.budget
    ? budgetReport(context.budget, spentOf(context.budget, context.usageByModel), context.budgetStop?.needed)
    : undefined;
  const common = {
    iterations: context.history.length,
    ...(context.criteria ? { criteria: context.criteria } : {}),
    usage: context.usage,
    usage_by_wave: context.usageByWave,
    usage_by_model: context.usageByModel,
    models: context.models,
    history: context.history,
    criteria_history: criteriaHistory(context),
    regressions: context.regressions,
    ...(quorum ? { quorum } : {}),
    ...(budget ? { budget } : {}),
  };
  const best = bestVersion(context.history);
  // A run that stops early still returns the best version it has, the input only before any evaluation.
  const bestSoFar = best?.artifact ?? context.spec.artifact;
  switch (state) {
    case 'converged': {
      const last = context.history.at(-1);
      if (!last) throw new Error('converged without an evaluation');
      return { status: 'CONVERGED', ...common, artifact: last.artifact, scores: last.scores };
    }
    case 'capReached': {
      if (!best) throw new Error('cap reached without an evaluation');
      return {
        status: 'CAP_REACHED',
        ...common,
        artifact: best.artifact,
        best_iteration: best.iteration,
        scores: best.scores,
        remaining_gaps: best.blocking_gaps,
      };
    }
    case 'budgetExhausted':
      return {
        status: 'BUDGET_EXHAUSTED',
        ...common,
        reason: context.budgetStop?.reason ?? 'the budget is spent',
        artifact: bestSoFar,
        ...(best ? { best_iteration: best.iteration, scores: best.scores } : {}),
        remaining_gaps: best?.blocking_gaps ?? [],
      };
    case 'failed':
      return {
        status: 'FAILED',
        ...common,
        code: context.failure?.code ?? 'INTERNAL',
        reason: context.failure?.reason ?? 'the run failed without a recorded reason',
        artifact: bestSoFar,
      };
    case 'cancelled':
      return {
        status: 'CANCELLED',
        ...common,
        reason: context.failure?.reason ?? 'cancelled',
        artifact: bestSoFar,
      };
  }
}

/** The run.finished event of a result (the caller stamps run id and time). */
export function runFinishedOf(result: RunResult): Omit<Extract<RunEvent, { type: 'run.finished' }>, 'runId' | 'at'> {
  return {
    type: 'run.finished',
    status: result.status,
    iterations: result.iterations,
    usage: result.usage,
    ...(result.cost ? { cost: result.cost } : {}),
    ...(result.quorum ? { quorum: result.quorum } : {}),
    ...(result.budget ? { budget: result.budget } : {}),
  };
}
