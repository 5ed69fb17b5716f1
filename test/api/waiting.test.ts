/**
 * A session the router has set up waits for the peer's side (docs/api.md, Waiting): the record says so
 * while the agent reports it configured with BIRD trying, and no more once BGP is Established.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_ASN, driver, expectOk, startHarness, type Harness } from './helpers.ts';

let h: Harness;
let token: string;
let d: ReturnType<typeof driver>;

beforeAll(async () => {
  h = await startHarness();
  token = await h.addRouter('fra1');
  d = driver(h, 'fra1', token);
  await expectOk(h.post('/admin/policy', h.admin, { action: 'set', spec: { dn42Asn: ADMIN_ASN } }));
});
afterAll(async () => h?.close());

interface Waiting {
  for: string;
  since: string;
}

/** The session as its owner reads it in `POST /session` list. */
async function record(uuid: string) {
  const res = await expectOk(h.post('/session', d.ownerToken(uuid), { action: 'list' }));
  const found = (res.json() as { sessions: Record<string, unknown>[] }).sessions.find((s) => s.uuid === uuid);
  if (!found) throw new Error(`session ${uuid} not listed`);
  return found as {
    status: number;
    waiting: Waiting | null;
    bgpState: string | null;
    serverPublicKey: string | null;
    serverLinkLocal: string | null;
  };
}

/** The agent's report of a session it configured, with BIRD's state since now. */
const report = (uuid: string, status: number, bgpState: string) =>
  d.reportBgp(uuid, status, bgpState, new Date());

describe('waiting', () => {
  it('is set while the agent reports the session configured and BIRD trying, cleared when Established', async () => {
    const uuid = await d.create();
    await expectOk(d.admin('approve', uuid));
    // approved, the agent never reported: it may be down
    expect((await record(uuid)).waiting?.for).toBe('agent');
    await expectOk(h.post('/agent/fra1/heartbeat', token, { version: '1.0.0', uptime: 1 }));
    // the agent reports: it sets the session up
    expect((await record(uuid)).waiting?.for).toBe('router');
    // the controller finds the agent silent (the router not Ready): only now may the agent be down
    const { lastHeartbeat, conditions = [] } = h.store.getRouter('fra1')?.status ?? {};
    const silent = {
      type: 'Ready',
      status: 'False' as const,
      reason: 'AgentNotReporting',
      message: `no heartbeat from the router's agent since ${lastHeartbeat}`,
      lastTransitionTime: new Date().toISOString(),
    };
    h.store.recordRouterStatus('fra1', {
      conditions: [...conditions.filter((c) => c.type !== 'Ready'), silent],
    });
    expect((await record(uuid)).waiting).toEqual({ for: 'agent', since: lastHeartbeat });
    await expectOk(h.post('/agent/fra1/heartbeat', token, { version: '1.0.0', uptime: 2 }));
    expect((await record(uuid)).waiting?.for).toBe('router');

    const before = Date.now();
    await expectOk(report(uuid, 4, 'Connect'));
    const waiting = (await record(uuid)).waiting;
    expect(waiting).toMatchObject({ for: 'peer' });
    expect(Date.parse(waiting?.since ?? '')).toBeGreaterThanOrEqual(before - 1000);

    // BIRD moves between its trying states: still waiting, since the first report
    await expectOk(report(uuid, 4, 'Active'));
    expect(await record(uuid)).toMatchObject({ status: 4, bgpState: 'Active', waiting });
    // the owner's change keeps the status and the wait
    await expectOk(d.user('modify', uuid, { mtu: 1400 }));
    expect((await record(uuid)).waiting).toEqual(waiting);

    // the peer's BGP answers: not waiting for the peer any more
    await expectOk(report(uuid, 4, 'OpenSent'));
    expect((await record(uuid)).waiting?.for).toBe('router');
    await expectOk(report(uuid, 1, 'Established'));
    expect(await record(uuid)).toMatchObject({ status: 1, bgpState: 'Established', waiting: null });
    expect(h.store.getSession(uuid)?.status.waiting).toBeUndefined();
  });

  it('is stored with the status: a report that changes nothing writes nothing', async () => {
    const uuid = await d.create();
    await expectOk(d.admin('approve', uuid));
    await expectOk(report(uuid, 4, 'Connect'));
    const stored = h.store.getSession(uuid)?.status;
    expect(stored?.waiting).toMatchObject({ for: 'peer' });
    // as kubectl and Flux read it (docs/kubernetes.md, Conditions)
    expect(stored?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'False',
      reason: 'WaitingForPeer',
    });
    const again = await expectOk(
      h.post('/agent/fra1/modify', token, {
        uuid,
        status: 4,
        interface: stored?.interface,
        bgpState: stored?.bgpState,
        bgpSince: stored?.bgpSince,
      }),
    );
    expect(again.json()).toMatchObject({ status: 4, removed: false });
    expect(h.store.getSession(uuid)?.status).toEqual(stored);
  });

  it('ends with ERROR after the grace; the record carries the router key and link-local for the checklist', async () => {
    const uuid = await d.create();
    await expectOk(d.admin('approve', uuid));
    await expectOk(report(uuid, 4, 'Active'));
    await expectOk(
      h.post('/agent/fra1/modify', token, {
        uuid,
        status: 2,
        interface: `wg_${h.store.getSession(uuid)?.spec.listenPort ?? 0}`,
        message: "no WireGuard handshake with the peer yet, BGP Active: check the peer's WireGuard",
        bgpState: 'Active',
      }),
    );
    const r = await record(uuid);
    expect(r).toMatchObject({ status: 2, waiting: null });
    const router = h.store.getRouter('fra1');
    expect(r.serverPublicKey).toBe(router?.spec.publicKey);
    expect(r.serverLinkLocal).toBe(router?.spec.linkLocal);
  });
});
