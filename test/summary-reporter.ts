/**
 * Prints the plain closing line `N passed, N failed, N skipped` that CI reads, after vitest's own summary.
 * A skipped test is counted as failed: a skip here means something was not verified.
 */
import type { Reporter, TestModule } from 'vitest/node';

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const mod of testModules) {
      for (const test of mod.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') failed++;
        else skipped++;
      }
      if (mod.state() === 'failed' && mod.children.size === 0) failed++;
    }
    console.log(`\n${passed} passed, ${failed + skipped} failed${skipped ? ` (${skipped} skipped)` : ''}`);
    if (skipped > 0) process.exitCode = 1;
  }
}
