/**
 * A modify that waits for review leaves the session on its router with the spec last approved
 * (docs/api.md, modify; common/approved-spec.ts), on the git store through the API: the agent is served
 * the approved values and the status the session has on the router, its reports move that status while
 * the session stays in review, and approve, reject, delete and a modify back to the approved values each
 * end the review as the table says. The store's side runs on both back ends in test/store/conformance.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentSession } from '../../common/agent-api.ts';
import { driver, expectOk, startHarness, type Harness } from './helpers.ts';

let h: Harness;
let d: ReturnType<typeof driver>;
let agentToken: string;

beforeAll(async () => {
  h = await startHarness();
  agentToken = await h.addRouter('fra1');
  d = driver(h, 'fra1', agentToken);
});
afterAll(async () => h?.close());

const served = async (uuid: string): Promise<AgentSession | undefined> => {
  const res = await expectOk(h.get('/agent/fra1/sessions', agentToken));
  return (res.json() as { sessions: AgentSession[] }).sessions.find((s) => s.uuid === uuid);
};

/** An ACTIVE session whose new IPv6 address waits for review; its old address. */
async function inReview(): Promise<{ uuid: string; old: string; requested: string }> {
  const uuid = await d.inStatus(1);
  const old = h.store.getSession(uuid)?.spec.ipv6 ?? '';
  const requested = `fd42:1234:ee::${Math.floor(Math.random() * 0xffff).toString(16)}`;
  const res = await expectOk(d.user('modify', uuid, { ipv6: requested, mtu: 1400 }));
  expect(res.json()).toMatchObject({
    status: 3,
    ipv6: requested,
    mtu: 1400,
    approved: { ipv6: old, mtu: 1420, status: 1, statusName: 'ACTIVE' },
  });
  return { uuid, old, requested };
}

describe('a modify in review', () => {
  it('keeps the approved spec on the router; reports move its status there, the session stays in review', async () => {
    const { uuid, old } = await inReview();
    expect(await served(uuid)).toMatchObject({ status: 1, ipv6: old, mtu: 1420 });
    // BGP still Established: the report confirms it, nothing changes
    const same = await expectOk(d.report(uuid, 1));
    expect(same.json()).toMatchObject({ status: 1, removed: false });
    // the tunnel fails meanwhile: ERROR on the router, the review goes on
    await expectOk(d.report(uuid, 2, 'handshake stale'));
    const s = h.store.getSession(uuid);
    expect(s?.status).toMatchObject({ code: 3, approved: { status: 2 }, lastError: { code: 'ERROR' } });
    expect(await served(uuid)).toMatchObject({ status: 2, ipv6: old });
    // told as any session's error (docs/notifications.md)
    const told = h.store.outbox().filter((e) => e.session?.uuid === uuid);
    expect(told.at(-1)).toMatchObject({ type: 'session.error' });
    // a report the router's status does not allow is refused as ever
    expect((await d.report(uuid, 0)).statusCode).toBe(409);
  });

  it('approve: the router is served the new spec to set up', async () => {
    const { uuid, requested } = await inReview();
    await expectOk(d.admin('approve', uuid));
    const s = h.store.getSession(uuid);
    expect(s?.status.code).toBe(4);
    expect(s?.status.approved).toBeUndefined();
    expect(await served(uuid)).toMatchObject({ status: 4, ipv6: requested, mtu: 1400 });
  });

  it("reject: the change is dropped, the session back in its router's status with the reason", async () => {
    const { uuid, old } = await inReview();
    await expectOk(d.admin('reject', uuid, 'not your route object'));
    const list = (await expectOk(h.post('/session', d.ownerToken(uuid), { action: 'list' }))).json() as {
      sessions: { uuid: string }[];
    };
    expect(list.sessions.find((s) => s.uuid === uuid)).toMatchObject({
      status: 1,
      ipv6: old,
      mtu: 1420,
      approved: null,
      decision: { action: 'reject', reason: 'not your route object' },
    });
    expect(await served(uuid)).toMatchObject({ status: 1, ipv6: old });
    const told = h.store.outbox().filter((e) => e.session?.uuid === uuid);
    expect(told.at(-1)).toMatchObject({ type: 'session.rejected', reason: 'not your route object' });
    // the old address is the session's again: a modify may ask for it without a review
    expect((await expectOk(d.user('modify', uuid, { mtu: 1380 }))).json()).toMatchObject({ status: 4 });
  });

  it('delete: the router tears down what it runs', async () => {
    const { uuid, old } = await inReview();
    const res = await expectOk(d.user('delete', uuid));
    expect(res.json()).toMatchObject({ status: 5, ipv6: old, approved: null });
    expect(await served(uuid)).toMatchObject({ status: 5, ipv6: old });
    await expectOk(d.report(uuid, 0));
    expect(h.store.getSession(uuid)).toBeUndefined();
  });

  it('a modify back to the approved values ends the review; another change keeps it', async () => {
    const { uuid, old } = await inReview();
    // still a new address: in review, the same approved copy
    const again = await expectOk(d.user('modify', uuid, { mtu: 1380 }));
    expect(again.json()).toMatchObject({ status: 3, approved: { ipv6: old, mtu: 1420, status: 1 } });
    const back = await expectOk(d.user('modify', uuid, { ipv6: old, mtu: 1420 }));
    expect(back.json()).toMatchObject({ status: 1, ipv6: old, approved: null });
  });

  it('a new request in review is not on the router, and holds no approved copy', async () => {
    const uuid = await d.inStatus(3);
    expect(await served(uuid)).toBeUndefined();
    const res = await expectOk(d.user('modify', uuid, { mtu: 1380 }));
    expect(res.json()).toMatchObject({ status: 3, approved: null });
  });
});
