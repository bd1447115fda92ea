import { randomUUID } from 'node:crypto';
import { createActor, type Actor, type InspectionEvent, type Observer } from 'xstate';
import { context, trace } from '@opentelemetry/api';
import {
  PolishError,
  RunSpecSchema,
  type PriceTable,
  type RunEvent,
  type RunResult,
  type RunSpecInput,
  type RunSummary,
} from '@polish/protocol';
import { POLISH_MACHINE_VERSION, polishMachine, type PolishContext, type PolishInput } from '../polish-machine.js';
import { createWaveActors, type WaveLedger, type WaveOutput } from '../wave-actors.js';
import { toRunResult, type PolishFinalState } from '../run-result.js';
import { estimateCost } from '../cost.js';
import type { Dispatcher } from '../dispatcher.js';
import type { RunStore } from './run-store.js';
import { ownerAlive } from './owner-lease.js';

/** What is kept in KV under `run.<runId>`: enough to resume the run, or to show its result. */
export interface RunRecord {
  runId: string;
  owner: string;
  machineVersion: number;
  status: RunSummary['status'];
  state: string;
  iteration: number;
  cap: number;
  createdAt: number;
  updatedAt: number;
  /** XState's persisted snapshot (context: spec, criteria, every version and evaluation, usage). */
  snapshot: unknown;
  result?: RunResult;
}

/** Settings of a run manager. */
export interface RunManagerOptions {
  store: RunStore;
  dispatcher: Dispatcher;
  /** This orchestrator's name: runs it starts are its own, and it resumes them after a restart. */
  owner: string;
  prices?: PriceTable;
  onEvent?: (event: RunEvent) => void;
  /** An XState inspection observer for each run's actors (e.g. the @statelyai/inspect feed on NATS). */
  inspect?: (runId: string) => Observer<InspectionEvent>;
  now?: () => number;
}

/** No-op unless an OpenTelemetry SDK is registered. */
const tracer = trace.getTracer('@polish/orchestrator');

/** A run may be taken over only when its owner is this orchestrator or is gone. */
async function checkTakeover(store: RunStore, record: RunRecord, me: string, action: string): Promise<void> {
  if (record.owner !== me && (await ownerAlive(store, record.owner))) {
    throw new PolishError(
      'INVALID_INPUT',
      `run ${record.runId} belongs to orchestrator "${record.owner}", which is running: ${action} it there`,
    );
  }
}

/** Starts, persists, resumes, cancels and extends polish runs. */
export interface RunManager {
  submit(spec: RunSpecInput, runId?: string): Promise<RunSummary>;
  status(runId: string): Promise<RunSummary | undefined>;
  list(): Promise<RunSummary[]>;
  cancel(runId: string, reason?: string): Promise<RunSummary>;
  extend(runId: string, cap: number): Promise<RunSummary>;
  /** Takes over an unfinished run (e.g. of an orchestrator that is gone) and continues it here. */
  resume(runId: string): Promise<RunSummary>;
  /** On start: resumes every unfinished run this owner had. */
  resumeOwned(): Promise<{ resumed: string[]; refused: { runId: string; problem: string }[] }>;
  /** Resolves with the run's result once it reaches a terminal state here. */
  result(runId: string): Promise<RunResult>;
  /** Stops the actors here without ending their runs: they stay resumable. */
  close(): Promise<void>;
}

const runKey = (runId: string) => `run.${runId}`;

function summaryOf(record: RunRecord, problem?: string): RunSummary {
  const { snapshot: _snapshot, ...summary } = record;
  return { ...summary, ...(problem ? { problem } : {}) };
}

function versionProblem(record: RunRecord): string | undefined {
  if (record.machineVersion === POLISH_MACHINE_VERSION) return undefined;
  return (
    `run ${record.runId} was saved by polish machine version ${record.machineVersion}, and this orchestrator runs machine ` +
    `version ${POLISH_MACHINE_VERSION}: it cannot be restored here. Finish it with a polish whose machine version is ` +
    `${record.machineVersion}, or cancel it`
  );
}

