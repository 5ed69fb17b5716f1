/**
 * The behaviour every store back end must show, through the Store interface only. A back end's test calls
 * storeConformance(name, factory); factory gives a started store on fresh data, reopen() (called after
 * store.close()) a started store on the same data, and cleanup() removes the data.
 *
 * Over 500 lines: one suite, the whole Store contract (routers, sessions, policies, admission limits
 * under concurrency, observations, the change feed, reopening, the outbox), which both back ends run as
 * it is.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { HeartbeatBody } from '../../common/agent-api.ts';
import { isProblem, type ErrorCode } from '../../common/errors.ts';
import { checkOrThrow } from '../../common/validate.ts';
import { topics } from '../../controller/store/change-feed.ts';
import type { Store } from '../../controller/store/store.ts';
import type { NotificationEvent } from '../../controller/store/core/events.ts';
import { newTokenId } from '../../controller/auth/token-id.ts';
import { applyTrigger } from '../../controller/api/actions.ts';
import { admin, defaultPolicy, newSession, pending, queued, routerSpec, user, wgKey } from './fixtures.ts';

export interface StoreHarness {
  store: Store;
  reopen: () => Promise<Store>;
  cleanup: () => Promise<void>;
}

async function expectProblem(promise: Promise<unknown>, code: ErrorCode): Promise<void> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isProblem(err), `expected ${code}, got ${String(err)}`).toBe(true);
  expect((err as { code: string }).code).toBe(code);
}

/**
 * How `creates`, started together, ended: the number that succeeded (`ok`) and of each refusal's code.
 * The admission limits are checked inside the store's write queue (docs/store.md), so these counts are
 * exact whatever the interleaving.
 */
