import { randomUUID } from 'node:crypto';
import { createActor, type Actor, type InspectionEvent, type Observer } from 'xstate';
import { SpanStatusCode, context, trace } from '@opentelemetry/api';
import {
  PolishError,
  RunSpecSchema,
  firstIssue,
  invalidInput,
  modelLane,
  type PriceTable,
  type RunEvent,
  type RunResult,
  type RunSpec,
  type RunSpecInput,
} from '@polish/protocol';
import { estimateCost } from './cost.js';
import { budgetReport, resolveBudget, spentOf } from './budget.js';
import { polishMachine, type PolishInput } from './polish-machine.js';
import { createWaveActors, type WaveLedger } from './wave-actors.js';
import { runFinishedOf, toRunResult, type PolishFinalState } from './run-result.js';
import { laneDispatcher, type Dispatcher } from '../dispatch/dispatcher.js';
import type { UnstampedEvent } from '../dispatch/validated-dispatch.js';

/** How to run one polish loop. */
export interface RunPolishOptions {
  dispatcher: Dispatcher;
  /**
   * A quorum's judges (`judges` in the spec): judge j's tasks go to `judges[j - 1]`, so each
   * judge can be another model's workers; judges without one go to `dispatcher`. Without it, a
   * spec naming `judge_models` sends judge j's tasks to its model's lane of `dispatcher`.
   */
  judges?: readonly Dispatcher[];
  runId?: string;
  /** Called with every run event, in order. */
  onEvent?: (event: RunEvent) => void;
  /** XState inspection observer, attached to every actor of the run. */
  inspect?: Observer<InspectionEvent> | ((event: InspectionEvent) => void);
  /** Aborting cancels the run: it ends CANCELLED. */
  signal?: AbortSignal;
  /** Re-sends of a task whose answer breaks the contract. Default 1. */
  maxContractRedispatch?: number;
  /** Prices for the cost estimate in the result and the run.finished event, and for a budget in US dollars. */
  prices?: PriceTable;
  now?: () => number;
}

/** The polish actor a run drives. */
export type PolishActor = Actor<typeof polishMachine>;

/**
 * Where a durable run is kept (DESIGN §6): the run manager layers persistence on the driver
 * through this, and nothing else differs between `polish run` and `polish serve`.
 */
export interface RunPersistence {
  /** Finished waves by idempotency key; waves wait for `persisted()` before they send. */
  ledger: WaveLedger;
  /** After every transition of the running actor (not after it stopped or ended). */
  transitioned(actor: PolishActor): void;
  /** The run ended with this result: resolves once it is stored; `run.finished` waits for it. */
  ended(actor: PolishActor, result: RunResult): Promise<void>;
}

/** What a run starts from: a fresh input (a spec, or a capped run's state for extend), or a persisted snapshot. */
export type PolishStart = { input: PolishInput } | { snapshot: unknown };

/** The judges of a spec naming its judges' models: each judge's tasks go to its model's lane. */
function laneJudges(dispatcher: Dispatcher, start: PolishStart): Dispatcher[] | undefined {
  const spec: RunSpec | undefined =
    'input' in start ? start.input.spec : (start.snapshot as { context?: { spec?: RunSpec } }).context?.spec;
  return spec?.judge_models?.map((model) => laneDispatcher(dispatcher, { name: modelLane(model), model }));
}

/** A started run: its id, the live actor to observe, the result to await, and a stop that keeps it resumable. */
export interface PolishRun {
  runId: string;
  actor: PolishActor;
  /** The result, once the run ends. Rejects with CANCELLED if `stop()` is called first. */
  result: Promise<RunResult>;
  /** Stops the actor without ending the run (an orchestrator shutting down): it stays resumable. */
  stop(): void;
}

/** No-op unless an OpenTelemetry SDK is registered. */
const tracer = trace.getTracer('@polish/orchestrator');

/** Parses a run spec, or throws INVALID_INPUT naming the field. */
export function parseRunSpec(specInput: RunSpecInput) {
  const parsed = RunSpecSchema.safeParse(specInput);
  if (parsed.success) return parsed.data;
  const issue = firstIssue(parsed.error, 'spec');
  throw invalidInput(issue.path, issue.message);
}

/**
 * Starts a polish run. Throws `PolishError('INVALID_INPUT')` naming the field when the
 * spec is invalid, or when its budget is in US dollars and a model has no price, before
 * anything runs.
 */
export function startPolish(specInput: RunSpecInput, options: RunPolishOptions): PolishRun {
  const spec = parseRunSpec(specInput);
  return drivePolish({ input: { spec, budget: resolveBudget(spec, options.prices) } }, options);
}

/** Runs a polish loop to its end and returns the result (see {@link startPolish}). */
export function runPolish(specInput: RunSpecInput, options: RunPolishOptions): Promise<RunResult> {
  return startPolish(specInput, options).result;
}

/**
 * The one polish run driver, used by `polish run` (through `startPolish`) and by the run
 * manager of `polish serve` (with `persistence`): it provides the wave actors, opens the run's
 * span, turns the machine's emitted events and transitions into run events, and builds the
 * result. A run started from a snapshot continues where it was persisted.
 */
