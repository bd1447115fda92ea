import type { RunStatus } from '@polish/protocol';

/** The documented exit codes of `polish` (README, "Exit codes"). */
export const EXIT = {
  CONVERGED: 0,
  /** An unexpected internal error (a bug): please report it. */
  INTERNAL: 1,
  INVALID_INPUT: 2,
  CAP_REACHED: 3,
  FAILED: 4,
  CANCELLED: 5,
  /** polish could not start what it needs: nats-server missing, NATS unreachable, workers failing to start. */
  SETUP: 6,
} as const;

/** The exit code for a run's final status. */
export function exitCodeFor(status: RunStatus): number {
  return EXIT[status];
}
