import type { Reporter, TestModule } from 'vitest/node';

/** Prints one plain closing line, "tests: N passed, N failed[, N skipped]", that any CI can read. */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const counts = { passed: 0, failed: 0, skipped: 0, pending: 0 };
    for (const module of testModules) {
      for (const test of module.children.allTests()) counts[test.result().state] += 1;
    }
    const skipped = counts.skipped + counts.pending;
    console.log(`tests: ${counts.passed} passed, ${counts.failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
  }
}
