/**
 * Peer addresses and keys a peer can own (issue 24): the DN42 default ranges of a fresh install, the
 * special-purpose addresses no policy allows, WireGuard keys, the registry's route objects, and sessions
 * a tightened policy no longer allows (flagged in the admin list, refused on approve and enable).
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GROUP_VERSION } from '../../common/schema.ts';
import { DirectoryRegistry } from '../../controller/auth/login/registry.ts';
import { createGitStore } from '../../controller/store/git/index.ts';
import { writeRegistry } from '../login/support.ts';
import { admin, routerSpec } from '../store/fixtures.ts';
import { eventually, git, put } from '../store/git-helpers.ts';
import {
  ADMIN_ASN,
  driver,
  expectOk,
  problem,
  sessionFields,
  startHarness,
  USER_ASN,
  wgKey,
  type Harness,
} from './helpers.ts';

type FieldErrors = { errors?: { pointer: string; message: string }[] };

let h: Harness;
let d: ReturnType<typeof driver>;

beforeAll(async () => {
  h = await startHarness();
  d = driver(h, 'fra1', await h.addRouter('fra1'));
  await h.addRouter('ams1');
  // the quick start's policy: no peerAddressRanges
  await expectOk(h.post('/admin/policy', h.admin, { action: 'set', spec: { dn42Asn: ADMIN_ASN } }));
});
afterAll(async () => h?.close());

async function refused(extra: Record<string, unknown>, router = 'fra1') {
  const res = await h.post('/session', d.freshUser(), sessionFields(router, extra));
  expect(problem(res), JSON.stringify(extra)).toMatchObject({ status: 400, code: 'INVALID_REQUEST' });
  // the English sentences; their keys are checked in test/api/message-keys.test.ts
  return ((res.json() as FieldErrors).errors ?? []).map(({ pointer, message }) => ({ pointer, message }));
}

describe('a fresh install allows DN42 addresses only', () => {
  it('refuses addresses outside DN42, naming the default and how to widen it', async () => {
    expect(await refused({ ipv6: '2606:4700:4700::1111', ipv4: '8.8.8.8' })).toEqual([
      {
        pointer: '/ipv6',
        message:
          "must be inside DN42's fd00::/8 (the default while the policy sets no peerAddressRanges.ipv6)",
      },
      {
        pointer: '/ipv4',
        message:
          "must be inside DN42's 172.20.0.0/14, 172.31.0.0/16, 10.0.0.0/8 (the default while the policy sets no peerAddressRanges.ipv4)",
      },
    ]);
  });

  it('takes addresses in each DN42 range', async () => {
    for (const ipv4 of ['172.22.1.1', '172.31.0.9', '10.127.0.5'])
      await expectOk(h.post('/session', d.freshUser(), sessionFields('fra1', { ipv4 })));
  });

  it('refuses every special-purpose address, each with its range', async () => {
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ ipv6: '::1' }, '/ipv6', /loopback address \(::1\/128\)/],
      [{ ipv6: '::' }, '/ipv6', /unspecified address/],
      [{ ipv6: 'ff02::1' }, '/ipv6', /multicast/],
      [{ ipv6: 'fe80::99' }, '/ipv6', /link-local address \(fe80::\/10\)/],
      [{ ipv6: '2001:db8::1' }, '/ipv6', /documentation address \(2001:db8::\/32\)/],
      [{ ipv4: '0.0.0.0' }, '/ipv4', /unspecified address/],
      [{ ipv4: '255.255.255.255' }, '/ipv4', /broadcast address/],
      [{ ipv4: '127.0.0.1' }, '/ipv4', /loopback/],
      [{ ipv4: '169.254.0.1' }, '/ipv4', /link-local/],
      [{ ipv4: '192.0.2.1' }, '/ipv4', /documentation/],
    ];
    for (const [extra, pointer, message] of cases) {
      const errors = await refused(extra);
      expect(errors, JSON.stringify(extra)).toContainEqual({
        pointer,
        message: expect.stringMatching(message),
      });
    }
  });

  it("refuses a router's loopback written IPv4-mapped, before the loopback rule could miss it", async () => {
    const loopback = h.store.getRouter('fra1')?.spec.loopback.ipv4;
    expect(await refused({ ipv6: `::ffff:${loopback}` })).toEqual([
      {
        pointer: '/ipv6',
        message: `is an IPv4-mapped address (::ffff:0:0/96): give the IPv4 address ${loopback} as ipv4`,
      },
    ]);
    // as ipv4 it meets the loopback rule (and, the harness's loopbacks being 172.20.0.<n>, the anycast one)
    expect(await refused({ ipv4: loopback })).toEqual([
      {
        pointer: '/ipv4',
        message:
          "is in DN42's anycast service range 172.20.0.0/24 (shared services such as the anycast DNS, announced by several networks): it cannot be one peer's tunnel address",
      },
      { pointer: '/ipv4', message: 'is the loopback of router fra1' },
    ]);
  });

  it('a policy widens the ranges, never to special-purpose addresses', async () => {
    await expectOk(
      h.post('/admin/policy', h.admin, {
        action: 'set',
        name: 'ams1',
        spec: { peerAddressRanges: { ipv6: ['::/0'], ipv4: ['0.0.0.0/0'] } },
      }),
    );
    try {
      await expectOk(
        h.post(
          '/session',
          d.freshUser(),
          sessionFields('ams1', { ipv6: '2606:4700:4700::1111', ipv4: '8.8.8.8' }),
        ),
      );
      expect(await refused({ ipv6: '::1', ipv4: '203.0.113.5' }, 'ams1')).toEqual([
        { pointer: '/ipv6', message: 'is the loopback address (::1/128), which no peer can own' },
        {
          pointer: '/ipv4',
          message: 'is a documentation address (203.0.113.0/24), which no peer can own',
        },
      ]);
    } finally {
      await expectOk(h.post('/admin/policy', h.admin, { action: 'set', name: 'ams1', spec: {} }));
    }
  });
});

describe('WireGuard keys', () => {
  it('refuses the all-zero key', async () => {
    expect(await refused({ publicKey: 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=' })).toEqual([
      {
        pointer: '/publicKey',
        message:
          'is not a usable WireGuard public key (a low-order point, such as the all-zero key): no peer holds its private key',
      },
    ]);
  });

  it("refuses the router's own key, also spelled with the bit X25519 ignores", async () => {
    const own = h.store.getRouter('fra1')?.spec.publicKey ?? '';
    const message = "is the router's own WireGuard key; give the public key of your side of the tunnel";
    expect(await refused({ publicKey: own })).toEqual([{ pointer: '/publicKey', message }]);
    const bytes = Buffer.from(own, 'base64');
    bytes[31] = (bytes[31] ?? 0) ^ 0x80;
    expect(await refused({ publicKey: bytes.toString('base64') })).toEqual([
      { pointer: '/publicKey', message },
    ]);
  });

  it("refuses another session's key on the same router; another router may see it again", async () => {
    const key = wgKey();
    const first = await d.create(d.freshUser(), { publicKey: key });
    const name = h.store.getSession(first)?.name;
    expect(await refused({ publicKey: key })).toEqual([
      { pointer: '/publicKey', message: `is already the key of session ${name} on router fra1` },
    ]);
    await expectOk(h.post('/session', d.freshUser(), sessionFields('ams1', { publicKey: key })));
  });
});

describe('a policy tightened later', () => {
  it('flags the sessions it no longer allows in the admin list, every address, and refuses their approval', async () => {
    const user = d.freshUser();
    const uuid = await d.create(user, { ipv4: '172.21.9.9' });
    const ipv6 = h.store.getSession(uuid)?.spec.ipv6;
    const record = async () =>
      (
        (await expectOk(h.post('/admin/session', h.admin, { action: 'list', router: 'fra1' }))).json() as {
          sessions: { uuid: string; ipv4: string | null; policyViolations: unknown[] }[];
        }
      ).sessions.find((s) => s.uuid === uuid);
    expect(await record()).toMatchObject({ ipv4: '172.21.9.9', policyViolations: [] });

    await expectOk(
      h.post('/admin/policy', h.admin, {
        action: 'set',
        name: 'fra1',
        spec: { peerAddressRanges: { ipv6: ['fd42:ffff::/32'], ipv4: ['10.0.0.0/8'] } },
      }),
    );
    try {
      const violations = [
        { pointer: '/ipv6', message: "must be inside fd42:ffff::/32 (the policy's peerAddressRanges.ipv6)" },
        { pointer: '/ipv4', message: "must be inside 10.0.0.0/8 (the policy's peerAddressRanges.ipv4)" },
      ];
      expect(await record()).toMatchObject({ ipv4: '172.21.9.9', policyViolations: violations });
      expect(ipv6).toMatch(/^fd42:1234:/);
      // a user's own list carries no such field
      const mine = (await expectOk(h.post('/session', user, { action: 'list' }))).json() as {
        sessions: Record<string, unknown>[];
      };
      expect(mine.sessions[0]).not.toHaveProperty('policyViolations');

      const res = await d.admin('approve', uuid);
      expect(problem(res)).toMatchObject({ status: 409, code: 'INVALID_STATE' });
      expect(problem(res).detail).toMatch(/^approve: session as\d+-fra1 breaks the current policy: \/ipv6: /);
      expect((res.json() as FieldErrors).errors).toMatchObject(violations);
      expect(d.status(uuid)).toBe(3);
      // reject still works on it
      const other = await d.create(d.freshUser(), { ipv6: 'fd42:ffff::77' });
      expect((await record()) !== undefined).toBe(true);
      await expectOk(d.admin('approve', other));
    } finally {
      await expectOk(h.post('/admin/policy', h.admin, { action: 'set', name: 'fra1', spec: {} }));
    }
    await expectOk(d.admin('approve', uuid));
    expect(d.status(uuid)).toBe(4);
  });

  it('refuses enable of a disabled session the policy no longer allows, and flags a blocked ASN', async () => {
    const uuid = await d.inStatus(0);
    const asn = h.store.getSession(uuid)?.spec.asn;
    await expectOk(
      h.post('/admin/policy', h.admin, { action: 'set', name: 'fra1', spec: { blockedAsns: [asn] } }),
    );
    try {
      const res = await d.admin('enable', uuid);
      expect(problem(res)).toMatchObject({ status: 409, code: 'INVALID_STATE' });
      expect((res.json() as FieldErrors).errors).toEqual([
        {
          pointer: '/asn',
          key: 'field.asnBlocked',
          params: { asn, router: 'fra1' },
          message: `AS${asn} is blocked by the policy of router fra1`,
        },
      ]);
      expect(d.status(uuid)).toBe(0);
    } finally {
      await expectOk(h.post('/admin/policy', h.admin, { action: 'set', name: 'fra1', spec: {} }));
    }
    await expectOk(d.admin('enable', uuid));
  });
});

describe('the git store keeps stored sessions a tightened policy no longer allows', () => {
  it('across a restart, while a merge bringing a new one in is refused', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'peerops-kept-'));
    const bare = join(dir, 'store.git');
    const open = async () => {
      const s = createGitStore({ dir: bare, logger: pino({ level: 'silent' }), pollIntervalMs: 100 });
      await s.start();
      return s;
    };
    let store = await open();
    try {
      await store.createRouter('fra1', routerSpec(1), admin);
      const wide = { dn42Asn: ADMIN_ASN, peerAddressRanges: { ipv4: ['0.0.0.0/0'], ipv6: ['::/0'] } };
      await store.putPolicy('default', wide, admin);
      const input = {
        asn: 4242420771,
        router: 'fra1',
        ipv6: '2606:4700:4700::1111',
        ipv4: '8.8.8.8',
        linkLocal: 'fe80::771',
        publicKey: wgKey(),
        mtu: 1420,
      };
      const created = await store.createSession(input, { code: 3, name: 'PENDING_REVIEW' }, admin, 'create');
      // the quick start's policy: DN42's ranges only
      await store.putPolicy('default', { dn42Asn: ADMIN_ASN }, admin);
      await store.close();
      store = await open();
      expect(store.getSession(created.spec.uuid)?.spec).toMatchObject({ ipv4: '8.8.8.8' });
      expect(store.storage.rejectedManifests()).toEqual([]);

      const work = join(dir, 'work');
      await git(dir, 'clone', '-q', bare, work);
      await put(work, 'sessions/fra1/as4242420772.yaml', {
        apiVersion: GROUP_VERSION,
        kind: 'PeeringSession',
        metadata: { name: 'as4242420772-fra1' },
        spec: {
          ...input,
          asn: 4242420772,
          ipv6: '2606:4700:4700::1112',
          ipv4: '8.8.4.4',
          publicKey: wgKey(),
        },
      });
      await git(work, 'add', '.');
      await git(work, 'commit', '-q', '-m', 'Merge pull request #9');
      await git(work, 'push', '-q', 'origin', 'HEAD');
      await eventually(() => store.storage.rejectedManifests().length === 1);
      expect(store.storage.rejectedManifests()).toEqual(['sessions/fra1/as4242420772.yaml']);
      expect(store.getSession(created.spec.uuid)).toBeDefined();
    } finally {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("with a DN42 registry, addresses must be the ASN's by its route objects", () => {
  let r: Harness;
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'peerops-routes-'));
    await writeRegistry(dir, {
      autNums: {},
      mntners: {},
      routes: {
        'fd42:1234::/48': [USER_ASN],
        'fd42:5678::/48': [4242425678],
        '172.20.42.0/24': [USER_ASN],
      },
    });
    r = await startHarness(
      {},
      { registry: new DirectoryRegistry(dir), serviceHost: 'peering.test', admins: [] },
    );
    await r.addRouter('fra1');
    await expectOk(r.post('/admin/policy', r.admin, { action: 'set', spec: { dn42Asn: ADMIN_ASN } }));
  });
  afterAll(async () => {
    await r?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('takes addresses inside its own objects', async () => {
    await expectOk(
      r.post('/session', r.user, sessionFields('fra1', { ipv6: 'fd42:1234::1', ipv4: '172.20.42.1' })),
    );
  });

  it('refuses one outside them, naming the missing object and whose object it is in', async () => {
    const res = await r.post(
      '/session',
      r.tokens.issueToken(USER_ASN + 1, 'user').token,
      sessionFields('fra1', { ipv6: 'fd42:5678::1', ipv4: '172.20.43.1' }),
    );
    expect(problem(res)).toMatchObject({
      status: 400,
      code: 'INVALID_REQUEST',
      detail: `/ipv6: fd42:5678::1 is AS4242425678's: route6 fd42:5678::/48 is the most specific route object covering it`,
    });
    expect((res.json() as FieldErrors).errors).toMatchObject([
      {
        pointer: '/ipv6',
        message: `fd42:5678::1 is AS4242425678's: route6 fd42:5678::/48 is the most specific route object covering it`,
      },
      {
        pointer: '/ipv4',
        message: `no route object in the registry gives 172.20.43.1 to AS${USER_ASN + 1}`,
      },
    ]);
    expect(r.store.listSessions({ asn: USER_ASN + 1 })).toEqual([]);
  });

  it('leaves addresses the policy refuses to the policy rule, which says why', async () => {
    const res = await r.post('/session', r.other, sessionFields('fra1', { ipv6: '::1' }));
    expect((res.json() as FieldErrors).errors).toMatchObject([
      { pointer: '/ipv6', message: 'is the loopback address (::1/128), which no peer can own' },
    ]);
  });

  it('a registry it cannot read is REGISTRY_UNAVAILABLE, nothing stored', async () => {
    await rm(join(dir, 'data'), { recursive: true, force: true });
    const res = await r.post(
      '/session',
      r.other,
      sessionFields('fra1', { publicKey: randomBytes(32).toString('base64') }),
    );
    expect(problem(res)).toMatchObject({ status: 503, code: 'REGISTRY_UNAVAILABLE' });
    expect(r.store.listSessions({ asn: 4242425678 })).toEqual([]);
  });
});

describe('policy prefixes are read one way and stored canonical (issue 24, Build 7)', () => {
  it('the admin policy API refuses leading zeros and host bits with a field error, and stores fd00:0::/8 as fd00::/8', async () => {
    const bad = await h.post('/admin/policy', h.admin, {
      action: 'set',
      name: 'ams1',
      spec: {
        ownPrefixes: { ipv4: ['010.0.0.0/8'] },
        peerAddressRanges: { ipv4: ['172.020.0.0/14', '10.1.0.0/8'], ipv6: ['fd00::/08'] },
      },
    });
    expect(problem(bad)).toMatchObject({ status: 400, code: 'INVALID_REQUEST' });
    expect((bad.json() as FieldErrors).errors).toEqual([
      {
        pointer: '/spec/ownPrefixes/ipv4/0',
        key: 'field.prefixForm.ipv4',
        message:
          'must be an IPv4 prefix such as 172.20.0.0/14: four decimal numbers 0-255 without leading zeros, / and a length 0-32',
      },
      {
        pointer: '/spec/peerAddressRanges/ipv4/0',
        key: 'field.prefixForm.ipv4',
        message:
          'must be an IPv4 prefix such as 172.20.0.0/14: four decimal numbers 0-255 without leading zeros, / and a length 0-32',
      },
      {
        pointer: '/spec/peerAddressRanges/ipv4/1',
        key: 'field.prefixBits',
        params: { length: 8, network: '10.0.0.0/8' },
        message: 'has bits set after /8: the network is 10.0.0.0/8 (or give a longer length)',
      },
      {
        pointer: '/spec/peerAddressRanges/ipv6/0',
        key: 'field.prefixForm.ipv6',
        message:
          'must be an IPv6 prefix such as fd00::/8: an IPv6 address, / and a length 0-128 without leading zeros',
      },
    ]);
    expect(h.store.getPolicy('ams1')?.spec.ownPrefixes).toBeUndefined();

    const spec = { ownPrefixes: { ipv6: ['FD42:4242:0::/48'] }, peerAddressRanges: { ipv6: ['fd00:0::/8'] } };
    const set = await expectOk(h.post('/admin/policy', h.admin, { action: 'set', name: 'ams1', spec }));
    const canonical = {
      ownPrefixes: { ipv6: ['fd42:4242::/48'] },
      peerAddressRanges: { ipv6: ['fd00::/8'] },
    };
    expect(set.json()).toMatchObject({ name: 'ams1', spec: canonical });
    expect(h.store.getPolicy('ams1')?.spec).toMatchObject(canonical);
    const got = await expectOk(h.post('/admin/policy', h.admin, { action: 'get', name: 'ams1' }));
    expect(got.json()).toMatchObject({ spec: canonical });
    await expectOk(h.post('/admin/policy', h.admin, { action: 'set', name: 'ams1', spec: {} }));
  });

  it('a policy merged in git: leading zeros and host bits skip the file, fd00:0::/8 is stored as fd00::/8', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'peerops-prefixes-'));
    const bare = join(dir, 'store.git');
    const work = join(dir, 'work');
    const store = createGitStore({ dir: bare, logger: pino({ level: 'silent' }), pollIntervalMs: 100 });
    try {
      await store.start();
      await store.createRouter('fra1', routerSpec(1), admin);
      await store.putPolicy('default', { dn42Asn: ADMIN_ASN }, admin);
      await git(dir, 'clone', '-q', bare, work);
      const policy = (name: string, spec: Record<string, unknown>) => ({
        apiVersion: GROUP_VERSION,
        kind: 'RoutingPolicy',
        metadata: { name },
        spec,
      });
      await put(work, 'policy/fra1.yaml', policy('fra1', { ownPrefixes: { ipv4: ['010.0.0.0/8'] } }));
      await put(
        work,
        'policy/default.yaml',
        policy('default', { dn42Asn: ADMIN_ASN, peerAddressRanges: { ipv4: ['10.1.0.0/8'] } }),
      );
      await git(work, 'add', '.');
      await git(work, 'commit', '-q', '-m', 'Merge pull request #7: prefixes');
      await git(work, 'push', '-q', 'origin', 'HEAD');
      await eventually(() => store.storage.rejectedManifests().length === 2);
      expect(store.storage.rejectedManifests()).toEqual(['policy/default.yaml', 'policy/fra1.yaml']);
      // the previous default stays in force; no override for fra1 came in
      expect(store.getPolicy('default')?.spec).toEqual({ dn42Asn: ADMIN_ASN, mergeIsApproval: false });
      expect(store.getPolicy('fra1')).toBeUndefined();

      await put(
        work,
        'policy/default.yaml',
        policy('default', { dn42Asn: ADMIN_ASN, peerAddressRanges: { ipv6: ['fd00:0::/8'] } }),
      );
      await git(work, 'commit', '-q', '-am', 'Merge pull request #8: canonical');
      await git(work, 'push', '-q', 'origin', 'HEAD');
      const stored = await eventually(() => store.getPolicy('default')?.spec.peerAddressRanges);
      expect(stored).toEqual({ ipv6: ['fd00::/8'] });
    } finally {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