async function outcomes(creates: Promise<unknown>[]): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const r of await Promise.allSettled(creates)) {
    const key =
      r.status === 'fulfilled' ? 'ok' : isProblem(r.reason) ? r.reason.code : `thrown: ${String(r.reason)}`;
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

/** Everything a reader sees, for comparing a store before and after reopening. */
function snapshot(store: Store) {
  return {
    routers: store.listRouters(),
    sessions: store.listSessions(),
    policies: store.listPolicies(),
    tokens: store.listRouters().map((r) => store.getAgentTokenHash(r.name)),
  };
}

const at = '2026-11-28T09:00:00.000Z';

export function storeConformance(name: string, factory: () => Promise<StoreHarness>): void {
  describe(`store conformance: ${name}`, () => {
    let h: StoreHarness;
    let store: Store;

    beforeEach(async () => {
      h = await factory();
      store = h.store;
    });
    afterEach(async () => {
      await store.close();
      await h.cleanup();
    });

    describe('routers', () => {
      it('round-trips create, update, token hash and delete', async () => {
        const spec = routerSpec(1);
        const created = await store.createRouter('fra1', spec, admin);
        expect(created.name).toBe('fra1');
        expect(created.spec).toMatchObject({ uuid: spec.uuid, nodeId: 1 });
        expect(store.getRouter('fra1')?.spec.publicKey).toBe(spec.publicKey);
        expect(store.listRouters().map((r) => r.name)).toEqual(['fra1']);

        const updated = await store.updateRouter(
          'fra1',
          (s) => ({ ...s, maxSessions: 10 }),
          admin,
          'cap fra1',
        );
        expect(updated.spec.maxSessions).toBe(10);
        expect(store.getRouter('fra1')?.spec.maxSessions).toBe(10);

        expect(store.getAgentTokenHash('fra1')).toBeUndefined();
        await store.setAgentTokenHash('fra1', 'a'.repeat(64), admin);
        expect(store.getAgentTokenHash('fra1')).toBe('a'.repeat(64));

        await store.deleteRouter('fra1', admin);
        expect(store.getRouter('fra1')).toBeUndefined();
        expect(store.listRouters()).toEqual([]);
      });

      it('refuses a taken name or node id, unknown routers and invalid specs', async () => {
        await store.createRouter('fra1', routerSpec(1), admin);
        await expectProblem(store.createRouter('fra1', routerSpec(2), admin), 'CONFLICT');
        await expectProblem(store.createRouter('ams1', routerSpec(1), admin), 'CONFLICT');
        await expectProblem(
          store.updateRouter('nope', (s) => s, admin, 'x'),
          'ROUTER_NOT_FOUND',
        );
        await expectProblem(store.deleteRouter('nope', admin), 'ROUTER_NOT_FOUND');
        await expectProblem(store.createRouter('Bad Name', routerSpec(3), admin), 'INVALID_REQUEST');
        await expectProblem(
          store.createRouter('ams1', { ...routerSpec(3), publicKey: 'not-a-key' }, admin),
          'INVALID_REQUEST',
        );
        expect(store.listRouters().map((r) => r.name)).toEqual(['fra1']);
      });

      it('refuses to delete a router that still has sessions, naming them', async () => {
        await store.createRouter('fra1', routerSpec(1), admin);
        const s = await store.createSession(
          newSession(4242420001, 'fra1'),
          pending,
          user(4242420001),
          'create',
        );
        await expectProblem(store.deleteRouter('fra1', admin), 'INVALID_STATE');
        await expect(store.deleteRouter('fra1', admin)).rejects.toThrow(
          `router fra1 still has 1 session: as4242420001-fra1 ${s.spec.uuid} (PENDING_REVIEW). Delete it first`,
        );
        expect(store.getRouter('fra1')).toBeDefined();
      });

      it("refuses another router's loopback (CONFLICT) and a port range with min > max (INVALID_REQUEST)", async () => {
        await store.createRouter(
          'fra1',
          routerSpec(1, { loopback: { ipv4: '172.20.0.1', ipv6: 'fd00::1' } }),
          admin,
        );
        const pointers = async (promise: Promise<unknown>, code: string) => {
          const err = (await promise.then(
            () => undefined,
            (e: unknown) => e,
          )) as { code?: string; errors?: { pointer: string }[] };
          expect(err?.code, String(err as Error)).toBe(code);
          return err.errors?.map((e) => e.pointer);
        };
        expect(
          await pointers(
            store.createRouter('ams1', routerSpec(2, { loopback: { ipv4: '172.20.0.1' } }), admin),
            'CONFLICT',
          ),
        ).toEqual(['/spec/loopback/ipv4']);
        expect(
          await pointers(
            store.createRouter('ams1', routerSpec(2, { portRange: { min: 31000, max: 30000 } }), admin),
            'INVALID_REQUEST',
          ),
        ).toEqual(['/spec/portRange/min']);
        await store.createRouter('ams1', routerSpec(2), admin);
        expect(
          await pointers(
            store.updateRouter('ams1', (spec) => ({ ...spec, loopback: { ipv6: 'fd00::1' } }), admin, 'x'),
            'CONFLICT',
          ),
        ).toEqual(['/spec/loopback/ipv6']);
        expect(store.getRouter('ams1')?.spec.loopback).toEqual({ ipv6: 'fd00::2' });
      });
    });

    describe('policies', () => {
      it('round-trips put, get, list and delete', async () => {
        const put = await store.putPolicy('default', defaultPolicy, admin);
        expect(put.spec.dn42Asn).toBe(4242420000);
        expect(store.getPolicy('default')?.spec.blockedAsns).toEqual([4242429999]);
        await store.putPolicy('fra1', { importLimit: { ipv6: 1000 } }, admin);
        expect(store.listPolicies().map((p) => p.name)).toEqual(['default', 'fra1']);
        await store.deletePolicy('fra1', admin);
        expect(store.getPolicy('fra1')).toBeUndefined();
        await expectProblem(store.deletePolicy('fra1', admin), 'NOT_FOUND');
      });
    });

    describe('token revocations', () => {
      it('revoke by id and by ASN, refuse a malformed id, and are read back on reopen', async () => {
        const now = Math.floor(Date.now() / 1000);
        const id = newTokenId(4242421234, now + 3600);
        await store.revokeTokens({ token: id }, admin);
        await store.revokeTokens({ asn: 4242425678 }, admin);
        await expectProblem(store.revokeTokens({ token: 'no-id' }, admin), 'INVALID_REQUEST');
        expect(store.tokenRevoked(id, 4242421234, now)).toBe(true);
        expect(store.tokenRevoked(newTokenId(4242421234, now + 3600), 4242421234, now)).toBe(false);
        expect(store.tokenRevoked(newTokenId(4242425678, now + 60), 4242425678, now - 1)).toBe(true);
        const list = store.listRevocations();
        expect(list.tokens).toEqual([id]);
        expect(Object.keys(list.asns)).toEqual(['4242425678']);
        await store.close();
        store = await h.reopen();
        expect(store.listRevocations()).toEqual(list);
        expect(store.tokenRevoked(id, 4242421234, now)).toBe(true);
      });
    });

    describe('sessions', () => {
      beforeEach(async () => {
        await store.createRouter('fra1', routerSpec(1), admin);
        await store.createRouter('ams1', routerSpec(2, { portRange: { min: 40000, max: 40002 } }), admin);
      });

      it('allocates uuid, port and createdAt and round-trips the session', async () => {
        const s = await store.createSession(
          newSession(4242420123, 'fra1'),
          pending,
          user(4242420123),
          'create',
        );
        expect(s.name).toBe('as4242420123-fra1');
        expect(s.spec.uuid).toMatch(/^[0-9a-f-]{36}$/);
        expect(s.spec.listenPort).toBe(20123);
        expect(Date.parse(s.spec.createdAt ?? '')).not.toBeNaN();
        expect(s.status).toMatchObject({ code: 3, name: 'PENDING_REVIEW' });
        expect(store.getSession(s.spec.uuid)).toEqual(s);
        expect(store.listSessions({ router: 'fra1' })).toEqual([s]);
        expect(store.listSessions({ asn: 4242420123 })).toEqual([s]);
        expect(store.listSessions({ router: 'ams1' })).toEqual([]);
        expect(store.listSessions({ asn: 1 })).toEqual([]);
      });

      it('gives other ASNs the lowest free port of the range, and ROUTER_FULL when none is left', async () => {
        const a = await store.createSession(newSession(64512, 'ams1'), pending, user(64512), 'c');
        const b = await store.createSession(newSession(64513, 'ams1'), pending, user(64513), 'c');
        expect([a.spec.listenPort, b.spec.listenPort]).toEqual([40000, 40001]);
        await store.updateSession(a.spec.uuid, () => ({ delete: true }), user(64512), 'delete');
        const c = await store.createSession(newSession(64514, 'ams1'), pending, user(64514), 'c');
        expect(c.spec.listenPort).toBe(40000);
        await store.createSession(newSession(64515, 'ams1'), pending, user(64515), 'c');
        await expectProblem(
          store.createSession(newSession(64516, 'ams1'), pending, user(64516), 'c'),
          'ROUTER_FULL',
        );
      });

      it('refuses an unknown router and an invalid spec', async () => {
        await expectProblem(
          store.createSession(newSession(64512, 'nope'), pending, user(64512), 'c'),
          'ROUTER_NOT_FOUND',
        );
        await expectProblem(
          store.createSession(
            newSession(64512, 'fra1', { ipv6: 'not-an-address' }),
            pending,
            user(64512),
            'c',
          ),
          'INVALID_REQUEST',
        );
        expect(store.listSessions()).toEqual([]);
      });

      it('refuses a second session for one (ASN, router) with SESSION_EXISTS', async () => {
        await store.createSession(newSession(4242420001, 'fra1'), pending, user(4242420001), 'c');
        await expectProblem(
          store.createSession(newSession(4242420001, 'fra1'), pending, user(4242420001), 'c'),
          'SESSION_EXISTS',
        );
        await store.createSession(newSession(4242420001, 'ams1'), pending, user(4242420001), 'c');
        expect(store.listSessions({ asn: 4242420001 })).toHaveLength(2);
      });

      it('lets exactly one of 50 concurrent creates for one (ASN, router) succeed', async () => {
        const results = await Promise.allSettled(
          Array.from({ length: 50 }, () =>
            store.createSession(newSession(4242420002, 'fra1'), pending, user(4242420002), 'c'),
          ),
        );
        const ok = results.filter((r) => r.status === 'fulfilled');
        const failed = results.filter((r) => r.status === 'rejected');
        expect(ok).toHaveLength(1);
        for (const f of failed) expect(isProblem(f.reason, 'SESSION_EXISTS')).toBe(true);
        expect(store.listSessions({ router: 'fra1' })).toHaveLength(1);
      });

      it('keeps ports unique per router under concurrent creates', async () => {
        const asns = Array.from({ length: 30 }, (_, i) => 64600 + i);
        const results = await Promise.allSettled(
          asns.map((asn) => store.createSession(newSession(asn, 'fra1'), pending, user(asn), 'c')),
        );
        expect(results.every((r) => r.status === 'fulfilled')).toBe(true);
        const ports = store.listSessions({ router: 'fra1' }).map((s) => s.spec.listenPort);
        expect(new Set(ports).size).toBe(30);
        expect(Math.min(...ports)).toBe(30000);
        expect(Math.max(...ports)).toBe(30029);
      });

      it("refuses another ASN's peer address and a router's loopback, also under concurrent creates", async () => {
        const held = { ipv6: 'fd42:1:ab::1' };
        // one ASN may use its address on several routers
        await store.createSession(newSession(64700, 'fra1', held), pending, user(64700), 'c');
        await store.createSession(newSession(64700, 'ams1', held), pending, user(64700), 'c');
        const refused = [
          store.createSession(newSession(64701, 'fra1', held), pending, user(64701), 'c'),
          store.createSession(newSession(64702, 'fra1', { ipv6: 'fd00::2' }), pending, user(64702), 'c'),
        ];
        const messages = [/is the address of AS64700's session/, /is the loopback of router ams1/];
        for (const [i, promise] of refused.entries()) {
          const err: unknown = await promise.catch((e: unknown) => e);
          expect(isProblem(err, 'INVALID_REQUEST'), String(err)).toBe(true);
          expect((err as { errors: unknown[] }).errors).toEqual([
            expect.objectContaining({
              pointer: '/ipv6',
              message: expect.stringMatching(messages[i] as RegExp),
            }),
          ]);
        }
        // of creates from other ASNs started together for one address, one is stored
        const contested = { ipv6: 'fd42:1:cd::1' };
        const results = await Promise.allSettled(
          [64710, 64711, 64712, 64713].map((asn) =>
            store.createSession(newSession(asn, 'fra1', contested), pending, user(asn), 'c'),
          ),
        );
        expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
        for (const r of results)
          if (r.status === 'rejected') expect(isProblem(r.reason, 'INVALID_REQUEST')).toBe(true);
        expect(store.listSessions().filter((s) => s.spec.ipv6 === contested.ipv6)).toHaveLength(1);
        expect(store.listSessions()).toHaveLength(3);
      });

      describe('admission limits under 20+ creates started together', () => {
        const asns = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

        it('stores exactly maxSessions sessions on a capped router; the rest are ROUTER_FULL', async () => {
          await store.createRouter('cap1', routerSpec(3, { maxSessions: 5 }), admin);
          await store.createSession(newSession(64800, 'cap1'), pending, user(64800), 'c');
          const counts = await outcomes(
            asns(64801, 24).map((asn) =>
              store.createSession(newSession(asn, 'cap1'), pending, user(asn), 'c'),
            ),
          );
          expect(counts).toEqual({ ok: 4, ROUTER_FULL: 20 });
          expect(store.listSessions({ router: 'cap1' })).toHaveLength(5);
        });

        it('stores no more sessions awaiting review per ASN than maxPendingPerAsn; the rest are CONFLICT', async () => {
          const routers = Array.from({ length: 22 }, (_, i) => `pend${i + 1}`);
          for (const [i, name] of routers.entries())
            await store.createRouter(name, routerSpec(10 + i), admin);
          await store.putPolicy('default', { ...defaultPolicy, maxPendingPerAsn: 3 }, admin);
          const asn = 4242420900;
          const counts = await outcomes(
            routers.map((r) => store.createSession(newSession(asn, r), pending, user(asn), 'c')),
          );
          expect(counts).toEqual({ ok: 3, CONFLICT: 19 });
          expect(store.listSessions({ asn })).toHaveLength(3);
          // another ASN has its own count
          await store.createSession(newSession(4242420901, 'pend1'), pending, user(4242420901), 'c');
        });

        it('stores nothing on a router not accepting sessions; all are ROUTER_FULL', async () => {
          await store.createRouter('closed1', routerSpec(3, { acceptingSessions: false }), admin);
          const counts = await outcomes(
            asns(64830, 20).map((asn) =>
              store.createSession(newSession(asn, 'closed1'), pending, user(asn), 'c'),
            ),
          );
          expect(counts).toEqual({ ROUTER_FULL: 20 });
          expect(store.listSessions({ router: 'closed1' })).toEqual([]);
        });

        it("stores no blocked ASN's session, by the network's or the router's own list: ASN_BLOCKED", async () => {
          await store.putPolicy('default', { ...defaultPolicy, blockedAsns: asns(64850, 6) }, admin);
          await store.putPolicy('fra1', { blockedAsns: asns(64856, 6) }, admin);
          const counts = await outcomes(
            asns(64850, 24).map((asn) =>
              store.createSession(newSession(asn, 'fra1'), pending, user(asn), 'c'),
            ),
          );
          expect(counts).toEqual({ ok: 12, ASN_BLOCKED: 12 });
          expect(store.listSessions({ router: 'fra1' }).map((s) => s.spec.asn)).toEqual(asns(64862, 12));
        });

        it('stores one session per (ASN, router) of 20 started together: SESSION_EXISTS', async () => {
          const counts = await outcomes(
            Array.from({ length: 20 }, () =>
              store.createSession(newSession(4242420950, 'fra1'), pending, user(4242420950), 'c'),
            ),
          );
          expect(counts).toEqual({ ok: 1, SESSION_EXISTS: 19 });
          expect(store.listSessions({ asn: 4242420950 })).toHaveLength(1);
        });

        it('gives one peer address to one of 20 ASNs asking together: INVALID_REQUEST', async () => {
          const ipv6 = 'fd42:1:ee::1';
          const counts = await outcomes(
            asns(64870, 20).map((asn, i) =>
              store.createSession(
                newSession(asn, i % 2 === 0 ? 'fra1' : 'ams1', { ipv6 }),
                pending,
                user(asn),
                'c',
              ),
            ),
          );
          // the address rules come before the port allocation: ams1's three ports are not what refuses
          expect(counts).toEqual({ ok: 1, INVALID_REQUEST: 19 });
          expect(store.listSessions().filter((s) => s.spec.ipv6 === ipv6)).toHaveLength(1);
        });
      });

      it('updates spec and status, passes on what mutate throws and then writes nothing', async () => {
        const s = await store.createSession(newSession(4242420003, 'fra1'), pending, user(4242420003), 'c');
        const updated = await store.updateSession(
          s.spec.uuid,
          (cur) => ({ spec: { ...cur.spec, mtu: 1380, endpoint: 'peer.example.org:51820' }, status: queued }),
          admin,
          'approve and change mtu',
        );
        expect(updated?.spec).toMatchObject({
          mtu: 1380,
          endpoint: 'peer.example.org:51820',
          uuid: s.spec.uuid,
        });
        expect(updated?.status.code).toBe(4);
        expect(store.getSession(s.spec.uuid)).toEqual(updated);

        const statusOnly = await store.updateSession(
          s.spec.uuid,
          (cur) => ({ status: { ...cur.status, code: 1, name: 'ACTIVE' } }),
          { name: 'agent fra1', role: 'agent' },
          'agent reports 1',
        );
        expect(statusOnly?.status.code).toBe(1);
        expect(statusOnly?.spec).toEqual(updated?.spec);

        const before = store.getSession(s.spec.uuid);
        const rev = store.revision(topics.routerSessions('fra1'));
        const boom = new Error('mutate refused');
        await expect(
          store.updateSession(
            s.spec.uuid,
            () => {
              throw boom;
            },
            admin,
            'x',
          ),
        ).rejects.toBe(boom);
        expect(store.getSession(s.spec.uuid)).toEqual(before);
        expect(store.revision(topics.routerSessions('fra1'))).toBe(rev);

        await expectProblem(
          store.updateSession(s.spec.uuid, (cur) => ({ spec: { ...cur.spec, mtu: 100 } }), admin, 'x'),
          'INVALID_REQUEST',
        );
        await expectProblem(
          store.updateSession(s.spec.uuid, (cur) => ({ spec: { ...cur.spec, asn: 64512 } }), admin, 'x'),
          'INVALID_REQUEST',
        );
        expect(store.getSession(s.spec.uuid)).toEqual(before);
        await expectProblem(
          store.updateSession('00000000-0000-4000-8000-000000000000', () => ({}), admin, 'x'),
          'SESSION_NOT_FOUND',
        );
      });

      it("judges a changed address or key by the create's rules, keeping a fault a field already had", async () => {
        const a = await store.createSession(newSession(4242420011, 'fra1'), pending, user(4242420011), 'c');
        const b = await store.createSession(newSession(4242420012, 'fra1'), pending, user(4242420012), 'c');
        const modify = (uuid: string, edit: Partial<typeof b.spec>) =>
          store.updateSession(uuid, (cur) => ({ spec: { ...cur.spec, ...edit } }), user(4242420012), 'm');
        const before = store.getSession(b.spec.uuid);
        // another ASN's address, another session's key on the router, the router's link-local
        await expectProblem(modify(b.spec.uuid, { ipv6: a.spec.ipv6 }), 'INVALID_REQUEST');
        await expectProblem(modify(b.spec.uuid, { publicKey: a.spec.publicKey }), 'INVALID_REQUEST');
        const router = store.getRouter('fra1')?.spec;
        await expectProblem(modify(b.spec.uuid, { linkLocal: router?.linkLocal ?? '' }), 'INVALID_REQUEST');
        expect(store.getSession(b.spec.uuid)).toEqual(before);
        const key = wgKey();
        expect((await modify(b.spec.uuid, { publicKey: key, linkLocal: 'fe80::42' }))?.spec).toMatchObject({
          publicKey: key,
          linkLocal: 'fe80::42',
        });
        // a policy tightened since: the address it breaks stays through a key change, a new one is refused
        await store.putPolicy(
          'default',
          { ...defaultPolicy, peerAddressRanges: { ipv6: ['fd42:99::/32'] } },
          admin,
        );
        expect((await modify(b.spec.uuid, { publicKey: wgKey() }))?.spec.ipv6).toBe(b.spec.ipv6);
        await expectProblem(modify(b.spec.uuid, { ipv6: 'fd42:1:ffff::1' }), 'INVALID_REQUEST');
        expect((await modify(b.spec.uuid, { ipv6: 'fd42:99::1' }))?.spec.ipv6).toBe('fd42:99::1');
      });

      it('stores an adopted session without ipv6, refuses one that is not, and a modify adds it', async () => {
        const adopted = {
          by: 'admin AS4242420000',
          at,
          interface: 'dn42-p1',
          protocols: ['p1_v6'],
          files: ['/etc/wireguard/dn42-p1.conf', '/etc/bird/peers/p1.conf'],
        };
        const bare = (asn: number, extra: Partial<ReturnType<typeof newSession>> = {}) => {
          const { ipv6: _ipv6, ...rest } = newSession(asn, 'fra1', extra);
          return rest;
        };
        // a user's session names the peer's DN42 IPv6: the field is named
        const err: unknown = await store
          .createSession(bare(4242420021), pending, user(4242420021), 'c')
          .catch((e: unknown) => e);
        expect(isProblem(err, 'INVALID_REQUEST'), String(err)).toBe(true);
        expect((err as { errors: unknown[] }).errors).toEqual([
          expect.objectContaining({ pointer: '/ipv6', key: 'field.ipv6UnlessAdopted' }),
        ]);
        // two ASNs' adopted sessions without one: a missing address claims nothing
        const a = await store.createSession(bare(4242420022, { adopted }), pending, admin, 'adopt');
        const b = await store.createSession(
          bare(4242420023, { adopted: { ...adopted, interface: 'dn42-p2' } }),
          pending,
          admin,
          'adopt',
        );
        expect(a.spec).not.toHaveProperty('ipv6');
        expect(b.spec.adopted?.interface).toBe('dn42-p2');
        // the peer's later modify adds its DN42 IPv6, judged as a create's
        const modify = (edit: Record<string, unknown>) =>
          store.updateSession(
            a.spec.uuid,
            (cur) => ({ spec: { ...cur.spec, ...edit } }),
            user(4242420022),
            'm',
          );
        expect((await modify({ ipv6: 'fd42:1:22::9' }))?.spec.ipv6).toBe('fd42:1:22::9');
        // and, once it has one, an adopted session may drop it again (the rule asks only non-adopted ones)
        const { ipv6: _dropped, ...without } = store.getSession(a.spec.uuid)!.spec;
        const dropped = await store.updateSession(a.spec.uuid, () => ({ spec: without }), admin, 'm');
        expect(dropped?.spec).not.toHaveProperty('ipv6');
        // a session that was not adopted may not lose it
        const c = await store.createSession(newSession(4242420024, 'fra1'), pending, user(4242420024), 'c');
        const { ipv6: _c, ...cWithout } = c.spec;
        await expectProblem(
          store.updateSession(c.spec.uuid, () => ({ spec: cWithout }), admin, 'm'),
          'INVALID_REQUEST',
        );
        await store.close();
        store = await h.reopen();
        expect(store.getSession(a.spec.uuid)?.spec).not.toHaveProperty('ipv6');
        expect(store.getSession(b.spec.uuid)?.spec.adopted).toEqual({ ...adopted, interface: 'dn42-p2' });
        expect(store.getSession(c.spec.uuid)?.spec.ipv6).toBe(c.spec.ipv6);
      });

      it('deletes a session, freeing its name and port', async () => {
        const s = await store.createSession(newSession(4242420004, 'fra1'), pending, user(4242420004), 'c');
        const gone = await store.updateSession(
          s.spec.uuid,
          () => ({ delete: true }),
          user(4242420004),
          'delete',
        );
        expect(gone).toBeUndefined();
        expect(store.getSession(s.spec.uuid)).toBeUndefined();
        expect(store.listSessions()).toEqual([]);
        const again = await store.createSession(
          newSession(4242420004, 'fra1'),
          pending,
          user(4242420004),
          'c',
        );
        expect(again.spec.listenPort).toBe(s.spec.listenPort);
        expect(again.spec.uuid).not.toBe(s.spec.uuid);
      });

      // docs/api.md, Decisions: the admin's reason stored with the status; a REJECTED record holds nothing
      it("keeps a REJECTED record with the admin's decision on reopen; it claims no address; a create replaces it", async () => {
        const s = await store.createSession(newSession(4242420005, 'fra1'), pending, user(4242420005), 'c');
        const decision = {
          action: 'reject' as const,
          reason: 'not in the registry',
          by: 'admin AS1',
          at: '2026-11-27T12:00:00.000Z',
        };
        const status = {
          code: 7 as const,
          name: 'REJECTED' as const,
          lastTransitionTime: decision.at,
          decision,
        };
        await store.updateSession(s.spec.uuid, () => ({ status }), admin, 'reject');
        // another ASN may take its address at once
        const other = await store.createSession(
          newSession(4242420006, 'fra1', { ipv6: s.spec.ipv6 }),
          pending,
          user(4242420006),
          'c',
        );
        store = await h.reopen();
        expect(store.getSession(s.spec.uuid)?.status).toMatchObject(status);
        expect(store.getSession(other.spec.uuid)?.spec.ipv6).toBe(s.spec.ipv6);
        const again = await store.createSession(
          newSession(4242420005, 'fra1', { ipv6: 'fd42:1:5::2' }),
          pending,
          user(4242420005),
          'again',
        );
        expect(store.getSession(s.spec.uuid)).toBeUndefined();
        expect(store.listSessions({ asn: 4242420005 }).map((x) => x.spec.uuid)).toEqual([again.spec.uuid]);
      });
    });

    describe('a modify in review (common/approved-spec.ts)', () => {
      beforeEach(async () => {
        await store.createRouter('fra1', routerSpec(1), admin);
      });

      it("keeps the approved spec beside the requested one, the agent's answer changing with it, after reopen", async () => {
        const s = await store.createSession(newSession(4242420007, 'fra1'), queued, user(4242420007), 'c');
        await store.updateSession(
          s.spec.uuid,
          (c) => applyTrigger(c, { kind: 'report', status: 1 }, at),
          admin,
          'up',
        );
        const since = store.revision(topics.routerSessions('fra1'));
        const requested = { ...s.spec, ipv6: 'fd42:1:7::2', mtu: 1400 };
        const changed = await store.updateSession(
          s.spec.uuid,
          (c) => applyTrigger(c, { kind: 'modify', review: true }, at, () => requested),
          user(4242420007),
          'modify',
        );
        expect(changed?.spec).toMatchObject({ ipv6: 'fd42:1:7::2', mtu: 1400 });
        expect(changed?.status).toMatchObject({
          code: 3,
          approved: { status: 1, spec: { ipv6: s.spec.ipv6, mtu: 1420, publicKey: s.spec.publicKey } },
        });
        // the address the router still runs stays the session's: another network cannot take it meanwhile
        const taken = store.createSession(
          newSession(4242420008, 'fra1', { ipv6: s.spec.ipv6 }),
          pending,
          user(4242420008),
          'c',
        );
        await expectProblem(taken, 'INVALID_REQUEST');
        // the router's status moves under the review: the agent's answer changes
        const reported = store.revision(topics.routerSessions('fra1'));
        expect(reported).toBeGreaterThan(since);
        await store.updateSession(
          s.spec.uuid,
          (c) => ({ status: { ...c.status, approved: { spec: c.status.approved!.spec, status: 2 } } }),
          { name: 'agent fra1', role: 'agent' },
          'report',
        );
        expect(store.revision(topics.routerSessions('fra1'))).toBeGreaterThan(reported);
        store = await h.reopen();
        const read = store.getSession(s.spec.uuid);
        expect(read?.spec.ipv6).toBe('fd42:1:7::2');
        expect(read?.status.approved).toEqual({
          status: 2,
          spec: {
            ipv6: s.spec.ipv6,
            linkLocal: 'fe80::1234',
            publicKey: s.spec.publicKey,
            mtu: 1420,
            mpbgp: true,
            extendedNextHop: true,
          },
        });
        // reject: the approved spec is the session's again, in the router's status
        const back = await store.updateSession(
          s.spec.uuid,
          (c) => applyTrigger(c, { kind: 'reject' }, at),
          admin,
          'reject',
        );
        expect(back?.spec.ipv6).toBe(s.spec.ipv6);
        expect(back?.status.code).toBe(2);
        expect(back?.status.approved).toBeUndefined();
        // the requested address is free again
        await store.createSession(
          newSession(4242420008, 'fra1', { ipv6: 'fd42:1:7::2' }),
          pending,
          user(4242420008),
          'c',
        );
      });
    });

    describe('change feed', () => {
      beforeEach(async () => {
        await store.createRouter('fra1', routerSpec(1), admin);
        await store.createRouter('ams1', routerSpec(2), admin);
      });

      /**
       * Waits on every topic at once and reports which a change woke: counted wake-ups, no timing. The
       * waits that were not woken are released by abort.
       */
      async function wokenBy(change: () => unknown): Promise<string[]> {
        const watched = {
          'fra1 sessions': topics.routerSessions('fra1'),
          'ams1 sessions': topics.routerSessions('ams1'),
          'AS4242420005 sessions': topics.asnSessions(4242420005),
          'AS4242420006 sessions': topics.asnSessions(4242420006),
          'all sessions': topics.allSessions,
          routers: topics.routers,
          policies: topics.policies,
        };
        const release = new AbortController();
        const woken: string[] = [];
        const waits = Object.entries(watched).map(async ([name, topic]) => {
          const since = store.revision(topic);
          if ((await store.waitForChange(topic, since, 60_000, release.signal)) > since) woken.push(name);
        });
        await change();
        await new Promise((resolve) => setImmediate(resolve));
        release.abort();
        await Promise.all(waits);
        return woken.sort();
      }

      it('wakes, for each kind of change, only the waits on the answers it changes', async () => {
        const mine = ['AS4242420005 sessions', 'all sessions'];
        let uuid = '';
        expect(
          await wokenBy(async () => {
            uuid = (await store.createSession(newSession(4242420005, 'fra1'), pending, user(4242420005), 'c'))
              .spec.uuid;
          }),
        ).toEqual([...mine, 'fra1 sessions'].sort());
        // approval: a status code the agent sees
        expect(
          await wokenBy(() =>
            store.updateSession(uuid, (s) => ({ status: { ...s.status, ...queued } }), admin, 'approve'),
          ),
        ).toEqual([...mine, 'fra1 sessions'].sort());
        // a spec change (modify)
        expect(
          await wokenBy(() =>
            store.updateSession(uuid, (s) => ({ spec: { ...s.spec, mtu: 1400 } }), admin, 'm'),
          ),
        ).toEqual([...mine, 'fra1 sessions'].sort());
        // BGP state and metrics are shown to the user, not to the agent
        expect(
          await wokenBy(() =>
            store.updateSession(
              uuid,
              (s) => ({
                status: { ...s.status, bgpState: 'Established', bgpSince: new Date().toISOString() },
              }),
              { name: 'agent fra1', role: 'agent' },
              'bgp',
            ),
          ),
        ).toEqual(mine);
        expect(
          await wokenBy(() =>
            store.recordSessionMetrics(uuid, {
              rtt: 1,
              rxBytes: 2,
              txBytes: 3,
              routesImported: 4,
              lastHandshake: new Date().toISOString(),
              at: new Date().toISOString(),
            }),
          ),
        ).toEqual(mine);
        // a new mesh key: no answer kept or waited on (mesh lists are built per request); onChange listeners
        // hear of it. The first heartbeat makes the router Ready, which users' records show (who a queued
        // session waits for: docs/api.md, Waiting): the routers' answers.
        const heard: unknown[] = [];
        const off = store.onChange((e) => heard.push(e));
        expect(
          await wokenBy(() =>
            store.recordHeartbeat(
              'fra1',
              checkOrThrow(HeartbeatBody, { version: '1', uptime: 1, meshPublicKey: wgKey() }, 'heartbeat'),
            ),
          ),
        ).toEqual(['routers']);
        off();
        expect(heard).toContainEqual({ kind: 'Router', name: 'fra1', type: 'put' });
        // a heartbeat with the same key changes nothing shown
        expect(
          await wokenBy(() =>
            store.recordHeartbeat(
              'fra1',
              checkOrThrow(HeartbeatBody, { version: '1', uptime: 2 }, 'heartbeat'),
            ),
          ),
        ).toEqual([]);
        expect(await wokenBy(() => store.putPolicy('default', defaultPolicy, admin))).toEqual(['policies']);
        expect(
          await wokenBy(() =>
            store.updateRouter('ams1', (spec) => ({ ...spec, displayName: 'Amsterdam' }), admin, 'rename'),
          ),
        ).toEqual(['routers']);
        expect(
          await wokenBy(() => store.updateSession(uuid, () => ({ delete: true }), user(4242420005), 'd')),
        ).toEqual([...mine, 'fra1 sessions'].sort());
      });

      it('tells onChange listeners, until they unsubscribe', async () => {
        const events: unknown[] = [];
        const off = store.onChange((e) => events.push(e));
        const s = await store.createSession(newSession(4242420006, 'fra1'), pending, user(4242420006), 'c');
        expect(events).toContainEqual({ kind: 'PeeringSession', name: s.name, type: 'put', router: 'fra1' });
        await store.updateSession(s.spec.uuid, () => ({ delete: true }), admin, 'd');
        expect(events).toContainEqual({
          kind: 'PeeringSession',
          name: s.name,
          type: 'delete',
          router: 'fra1',
        });
        off();
        const count = events.length;
        await store.putPolicy('default', defaultPolicy, admin);
        expect(events).toHaveLength(count);
      });

      it('wakes waitForChange on a change, and returns the current revision on timeout and abort', async () => {
        const fra1 = topics.routerSessions('fra1');
        const since = store.revision(fra1);
        const waiting = store.waitForChange(fra1, since, 5000);
        await store.createSession(newSession(4242420007, 'fra1'), pending, user(4242420007), 'c');
        expect(await waiting).toBeGreaterThan(since);

        const now = store.revision(fra1);
        const started = Date.now();
        expect(await store.waitForChange(fra1, now, 50)).toBe(now);
        expect(Date.now() - started).toBeGreaterThanOrEqual(40);

        const controller = new AbortController();
        const aborted = store.waitForChange(fra1, now, 60000, controller.signal);
        controller.abort();
        expect(await aborted).toBe(now);

        expect(await store.waitForChange(fra1, now - 1, 60000)).toBe(now);
      });
    });

    describe('observations', () => {
      it('are visible at once and persisted after close and reopen', async () => {
        await store.createRouter('fra1', routerSpec(1), admin);
        const s = await store.createSession(newSession(4242420008, 'fra1'), queued, admin, 'c');
        const metrics = {
          rtt: 12.5,
          rxBytes: 100,
          txBytes: 200,
          routesImported: 3,
          at: '2026-01-01T00:00:00.000Z',
        };
        store.recordSessionMetrics(s.spec.uuid, metrics);
        store.recordRouterStatus('fra1', {
          lastHeartbeat: '2026-01-01T00:00:01.000Z',
          agentVersion: '0.1.0',
          uptime: 5,
        });
        store.recordRouterStatus('fra1', { uptime: 6 });
        expect(store.getSession(s.spec.uuid)?.status.metrics).toEqual(metrics);
        expect(store.getSession(s.spec.uuid)?.status.code).toBe(4);
        expect(() => store.recordSessionMetrics(s.spec.uuid, { ...metrics, rxBytes: -1 })).toThrow(/rxBytes/);
        expect(() => store.recordRouterStatus('fra1', { uptime: -5 })).toThrow(/uptime/);
        expect(store.getSession(s.spec.uuid)?.status.metrics).toEqual(metrics);
        expect(store.getRouter('fra1')?.status).toEqual({
          lastHeartbeat: '2026-01-01T00:00:01.000Z',
          agentVersion: '0.1.0',
          uptime: 6,
        });
        await store.close();
        store = await h.reopen();
        expect(store.getSession(s.spec.uuid)?.status.metrics).toEqual(metrics);
        expect(store.getRouter('fra1')?.status.uptime).toBe(6);
      });

      it('record a heartbeat as the router status, told as a change only when the mesh key changes', async () => {
        await store.createRouter('fra1', routerSpec(1), admin);
        const meshPublicKey = wgKey();
        const beat = (uptime: number) =>
          checkOrThrow(HeartbeatBody, { version: '1.2.3', uptime, meshPublicKey }, 'heartbeat');
        const routerChanges: unknown[] = [];
        const off = store.onChange((e) => {
          if (e.kind === 'Router') routerChanges.push(e);
        });
        const before = Date.now();
        expect(store.recordHeartbeat('fra1', beat(60))).toBe(true);
        const first = store.getRouter('fra1')?.status;
        expect(first).toMatchObject({ agentVersion: '1.2.3', uptime: 60, meshPublicKey });
        const at = Date.parse(String(first?.lastHeartbeat));
        expect(at).toBeGreaterThanOrEqual(before);
        expect(at).toBeLessThanOrEqual(Date.now());
        expect(routerChanges).toHaveLength(1);
        store.recordHeartbeat('fra1', beat(90));
        expect(routerChanges).toHaveLength(1); // the same key: nothing for agents to fetch again
        expect(store.recordHeartbeat('nowhere', beat(1))).toBe(false); // an unknown router: nothing recorded
        off();
        await store.close();
        store = await h.reopen();
        expect(store.getRouter('fra1')?.status).toMatchObject({
          agentVersion: '1.2.3',
          uptime: 90,
          meshPublicKey,
        });
      });

      it("keep the agent's live state: conditions by type, BGP state, last handshake (docs/agent.md)", async () => {
        await store.createRouter('fra1', routerSpec(1), admin);
        const s = await store.createSession(newSession(4242420009, 'fra1'), queued, admin, 'c');
        const configApplied = {
          type: 'ConfigApplied',
          status: 'False',
          reason: 'LocalConfigRejected',
          message: 'BIRD refused the configuration: /etc/bird/local.d/x.conf:2:1 syntax error',
          lastTransitionTime: '2026-01-01T00:00:00.000Z',
        };
        const beat = (conditions?: unknown[]) =>
          checkOrThrow(
            HeartbeatBody,
            { version: '1.2.3', uptime: 1, ...(conditions ? { conditions } : {}) },
            'heartbeat',
          );
        store.recordRouterStatus('fra1', {
          conditions: [
            {
              type: 'Ready',
              status: 'True',
              reason: 'Ok',
              message: '',
              lastTransitionTime: configApplied.lastTransitionTime,
            },
          ],
        });
        store.recordHeartbeat('fra1', beat([configApplied]));
        store.recordHeartbeat('fra1', beat()); // an older agent sends none: kept
        // the agent's own conditions kept by type; Ready, Reconciling and Stalled judged by the core
        const kept = store.getRouter('fra1')?.status.conditions ?? [];
        expect(kept.map((c) => c.type).sort()).toEqual(['ConfigApplied', 'Ready', 'Reconciling', 'Stalled']);
        expect(kept.find((c) => c.type === 'ConfigApplied')).toMatchObject({ reason: 'LocalConfigRejected' });
        expect(kept.find((c) => c.type === 'Ready')).toMatchObject({
          status: 'True',
          reason: 'AgentReporting',
        });
        const metrics = {
          rtt: null,
          rxBytes: 1,
          txBytes: 2,
          routesImported: 0,
          lastHandshake: '2026-01-01T00:00:02.000Z',
          at: '2026-01-01T00:00:03.000Z',
        };
        store.recordSessionMetrics(s.spec.uuid, metrics);
        await store.updateSession(
          s.spec.uuid,
          (cur) => ({
            status: {
              ...cur.status,
              code: 2,
              name: 'ERROR',
              bgpState: 'Active',
              bgpSince: '2026-01-01T00:00:01.000Z',
            },
          }),
          admin,
          'r',
        );
        await store.close();
        store = await h.reopen();
        // the Kubernetes store adds the generation it judged (observedGeneration) to each condition
        expect(
          store.getRouter('fra1')?.status.conditions?.find((c) => c.type === 'ConfigApplied'),
        ).toMatchObject(configApplied);
        expect(store.getSession(s.spec.uuid)?.status).toMatchObject({
          bgpState: 'Active',
          bgpSince: '2026-01-01T00:00:01.000Z',
          metrics,
        });
      });

      it('keep the newer of two observations of one thing, whichever comes last (docs/store.md)', async () => {
        await store.createRouter('fra1', routerSpec(1), admin);
        const s = await store.createSession(newSession(4242420012, 'fra1'), queued, admin, 'c');
        const at = (second: number) => `2026-01-01T00:00:0${second}.000Z`;
        const metrics = (second: number) => ({
          rtt: 1,
          rxBytes: second,
          txBytes: 1,
          routesImported: 0,
          at: at(second),
        });
        store.recordSessionMetrics(s.spec.uuid, metrics(2));
        store.recordSessionMetrics(s.spec.uuid, metrics(1)); // a report got before, recorded after
        store.recordRouterStatus('fra1', { lastHeartbeat: at(2), agentVersion: '2', uptime: 2 });
        store.recordRouterStatus('fra1', { lastHeartbeat: at(1), agentVersion: '1', uptime: 1 });
        // the mesh state is an observation of its own: older than the heartbeat, newer than none
        store.recordRouterStatus('fra1', { meshPeers: [], meshUpdatedAt: at(1) });
        store.recordRouterStatus('fra1', {
          meshPeers: [{ router: 'ams1', reachable: true }],
          meshUpdatedAt: at(0),
        });
        const newest = {
          lastHeartbeat: at(2),
          agentVersion: '2',
          uptime: 2,
          meshPeers: [],
          meshUpdatedAt: at(1),
        };
        expect(store.getSession(s.spec.uuid)?.status.metrics).toEqual(metrics(2));
        expect(store.getRouter('fra1')?.status).toMatchObject(newest);
        await store.close();
        store = await h.reopen();
        expect(store.getSession(s.spec.uuid)?.status.metrics).toEqual(metrics(2));
        expect(store.getRouter('fra1')?.status).toMatchObject(newest);
      });
    });

    describe('reopen', () => {
      it('reloads exactly the same state', async () => {
        await store.createRouter('fra1', routerSpec(1, { autoApprove: true }), admin);
        await store.createRouter('ams1', routerSpec(2), admin);
        await store.setAgentTokenHash('ams1', 'b'.repeat(64), admin);
        await store.putPolicy('default', defaultPolicy, admin);
        const a = await store.createSession(newSession(4242420010, 'fra1'), queued, admin, 'c');
        await store.createSession(
          newSession(64512, 'ams1', { ipv4: '172.20.1.1' }),
          pending,
          user(64512),
          'c',
        );
        const c = await store.createSession(newSession(4242420011, 'ams1'), pending, user(4242420011), 'c');
        await store.updateSession(
          a.spec.uuid,
          (cur) => ({ status: { ...cur.status, code: 1, name: 'ACTIVE' } }),
          admin,
          'r',
        );
        await store.updateSession(c.spec.uuid, () => ({ delete: true }), admin, 'd');
        const before = snapshot(store);
        await store.close();
        store = await h.reopen();
        expect(snapshot(store)).toEqual(before);
        // the reopened store keeps enforcing uniqueness
        await expectProblem(
          store.createSession(newSession(4242420010, 'fra1'), pending, admin, 'c'),
          'SESSION_EXISTS',
        );
        const d = await store.createSession(newSession(64513, 'ams1'), pending, user(64513), 'c');
        expect(d.spec.listenPort).toBe(30001);
      });
    });

    // The outbox contract (store.ts, outbox); that a reopened store holds it is each back end's own test.
    describe('the outbox', () => {
      it("holds each write's events with stable ids, one per id, until they are confirmed", async () => {
        await store.createRouter('fra1', routerSpec(1), admin);
        const revision = store.revision(topics.outbox);
        const s = await store.createSession(newSession(4242420020, 'fra1'), pending, user(4242420020), 'c');
        expect(store.revision(topics.outbox)).toBeGreaterThan(revision);
        await store.updateSession(s.spec.uuid, () => ({ status: queued }), admin, 'approve');
        await store.updateSession(s.spec.uuid, (c) => ({ spec: { ...c.spec, mtu: 1400 } }), admin, 'mtu');
        await store.updateSession(s.spec.uuid, () => ({ delete: true }), admin, 'withdraw');
        const events = store.outbox();
        expect(events.map((e) => e.type)).toEqual([
          'session.created',
          'session.pending_review',
          'session.approved',
          'session.deleted',
        ]);
        expect(events.every((e) => e.session?.uuid === s.spec.uuid)).toBe(true);
        expect(store.outbox().map((e) => e.id)).toEqual(events.map((e) => e.id));

        const offline = { ...(events[0] as NotificationEvent), id: 'b'.repeat(32) };
        await store.appendEvents([offline, offline]);
        expect(store.outbox().filter((e) => e.id === offline.id)).toHaveLength(1);

        await store.confirmDelivered([...events.slice(0, 3).map((e) => e.id), 'not-held']);
        expect(store.outbox().map((e) => e.id)).toEqual([events[3]?.id, offline.id]);
      });
    });
  });
}
