import { PolishError, type ParFinalStatus, type RunStatus } from '@polish/protocol';

// Every exit code of `polish`, and the one mapping from errors to codes (README, "Exit codes").

/** The documented exit codes of `polish run`, `demo` and the other commands. */
export const EXIT = {
  CONVERGED: 0,
  /** An unexpected internal error (a bug): please report it. */
  INTERNAL: 1,
  INVALID_INPUT: 2,
  CAP_REACHED: 3,
  FAILED: 4,
  CANCELLED: 5,
  /** polish could not start what it needs: Node older than 22 (bin.ts), nats-server missing, NATS unreachable, workers failing to start. */
  SETUP: 6,
  /** The budget could not cover the next wave: best version and remaining gaps returned (like CAP_REACHED). */
  BUDGET_EXHAUSTED: 8,
} as const;

/** Exit codes of `polish par run|resume` (README, "Plan-act-reflect"). */
export const PAR_EXIT: Readonly<Record<ParFinalStatus, number>> = {
  pass: 0,
  checkpoint: 3,
  stop: 4,
  'needs-human': 5,
  error: 7,
};

/** Exit codes of `polish policy`: 0 continue (or valid), 3 checkpoint, 4 stop. */
export const POLICY_EXIT = { continue: 0, checkpoint: 3, stop: 4 } as const;

/** The exit code for a run's final status. */
export function exitCodeFor(status: RunStatus): number {
  return EXIT[status];
}

/**
 * The exit code and the one line to print for an error that ended a command: bad input is 2
 * (the line names the field), a missing dependency 6, anything else a bug (1, with its stack).
 */
export function describeFailure(error: unknown): { code: number; line: string } {
  if (error instanceof PolishError && error.code === 'INVALID_INPUT')
    return { code: EXIT.INVALID_INPUT, line: `polish: invalid input: ${error.message}` };
  if (error instanceof PolishError && error.code === 'UNAVAILABLE')
    return { code: EXIT.SETUP, line: `polish: cannot start: ${error.message}` };
  const detail = error instanceof Error ? (error.stack ?? error.message) : String(error);
  return { code: EXIT.INTERNAL, line: `polish: internal error (please report): ${detail}` };
}
