/**
 * A router's Ready as the controller judges it (docs/agent.md, "When something is wrong"): from the
 * agent's BirdRunning condition in its heartbeat (False: Ready False, BirdDown, the agent's words), and
 * from silence (no heartbeat for 1.5 of the interval the agent says it keeps: Ready False,
 * AgentNotReporting). A heartbeat of an older agent (no conditions, no interval) keeps working. The
 * metric the alerts read, peerops_router_ready, follows Ready.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Condition } from '../../common/schema.ts';
import { SessionReconciler } from '../../controller/reconcile/session-reconciler.ts';
import { expectOk, problem, startHarness, type Harness } from './helpers.ts';

let h: Harness;
let token: string;

const ready = (): Condition | undefined =>
  h.store.getRouter('rdy1')?.status.conditions?.find((c) => c.type === 'Ready');

const birdRunning = (status: 'True' | 'False', message: string) => ({
  type: 'BirdRunning',
  status,
  reason: status === 'True' ? 'Answering' : 'BirdDown',
  message,
  lastTransitionTime: '2026-11-28T00:00:00.000Z',
});

const beat = (extra: Record<string, unknown> = {}) =>
  h.post('/agent/rdy1/heartbeat', token, { version: '0.1.0', uptime: 5, ...extra });

beforeAll(async () => {
  h = await startHarness();
  token = await h.addRouter('rdy1');
});
afterAll(async () => h?.close());

describe("a router's Ready", () => {
  it("an older agent's heartbeat (no conditions, no interval) makes it Ready", async () => {
    await expectOk(beat());
    expect(ready()).toMatchObject({ status: 'True', reason: 'AgentReporting' });
    expect(h.store.getRouter('rdy1')?.status.heartbeatInterval).toBeUndefined();
  });

  it("BirdRunning False in a heartbeat: Ready False, BirdDown, with the agent's words; True again: Ready", async () => {
    const words = 'BIRD does not answer on /run/bird/bird.ctl: connect ECONNREFUSED';
    await expectOk(beat({ conditions: [birdRunning('False', words)], heartbeatInterval: 30 }));
    expect(ready()).toMatchObject({ status: 'False', reason: 'BirdDown', message: words });
    const metrics = (await expectOk(h.get('/metrics'))).body;
    expect(metrics).toMatch(/^peerops_router_ready\{router="rdy1",reason="BirdDown"\} 0$/m);
    const since = ready()?.lastTransitionTime;
    // the same report again moves nothing
    await expectOk(beat({ conditions: [birdRunning('False', words)], heartbeatInterval: 30 }));
    expect(ready()?.lastTransitionTime).toBe(since);
    await expectOk(beat({ conditions: [birdRunning('True', 'BIRD answers')], heartbeatInterval: 30 }));
    expect(ready()).toMatchObject({ status: 'True', reason: 'AgentReporting' });
    expect((await expectOk(h.get('/metrics'))).body).toMatch(
      /^peerops_router_ready\{router="rdy1",reason="AgentReporting"\} 1$/m,
    );
  });

  it("silence for 1.5 of the agent's intervals: Ready False, AgentNotReporting; the next heartbeat: Ready", async () => {
    await expectOk(beat({ heartbeatInterval: 4 }));
    const last = Date.parse(h.store.getRouter('rdy1')!.status.lastHeartbeat!);
    const reconciler = new SessionReconciler({
      store: h.store,
      stuckAfterSeconds: 600,
      offlineAfterSeconds: 300,
    });
    reconciler.markSilent(last + 6000);
    expect(ready()).toMatchObject({ status: 'True' });
    reconciler.markSilent(last + 6001);
    expect(ready()).toMatchObject({ status: 'False', reason: 'AgentNotReporting' });
    expect(ready()?.message).toContain(h.store.getRouter('rdy1')!.status.lastHeartbeat!);
    // the next heartbeat comes after that judgement, as on a real clock: of two observations the store
    // keeps the newer (docs/store.md, "The newer observation wins")
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      vi.setSystemTime(last + 6002);
      await expectOk(beat({ heartbeatInterval: 4 }));
    } finally {
      vi.useRealTimers();
    }
    expect(ready()).toMatchObject({ status: 'True', reason: 'AgentReporting' });
  });

  it('a heartbeat interval out of range is refused, naming the field', async () => {
    const res = await beat({ heartbeatInterval: 0 });
    expect(problem(res)).toMatchObject({ status: 400 });
    expect(res.body).toContain('/heartbeatInterval');
  });
});
