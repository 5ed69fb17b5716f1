/**
 * The whole lifecycle of a session through `modify` (docs/api.md, modify), on the git store through the
 * API: a new WireGuard key without a new review unless the policy's reviewKeyChanges asks for one, new
 * peer addresses following the router's review rule, link-local, IPv4 and the BGP options, every new value
 * meeting the checks of a create (another ASN's address, another session's key, the router's link-local),
 * and a fault a session already had not blocking an unrelated change. The store's side of the rule runs in
 * both back ends by test/store/conformance.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_ASN, driver, expectOk, problem, startHarness, wgKey, type Harness } from './helpers.ts';

type FieldErrors = { errors?: { pointer: string; message: string; key?: string }[] };

let h: Harness;
let d: ReturnType<typeof driver>;
let auto: ReturnType<typeof driver>;

beforeAll(async () => {
  // no DN42 registry here: auto-approval needs the operator's opt-in (docs/operator-guide.md, 4)
  h = await startHarness({ autoApproveWithoutRegistry: true });
  d = driver(h, 'fra1', await h.addRouter('fra1'));
  auto = driver(h, 'ams1', await h.addRouter('ams1', { autoApprove: true }));
});
afterAll(async () => h?.close());

const setPolicy = (spec: Record<string, unknown>) =>
  expectOk(h.post('/admin/policy', h.admin, { action: 'set', spec: { dn42Asn: ADMIN_ASN, ...spec } }));
const pointers = (body: FieldErrors) => (body.errors ?? []).map((e) => e.pointer);

describe('key rotation', () => {
  it('takes a new key on an ACTIVE session without a review by default: QUEUED_FOR_SETUP', async () => {
    const uuid = await d.inStatus(1);
    const key = wgKey();
    const res = await expectOk(d.user('modify', uuid, { publicKey: key }));
    expect(res.json()).toMatchObject({ status: 4, publicKey: key });
    expect(h.store.getSession(uuid)?.spec.publicKey).toBe(key);
  });

  it('sends the session to review where the policy sets reviewKeyChanges; an admin is its own review', async () => {
    await setPolicy({ reviewKeyChanges: true });
    try {
      const uuid = await d.inStatus(1);
      const res = await expectOk(d.user('modify', uuid, { publicKey: wgKey() }));
      expect(res.json()).toMatchObject({ status: 3, statusName: 'PENDING_REVIEW' });
      await expectOk(d.admin('approve', uuid));
      await expectOk(d.report(uuid, 1));
      const byAdmin = await expectOk(d.user('modify', uuid, { publicKey: wgKey() }, h.admin));
      expect(byAdmin.json()).toMatchObject({ status: 4 });
      // an MTU change is no key change: no review
      await expectOk(d.report(uuid, 1));
      expect((await expectOk(d.user('modify', uuid, { mtu: 1400 }))).json()).toMatchObject({ status: 4 });
    } finally {
      await setPolicy({});
    }
  });

  it("refuses another session's key on the router and the router's own key, naming publicKey", async () => {
    const first = await d.inStatus(1);
    const second = await d.inStatus(1);
    const taken = h.store.getSession(first)?.spec.publicKey;
    const res = await d.user('modify', second, { publicKey: taken });
    expect(problem(res)).toMatchObject({ status: 400, code: 'INVALID_REQUEST' });
    expect(pointers(res.json())).toEqual(['/publicKey']);
    const routerKey = h.store.getRouter('fra1')?.spec.publicKey;
    expect(pointers((await d.user('modify', second, { publicKey: routerKey })).json())).toEqual([
      '/publicKey',
    ]);
    expect(d.status(second)).toBe(1);
    expect(h.store.getSession(second)?.spec.publicKey).not.toBe(taken);
  });
});

describe('peer addresses', () => {
  it('sends an ACTIVE session with a new IPv6 address to review on a reviewed router', async () => {
    const uuid = await d.inStatus(1);
    const res = await expectOk(d.user('modify', uuid, { ipv6: 'fd42:1234:ff::1' }));
    expect(res.json()).toMatchObject({ status: 3, ipv6: 'fd42:1234:ff::1' });
    // the admins are told, as of a new session (docs/notifications.md)
    const told = h.store
      .outbox()
      .filter((e) => e.session?.uuid === uuid)
      .map((e) => e.type);
    expect(told.filter((type) => type === 'session.pending_review')).toHaveLength(2);
  });

  it('queues it for setup at once on a router that auto-approves', async () => {
    const uuid = await auto.create();
    await expectOk(auto.report(uuid, 1));
    const res = await expectOk(auto.user('modify', uuid, { ipv6: 'fd42:1234:ff::2' }));
    expect(res.json()).toMatchObject({ status: 4, ipv6: 'fd42:1234:ff::2' });
  });

  it("refuses another ASN's address and a router's loopback, naming the field, and writes nothing", async () => {
    const other = await d.inStatus(1);
    const uuid = await d.inStatus(1);
    const before = h.store.getSession(uuid)?.spec;
    const taken = h.store.getSession(other)?.spec.ipv6;
    const res = await d.user('modify', uuid, { ipv6: taken });
    expect(problem(res)).toMatchObject({ status: 400, code: 'INVALID_REQUEST' });
    expect(pointers(res.json())).toEqual(['/ipv6']);
    const loopback = await d.user('modify', uuid, { ipv4: h.store.getRouter('fra1')?.spec.loopback.ipv4 });
    expect(pointers(loopback.json())).toEqual(['/ipv4']);
    expect(h.store.getSession(uuid)?.spec).toEqual(before);
    expect(d.status(uuid)).toBe(1);
  });

  it('adds and removes IPv4 (null), refusing the removal while the IPv4 side needs it', async () => {
    const uuid = await d.inStatus(1);
    const added = await expectOk(d.user('modify', uuid, { ipv4: '172.20.53.97' }));
    expect(added.json()).toMatchObject({ status: 3, ipv4: '172.20.53.97' });
    await expectOk(d.admin('approve', uuid));
    await expectOk(d.report(uuid, 1));
    // without MP-BGP the IPv4 session runs over the IPv4 address: it cannot go
    await expectOk(d.user('modify', uuid, { mpbgp: false, extendedNextHop: false }));
    const refused = await d.user('modify', uuid, { ipv4: null });
    expect(problem(refused)).toMatchObject({ status: 400, code: 'INVALID_REQUEST' });
    expect(pointers(refused.json())).toContain('/mpbgp');
    // with MP-BGP and extended next hop back, removing it is no new address: no review
    await expectOk(d.report(uuid, 1));
    const removed = await expectOk(
      d.user('modify', uuid, { ipv4: null, mpbgp: true, extendedNextHop: true }),
    );
    expect(removed.json()).toMatchObject({ status: 4, ipv4: null, mpbgp: true, extendedNextHop: true });
  });
});

describe('link-local and the BGP options', () => {
  it("changes the link-local without a review, refusing the router's own", async () => {
    const uuid = await d.inStatus(1);
    const res = await expectOk(d.user('modify', uuid, { linkLocal: 'fe80::4242' }));
    expect(res.json()).toMatchObject({ status: 4, ipv6LinkLocal: 'fe80::4242' });
    const refused = await d.user('modify', uuid, { linkLocal: h.store.getRouter('fra1')?.spec.linkLocal });
    expect(pointers(refused.json())).toEqual(['/linkLocal']);
  });

  it('refuses extended next hop without MP-BGP, naming extendedNextHop', async () => {
    const uuid = await d.inStatus(1);
    const res = await d.user('modify', uuid, { mpbgp: false, ipv4: '172.20.53.98' });
    // the address is new: to review; the options were accepted with it
    expect(res.statusCode, res.body).toBe(400);
    expect(pointers(res.json())).toEqual(['/extendedNextHop']);
  });

  it('a modify to the values the session has writes nothing; an empty one names what it can change', async () => {
    const uuid = await d.inStatus(1);
    const spec = h.store.getSession(uuid)?.spec;
    const same = await expectOk(
      d.user('modify', uuid, { publicKey: spec?.publicKey, mpbgp: true, extendedNextHop: true }),
    );
    expect(same.json()).toMatchObject({ status: 1 });
    const empty = await d.user('modify', uuid);
    expect(problem(empty)).toMatchObject({ status: 400, code: 'INVALID_REQUEST' });
    expect((empty.json() as FieldErrors).errors?.[0]?.message).toContain('publicKey');
  });
});

describe('a policy tightened after the session was stored', () => {
  it('lets a key or MTU change through, refuses a new address that breaks it too', async () => {
    const uuid = await d.inStatus(1);
    await setPolicy({ peerAddressRanges: { ipv6: ['fd42:9999::/32'] } });
    try {
      await expectOk(d.user('modify', uuid, { publicKey: wgKey(), mtu: 1400 }));
      const res = await d.user('modify', uuid, { ipv6: 'fd42:1234:ee::1' });
      expect(problem(res)).toMatchObject({ status: 400, code: 'INVALID_REQUEST' });
      expect(pointers(res.json())).toEqual(['/ipv6']);
    } finally {
      await setPolicy({});
    }
  });
});
