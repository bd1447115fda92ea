import { fromPromise } from 'xstate';
import type { Context } from '@opentelemetry/api';
import {
  ParActionSchema,
  ParCommandResultSchema,
  ParPlanSchema,
  PolishError,
  ZERO_USAGE,
  modelKey,
  parReviewSchemaFor,
  type AnyPolicyDecision,
  type ParActPayload,
  type ParPlanPayload,
  type PriceTable,
  type TaskRole,
  type Usage,
  type ModelInfo,
  type PayloadOf,
} from '@polish/protocol';
import type { z } from 'zod';
import type { Dispatcher } from '../dispatch/dispatcher.js';
import { dispatchValidated, type UnstampedEvent } from '../dispatch/validated-dispatch.js';
import { resolveRef, writeChanges, writeTaskFile } from './coord-files.js';
import { writeFileAtomic } from '../write-file-atomic.js';
import { commitWorkspace } from './git-workspace.js';
import type { CritiqueInput, CycleToRecord, ParStep } from './par-machine.js';
import { FailedStep } from './cycle-record.js';
import type { CritiqueAnswer } from './critique.js';
import { estimateCost } from '../polish/cost.js';
import { documentOf, type ParState } from './par-state.js';

/** The text with each secret value replaced by `[redacted]`, longest first. */
export function redactSecrets(text: string, secrets: readonly string[]): string {
  return [...secrets]
    .filter((secret) => secret.length >= 6)
    .sort((a, b) => b.length - a.length)
    .reduce((clean, secret) => clean.split(secret).join('[redacted]'), text);
}

/** What the PAR actors of one run work with. */
export interface ParActorOptions {
  /** Secret values this process holds (the human keys): cut out of command output before it is kept. */
  secrets?: readonly string[];
  dispatcher: Dispatcher;
  workspace: string;
  /** The task file and the checkpoint file of the run. */
  paths: { task: string; checkpoint: string };
  /** Workspace paths the agent may never write (the policy and the checkpoint). */
  protectedPaths: ReadonlySet<string>;
  /** Evaluates the policy (with the human keys) on a checkpoint. */
  decide(state: ParState): AnyPolicyDecision;
  /** Advances the goal slice of a v2 checkpoint (validated as the harness's `advance_checkpoint`). */
  advance(state: ParState): ParState;
  /** Prices for the cost of each model call (none: cost unknown, null). */
  prices?: PriceTable;
  /** The cycle in progress (the checkpoint's cycle + 1), for events and spans. */
  cycle(): number;
  /** Called once a cycle's checkpoint is on disk. */
  recorded(state: ParState): void;
  /** A model answered (for the report's list of models). */
  answeredBy(model: string): void;
  signal: AbortSignal;
  report: (event: UnstampedEvent) => void;
  progress: (line: string) => void;
  traceContext: Context;
  /** Re-sends of a task whose answer breaks the contract (the same setting as the polish loop's). Default 1. */
  maxContractRedispatch?: number;
  /** Commit each cycle (`--git`). */
  git?: boolean;
}

const plural = (count: number, noun: string) => `${count} ${noun}${count === 1 ? '' : 's'}`;

/**
 * The actors of the PAR machine (xstate's `fromPromise`), provided by name like the polish
 * loop's wave actors: policy decisions, plan, act and critique through the one validated
 * dispatch, and the recording of each cycle to the `.coord/` files (and git).
 */
