import type { ModelInfo, PayloadOf, TaskRole, Usage, WorkerInfo } from '@polish/protocol';

/** What came back for one task: the raw result (validated by the caller), usage and provenance. */
export interface DispatchOutcome {
  result: unknown;
  usage: Usage;
  model: ModelInfo;
  worker: WorkerInfo;
  /** Dispatches this answer took: 1 unless the task was retried. */
  attempts: number;
}

/** Options for one dispatch. */
export interface DispatchOptions {
  /** Aborted when the run is cancelled or stopped; the dispatcher stops waiting. */
  signal?: AbortSignal;
  /** Identifies the task across retries and restarts (run, wave, iteration); each dispatch adds its attempt. */
  idempotencyKey?: string;
  /** This task's own reply timeout, instead of the dispatcher's (e.g. a command critique's timeout plus a margin). */
  timeoutMs?: number;
  /** This task's own bound on dispatches; 1 sends it once (a command critique is never re-run). */
  maxAttempts?: number;
}

/**
 * Sends one task to whoever serves a role and returns its answer, or throws a
 * `PolishError` naming the role. Implementations: in-process (embedding, unit tests)
 * and NATS (worker processes).
 */
export interface Dispatcher {
  dispatch<R extends TaskRole>(role: R, payload: PayloadOf<R>, options?: DispatchOptions): Promise<DispatchOutcome>;
  /** Releases connections; a closed dispatcher accepts no more tasks. */
  close?(): Promise<void>;
}
