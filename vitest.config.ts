import { configDefaults, defineConfig } from 'vitest/config';

// Integration tests start real processes (git, BIRD, wireguard-go, kube-apiserver); they get room to do so.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // test/cluster/ brings up a whole Kubernetes node: its own run, `npm run test:cluster` (docs/kubernetes.md)
    exclude: process.env.PEEROPS_TEST_CLUSTER
      ? configDefaults.exclude
      : [...configDefaults.exclude, 'test/cluster/**'],
    testTimeout: 60_000,
    // expect.poll waits for what a loaded CI machine may take seconds to show (its default is 1 s)
    expect: { poll: { timeout: 10_000 } },
    hookTimeout: 600_000,
    pool: 'forks',
    reporters: ['default', './test/summary-reporter.ts'],
  },
});
