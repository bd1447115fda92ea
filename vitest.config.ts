import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['packages/*/src/**/*.test.ts', 'test/**/*.test.ts'],
    // Most of a test's time is spent waiting on its processes (nats-server, hosts, workers):
    // two files at a time halves the suite on 2 cores (vitest's default there is one).
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default', './test/support/summary-reporter.ts'],
    setupFiles: ['./test/support/setup.ts'],
  },
});
