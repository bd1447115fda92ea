import { laneModelOf, type ModelSettings } from '@polish/agents';
import { resolveBudget } from '@polish/orchestrator';
import { invalidInput, modelLane, type PriceTable, type RunSpec, type TaskRole } from '@polish/protocol';
import { readSpec, type SpecFlags } from './read-spec.js';
import {
  declareModels,
  describeModels,
  resolveJudges,
  resolveModels,
  resolvePrices,
  withAnswers,
  type ModelFlags,
} from './models.js';

/** The flags `polish run` plans a run from. */
export interface PlanFlags extends SpecFlags, ModelFlags {
  /** A quorum's judges: model specs, comma-separated. */
  evaluators?: string;
}

/** A run, validated before anything starts: the spec, each role's model (embedded runs), the judges', and prices. */
export interface RunPlan {
  spec: RunSpec;
  /** Embedded runs: each role's model, answering as this run asks (revise form, evidence). */
  models?: Partial<Record<TaskRole, ModelSettings>>;
  /** Embedded quorums: each judge's model (judge 1 is the evaluate role's). */
  judges?: ModelSettings[];
  prices: PriceTable;
}

/**
 * Judges over NATS: each judge's model (`judge_models` of the spec), whose lane only
 * `polish worker --lane` hosts of that model serve. Says which lane each judge goes to.
 */
function judgeModelsOf(judges: readonly ModelSettings[]): string[] {
  return judges.map((judge, index) => {
    const model = laneModelOf(judge);
    let lane: string;
    try {
      lane = modelLane(model);
    } catch (error) {
      throw invalidInput('evaluators', (error as Error).message);
    }
    log(`polish: judge ${index + 1}: ${model}, lane ${lane} (\`polish worker --lane\` hosts of that model)`);
    return model;
  });
}

const log = (line: string) => process.stderr.write(`${line}\n`);

/**
 * Reads the spec and resolves the models of `polish run`. Embedded, every model is checked
 * (keys, scripts) and the budget declares what the workers will use. With `--nats` the workers
 * run elsewhere with their own settings: a budget then needs their models named with the model
 * flags (and max_tokens in the config), or it refuses to start rather than guess a price.
 * A budget in US dollars refuses to start when a model has no price, naming it.
 */
export function planRun(artifactPath: string, flags: PlanFlags, remote: boolean): RunPlan {
  const budgeted = flags.maxUsd !== undefined || flags.maxTokens !== undefined;
  const named = Boolean(
    flags.model || flags.criteriaModel || flags.evaluatorModel || flags.reviserModel || flags.script,
  );
  if (remote && budgeted && !named)
    throw invalidInput(
      flags.maxUsd === undefined ? 'max-tokens' : 'max-usd',
      'with --nats the workers’ models are not known here: name them with --model (or --criteria-model, ' +
        '--evaluator-model, --reviser-model, --evaluators) and their max_tokens in --config, so each call’s worst case can be reserved',
    );
  if (remote && named)
    log(
      budgeted
        ? 'polish: note: with --nats the model flags declare what the workers use, for the budget; the workers keep their own settings'
        : 'polish: note: model flags apply to the workers; with --nats they were set where `polish worker` runs',
    );
  const resolved = remote && !named ? undefined : resolveModels(flags, process.env, undefined, { check: !remote });
  const judges = resolveJudges(flags, process.env, { check: !remote });
  const byRole = resolved && judges ? { ...resolved.byRole, evaluate: judges[0] as ModelSettings } : resolved?.byRole;
  const prices = resolved?.prices ?? resolvePrices(flags);
  const spec = readSpec(artifactPath, flags, {
    ...(judges ? { judges: judges.length } : {}),
    ...(remote && judges ? { judge_models: judgeModelsOf(judges) } : {}),
    ...(budgeted && byRole ? { models: declareModels(byRole, judges) } : {}),
  });
  // Refuse an unpriced model now, before any process starts.
  resolveBudget(spec, prices);
  if (remote || !byRole) return { spec, prices };
  for (const line of describeModels(byRole)) log(`polish: model for ${line}`);
  for (const [index, judge] of (judges ?? []).entries())
    if (index > 0) for (const line of describeModels({ evaluate: judge })) log(`polish: judge ${index + 1}: ${line}`);
  // Embedded workers answer as this run asks; workers elsewhere answer as `polish worker` set them.
  const answers = { revise: spec.revise_mode, evidence: spec.evidence };
  return {
    spec,
    models: withAnswers(byRole, answers),
    ...(judges
      ? { judges: judges.map((judge) => withAnswers({ evaluate: judge }, answers).evaluate as ModelSettings) }
      : {}),
    prices,
  };
}
