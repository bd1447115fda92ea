import { randomUUID } from 'node:crypto';
import type { InspectionEvent, Observer } from 'xstate';
import {
  PolishError,
  invalidInput,
  type PriceTable,
  type RunEvent,
  type RunResult,
  type RunSpecInput,
  type RunSummary,
} from '@polish/protocol';
import { POLISH_MACHINE_VERSION, type PolishContext } from '../polish/polish-machine.js';
import type { WaveOutput } from '../polish/wave-actors.js';
import { runFinishedOf, toRunResult } from '../polish/run-result.js';
import { resolveBudget } from '../polish/budget.js';
import { drivePolish, parseRunSpec, type PolishActor, type PolishRun, type PolishStart } from '../polish/run-polish.js';
import type { Dispatcher } from '../dispatch/dispatcher.js';
import type { RunStore } from './run-store.js';
import { ownerAlive } from './owner-lease.js';
import { createRecordSaver } from './record-saver.js';
import { CORRUPT_FIELD } from './run-store.js';

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
  /** CORRUPT: why, and what was stored. */
  problem?: string;
  found?: unknown;
}

/** What is wrong with a stored value as a run record, or undefined when it has the shape. */
function recordProblem(raw: unknown): string | undefined {
  const record = raw as Partial<RunRecord> | null;
  if (!record || typeof record !== 'object' || Array.isArray(record)) return 'not an object';
  for (const field of ['runId', 'owner', 'status', 'state'] as const)
    if (typeof record[field] !== 'string') return `${field} is not a string`;
  for (const field of ['machineVersion', 'iteration', 'cap', 'createdAt', 'updatedAt'] as const)
    if (typeof record[field] !== 'number') return `${field} is not a number`;
  // A snapshot of another machine version is judged by that version: here it is only refused, by name.
  if (record.status === 'RUNNING' && record.machineVersion === POLISH_MACHINE_VERSION) {
    const snapshot = record.snapshot as { value?: unknown; context?: { spec?: unknown } } | null | undefined;
    if (!snapshot || typeof snapshot !== 'object' || !snapshot.context?.spec)
      return 'snapshot has no context to restore';
  }
  return undefined;
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

/** The field of the error for a run id the store does not know (the run service answers NOT_FOUND). */
export const NOT_FOUND_FIELD = 'runId';
/** A request about a run that cannot be done: the message names the run. */
const runRefused = (message: string) => new PolishError('INVALID_INPUT', message, { field: 'run' });

/** A run may be taken over only when its owner is this orchestrator or is gone. */
async function checkTakeover(store: RunStore, record: RunRecord, me: string, action: string): Promise<void> {
  if (record.owner !== me && (await ownerAlive(store, record.owner))) {
    throw runRefused(
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
/** The message id of a run's run.finished event: a repeat within the stream's window is dropped. */
const finishedId = (runId: string, cap: number) => `${runId}.finished.${cap}`;

function summaryOf(record: RunRecord, problem?: string): RunSummary {
  const { snapshot: _snapshot, found: _found, problem: stored, ...summary } = record;
  const why = problem ?? stored;
  return { ...summary, ...(why ? { problem: why } : {}) };
}

function versionProblem(record: RunRecord): string | undefined {
  if (record.machineVersion === POLISH_MACHINE_VERSION || record.status === 'CORRUPT') return undefined;
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
  const active = new Map<string, { run: PolishRun; result: Promise<RunResult> }>();

  /**
   * A run's record, or its quarantine: a value that does not parse or does not have a run
   * record's shape is kept aside as CORRUPT (with the reason and the text as found), and every
   * other run goes on. One bad record is one bad record, never a service that cannot start.
   */
  async function load(runId: string): Promise<RunRecord | undefined> {
    let raw: unknown;
    try {
      raw = await options.store.get<unknown>(runKey(runId));
    } catch (error) {
      if (!(error instanceof PolishError && error.field === CORRUPT_FIELD)) throw error;
      return quarantine(runId, `its stored record is broken: ${error.message}`, String(error.cause ?? ''));
    }
    if (raw === undefined) return undefined;
    const shape = recordProblem(raw);
    return shape ? quarantine(runId, `its stored record is broken: ${shape}`, raw) : (raw as RunRecord);
  }

  /** Keeps a broken record aside as CORRUPT, with the reason and what was there. */
  async function quarantine(runId: string, problem: string, found: unknown): Promise<RunRecord> {
    const record: RunRecord = {
      runId,
      owner: typeof (found as RunRecord | null)?.owner === 'string' ? (found as RunRecord).owner : 'unknown',
      machineVersion: 0,
      status: 'CORRUPT',
      state: 'corrupt',
      iteration: 0,
      cap: 0,
      createdAt: Number((found as RunRecord | null)?.createdAt) || now(),
      updatedAt: now(),
      snapshot: null,
      problem,
      found,
    };
    await options.store.put(runKey(runId), record).catch(() => undefined);
    return record;
  }

  function launch(runId: string, createdAt: number, start: PolishStart): Promise<RunSummary> {
    const saver = createRecordSaver(options.store, runKey(runId));
    let cap = 0;
    // Events of a run reach the stream one after another, in order, even across a NATS outage;
    // run.finished carries a message id, so a restarted orchestrator's repeat is dropped.
    let published = Promise.resolve();
    const onEvent = (event: RunEvent) => {
      options.onEvent?.(event);
      const dedupeId = event.type === 'run.finished' ? finishedId(runId, cap) : undefined;
      published = published.then(() => options.store.publishEvent(event, dedupeId)).catch(() => undefined);
    };
    const recordOf = (actor: PolishActor, status: RunRecord['status'], result?: RunResult): RunRecord => {
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
    const run = drivePolish(start, {
      runId,
      dispatcher: options.dispatcher,
      onEvent,
      now,
      ...(options.prices ? { prices: options.prices } : {}),
      ...(options.inspect ? { inspect: options.inspect(runId) } : {}),
      persistence: {
        ledger: {
          keyOf: (role, iteration) => `result.${runId}.${role}.${iteration}`,
          load: (key) => options.store.get<WaveOutput<unknown>>(key),
          save: (key, output) => options.store.put(key, output),
          persisted: saver.persisted,
        },
        transitioned: (actor) => saver.save(recordOf(actor, 'RUNNING')),
        ended: (actor, result) => {
          saver.save(recordOf(actor, result.status, result));
          return saver.persisted();
        },
      },
    });
    cap = run.actor.getSnapshot().context.spec.cap;
    const entry = {
      run,
      result: run.result.finally(() => {
        if (active.get(runId) === entry) active.delete(runId);
      }),
    };
    // A machine that fails on its own (a snapshot that restored but cannot go on) is quarantined, not fatal.
    run.result.catch((error: unknown) => {
      if (error instanceof PolishError && error.code === 'CANCELLED') return;
      // A record that could not be saved is no broken machine: the last one saved stands, and
      // the run resumes from it (quarantining would overwrite that good snapshot).
      if (error === saver.failure()) return;
      let state: unknown;
      try {
        state = run.actor.getSnapshot().value;
      } catch {
        state = undefined;
      }
      void quarantine(runId, `its machine failed: ${(error as Error)?.message ?? String(error)}`, { runId, state });
    });
    entry.result.catch(() => undefined);
    active.set(runId, entry);
    // Only once the run is in KV is it accepted: a crash after this point cannot lose it.
    return saver.persisted().then(() => summaryOf(recordOf(run.actor, 'RUNNING')));
  }

  async function restore(record: RunRecord): Promise<RunSummary> {
    const problem = versionProblem(record);
    if (problem) return summaryOf(record, problem);
    if (active.has(record.runId)) return summaryOf(record);
    try {
      return await launch(record.runId, record.createdAt, { snapshot: record.snapshot });
    } catch (error) {
      // A snapshot XState cannot restore: kept aside, and the service goes on.
      active.delete(record.runId);
      const message = `its snapshot does not restore: ${(error as Error).message}`;
      return summaryOf(await quarantine(record.runId, message, record));
    }
  }

  const notFound = (runId: string) => new PolishError('INVALID_INPUT', `no run ${runId}`, { field: NOT_FOUND_FIELD });

  return {
    async submit(specInput, runId = randomUUID()) {
      const spec = parseRunSpec(specInput);
      const budget = resolveBudget(spec, options.prices);
      if (active.has(runId) || (await load(runId))) throw runRefused(`run ${runId} exists already`);
      return launch(runId, now(), { input: { spec, budget } });
    },
    async status(runId) {
      const record = await load(runId);
      return record ? summaryOf(record, versionProblem(record)) : undefined;
    },
    async list() {
      const keys = await options.store.keys('run.');
      const records = await Promise.all(keys.map((key) => load(key.slice('run.'.length))));
      return records
        .filter((record): record is RunRecord => Boolean(record))
        .map((record) => summaryOf(record, versionProblem(record)));
    },
    async cancel(runId, reason = 'cancelled by the caller') {
      const running = active.get(runId);
      if (running) {
        running.run.actor.send({ type: 'CANCEL', reason });
        await running.result;
        return summaryOf((await load(runId)) as RunRecord);
      }
      const record = await load(runId);
      if (!record) throw notFound(runId);
      if (record.status !== 'RUNNING') throw runRefused(`run ${runId} has ended already (${record.status})`);
      await checkTakeover(options.store, record, options.owner, 'cancel');
      // Not running here (its orchestrator is gone): end it from its stored state, dispatching nothing.
      const context = (record.snapshot as { context?: PolishContext } | undefined)?.context;
      if (!context)
        throw runRefused(
          `run ${runId} has no state this orchestrator can read; cancel it with the polish that wrote it`,
        );
      const result = toRunResult('cancelled', { ...context, failure: { code: 'CANCELLED', reason } });
      const cancelled: RunRecord = { ...record, status: 'CANCELLED', state: 'cancelled', updatedAt: now(), result };
      await options.store.put(runKey(runId), cancelled);
      publishFinished(runId, result, record.cap);
      return summaryOf(cancelled);
    },
    async extend(runId, cap) {
      const record = await load(runId);
      if (!record) throw notFound(runId);
      if (record.status !== 'CAP_REACHED')
        throw runRefused(`only a run that reached its cap can be extended; ${runId} is ${record.status}`);
      if (cap <= record.cap) throw invalidInput('cap', `must be above the run's cap of ${record.cap}`);
      if (active.has(runId)) throw runRefused(`run ${runId} is being extended already`);
      await checkTakeover(options.store, record, options.owner, 'extend');
      const problem = versionProblem(record);
      if (problem) throw runRefused(problem);
      const { spec, failure: _failure, ...resume } = (record.snapshot as { context: PolishContext }).context;
      return launch(runId, record.createdAt, { input: { spec: { ...spec, cap }, resume } });
    },
    async resume(runId) {
      const record = await load(runId);
      if (!record) throw notFound(runId);
      if (record.status !== 'RUNNING') throw runRefused(`run ${runId} has ended (${record.status}); nothing to resume`);
      if (!active.has(runId)) await checkTakeover(options.store, record, options.owner, 'resume');
      const summary = await restore(record);
      if (summary.problem) throw runRefused(summary.problem);
      return summary;
    },
    async resumeOwned() {
      const resumed: string[] = [];
      const refused: { runId: string; problem: string }[] = [];
      for (const summary of await this.list()) {
        // A run that ended just before a crash may have missed its run.finished event: publish it
        // again; the stream drops it if it is there already (same message id, 10-minute window).
        if (summary.owner === options.owner && summary.result && summary.updatedAt > now() - 9 * 60_000) {
          await publishFinished(summary.runId, summary.result, summary.cap, { quiet: true });
        }
        if (summary.status === 'CORRUPT' && summary.owner === options.owner) {
          refused.push({ runId: summary.runId, problem: summary.problem ?? 'corrupt' });
          continue;
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
      for (const entry of active.values()) entry.run.stop();
      active.clear();
    },
  };

  /** run.finished of a run that ended without an actor here (cancelled from its record, or republished after a crash). */
  function publishFinished(runId: string, result: RunResult, cap: number, { quiet = false } = {}): Promise<void> {
    const event: RunEvent = { ...runFinishedOf(result), runId, at: now() };
    if (!quiet) options.onEvent?.(event);
    return options.store.publishEvent(event, finishedId(runId, cap)).catch(() => undefined);
  }
}
