// Mutation testing (pnpm test:mutation, issue 22): StrykerJS changes the modules whose
// correctness is the product one small edit at a time and runs their in-process tests against
// each change; a change no test notices is a surviving mutant. docs/testing.md has the scores
// per module and the survivors judged equivalent. Not in CI: see docs/testing.md for how long
// it takes on 2 cores.
/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'vitest',
  vitest: { configFile: 'vitest.mutation.config.ts', related: false },
  plugins: ['@stryker-mutator/vitest-runner'],
  mutate: [
    // verdict and threshold
    'packages/orchestrator/src/polish/verdict.ts',
    'packages/protocol/src/threshold.ts',
    // run result
    'packages/orchestrator/src/polish/run-result.ts',
    // protocol validation (the answer contracts every agent reply is checked against)
    'packages/protocol/src/evaluation.ts',
    'packages/protocol/src/criteria.ts',
    'packages/protocol/src/tolerant-read.ts',
    // policy engine
    'packages/orchestrator/src/par/policy-engine.ts',
    // NATS permissions
    'packages/protocol/src/permissions.ts',
    // the critique classifier
    'packages/orchestrator/src/par/classify-cycle.ts',
    'packages/orchestrator/src/par/critique.ts',
  ],
  // Two cores shared with other work: one mutant at a time by default (STRYKER_CONCURRENCY to change).
  concurrency: Number(process.env.STRYKER_CONCURRENCY ?? 1),
  coverageAnalysis: 'perTest',
  reporters: ['clear-text', 'progress-append-only', 'html', 'json'],
  htmlReporter: { fileName: 'reports/mutation/index.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  tempDirName: '.stryker-tmp',
  // Node 24 from scripts/use-node.sh: never needed in the sandbox, and a worktree's .node symlink
  // to another checkout's install makes the sandbox copy fail (EISDIR).
  ignorePatterns: ['.node'],
  cleanTempDir: 'always',
  // A mutant that makes a run wait forever is caught by this timeout (counted as killed): keep it short.
  timeoutMS: 3_000,
  thresholds: { high: 90, low: 80, break: null },
};