/**
 * The run manager (DESIGN §6). After every transition it persists the machine's snapshot to
 * KV, and a wave is dispatched only once the transition that started it is stored. Finished
 * waves are recorded by (run, wave, iteration), so a restored run never pays for one twice.
 * Every event also goes to the event stream.
 */
export function createRunManager(options: RunManagerOptions): RunManager {
  const now = options.now ?? Date.now;
  const active = new Map<
    string,
    { actor: Actor<typeof polishMachine>; result: Promise<RunResult>; stopping: boolean }
  >();

  async function load(runId: string): Promise<RunRecord | undefined> {
    return options.store.get<RunRecord>(runKey(runId));
  }

  function launch(
    runId: string,
    createdAt: number,
    start: { input: PolishInput } | { snapshot: unknown },
  ): Promise<RunSummary> {
    // Snapshot writes are coalesced and strictly ordered; `persisted()` waits for the latest.
    let version = 0;
    let written = 0;
    let latest: RunRecord | undefined;
    let writing: Promise<void> | undefined;
    let waiters: { version: number; resolve: () => void; reject: (error: Error) => void }[] = [];
    let storeFailure: Error | undefined;
    const pump = async () => {
      try {
        while (latest && version > written) {
          const target = version;
          await options.store.put(runKey(runId), latest);
          written = target;
          waiters = waiters.filter((waiter) => (waiter.version <= written ? (waiter.resolve(), false) : true));
        }
      } catch (error) {
        // The run can no longer be saved: it must not go on unsaved. Waves waiting to be sent fail.
        storeFailure = new PolishError('INTERNAL', `run ${runId} could not be saved: ${(error as Error).message}`);
        for (const waiter of waiters) waiter.reject(storeFailure);
        waiters = [];
      }
      writing = undefined;
    };
    const persist = (record: RunRecord) => {
      latest = record;
      version += 1;
      writing ??= pump();
    };
    const persisted = () =>
      storeFailure
        ? Promise.reject(storeFailure)
        : written >= version
          ? Promise.resolve()
          : new Promise<void>((resolve, reject) => waiters.push({ version, resolve, reject }));

    // Events of a run reach the stream one after another, in order, even across a NATS outage.
    let published = Promise.resolve();
    const report = (event: Record<string, unknown> & { type: RunEvent['type'] }, dedupeId?: string) => {
      const full = { ...event, runId, at: now() } as RunEvent;
      options.onEvent?.(full);
      published = published.then(() => options.store.publishEvent(full, dedupeId)).catch(() => undefined);
    };
    const ledger: WaveLedger = {
      keyOf: (role, iteration) => `result.${runId}.${role}.${iteration}`,
      load: (key) => options.store.get<WaveOutput<unknown>>(key),
      save: (key, output) => options.store.put(key, output),
      persisted,
    };
    // The run's trace in this orchestrator (a resumed run starts a new one): each wave a child.
    const span = tracer.startSpan('polish.run', {
      attributes: { 'polish.run_id': runId, 'polish.resumed': !('input' in start) },
    });
    const machine = polishMachine.provide({
      actors: createWaveActors({
        dispatcher: options.dispatcher,
        report,
        ledger,
        traceContext: trace.setSpan(context.active(), span),
      }),
    });
    const inspect = options.inspect ? { inspect: options.inspect(runId) } : {};
    const actor =
      'input' in start
        ? createActor(machine, { input: start.input, ...inspect })
        : createActor(machine, { snapshot: start.snapshot as never, input: undefined as never, ...inspect });
    const entry = { actor, result: undefined as unknown as Promise<RunResult>, stopping: false };

    const recordOf = (status: RunRecord['status'], result?: RunResult): RunRecord => {
      const snapshot = actor.getSnapshot();
      return {
        runId,
        owner: options.owner,
        machineVersion: POLISH_MACHINE_VERSION,
        status,
        state: String(snapshot.value),
        iteration: snapshot.context.iteration,
        cap: snapshot.context.spec.cap,
        createdAt,
        updatedAt: now(),
        snapshot: actor.getPersistedSnapshot(),
        ...(result ? { result } : {}),
      };
    };
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
      // A stopped actor (orchestrator shutting down) is not a transition: its run stays resumable.
      if (snapshot.status !== 'active' || entry.stopping) return;
      persist(recordOf('RUNNING'));
      const state = String(snapshot.value);
      if (state !== lastState) report({ type: 'state.entered', state });
      lastState = state;
    });
    entry.result = new Promise<RunResult>((resolve, reject) => {
      actor.subscribe({
        complete: () => {
          if (entry.stopping) return;
          const snapshot = actor.getSnapshot();
          const base = toRunResult(snapshot.value as PolishFinalState, snapshot.context);
          const result: RunResult = options.prices
            ? { ...base, cost: estimateCost(base.usage_by_model, options.prices) }
            : base;
          persist(recordOf(result.status, result));
          span.setAttributes({ 'polish.status': result.status, 'polish.iterations': result.iterations });
          span.end();
          void persisted()
            .then(() => {
              report(
                {
                  type: 'run.finished',
                  status: result.status,
                  iterations: result.iterations,
                  usage: result.usage,
                  ...(result.cost ? { cost: result.cost } : {}),
                },
                `${runId}.finished.${snapshot.context.spec.cap}`,
              );
              active.delete(runId);
              resolve(result);
            })
            .catch(reject);
        },
        error: (error) => {
          active.delete(runId);
          reject(error);
        },
      });
    });
    entry.result.catch(() => undefined);
    active.set(runId, entry);
    actor.start();
    // Only once the run is in KV is it accepted: a crash after this point cannot lose it.
    return persisted().then(() => summaryOf(recordOf('RUNNING')));
  }

  async function restore(record: RunRecord): Promise<RunSummary> {
    const problem = versionProblem(record);
    if (problem) return summaryOf(record, problem);
    if (active.has(record.runId)) return summaryOf(record);
    return launch(record.runId, record.createdAt, { snapshot: record.snapshot });
  }

  const notFound = (runId: string) => new PolishError('INVALID_INPUT', `no run ${runId}`);

  return {
    async submit(specInput, runId = randomUUID()) {
      const parsed = RunSpecSchema.safeParse(specInput);
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        throw new PolishError('INVALID_INPUT', `${issue?.path.join('.') || 'spec'}: ${issue?.message ?? 'invalid'}`);
      }
      if (active.has(runId) || (await load(runId)))
        throw new PolishError('INVALID_INPUT', `run ${runId} exists already`);
      report0(runId, { type: 'run.started', cap: parsed.data.cap, threshold: parsed.data.threshold });
      return launch(runId, now(), { input: { spec: parsed.data } });
    },
    async status(runId) {
      const record = await load(runId);
      return record ? summaryOf(record, versionProblem(record)) : undefined;
    },
    async list() {
      const keys = await options.store.keys('run.');
      const records = await Promise.all(keys.map((key) => options.store.get<RunRecord>(key)));
      return records
        .filter((record): record is RunRecord => Boolean(record))
        .map((record) => summaryOf(record, versionProblem(record)));
    },
    async cancel(runId, reason = 'cancelled by the caller') {
      const running = active.get(runId);
      if (running) {
        running.actor.send({ type: 'CANCEL', reason });
        await running.result;
        return summaryOf((await load(runId)) as RunRecord);
      }
      const record = await load(runId);
      if (!record) throw notFound(runId);
      if (record.status !== 'RUNNING')
        throw new PolishError('INVALID_INPUT', `run ${runId} has ended already (${record.status})`);
      await checkTakeover(options.store, record, options.owner, 'cancel');
      // Not running here (its orchestrator is gone): end it from its stored state, dispatching nothing.
      const context = (record.snapshot as { context?: PolishContext } | undefined)?.context;
      if (!context)
        throw new PolishError(
          'INVALID_INPUT',
          `run ${runId} has no state this orchestrator can read; cancel it with the polish that wrote it`,
        );
      const result = toRunResult('cancelled', { ...context, failure: { code: 'CANCELLED', reason } });
      const cancelled: RunRecord = { ...record, status: 'CANCELLED', state: 'cancelled', updatedAt: now(), result };
      await options.store.put(runKey(runId), cancelled);
      report0(
        runId,
        { type: 'run.finished', status: 'CANCELLED', iterations: result.iterations, usage: result.usage },
        `${runId}.finished.${record.cap}`,
      );
      return summaryOf(cancelled);
    },
    async extend(runId, cap) {
      const record = await load(runId);
      if (!record) throw notFound(runId);
      if (record.status !== 'CAP_REACHED')
        throw new PolishError(
          'INVALID_INPUT',
          `only a run that reached its cap can be extended; ${runId} is ${record.status}`,
        );
      if (cap <= record.cap)
        throw new PolishError('INVALID_INPUT', `cap: must be above the run's cap of ${record.cap}`);
      if (active.has(runId)) throw new PolishError('INVALID_INPUT', `run ${runId} is being extended already`);
      await checkTakeover(options.store, record, options.owner, 'extend');
      const problem = versionProblem(record);
      if (problem) throw new PolishError('INVALID_INPUT', problem);
      const { spec, failure: _failure, ...resume } = (record.snapshot as { context: PolishContext }).context;
      return launch(runId, record.createdAt, { input: { spec: { ...spec, cap }, resume } });
    },
    async resume(runId) {
      const record = await load(runId);
      if (!record) throw notFound(runId);
      if (record.status !== 'RUNNING')
        throw new PolishError('INVALID_INPUT', `run ${runId} has ended (${record.status}); nothing to resume`);
      if (!active.has(runId)) await checkTakeover(options.store, record, options.owner, 'resume');
      const summary = await restore(record);
      if (summary.problem) throw new PolishError('INVALID_INPUT', summary.problem);
      return summary;
    },
    async resumeOwned() {
      const resumed: string[] = [];
      const refused: { runId: string; problem: string }[] = [];
      for (const summary of await this.list()) {
        // A run that ended just before a crash may have missed its run.finished event: publish it
        // again; the stream drops it if it is there already (same message id, 10-minute window).
        if (summary.owner === options.owner && summary.result && summary.updatedAt > now() - 9 * 60_000) {
          const { result } = summary;
          const event = {
            type: 'run.finished',
            status: result.status,
            iterations: result.iterations,
            usage: result.usage,
            runId: summary.runId,
            at: now(),
          } as RunEvent;
          await options.store.publishEvent(event, `${summary.runId}.finished.${summary.cap}`);
        }
        if (summary.status !== 'RUNNING' || summary.owner !== options.owner || active.has(summary.runId)) continue;
        try {
          const record = await load(summary.runId);
          if (!record) continue;
          const outcome = await restore(record);
          if (outcome.problem) refused.push({ runId: summary.runId, problem: outcome.problem });
          else resumed.push(summary.runId);
        } catch (error) {
          refused.push({ runId: summary.runId, problem: (error as Error).message });
        }
      }
      return { resumed, refused };
    },
    async result(runId) {
      const running = active.get(runId);
      if (running) return running.result;
      const record = await load(runId);
      if (record?.result) return record.result;
      throw notFound(runId);
    },
    async close() {
      for (const entry of active.values()) {
        entry.stopping = true;
        entry.actor.stop();
      }
      active.clear();
    },
  };

  function report0(runId: string, event: Record<string, unknown> & { type: RunEvent['type'] }, dedupeId?: string) {
    const full = { ...event, runId, at: now() } as RunEvent;
    options.onEvent?.(full);
    void options.store.publishEvent(full, dedupeId).catch(() => undefined);
  }
}
