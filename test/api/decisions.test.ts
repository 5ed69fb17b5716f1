/**
 * An admin's decisions reach the session's owner (docs/api.md, Decisions): a rejection keeps the record as
 * 7 REJECTED with the reason, seen by its owner only, holding nothing on the router, removed by the
 * reconciler after TERMINAL_RETENTION_MS or replaced by a new create; disable and purge carry their reason
 * too. On the real git store, through the user, admin and agent APIs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TERMINAL_RETENTION_MS } from '../../common/status.ts';
import { SessionReconciler } from '../../controller/reconcile/session-reconciler.ts';
import {
  ADMIN_ASN,
  driver,
  expectOk,
  problem,
  sessionFields,
  startHarness,
  type Harness,
} from './helpers.ts';

interface Listed {
  uuid: string;
  status: number;
  statusName: string;
  decision: { action: string; reason?: string; by: string; at: string; until?: string } | null;
}

let h: Harness;
let d: ReturnType<typeof driver>;
let agentToken: string;

beforeAll(async () => {
  h = await startHarness();
  agentToken = await h.addRouter('fra1', { maxSessions: 2 });
  d = driver(h, 'fra1', agentToken);
});
afterAll(async () => h?.close());

const listOf = async (token: string): Promise<Listed[]> =>
  (await expectOk(h.post('/session', token, { action: 'list' }))).json().sessions;
const agentSees = async (): Promise<string[]> =>
  (await expectOk(h.get('/agent/fra1/sessions', agentToken))).json().sessions.map((s: Listed) => s.uuid);
const reconcileAt = (now: number) =>
  new SessionReconciler({ store: h.store, stuckAfterSeconds: 3600, offlineAfterSeconds: 3600 }).pass(now);

describe('reject', () => {
  it("the owner sees 7 REJECTED with the admin's reason, who and when, and until when", async () => {
    const uuid = await d.inStatus(3);
    const owner = d.ownerToken(uuid);
    const before = Date.now();
    await expectOk(d.admin('reject', uuid, 'address not in your route object'));
    const mine = (await listOf(owner)).find((s) => s.uuid === uuid);
    expect(mine).toMatchObject({
      status: 7,
      statusName: 'REJECTED',
      decision: { action: 'reject', reason: 'address not in your route object', by: `admin AS${ADMIN_ASN}` },
    });
    const at = Date.parse(mine?.decision?.at ?? '');
    expect(at).toBeGreaterThanOrEqual(before - 1000);
    expect(Date.parse(mine?.decision?.until ?? '')).toBe(at + TERMINAL_RETENTION_MS);
  });

  it('another ASN sees nothing of it: not in its list, SESSION_NOT_FOUND by uuid', async () => {
    const uuid = await d.inStatus(3);
    await expectOk(d.admin('reject', uuid, 'not for you'));
    expect((await listOf(h.other)).map((s) => s.uuid)).not.toContain(uuid);
    const res = await h.post('/session', h.other, { action: 'restart', uuid });
    expect(problem(res)).toMatchObject({ status: 404, code: 'SESSION_NOT_FOUND' });
    expect(JSON.stringify(await listOf(h.other))).not.toContain('not for you');
  });

  it('holds nothing: not sent to the agent, its address free for another ASN, not counted in maxSessions', async () => {
    const uuid = await d.inStatus(3);
    const ipv6 = h.store.getSession(uuid)?.spec.ipv6;
    await expectOk(d.admin('reject', uuid, 'no'));
    expect(await agentSees()).not.toContain(uuid);
    // fra1 takes 2 sessions; the REJECTED ones of the tests before do not count
    const taken = await d.create(undefined, { ipv6 });
    expect(h.store.getSession(taken)?.spec.ipv6).toBe(ipv6);
    await d.create();
    const full = await h.post('/session', d.freshUser(), sessionFields('fra1'));
    expect(problem(full)).toMatchObject({ code: 'ROUTER_FULL' });
    // GET /routers counts the same: no slot left, whatever the REJECTED records
    const routers = (await expectOk(h.get('/routers', h.user))).json().routers;
    expect(routers.find((r: { name: string }) => r.name === 'fra1')).toMatchObject({
      freeSlots: 0,
      accepting: false,
    });
    for (const s of h.store.listSessions({ router: 'fra1' }))
      if (s.status.code === 3) await expectOk(d.user('delete', s.spec.uuid));
    const freed = (await expectOk(h.get('/routers', h.user))).json().routers;
    expect(freed.find((r: { name: string }) => r.name === 'fra1')).toMatchObject({ freeSlots: 2 });
  });

  it('a new create by its owner replaces it at once; the owner may also delete it', async () => {
    const uuid = await d.inStatus(3);
    const owner = d.ownerToken(uuid);
    await expectOk(d.admin('reject', uuid, 'try again with your own address'));
    const again = (await expectOk(h.post('/session', owner, sessionFields('fra1')))).json().uuid as string;
    expect(h.store.getSession(uuid)).toBeUndefined();
    expect((await listOf(owner)).map((s) => [s.uuid, s.status])).toEqual([[again, 3]]);
    await expectOk(d.admin('reject', again, 'still no'));
    expect((await expectOk(d.user('delete', again, {}, owner))).json()).toEqual({
      uuid: again,
      deleted: true,
    });
    expect(await listOf(owner)).toEqual([]);
  });

  it('a new create that its rules refuse leaves the record and its reason', async () => {
    const uuid = await d.inStatus(3);
    const owner = d.ownerToken(uuid);
    await expectOk(d.admin('reject', uuid, 'wrong key'));
    const res = await h.post('/session', owner, sessionFields('fra1', { ipv6: 'fd00::1' }));
    expect(problem(res).status).toBe(400);
    expect(h.store.getSession(uuid)?.status.decision?.reason).toBe('wrong key');
  });

  it('is removed by the reconciler TERMINAL_RETENTION_MS after the rejection, not before', async () => {
    const uuid = await d.inStatus(3);
    await expectOk(d.admin('reject', uuid, 'expires'));
    const at = Date.parse(h.store.getSession(uuid)?.status.lastTransitionTime ?? '');
    await reconcileAt(at + TERMINAL_RETENTION_MS - 60_000);
    expect(d.status(uuid)).toBe(7);
    await reconcileAt(at + TERMINAL_RETENTION_MS);
    expect(h.store.getSession(uuid)).toBeUndefined();
  });

  it('only PENDING_REVIEW can be rejected; a REJECTED one takes no other action', async () => {
    const uuid = await d.inStatus(3);
    await expectOk(d.admin('reject', uuid, 'x'));
    for (const action of ['approve', 'reject', 'disable', 'enable'])
      expect(problem(await d.admin(action, uuid)), action).toMatchObject({ code: 'INVALID_STATE' });
    for (const action of ['restart', 'modify'])
      expect(
        problem(await d.user(action, uuid, action === 'modify' ? { mtu: 1400 } : {})),
        action,
      ).toMatchObject({
        code: 'INVALID_STATE',
      });
  });
});

describe('disable and purge carry the reason', () => {
  it("disable: the owner reads the admin's reason; enable clears it", async () => {
    const uuid = await d.inStatus(1);
    const owner = d.ownerToken(uuid);
    await expectOk(d.admin('disable', uuid, 'your routes leaked 10.0.0.0/8'));
    const disabled = (await listOf(owner)).find((s) => s.uuid === uuid);
    expect(disabled).toMatchObject({
      status: 0,
      decision: { action: 'disable', reason: 'your routes leaked 10.0.0.0/8', by: `admin AS${ADMIN_ASN}` },
    });
    expect(disabled?.decision?.until).toBeUndefined();
    // a modify of the DISABLED session keeps the decision standing
    await expectOk(d.user('modify', uuid, { mtu: 1400 }));
    expect(h.store.getSession(uuid)?.status.decision?.reason).toBe('your routes leaked 10.0.0.0/8');
    await expectOk(d.admin('enable', uuid));
    expect((await listOf(owner)).find((s) => s.uuid === uuid)?.decision).toBeNull();
    await expectOk(d.user('delete', uuid));
    await expectOk(d.report(uuid, 0));
  });

  it('purge: 8 PURGED with the reason, not sent to the agent, removed after the retention', async () => {
    const uuid = await d.inStatus(5);
    const owner = d.ownerToken(uuid);
    await expectOk(d.admin('purge', uuid, 'fra1 was reinstalled; its tunnels are gone'));
    expect((await listOf(owner)).find((s) => s.uuid === uuid)).toMatchObject({
      status: 8,
      statusName: 'PURGED',
      decision: { action: 'purge', reason: 'fra1 was reinstalled; its tunnels are gone' },
    });
    expect(await agentSees()).not.toContain(uuid);
    const at = Date.parse(h.store.getSession(uuid)?.status.lastTransitionTime ?? '');
    await reconcileAt(at + TERMINAL_RETENTION_MS);
    expect(h.store.getSession(uuid)).toBeUndefined();
  });

  it('a router whose sessions are all REJECTED or PURGED can be removed; the records go with it', async () => {
    const token = await h.addRouter('gone1');
    const g = driver(h, 'gone1', token);
    const rejected = await g.inStatus(3);
    await expectOk(g.admin('reject', rejected, 'no'));
    const purged = await g.inStatus(5);
    await expectOk(g.admin('purge', purged, 'gone'));
    await expectOk(h.post('/admin/router', h.admin, { action: 'remove', name: 'gone1' }));
    expect(h.store.getSession(rejected)).toBeUndefined();
    expect(h.store.getSession(purged)).toBeUndefined();
  });
});