export function createParActors(options: ParActorOptions) {
  /** What a call used, as a cycle counts it: tokens (cached input apart) and cost (null without a price). */
  const stepUsage = (usage: Usage, model: ModelInfo | undefined): ParStep<unknown>['usage'] => {
    // A command runs no model: its usage is a known zero. A model without a price has an unknown cost.
    const cost =
      !model || model.provider === 'none'
        ? 0
        : options.prices
          ? estimateCost({ [modelKey(model)]: usage }, options.prices).total
          : null;
    return {
      input_tokens: usage.input_tokens + usage.cache_write_tokens,
      cached_input_tokens: usage.cache_read_tokens,
      output_tokens: usage.output_tokens,
      cost_microusd: cost === null ? null : Math.round(cost * 1_000_000),
    };
  };

  const send = async <R extends TaskRole, T>(
    role: R,
    payload: PayloadOf<R>,
    schema: z.ZodType<T>,
    once?: { timeoutMs: number },
  ): Promise<ParStep<T>> => {
    const packetBytes = Buffer.byteLength(JSON.stringify(payload));
    const child = role === 'par.review' || role === 'par.command';
    let output;
    try {
      output = await dispatchValidated(role, payload, schema, {
        dispatcher: options.dispatcher,
        signal: options.signal,
        iteration: options.cycle(),
        report: options.report,
        traceContext: options.traceContext,
        ...(options.maxContractRedispatch === undefined
          ? {}
          : { maxContractRedispatch: options.maxContractRedispatch }),
        ...(once ? { once } : {}),
      });
    } catch (error) {
      const failure = PolishError.from(error);
      throw new FailedStep(failure, {
        bytes: packetBytes,
        packetBytes,
        role,
        child,
        usage: stepUsage(failure.usage ?? ZERO_USAGE, failure.model),
      });
    }
    if (output.model.provider !== 'none')
      options.answeredBy(`${output.model.model}${output.model.scripted ? ' (scripted, not an LLM)' : ''}`);
    return {
      value: output.value,
      bytes: output.bytes,
      packetBytes,
      role,
      child,
      usage: stepUsage(output.usage, output.model),
    };
  };

  return {
    decide: fromPromise<AnyPolicyDecision, ParState>(async ({ input }) => {
      const decision = options.decide(input);
      const reasons = decision.reasons.length > 0 ? ` (${decision.reasons.join('; ')})` : '';
      options.progress(`par: policy: ${decision.decision}${reasons}`);
      options.report({ type: 'par.decision', decision });
      return decision;
    }),
    advance: fromPromise<ParState, ParState>(async ({ input }) => {
      const advanced = options.advance(input);
      writeFileAtomic(options.paths.checkpoint, `${JSON.stringify(documentOf(advanced), null, 2)}\n`);
      options.recorded(advanced);
      const slice = advanced.goal?.slice_id ?? 0;
      options.progress(`par: goal slice ${slice - 1} done: advanced to slice ${slice}`);
      options.report({ type: 'par.decision', decision: options.decide(advanced) });
      return advanced;
    }),
    plan: fromPromise(async ({ input }: { input: ParPlanPayload }) => {
      options.progress(`par: cycle ${options.cycle()}: planning`);
      const step = await send('par.plan', input, ParPlanSchema);
      options.progress(`par: plan: ${step.value.plan_summary}`);
      return step;
    }),
    act: fromPromise(async ({ input }: { input: ParActPayload }) => {
      const step = await send('par.act', input, ParActionSchema);
      const { changes } = step.value;
      const forbidden = changes
        .filter((change) => options.protectedPaths.has(change.path))
        .map((change) => change.path);
      if (forbidden.length > 0)
        throw new PolishError(
          'CONTRACT_VIOLATION',
          `the agent may not write the policy or the checkpoint (${forbidden.join(', ')})`,
        );
      const written = changes.length > 0 ? ` (${changes.map((change) => change.path).join(', ')})` : '';
      options.progress(`par: act: ${plural(changes.length, 'file')} written${written}`);
      return step;
    }),
    critique: fromPromise<ParStep<CritiqueAnswer> | { value: CritiqueAnswer; step: null }, CritiqueInput>(
      async ({ input }) => {
        const source = input.task.critique_source;
        if (source.kind === 'self')
          return { value: { kind: 'self', result: input.action.self_assessment }, step: null };
        if (source.kind === 'review') {
          const criteria = input.task.acceptance_criteria.filter((criterion) => !criterion.human_gate);
          const step = await send(
            'par.review',
            { artifact: input.artifact, acceptance_criteria: criteria },
            parReviewSchemaFor(criteria),
          );
          const passed = step.value.results.filter((result) => result.passed).length;
          options.progress(`par: review: ${passed}/${step.value.results.length} criteria pass`);
          return { ...step, value: { kind: 'review', result: step.value } };
        }
        const payload = {
          artifact: input.artifact,
          command: source.command,
          timeout_ms: Math.round(source.timeout_seconds * 1000),
        };
        // Run once: re-running it is not the critique's call. The worker kills the command at its
        // timeout; the margin covers writing the files and replying.
        const step = await send('par.command', payload, ParCommandResultSchema, {
          timeoutMs: payload.timeout_ms + 30_000,
        });
        const outcome = step.value.timed_out ? 'timed out' : `exit ${step.value.exit_code}`;
        options.progress(`par: ${source.kind} critique: \`${source.command}\` ${outcome}`);
        // What a command printed becomes evidence, the report and the task file: no secret this
        // process knows (the human keys) gets there, whatever the worker did.
        const result = { ...step.value, output_tail: redactSecrets(step.value.output_tail, options.secrets ?? []) };
        return { ...step, value: { kind: source.kind, result } };
      },
    ),
    record: fromPromise<void, CycleToRecord>(async ({ input }) => {
      const { workspace } = options;
      // Evidence and workspace first, the checkpoint last: the checkpoint never names what is not on disk.
      for (const document of input.evidence) writeFileAtomic(resolveRef(workspace, document.ref), document.content);
      writeChanges(workspace, input.changes);
      writeTaskFile(options.paths.task, input.task);
      writeFileAtomic(options.paths.checkpoint, `${JSON.stringify(documentOf(input), null, 2)}\n`);
      options.recorded({ checkpoint: input.checkpoint, goal: input.goal });
      options.report({ type: 'par.cycle', record: input.record, checkpoint_status: input.checkpoint.status });
      options.progress(`par: cycle ${input.record.cycle}: ${input.record.verdict}; next: ${input.record.next_action}`);
      if (options.git)
        await commitWorkspace(workspace, `par(iter-${input.record.cycle}): ${input.record.plan_summary}`);
    }),
  };
}
