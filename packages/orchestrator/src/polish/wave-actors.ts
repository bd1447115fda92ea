import { fromPromise } from 'xstate';
import type { Context } from '@opentelemetry/api';
import { z } from 'zod';
import {
  CriteriaResultSchema,
  EvaluationSchema,
  PolishError,
  RevisionReportSchema,
  ZERO_USAGE,
  addUsage,
  evaluationSchemaFor,
  type Criterion,
  type Judgement,
  type ModelInfo,
  type PayloadOf,
  type ReviseMode,
  type Role,
  type Usage,
} from '@polish/protocol';
import type { Dispatcher } from '../dispatch/dispatcher.js';
import { dispatchValidated, type Contract, type UnstampedEvent } from '../dispatch/validated-dispatch.js';
import { reviseContract, type AppliedRevision } from './revise-contract.js';
import { checkDeclared, costOf, createPurse, worstCase, type Amount, type BudgetPlan, type Purse } from './budget.js';

/** A wave's validated answer with what it cost and who gave it. */
export interface WaveOutput<T> {
  value: T;
  usage: Usage;
  model: ModelInfo;
  /** Several answers (a quorum's judges): each one's usage and model, for accounting per model. */
  parts?: { usage: Usage; model: ModelInfo }[];
}

/** Where a durable run records each finished wave. */
export interface WaveLedger {
  /** The key of a wave: e.g. `result.<runId>.evaluate.2`. */
  keyOf(role: Role, iteration: number): string;
  load(key: string): Promise<WaveOutput<unknown> | undefined>;
  save(key: string, output: WaveOutput<unknown>): Promise<void>;
  /** Resolves once every state transition so far is persisted: nothing is sent before that. */
  persisted(): Promise<void>;
}

/** Settings shared by the wave actors of one run. */
export interface WaveActorOptions {
  dispatcher: Dispatcher;
  /** A quorum's judges: judge j's tasks go to `judges[j - 1]`, else to `dispatcher`. */
  judges?: readonly Dispatcher[];
  /** Re-sends of a task whose answer breaks the contract (see `dispatchValidated`). Default 1. */
  maxContractRedispatch?: number;
  report?: (event: UnstampedEvent) => void;
  /**
   * Durable runs: finished waves are recorded under an idempotency key (run, wave, iteration),
   * and a wave whose result is recorded is never dispatched again (XState re-runs in-flight
   * invoked promises when a snapshot is restored).
   */
  ledger?: WaveLedger;
  /** The run's `polish.run` span context: each wave's span is its child. */
  traceContext?: Context;
}

/** A run's budget as a wave sees it: the plan, and what the run had spent when the wave began. */
export interface WaveBudget {
  plan: BudgetPlan;
  spent: Amount;
}

/** Input of a wave actor: the payload that crosses the wire, plus what stays on this side. */
export interface WaveInput<R extends Role> {
  payload: PayloadOf<R>;
  /** For reporting and ledger keys only: never sent to the worker. */
  iteration: number;
  budget?: WaveBudget;
}

/** Input of the evaluate actor: also how many judges, and whether passes must quote evidence. */
export interface EvaluateInput extends WaveInput<'evaluate'> {
  judges: number;
  evidence: boolean;
}

/** Input of the revise actor: also how this run takes Wave 3 answers (never sent to the worker). */
export interface ReviseInput extends WaveInput<'revise'> {
  mode: ReviseMode;
}

/** A revision as recorded in the wave ledger: the applied result, not the raw answer. */
const AppliedRevisionSchema = z.strictObject({ artifact: z.string(), revision: RevisionReportSchema });

/** One task of a wave: its role, judge, contract, and the purse that pays for it. */
interface Task<R extends Role, T> {
  role: R;
  input: WaveInput<R>;
  contract: Contract<T>;
  recordedSchema: z.ZodType<T>;
  judge?: number;
  purse?: Purse;
}

