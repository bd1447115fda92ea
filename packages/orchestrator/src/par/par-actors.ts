import { fromPromise } from 'xstate';
import type { Context } from '@opentelemetry/api';
import {
  ParActionSchema,
  ParCommandResultSchema,
  ParPlanSchema,
  PolishError,
  parReviewSchemaFor,
  type ParActPayload,
  type ParCheckpoint,
  type ParPlanPayload,
  type PolicyDecision,
  type TaskRole,
  type PayloadOf,
} from '@polish/protocol';
import type { z } from 'zod';
import type { Dispatcher } from '../dispatch/dispatcher.js';
import { dispatchValidated, type UnstampedEvent } from '../dispatch/validated-dispatch.js';
import { resolveRef, writeChanges, writeTaskFile } from './coord-files.js';
import { writeFileAtomic } from '../write-file-atomic.js';
import { commitWorkspace } from './git-workspace.js';
import type { CritiqueInput, CycleToRecord, ParStep } from './par-machine.js';
import type { CritiqueAnswer } from './critique.js';

/** What the PAR actors of one run work with. */
export interface ParActorOptions {
  dispatcher: Dispatcher;
  workspace: string;
  /** The task file and the checkpoint file of the run. */
  paths: { task: string; checkpoint: string };
  /** Workspace paths the agent may never write (the policy and the checkpoint). */
  protectedPaths: ReadonlySet<string>;
  /** Evaluates the policy (with the human keys) on a checkpoint. */
  decide(checkpoint: ParCheckpoint): PolicyDecision;
  /** The cycle in progress (the checkpoint's cycle + 1), for events and spans. */
  cycle(): number;
  /** Called once a cycle's checkpoint is on disk. */
  recorded(checkpoint: ParCheckpoint): void;
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
  const send = async <R extends TaskRole, T>(
    role: R,
    payload: PayloadOf<R>,
    schema: z.ZodType<T>,
    once?: { timeoutMs: number },
  ): Promise<ParStep<T>> => {
    const output = await dispatchValidated(role, payload, schema, {
      dispatcher: options.dispatcher,
      signal: options.signal,
      iteration: options.cycle(),
      report: options.report,
      traceContext: options.traceContext,
      ...(options.maxContractRedispatch === undefined ? {} : { maxContractRedispatch: options.maxContractRedispatch }),
      ...(once ? { once } : {}),
    });
    if (output.model.provider !== 'none')
      options.answeredBy(`${output.model.model}${output.model.scripted ? ' (scripted, not an LLM)' : ''}`);
    return { value: output.value, bytes: output.bytes };
  };

  return {
    decide: fromPromise<PolicyDecision, ParCheckpoint>(async ({ input }) => {
      const decision = options.decide(input);
      const reasons = decision.reasons.length > 0 ? ` (${decision.reasons.join('; ')})` : '';
      options.progress(`par: policy: ${decision.decision}${reasons}`);
      options.report({ type: 'par.decision', decision });
      return decision;
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
    critique: fromPromise<ParStep<CritiqueAnswer> & { toolCalls: number }, CritiqueInput>(async ({ input }) => {
      const source = input.task.critique_source;
      if (source.kind === 'self')
        return { value: { kind: 'self', result: input.action.self_assessment }, bytes: 0, toolCalls: 0 };
      if (source.kind === 'review') {
        const criteria = input.task.acceptance_criteria.filter((criterion) => !criterion.human_gate);
        const step = await send(
          'par.review',
          { artifact: input.artifact, acceptance_criteria: criteria },
          parReviewSchemaFor(criteria),
        );
        const passed = step.value.results.filter((result) => result.passed).length;
        options.progress(`par: review: ${passed}/${step.value.results.length} criteria pass`);
        return { value: { kind: 'review', result: step.value }, bytes: step.bytes, toolCalls: 1 };
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
      return { value: { kind: source.kind, result: step.value }, bytes: step.bytes, toolCalls: 1 };
    }),
    record: fromPromise<void, CycleToRecord>(async ({ input }) => {
      const { workspace } = options;
      // Evidence and workspace first, the checkpoint last: the checkpoint never names what is not on disk.
      for (const document of input.evidence) writeFileAtomic(resolveRef(workspace, document.ref), document.content);
      writeChanges(workspace, input.changes);
      writeTaskFile(options.paths.task, input.task);
      writeFileAtomic(options.paths.checkpoint, `${JSON.stringify(input.checkpoint, null, 2)}\n`);
      options.recorded(input.checkpoint);
      options.report({ type: 'par.cycle', record: input.record, checkpoint_status: input.checkpoint.status });
      options.progress(`par: cycle ${input.record.cycle}: ${input.record.verdict}; next: ${input.record.next_action}`);
      if (options.git)
        await commitWorkspace(workspace, `par(iter-${input.record.cycle}): ${input.record.plan_summary}`);
    }),
  };
}
