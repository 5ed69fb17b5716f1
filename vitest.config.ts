import { defineConfig } from 'vitest/config';

// Integration tests start real processes (git, BIRD, wireguard-go, kube-apiserver); they get room to do so.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 600_000,
    pool: 'forks',
    reporters: ['default', './test/summary-reporter.ts'],
  },
});
