/** The alert rules (docs/kubernetes.md, "Monitoring"), checked and unit-tested with the real promtool. */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const exec = promisify(execFile);
const dir = 'charts/peerops/files';

describe('charts/peerops/files/alerts.yaml', () => {
  it('is a valid rule file', async () => {
    const { stdout } = await exec('promtool', ['check', 'rules', 'alerts.yaml'], { cwd: dir });
    expect(stdout).toContain('SUCCESS: 10 rules found');
  });
  it('passes its promtool unit tests (agent offline > 5 min, BIRD down > 1 min, agent not reporting > 2 min, stuck > 10 min, 5xx > 5%, one session in ERROR > 15 min, 3 sessions of a router in ERROR > 5 min, manifests skipped > 5 min, the store refusing writes > 2 min, a node refusing its config > 10 min)', async () => {
    const { stdout } = await exec('promtool', ['test', 'rules', 'alerts.test.yaml'], { cwd: dir });
    expect(stdout).toContain('SUCCESS');
  });
  it('names only metrics the controller exports', async () => {
    const { register } = await import('../../controller/metrics.ts');
    await import('../../controller/store/core/skipped.ts'); // registers the store's gauge
    const names = (await register.getMetricsAsJSON()).map((m) => m.name);
    for (const metric of [
      'agent_heartbeat_timestamp',
      'peerops_router_ready',
      'peerops_sessions_stuck',
      'http_requests_total',
      'peerops_store_manifests_skipped',
      'peerops_store_writable',
    ])
      expect(names).toContain(metric);
    // the per-session series are written beside the registry (controller/metrics.ts, metricsText)
    const { metricsText } = await import('../../controller/metrics.ts');
    expect(await metricsText()).toContain('# TYPE peerops_session_state gauge');
  });
  it("names the agent's config metric as the agent exports it, 0 while BIRD refuses a file no session owns", async () => {
    const { AgentMetrics } = await import('../../agent/metrics.ts');
    const text = (configApplied: boolean) =>
      new AgentMetrics({
        sessions: () => [],
        lastReport: () => undefined,
        configureCalls: () => 0,
        configApplied: () => configApplied,
        health: async () => ({ bird: true, controller: true }),
      }).registry.metrics();
    expect(await text(true)).toMatch(/^peerops_agent_config_applied 1$/m);
    expect(await text(false)).toMatch(/^peerops_agent_config_applied 0$/m);
  });
});
