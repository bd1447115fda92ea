import {
  isLaneRole,
  type ModelInfo,
  type PayloadOf,
  type TaskRole,
  type Usage,
  type WorkerInfo,
} from '@polish/protocol';

/** What came back for one task: the raw result (validated by the caller), usage and provenance. */
export interface DispatchOutcome {
  result: unknown;
  usage: Usage;
  model: ModelInfo;
  worker: WorkerInfo;
  /** Deliveries this answer took: 1 unless the task was handed out again (a worker died, timed out). */
  attempts: number;
  /** Time the task waited for a worker, and the time its worker spent on it (when known). */
  queuedMs?: number;
  workMs?: number;
}

/** How a task is getting on before its answer: for progress lines and events. */
export type DispatchProgress =
  | { type: 'queued'; ahead: number }
  | { type: 'waiting'; queued: number; pulling: number; inFlight: number; waitedMs: number }
  | { type: 'taken'; worker: WorkerInfo; delivery: number; queuedMs: number }
  | { type: 'released'; worker: WorkerInfo; delivery: number; reason: string };

/** Options for one dispatch. */
export interface DispatchOptions {
  /** Aborted when the run is cancelled or stopped; the dispatcher stops waiting and withdraws the task. */
  signal?: AbortSignal;
  /** Identifies the task across retries and restarts (run, wave, iteration, re-send). */
  idempotencyKey?: string;
  /** This task's own time limit once a worker has it, instead of the dispatcher's (e.g. a command critique's timeout plus a margin). */
  timeoutMs?: number;
  /** This task's own bound on deliveries; 1 hands it out once (a command critique is never re-run). */
  maxAttempts?: number;
  /** Told how the task is getting on: queued, still waiting, taken, given back. */
  onProgress?: (progress: DispatchProgress) => void;
  /**
   * Over NATS: the model lane the task goes to instead of its role's queue (a quorum's judge on
   * its own model), taken only by workers serving that model. In process there are no lanes.
   */
  lane?: TaskLane;
}

/** A model's lane: its name (see `modelLane` in the protocol) and the model, for messages. */
export interface TaskLane {
  name: string;
  model: string;
}

/**
 * Sends one task to whoever serves a role and returns its answer, or throws a
 * `PolishError` naming the role. Implementations: in-process (embedding, unit tests)
 * and NATS (the task queue, worker processes).
 */
export interface Dispatcher {
  dispatch<R extends TaskRole>(role: R, payload: PayloadOf<R>, options?: DispatchOptions): Promise<DispatchOutcome>;
  /** Releases connections; a closed dispatcher accepts no more tasks. */
  close?(): Promise<void>;
}

/**
 * A dispatcher that sends the tasks of roles with lanes (evaluate) to one model's lane, and the
 * others as `dispatcher` does: a judge whose workers run elsewhere.
 */
export function laneDispatcher(dispatcher: Dispatcher, lane: TaskLane): Dispatcher {
  return {
    dispatch: (role, payload, options) =>
      dispatcher.dispatch(role, payload, isLaneRole(role) ? { ...options, lane } : options),
  };
}
