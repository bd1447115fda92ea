import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['packages/*/src/**/*.test.ts', 'test/**/*.test.ts'],
    // Two files at a time even on 2 cores: most of a file's time is spent waiting on the processes it
    // starts (one file at a time kept the 2 cores 40% busy), so the suite takes 9 minutes instead of
    // 15 (vitest's default is one file per core but one, that is one here).
    maxWorkers: Math.max(2, availableParallelism() - 1),
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default', './test/support/summary-reporter.ts'],
    setupFiles: ['./test/support/setup.ts'],
  },
});
