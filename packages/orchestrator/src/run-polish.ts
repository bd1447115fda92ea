import { randomUUID } from 'node:crypto';
import { createActor, toPromise, type Actor, type InspectionEvent, type Observer } from 'xstate';
import { SpanStatusCode, context, trace } from '@opentelemetry/api';
import {
  PolishError,
  RunSpecSchema,
  type PriceTable,
  type RunEvent,
  type RunResult,
  type RunSpecInput,
} from '@polish/protocol';
import { estimateCost } from './cost.js';
import { polishMachine } from './polish-machine.js';
import { createWaveActors } from './wave-actors.js';
import { toRunResult, type PolishFinalState } from './run-result.js';
import type { Dispatcher } from './dispatcher.js';

/** How to run one polish loop. */
export interface RunPolishOptions {
  dispatcher: Dispatcher;
  runId?: string;
  /** Called with every run event, in order. */
  onEvent?: (event: RunEvent) => void;
  /** XState inspection observer, attached to every actor of the run. */
  inspect?: Observer<InspectionEvent> | ((event: InspectionEvent) => void);
  /** Aborting cancels the run: it ends CANCELLED. */
  signal?: AbortSignal;
  maxContractRedispatch?: number;
  /** Prices for the cost estimate in the result and the run.finished event. */
  prices?: PriceTable;
  now?: () => number;
}

/** No-op unless an OpenTelemetry SDK is registered. */
const tracer = trace.getTracer('@polish/orchestrator');

/** A started run: its id, the live actor to observe, and the result to await. */
export interface PolishRun {
  runId: string;
  actor: Actor<typeof polishMachine>;
  result: Promise<RunResult>;
}

/**
 * Starts a polish run. Throws `PolishError('INVALID_INPUT')` naming the field when the
 * spec is invalid, before anything runs.
 */
export function startPolish(specInput: RunSpecInput, options: RunPolishOptions): PolishRun {
  const parsed = RunSpecSchema.safeParse(specInput);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue?.path.join('.') || 'spec';
    throw new PolishError('INVALID_INPUT', `${field}: ${issue?.message ?? 'invalid'}`);
  }
  const spec = parsed.data;
  const runId = options.runId ?? randomUUID();
  const now = options.now ?? Date.now;
  const report = (event: Record<string, unknown> & { type: RunEvent['type'] }) =>
    options.onEvent?.({ ...event, runId, at: now() } as RunEvent);

  // The run's trace: this span is the root (or a child of the caller's active span), each wave a child.
  const span = tracer.startSpan('polish.run', {
    attributes: { 'polish.run_id': runId, 'polish.cap': spec.cap, 'polish.threshold': spec.threshold },
  });
  const machine = polishMachine.provide({
    actors: createWaveActors({
      dispatcher: options.dispatcher,
      traceContext: trace.setSpan(context.active(), span),
      ...(options.maxContractRedispatch === undefined ? {} : { maxContractRedispatch: options.maxContractRedispatch }),
      report,
    }),
  });
  const actor = createActor(machine, { input: { spec }, ...(options.inspect ? { inspect: options.inspect } : {}) });
  actor.on('criteria.locked', (event) =>
    report({ type: 'criteria.locked', criteria: event.criteria, extracted: event.extracted }),
  );
  actor.on('iteration.evaluated', ({ record }) =>
    report({
      type: 'iteration.evaluated',
      iteration: record.iteration,
      passed: record.passed,
      total: record.total,
      blocking_gaps: record.blocking_gaps,
    }),
  );
  actor.on('iteration.finished', ({ record }) =>
    report({ type: 'iteration.finished', iteration: record.iteration, usage: record.usage }),
  );
  let lastState = '';
  actor.subscribe((snapshot) => {
    const state = String(snapshot.value);
    if (state !== lastState) report({ type: 'state.entered', state });
    lastState = state;
  });
  const onAbort = () =>
    actor.send({ type: 'CANCEL', reason: String(options.signal?.reason ?? 'cancelled by the caller') });
  options.signal?.addEventListener('abort', onAbort, { once: true });

  report({ type: 'run.started', cap: spec.cap, threshold: spec.threshold });
  actor.start();
  if (options.signal?.aborted) onAbort();

  const result = toPromise(actor).then(() => {
    options.signal?.removeEventListener('abort', onAbort);
    const snapshot = actor.getSnapshot();
    const base = toRunResult(snapshot.value as PolishFinalState, snapshot.context);
    const runResult: RunResult = options.prices
      ? { ...base, cost: estimateCost(base.usage_by_model, options.prices) }
      : base;
    report({
      type: 'run.finished',
      status: runResult.status,
      iterations: runResult.iterations,
      usage: runResult.usage,
      ...(runResult.cost ? { cost: runResult.cost } : {}),
    });
    span.setAttributes({
      'polish.status': runResult.status,
      'polish.iterations': runResult.iterations,
      'gen_ai.usage.input_tokens': runResult.usage.input_tokens,
      'gen_ai.usage.output_tokens': runResult.usage.output_tokens,
    });
    // The status, not the reason: a reason may quote a provider's error text.
    if (runResult.status === 'FAILED') span.setStatus({ code: SpanStatusCode.ERROR, message: 'FAILED' });
    span.end();
    return runResult;
  });
  // The caller handles the rejection; the span only records that the run broke.
  result.catch(() => {
    if (!span.isRecording()) return;
    span.setStatus({ code: SpanStatusCode.ERROR, message: 'internal error' });
    span.end();
  });
  return { runId, actor, result };
}

/** Runs a polish loop to its end and returns the result (see {@link startPolish}). */
export function runPolish(specInput: RunSpecInput, options: RunPolishOptions): Promise<RunResult> {
  return startPolish(specInput, options).result;
}