export function drivePolish(
  start: PolishStart,
  options: RunPolishOptions & { persistence?: RunPersistence },
): PolishRun {
  const runId = options.runId ?? randomUUID();
  const now = options.now ?? Date.now;
  const { persistence } = options;
  const report = (event: UnstampedEvent) => options.onEvent?.({ ...event, runId, at: now() } as RunEvent);
  const restored = 'snapshot' in start;

  // The run's trace (a resumed run starts a new one): this span is the root, or a child of the caller's.
  const span = tracer.startSpan('polish.run', { attributes: { 'polish.run_id': runId, 'polish.resumed': restored } });
  const lanes = options.judges ? undefined : laneJudges(options.dispatcher, start);
  // A lone judge is the evaluate role's own: its lane too.
  const dispatcher = lanes?.length === 1 ? (lanes[0] as Dispatcher) : options.dispatcher;
  const judges = options.judges ?? (lanes && lanes.length > 1 ? lanes : undefined);
  const machine = polishMachine.provide({
    actors: createWaveActors({
      dispatcher,
      ...(judges ? { judges } : {}),
      traceContext: trace.setSpan(context.active(), span),
      report,
      ...(options.maxContractRedispatch === undefined ? {} : { maxContractRedispatch: options.maxContractRedispatch }),
      ...(persistence ? { ledger: persistence.ledger } : {}),
    }),
  });
  const inspect = options.inspect ? { inspect: options.inspect } : {};
  const actor = restored
    ? createActor(machine, { snapshot: start.snapshot as never, input: undefined as never, ...inspect })
    : createActor(machine, { input: start.input, ...inspect });
  const { spec } = actor.getSnapshot().context;
  span.setAttributes({ 'polish.cap': spec.cap, 'polish.threshold': spec.threshold });

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
      scores: record.scores,
      ...(record.judges ? { judges: record.judges } : {}),
      ...(record.verdicts ? { verdicts: record.verdicts } : {}),
      ...(record.agreement ? { agreement: record.agreement } : {}),
      ...(record.regressions ? { regressions: record.regressions } : {}),
    }),
  );
  actor.on('regression.re_ask', ({ record, from }) =>
    report({ type: 'regression.re_ask', iteration: record.iteration, from, criteria: record.regressions ?? [] }),
  );
  actor.on('budget.exhausted', ({ context: stoppedContext }) => {
    const plan = stoppedContext.budget;
    if (!plan) return;
    const spent = spentOf(plan, stoppedContext.usageByModel);
    report({ type: 'budget.exhausted', ...budgetReport(plan, spent, stoppedContext.budgetStop?.needed) });
  });
  actor.on('iteration.revised', ({ record }) => {
    if (record.revision) report({ type: 'iteration.revised', iteration: record.iteration, ...record.revision });
  });
  actor.on('iteration.finished', ({ record }) =>
    report({ type: 'iteration.finished', iteration: record.iteration, usage: record.usage }),
  );

  let stopping = false;
  let lastState = '';
  actor.subscribe((snapshot) => {
    // A stopped actor (orchestrator shutting down) is not a transition: its run stays resumable.
    if (stopping) return;
    if (snapshot.status === 'active') persistence?.transitioned(actor);
    const state = String(snapshot.value);
    if (state !== lastState) report({ type: 'state.entered', state });
    lastState = state;
  });

  const result = new Promise<RunResult>((resolve, reject) => {
    actor.subscribe({
      complete: () => {
        if (stopping) {
          reject(new PolishError('CANCELLED', `run ${runId} stopped here; it stays resumable`));
          return;
        }
        const snapshot = actor.getSnapshot();
        const base = toRunResult(snapshot.value as PolishFinalState, snapshot.context);
        const runResult: RunResult = options.prices
          ? { ...base, cost: estimateCost(base.usage_by_model, options.prices) }
          : base;
        void (persistence?.ended(actor, runResult) ?? Promise.resolve()).then(() => {
          report(runFinishedOf(runResult));
          span.setAttributes({
            'polish.status': runResult.status,
            'polish.iterations': runResult.iterations,
            'gen_ai.usage.input_tokens': runResult.usage.input_tokens,
            'gen_ai.usage.output_tokens': runResult.usage.output_tokens,
          });
          // The status, not the reason: a reason may quote a provider's error text.
          if (runResult.status === 'FAILED') span.setStatus({ code: SpanStatusCode.ERROR, message: 'FAILED' });
          span.end();
          resolve(runResult);
        }, reject);
      },
      error: reject,
    });
  });
  // The caller handles the rejection; the span only records that the run broke.
  result.catch(() => {
    if (!span.isRecording()) return;
    if (!stopping) span.setStatus({ code: SpanStatusCode.ERROR, message: 'internal error' });
    span.end();
  });

  const onAbort = () =>
    actor.send({ type: 'CANCEL', reason: String(options.signal?.reason ?? 'cancelled by the caller') });
  options.signal?.addEventListener('abort', onAbort, { once: true });
  void result.finally(() => options.signal?.removeEventListener('abort', onAbort)).catch(() => undefined);

  if (!restored && !start.input.resume) report({ type: 'run.started', cap: spec.cap, threshold: spec.threshold });
  actor.start();
  if (options.signal?.aborted) onAbort();
  return {
    runId,
    actor,
    result,
    stop() {
      stopping = true;
      actor.stop();
    },
  };
}
