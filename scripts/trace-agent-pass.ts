/**
 * The agent pass's trace (docs/architecture.md, "The create trace"; docs/agent.md): which project files
 * a reconcile pass runs when a session appears on the router, and the direction of each call between
 * two of them (scripts/call-trace.ts). The agent in this process against the real controller, a real
 * BIRD and WireGuard in a network namespace (test/agent/lab.ts); needs root. The functions a heartbeat
 * runs (the client's framing) are taken away; the pass counted brings one session up (tunnel, BIRD
 * protocol, configure), and each profiled run takes it down and up again (disable, pass, enable, pass).
 *
 *   node scripts/trace-agent-pass.ts        (PASSES=10 profiled disable/enable rounds)
 */
import { expectOk } from '../test/api/helpers.ts';
import { startAgentLab } from '../test/agent/lab.ts';
import { printTrace } from './call-trace.ts';

const lab = await startAgentLab('tap');
const agent = lab.agent();
try {
  const peer = await lab.addPeer('peer', 'fe80::1234');
  // a first pass with nothing to do: what loads once is not the traced pass's
  await agent.syncOnce();
  await agent.heartbeatOnce();
  const uuid = await lab.approvedSession(peer);
  const admin = (action: string) => expectOk(lab.h.post('/admin/session', lab.h.admin, { action, uuid }));
  await printTrace({
    dirs: ['common', 'agent'],
    what: 'pass',
    baselineWhat: 'a heartbeat',
    baseline: () => agent.heartbeatOnce(),
    run: async () => {
      await agent.syncOnce();
    },
    profiledRun: async () => {
      await admin('disable');
      await agent.syncOnce();
      await admin('enable');
      await agent.syncOnce();
    },
    runs: Number(process.env.PASSES ?? 10),
  });
} finally {
  await agent.close();
  await lab.close();
}