async function runTask<R extends Role, T>(
  options: WaveActorOptions,
  task: Task<R, T>,
  signal: AbortSignal,
): Promise<WaveOutput<T>> {
  const { ledger } = options;
  const { role, input, judge, purse } = task;
  const judged = judge !== undefined && judge > 1 ? `.judge-${judge}` : '';
  const key = ledger ? `${ledger.keyOf(role, input.iteration)}${judged}` : undefined;
  if (ledger && key) {
    const recorded = await ledger.load(key);
    if (recorded) {
      // Finished before a restart: its result stands, and it is not paid for again.
      const parsed = task.recordedSchema.safeParse(recorded.value);
      if (parsed.success) return { ...recorded, value: parsed.data };
    }
    // A run must not go on unsaved: the transition that started this wave is stored first.
    await ledger.persisted();
  }
  const plan = input.budget?.plan;
  const worst = plan ? worstCase(plan, role, input.payload, judge) : undefined;
  const output = await dispatchValidated(role, input.payload, task.contract, {
    dispatcher: (judge !== undefined ? options.judges?.[judge - 1] : undefined) ?? options.dispatcher,
    signal,
    iteration: input.iteration,
    ...(judge !== undefined ? { judge } : {}),
    ...(options.report ? { report: options.report } : {}),
    ...(options.traceContext ? { traceContext: options.traceContext } : {}),
    ...(options.maxContractRedispatch === undefined ? {} : { maxContractRedispatch: options.maxContractRedispatch }),
    ...(key ? { idempotencyKey: key } : {}),
    ...(plan && worst && purse
      ? {
          // Each send is reserved at its worst before it goes, and settled at what it cost.
          beforeSend: (send: number) =>
            purse.reserve(
              worst,
              `${send === 1 ? 'the' : 'a re-sent'} ${role} task${judge ? ` of judge ${judge}` : ''}`,
            ),
          afterSend: (usage: Usage) => purse.settle(worst, costOf(plan, usage, role, judge)),
        }
      : {}),
  });
  try {
    if (plan) checkDeclared(plan, role, output.model, judge);
  } catch (error) {
    // The answer was paid for, priced or not.
    throw PolishError.from(error).withUsage(output.usage, output.model);
  }
  const wave = { value: output.value, usage: output.usage, model: output.model };
  if (ledger && key) await ledger.save(key, wave);
  return wave;
}

const purseOf = (input: WaveInput<Role>) =>
  input.budget ? createPurse(input.budget.plan, input.budget.spent) : undefined;

/**
 * Wave 2 with k judges: the same payload to each, in its own task (and process), in parallel.
 * Each answer is held to the contract on its own (ids, gaps, quotes found in the artifact sent);
 * one judge that keeps breaking it fails the wave, since a verdict is never made up.
 */
async function evaluateWithJudges(
  options: WaveActorOptions,
  input: EvaluateInput,
  signal: AbortSignal,
): Promise<WaveOutput<{ judges: Judgement[] }>> {
  const contract = evaluationSchemaFor(input.payload.criteria, {
    artifact: input.payload.artifact,
    evidence: input.evidence,
  });
  const purse = purseOf(input);
  const settled = await Promise.allSettled(
    Array.from({ length: input.judges }, (_, index) =>
      runTask(
        options,
        {
          role: 'evaluate',
          input,
          contract,
          recordedSchema: EvaluationSchema,
          ...(input.judges > 1 ? { judge: index + 1 } : {}),
          ...(purse ? { purse } : {}),
        },
        signal,
      ),
    ),
  );
  const parts = settled.flatMap((outcome) => (outcome.status === 'fulfilled' ? [outcome.value] : []));
  const failure = settled.find((outcome) => outcome.status === 'rejected');
  if (failure) {
    // The judges that answered were paid for too: their usage goes with the failure.
    const error = PolishError.from(failure.reason);
    const usage = parts.reduce((sum, part) => addUsage(sum, part.usage), error.usage ?? ZERO_USAGE);
    throw error.withUsage(usage, error.model ?? parts[0]?.model);
  }
  const first = parts[0] as WaveOutput<{ scores: Judgement['scores'] }>;
  return {
    value: { judges: parts.map((part, index) => ({ judge: index + 1, model: part.model, scores: part.value.scores })) },
    usage: parts.reduce((sum, part) => addUsage(sum, part.usage), ZERO_USAGE),
    model: first.model,
    parts: parts.map((part) => ({ usage: part.usage, model: part.model })),
  };
}

/** The three wave actors of the polish machine (xstate's `fromPromise`), each going through the one dispatch. */
export function createWaveActors(options: WaveActorOptions) {
  return {
    extractCriteria: fromPromise<WaveOutput<{ criteria: Criterion[] }>, WaveInput<'criteria'>>(({ input, signal }) => {
      const purse = purseOf(input);
      return runTask(
        options,
        {
          role: 'criteria',
          input,
          contract: CriteriaResultSchema,
          recordedSchema: CriteriaResultSchema,
          ...(purse ? { purse } : {}),
        },
        signal,
      );
    }),
    evaluate: fromPromise<WaveOutput<{ judges: Judgement[] }>, EvaluateInput>(({ input, signal }) =>
      evaluateWithJudges(options, input, signal),
    ),
    revise: fromPromise<WaveOutput<AppliedRevision>, ReviseInput>(({ input, signal }) => {
      const purse = purseOf(input);
      return runTask(
        options,
        {
          role: 'revise',
          input,
          contract: reviseContract(input.payload, input.mode),
          recordedSchema: AppliedRevisionSchema,
          ...(purse ? { purse } : {}),
        },
        signal,
      );
    }),
  };
}
