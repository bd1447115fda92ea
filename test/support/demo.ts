import { readFileSync } from 'node:fs';
import type { RunEvent, RunResult } from '@polish/protocol';
import { REPO } from './cli.js';

// The demo example (examples/demo): an artifact, its goal and criteria, and a scripted model with
// which a run converges at iteration 3, one more criterion passing each time.

export const DEMO = `${REPO}examples/demo`;
export const DEMO_GOAL = readFileSync(`${DEMO}/goal.txt`, 'utf8').trim();
/** The demo's run spec (its criteria are drafted by the criteria task). */
export const DEMO_SPEC = { artifact: readFileSync(`${DEMO}/artifact.md`, 'utf8'), goal: DEMO_GOAL };
/** The roles of the demo run's tasks, in order: criteria, then evaluate and revise until the third evaluation passes. */
export const DEMO_TASK_ROLES = ['criteria', 'evaluate', 'revise', 'evaluate', 'revise', 'evaluate'];

/** `polish run` on an artifact (default: the demo's) with the demo's goal and criteria, then `extra`. */
export const demoRunArgs = (extra: string[] = [], artifact = `${DEMO}/artifact.md`) => [
  'run',
  artifact,
  '--goal',
  DEMO_GOAL,
  '--criteria',
  `${DEMO}/criteria.json`,
  ...extra,
];

/** `polish run` on the demo's artifact and goal through the workers at `natsUrl`, printing JSON (a criteria task drafts the criteria). */
export const demoRunOnNatsArgs = (natsUrl: string) => [
  'run',
  `${DEMO}/artifact.md`,
  '--goal',
  DEMO_GOAL,
  '--nats',
  natsUrl,
  '--json',
];

/** What must be equal between a disturbed and an undisturbed run. */
export const runOutcome = (result: RunResult) => ({
  status: result.status,
  iterations: result.iterations,
  artifact: result.artifact,
  history: result.history,
});

/** How many criteria passed at each evaluated iteration, from a run's events (the demo's: 1, 2, 3). */
export const passedPerIteration = (events: RunEvent[]) =>
  events.flatMap((event) => (event.type === 'iteration.evaluated' ? [event.passed] : []));
