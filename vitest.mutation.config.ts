import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// The tests StrykerJS runs against each mutant (pnpm test:mutation, see docs/testing.md): the
// in-process tests of the mutated modules. The workspace packages resolve to their sources
// here, not to dist/, so a mutant in packages/*/src is the code these tests load.
const source = (path: string) => fileURLToPath(new URL(path, import.meta.url));

export default defineConfig({
  resolve: {
    alias: {
      '@polish/protocol': source('./packages/protocol/src/index.ts'),
      '@polish/orchestrator': source('./packages/orchestrator/src/index.ts'),
      '@polish/agents': source('./packages/agents/src/index.ts'),
    },
  },
  test: {
    include: [
      'test/permission-table.test.ts',
      'packages/protocol/src/**/*.test.ts',
      'packages/orchestrator/src/**/*.test.ts',
      'test/polish-loop.test.ts',
    ],
    // The memory log's test races real processes: it covers none of the mutated modules.
    exclude: ['**/node_modules/**', 'packages/orchestrator/src/memory/**'],
    testTimeout: 60_000,
  },
});
