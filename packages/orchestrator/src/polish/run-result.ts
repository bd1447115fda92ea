import type { RunResult } from '@polish/protocol';
import { bestVersion } from './verdict.js';
import type { PolishContext } from './polish-machine.js';

/** The final state names of the polish machine. */
export type PolishFinalState = 'converged' | 'capReached' | 'failed' | 'cancelled';

/** Builds the run result (DESIGN §1 outputs) from the machine's final state and context. */
export function toRunResult(state: PolishFinalState, context: PolishContext): RunResult {
  const common = {
    iterations: context.history.length,
    ...(context.criteria ? { criteria: context.criteria } : {}),
    usage: context.usage,
    usage_by_wave: context.usageByWave,
    usage_by_model: context.usageByModel,
    models: context.models,
    history: context.history,
  };
  const best = bestVersion(context.history);
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
    case 'failed':
      return {
        status: 'FAILED',
        ...common,
        code: context.failure?.code ?? 'INTERNAL',
        reason: context.failure?.reason ?? 'the run failed without a recorded reason',
        artifact: best?.artifact ?? context.spec.artifact,
      };
    case 'cancelled':
      return {
        status: 'CANCELLED',
        ...common,
        reason: context.failure?.reason ?? 'cancelled',
        artifact: best?.artifact ?? context.spec.artifact,
      };
  }
}
