/** The controller-side reconcile loop: conditions for stuck sessions, offline agents, missing routers. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionReconciler } from '../../controller/reconcile/session-reconciler.ts';
import type { Store } from '../../controller/store/store.ts';
import { driver, expectOk, startHarness, type Harness } from './helpers.ts';

let h: Harness;
let d: ReturnType<typeof driver>;
let token: string;

beforeAll(async () => {
  h = await startHarness();
  token = await h.addRouter('fra1');
  d = driver(h, 'fra1', token);
});
afterAll(async () => h?.close());

describe('reconciler', () => {
  it('reports a session in QUEUED_FOR_SETUP for more than 10 minutes as stuck, and clears it', async () => {
    const r = new SessionReconciler({ store: h.store, stuckAfterSeconds: 600, offlineAfterSeconds: 300 });
    const uuid = await d.inStatus(4);
    await r.pass();
    expect(r.findings().filter((c) => c.type === 'SessionStuck')).toEqual([]);
    await r.pass(Date.now() + 11 * 60_000);
    expect(r.findings()).toContainEqual(expect.objectContaining({ type: 'SessionStuck', subject: uuid }));
    const since = r.findings().find((c) => c.subject === uuid)?.since;
    await r.pass(Date.now() + 12 * 60_000);
    expect(r.findings().find((c) => c.subject === uuid)?.since).toBe(since);
    await expectOk(d.report(uuid, 1));
    await r.pass(Date.now() + 12 * 60_000);
    expect(r.findings().find((c) => c.subject === uuid)).toBeUndefined();
    const metrics = await h.get('/metrics');
    expect(metrics.body).toMatch(/peerops_sessions_stuck\{router="fra1"\} 0/);
  });
  it('reports an agent without a heartbeat for more than 5 minutes as offline', async () => {
    const r = new SessionReconciler({ store: h.store, stuckAfterSeconds: 600, offlineAfterSeconds: 300 });
    await expectOk(h.post('/agent/fra1/heartbeat', token, { version: '1.0.0', uptime: 5 }));
    await r.pass();
    expect(r.findings().find((c) => c.type === 'AgentOffline')).toBeUndefined();
    await r.pass(Date.now() + 6 * 60_000);
    expect(r.findings()).toContainEqual(expect.objectContaining({ type: 'AgentOffline', subject: 'fra1' }));
  });
  it('rejects (7 REJECTED) pending sessions of a removed router and flags the others; runs on store changes', async () => {
    const pending = await d.inStatus(3);
    const active = await d.inStatus(1);
    // A router removed behind the API's back (a merged pull request deleting its file): the store refuses to
    // delete a router with sessions, so the view of a store without fra1 is given by a Proxy over the real one.
    const withoutRouter = new Proxy(h.store, {
      get(target, prop, receiver) {
        if (prop === 'getRouter')
          return (name: string) => (name === 'fra1' ? undefined : target.getRouter(name));
        const v = Reflect.get(target, prop, receiver);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    }) as Store;
    const r = new SessionReconciler({
      store: withoutRouter,
      stuckAfterSeconds: 600,
      offlineAfterSeconds: 300,
      intervalMs: 60_000,
    });
    r.start();
    await r.trigger();
    await r.stop();
    // REJECTED with the reason for its owner, by the controller (docs/api.md, Decisions)
    expect(h.store.getSession(pending)?.status).toMatchObject({
      code: 7,
      decision: { action: 'reject', reason: 'router fra1 was removed', by: 'controller' },
    });
    expect(h.store.getSession(active)?.status.code).toBe(1);
    expect(r.findings()).toContainEqual(expect.objectContaining({ type: 'RouterMissing', subject: active }));
    await r.pass();
    // a REJECTED record holds nothing on the router: no RouterMissing for it
    expect(r.findings().filter((c) => c.type === 'RouterMissing')).toHaveLength(
      h.store.listSessions({ router: 'fra1' }).filter((s) => s.status.code !== 7).length,
    );
  });
});
