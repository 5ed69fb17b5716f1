/**
 * What the admin API refuses of its inputs, and that a refusal stores nothing: router fields that only
 * rotate-token or add set, port ranges and loopbacks; a default policy without dn42Asn, policy patch; purge
 * of a session stuck in QUEUED_FOR_DELETE; router remove naming the sessions that hold it.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ajv } from '../../common/validate.ts';
import {
  ADMIN_ASN,
  driver,
  expectOk,
  problem,
  routerFields,
  sessionFields,
  startHarness,
  type Harness,
} from './helpers.ts';

import type { BirdConfigResponse } from '../../common/agent-api.ts';
import { DN42_REGION_NAMES } from '../../common/schema.ts';
import { parseManifest, renderManifest } from '../../common/manifests.ts';

const exec = promisify(execFile);
const ADMIN_AUTHOR = `admin AS${ADMIN_ASN} <admin-as${ADMIN_ASN}@peerops.invalid>`;

let h: Harness;
let d: ReturnType<typeof driver>;

beforeAll(async () => {
  // no DN42 registry here: auto-approval needs the operator's opt-in (docs/operator-guide.md, 4)
  h = await startHarness({ autoApproveWithoutRegistry: true });
  d = driver(h, 'fra1', await h.addRouter('fra1'));
  await expectOk(h.post('/admin/policy', h.admin, { action: 'set', spec: { dn42Asn: ADMIN_ASN } }));
});
afterAll(async () => h?.close());

async function git(...args: string[]): Promise<string> {
  return (await exec('git', ['--git-dir', join(h.dir, 'store.git'), ...args])).stdout.trim();
}
/** The store's head commit: unchanged after a refusal. */
const head = () => git('rev-parse', 'main');
/** Author and message of the store's newest commit: the audit log. */
/** The newest commit on `ref` (a status change commits to peerops-status, docs/store.md). */
const lastCommit = (ref = 'main') => git('log', '-1', '--format=%an <%ae>%n%B', ref);

/** The field errors of a problem answer as `pointer: message`. */
function fieldErrors(res: { json(): unknown }): string[] {
  const body = res.json() as { errors?: { pointer: string; message: string }[] };
  return (body.errors ?? []).map((e) => `${e.pointer}: ${e.message}`);
}

/** Posts `body`, expects the problem, and that the store and the router list did not change. */
async function refused(
  url: string,
  body: unknown,
  expected: { status: number; code: string },
): Promise<{ detail: string; errors: string[] }> {
  const before = { head: await head(), routers: JSON.stringify(h.store.listRouters()) };
  const res = await h.post(url, h.admin, body);
  expect(problem(res), res.body).toMatchObject(expected);
  expect(await head()).toBe(before.head);
  expect(JSON.stringify(h.store.listRouters())).toBe(before.routers);
  return { detail: problem(res).detail, errors: fieldErrors(res) };
}

describe('router update: fields only add and rotate-token set', () => {
  it('refuses agentTokenSha256 (INVALID_REQUEST /spec/agentTokenSha256); the token keeps working', async () => {
    const token = await h.addRouter('tok1');
    const hash = h.store.getAgentTokenHash('tok1');
    const other = h.store.getAgentTokenHash('fra1') as string;
    for (const planted of ['a'.repeat(64), other]) {
      const { errors } = await refused(
        '/admin/router',
        { action: 'update', name: 'tok1', spec: { agentTokenSha256: planted } },
        { status: 400, code: 'INVALID_REQUEST' },
      );
      expect(errors).toEqual([
        '/spec/agentTokenSha256: is set only by rotate-token, which answers the new agent token once',
      ]);
    }
    expect(h.store.getAgentTokenHash('tok1')).toBe(hash);
    expect((await h.get('/agent/tok1/sessions', token)).statusCode).toBe(200);
  });
  it('refuses uuid (INVALID_REQUEST /spec/uuid), also beside fields it would accept', async () => {
    const uuid = h.store.getRouter('tok1')?.spec.uuid;
    const { detail, errors } = await refused(
      '/admin/router',
      {
        action: 'update',
        name: 'tok1',
        spec: { uuid: '6f7b3f2a-1111-4222-8333-444455556666', maxSessions: 3 },
      },
      { status: 400, code: 'INVALID_REQUEST' },
    );
    expect(detail).toMatch(/^update \/spec\/uuid: cannot change/);
    expect(errors).toHaveLength(1);
    expect(h.store.getRouter('tok1')?.spec).toMatchObject({ uuid });
    expect(h.store.getRouter('tok1')?.spec.maxSessions).toBeUndefined();
    // both at once: both named
    const both = await refused(
      '/admin/router',
      { action: 'update', name: 'tok1', spec: { uuid, agentTokenSha256: 'b'.repeat(64) } },
      { status: 400, code: 'INVALID_REQUEST' },
    );
    expect(both.errors.map((e) => e.split(':')[0])).toEqual(['/spec/uuid', '/spec/agentTokenSha256']);
  });
  it('refuses any other unknown field of spec with its pointer', async () => {
    const { errors } = await refused(
      '/admin/router',
      { action: 'update', name: 'tok1', spec: { postUp: 'rm -rf /' } },
      { status: 400, code: 'INVALID_REQUEST' },
    );
    expect(errors).toEqual(['/spec/postUp: is not a known field']);
  });
});

describe('router update: null clears an optional field (a merge patch one level deep)', () => {
  it('clears location, provider, dn42Region, maxSessions, portRange; the defaults come back', async () => {
    await h.addRouter('clr1');
    await expectOk(
      h.post('/admin/router', h.admin, {
        action: 'update',
        name: 'clr1',
        spec: {
          location: 'Frankfurt',
          provider: 'Hetzner',
          dn42Region: 'eu',
          maxSessions: 10,
          portRange: { min: 40000, max: 40100 },
          autoApprove: true,
        },
      }),
    );
    const res = await expectOk(
      h.post('/admin/router', h.admin, {
        action: 'update',
        name: 'clr1',
        spec: {
          location: null,
          provider: null,
          dn42Region: null,
          maxSessions: null,
          portRange: null,
          autoApprove: null,
          displayName: 'Cleared',
        },
      }),
    );
    const spec = h.store.getRouter('clr1')?.spec;
    for (const field of ['location', 'provider', 'dn42Region', 'maxSessions'])
      expect(spec, field).not.toHaveProperty(field);
    expect(spec).toMatchObject({
      displayName: 'Cleared',
      portRange: { min: 30000, max: 32767 },
      autoApprove: false,
    });
    expect((res.json() as { router: { spec: object } }).router.spec).not.toHaveProperty('location');
  });

  it('refuses null on a field every router has, naming it; nothing changes', async () => {
    const { errors } = await refused(
      '/admin/router',
      { action: 'update', name: 'clr1', spec: { endpointHost: null, loopback: null, location: null } },
      { status: 400, code: 'INVALID_REQUEST' },
    );
    expect(errors).toEqual([
      '/spec/endpointHost: cannot be cleared: every router has one; give a new value instead',
      '/spec/loopback: cannot be cleared: every router has one; give a new value instead',
    ]);
  });
});

describe('router dn42Region: a DN42 region by name (docs/operator-guide.md, 4)', () => {
  it('add and update refuse an unknown name or a number with a field error; nothing stored', async () => {
    const add = await refused(
      '/admin/router',
      { action: 'add', ...routerFields('reg1', { dn42Region: 'mars' }) },
      { status: 400, code: 'INVALID_REQUEST' },
    );
    expect(add.errors).toEqual([`/dn42Region: must be one of ${DN42_REGION_NAMES.join(', ')}`]);
    expect(h.store.getRouter('reg1')).toBeUndefined();
    await h.addRouter('reg1');
    for (const dn42Region of ['Europe', 42]) {
      const update = await refused(
        '/admin/router',
        { action: 'update', name: 'reg1', spec: { dn42Region } },
        { status: 400, code: 'INVALID_REQUEST' },
      );
      expect(new Set(update.errors.map((e) => e.split(':')[0]))).toEqual(new Set(['/spec/dn42Region']));
    }
    expect(h.store.getRouter('reg1')?.spec.dn42Region).toBeUndefined();
  });
  it('a name is stored and the agent gets its community number', async () => {
    const token = await h.addRouter('reg2', { dn42Region: 'asia-east' });
    expect(h.store.getRouter('reg2')?.spec.dn42Region).toBe('asia-east');
    const bird = async () =>
      ((await expectOk(h.get('/agent/reg2/bird-config', token))).json() as BirdConfigResponse).communities
        .region;
    expect(await bird()).toBe(52);
    await expectOk(
      h.post('/admin/router', h.admin, { action: 'update', name: 'reg2', spec: { dn42Region: 'na-west' } }),
    );
    expect(await bird()).toBe(44);
  });
  it('a manifest stored with the number of a named region loads with the name', () => {
    const { name: _name, ...spec } = routerFields('leg1');
    const manifest = (dn42Region: number) =>
      parseManifest(
        'routers/leg1.yaml',
        renderManifest('Router', 'leg1', { ...spec, uuid: randomUUID(), dn42Region }),
      );
    expect(manifest(41)).toMatchObject({ ok: true, manifest: { spec: { dn42Region: 'eu' } } });
    expect(manifest(57)).toMatchObject({ ok: true, manifest: { spec: { dn42Region: 'central-asia' } } });
    // 58..70 were never assigned a region: refused with the field, as any invalid manifest
    const unassigned = manifest(60);
    expect(unassigned.ok).toBe(false);
    if (!unassigned.ok)
      expect(new Set(unassigned.errors.map((e) => e.pointer))).toEqual(new Set(['/spec/dn42Region']));
  });
});

describe('router port ranges and loopbacks', () => {
  it('add refuses a port range with min > max, or over the mesh ports (INVALID_REQUEST, nothing stored)', async () => {
    const a = await refused(
      '/admin/router',
      { action: 'add', ...routerFields('pr1', { portRange: { min: 40000, max: 30000 } }) },
      { status: 400, code: 'INVALID_REQUEST' },
    );
    expect(a.errors).toEqual(['/portRange/min: must be at most max (30000)']);
    const b = await refused(
      '/admin/router',
      { action: 'add', ...routerFields('pr1', { portRange: { min: 32000, max: 33500 } }) },
      { status: 400, code: 'INVALID_REQUEST' },
    );
    expect(b.errors).toEqual(['/portRange: must stay clear of the mesh ports 33001-37095']);
    expect(h.store.getRouter('pr1')).toBeUndefined();
    // one port is a range; above the mesh ports is fine
    await expectOk(
      h.post('/admin/router', h.admin, {
        action: 'add',
        ...routerFields('pr1', { portRange: { min: 40000, max: 40000 } }),
      }),
    );
  });
  it("add refuses another router's loopback, per family and across families (CONFLICT, nothing stored)", async () => {
    const fra1 = h.store.getRouter('fra1')?.spec.loopback as { ipv4: string; ipv6: string };
    const same = await refused(
      '/admin/router',
      { action: 'add', ...routerFields('lo1', { loopback: { ipv6: fra1.ipv6 } }) },
      { status: 409, code: 'CONFLICT' },
    );
    expect(same.errors).toEqual([`/loopback/ipv6: ${fra1.ipv6} is already the loopback of router fra1`]);
    const both = await refused(
      '/admin/router',
      { action: 'add', ...routerFields('lo1', { loopback: fra1 }) },
      { status: 409, code: 'CONFLICT' },
    );
    expect(both.errors.map((e) => e.split(':')[0])).toEqual(['/loopback/ipv4', '/loopback/ipv6']);
    expect(h.store.getRouter('lo1')).toBeUndefined();
  });
  it('update refuses the same, with pointers into its spec; the router keeps its fields', async () => {
    await h.addRouter('up1');
    const before = h.store.getRouter('up1')?.spec;
    const range = await refused(
      '/admin/router',
      { action: 'update', name: 'up1', spec: { portRange: { min: 2000, max: 1999 } } },
      { status: 400, code: 'INVALID_REQUEST' },
    );
    expect(range.errors).toEqual(['/spec/portRange/min: must be at most max (1999)']);
    const fra1 = h.store.getRouter('fra1')?.spec.loopback;
    const loop = await refused(
      '/admin/router',
      { action: 'update', name: 'up1', spec: { loopback: { ipv4: fra1?.ipv4 } } },
      { status: 409, code: 'CONFLICT' },
    );
    expect(loop.errors).toEqual([
      `/spec/loopback/ipv4: ${fra1?.ipv4} is already the loopback of router fra1`,
    ]);
    expect(h.store.getRouter('up1')?.spec).toEqual(before);
    // its own loopback again is no conflict
    await expectOk(
      h.post('/admin/router', h.admin, {
        action: 'update',
        name: 'up1',
        spec: { loopback: before?.loopback },
      }),
    );
  });
});

describe('router remove names what holds it', () => {
  it('INVALID_STATE with the count, the first three sessions with uuid and status, and what to do', async () => {
    await h.addRouter('busy1');
    const token = await h.addRouter('busy2');
    const b = driver(h, 'busy2', token);
    const uuids = [await b.inStatus(3), await b.inStatus(1), await b.inStatus(5), await b.inStatus(5)];
    const { detail } = await refused(
      '/admin/router',
      { action: 'remove', name: 'busy2' },
      { status: 409, code: 'INVALID_STATE' },
    );
    const sessions = h.store.listSessions({ router: 'busy2' }).sort((x, y) => x.name.localeCompare(y.name));
    const named = sessions.slice(0, 3).map((s) => `${s.name} ${s.spec.uuid} (${s.status.name})`);
    expect(detail).toBe(
      `router busy2 still has 4 sessions: ${named.join(', ')}, …. Delete the 2 not yet deleted ` +
        'first (peerops session delete UUID, or admin session reject in PENDING_REVIEW); the 2 in ' +
        "QUEUED_FOR_DELETE wait for the router's agent to tear them down: if it will not, purge them " +
        '(peerops admin session purge UUID --reason TEXT)',
    );
    expect(uuids.every((u) => h.store.getSession(u))).toBe(true);
    // one session, none stuck: no purge advice
    const one = driver(h, 'busy1', '');
    await one.create();
    const single = await refused(
      '/admin/router',
      { action: 'remove', name: 'busy1' },
      { status: 409, code: 'INVALID_STATE' },
    );
    expect(single.detail).toMatch(
      /^router busy1 still has 1 session: as\d+-busy1 \S+ \(PENDING_REVIEW\)\. Delete it first \(/,
    );
    expect(single.detail).not.toContain('purge');
  });
});

describe('admin session purge', () => {
  it('5 purge → 8 PURGED with the reason, committed with the admin as author; then the ASN may create again', async () => {
    const uuid = await d.inStatus(5);
    const session = h.store.getSession(uuid);
    const owner = d.ownerToken(uuid);
    const res = await expectOk(
      h.post('/admin/session', h.admin, { action: 'purge', uuid, reason: 'fra1 was reinstalled' }),
    );
    expect(res.json()).toMatchObject({
      uuid,
      status: 8,
      statusName: 'PURGED',
      decision: { action: 'purge', reason: 'fra1 was reinstalled', by: `admin AS${ADMIN_ASN}` },
    });
    const commit = await lastCommit('peerops-status');
    expect(commit).toContain(ADMIN_AUTHOR);
    expect(commit).toContain(
      `purge session ${session?.name} (QUEUED_FOR_DELETE, not torn down by router fra1): fra1 was reinstalled`,
    );
    // no longer SESSION_EXISTS: the new session replaces the PURGED record (docs/api.md, Decisions)
    const again = (await expectOk(h.post('/session', owner, sessionFields('fra1')))).json().uuid as string;
    expect(h.store.getSession(uuid)).toBeUndefined();
    expect(h.store.getSession(again)?.status.code).toBe(3);
  });
  it('refuses every other status with INVALID_STATE, and changes nothing', async () => {
    for (const status of [0, 1, 2, 3, 4, 6]) {
      const uuid = await d.inStatus(status);
      const before = JSON.stringify(h.store.getSession(uuid));
      const commit = await head();
      const res = await h.post('/admin/session', h.admin, { action: 'purge', uuid, reason: 'stuck' });
      expect(problem(res), `status ${status}`).toMatchObject({ status: 409, code: 'INVALID_STATE' });
      expect(problem(res).detail).toContain(`purge is not allowed for a session in status ${status}`);
      expect(JSON.stringify(h.store.getSession(uuid))).toBe(before);
      expect(await head()).toBe(commit);
    }
  });
  it('needs a reason of one printable line; a user token and /session cannot purge', async () => {
    const uuid = await d.inStatus(5);
    const commit = await head();
    for (const body of [
      { action: 'purge', uuid },
      { action: 'purge', uuid, reason: '' },
      { action: 'purge', uuid, reason: 'line one\nline two' },
      { action: 'purge', uuid, reason: 'x'.repeat(501) },
    ]) {
      const res = await h.post('/admin/session', h.admin, body);
      expect(problem(res), JSON.stringify(body)).toMatchObject({ status: 400, code: 'INVALID_REQUEST' });
      expect(fieldErrors(res)[0]).toMatch(/^\/reason: /);
    }
    expect(
      problem(await h.post('/admin/session', d.ownerToken(uuid), { action: 'purge', uuid, reason: 'x' })),
    ).toMatchObject({ status: 403, code: 'FORBIDDEN' });
    expect(problem(await h.post('/session', h.admin, { action: 'purge', uuid }))).toMatchObject({
      code: 'INVALID_ACTION',
    });
    expect(d.status(uuid)).toBe(5);
    expect(await head()).toBe(commit);
    expect(
      problem(
        await h.post('/admin/session', h.admin, {
          action: 'purge',
          uuid: '6f7b3f2a-1111-4222-8333-444455556666',
          reason: 'x',
        }),
      ),
    ).toMatchObject({ code: 'SESSION_NOT_FOUND' });
  });
  it('a router whose last session is purged can be removed', async () => {
    const token = await h.addRouter('gone1');
    const g = driver(h, 'gone1', token);
    const uuid = await g.inStatus(5);
    await expectOk(
      h.post('/admin/session', h.admin, { action: 'purge', uuid, reason: 'host decommissioned' }),
    );
    await expectOk(h.post('/admin/router', h.admin, { action: 'remove', name: 'gone1' }));
    expect(h.store.getRouter('gone1')).toBeUndefined();
  });
});

describe('admin policy', () => {
  it('set refuses a default policy without dn42Asn (INVALID_REQUEST /spec/dn42Asn), nothing stored', async () => {
    const stored = h.store.getPolicy('default')?.spec;
    for (const spec of [{}, { rpkiServers: [{ host: 'rpki.example.net', port: 8282 }] }]) {
      const { errors } = await refused(
        '/admin/policy',
        { action: 'set', spec },
        { status: 400, code: 'INVALID_REQUEST' },
      );
      expect(errors).toEqual([
        "/spec/dn42Asn: the default policy must set dn42Asn (the network's own ASN): agents build their BIRD config with it",
      ]);
    }
    expect(h.store.getPolicy('default')?.spec).toEqual(stored);
    // a router's override adds to the default: it needs no dn42Asn of its own
    await expectOk(h.post('/admin/policy', h.admin, { action: 'set', name: 'fra1', spec: {} }));
  });
  it('patch merges into the stored policy (RFC 7386): fields replace, objects merge, arrays replace, null removes', async () => {
    await expectOk(
      h.post('/admin/policy', h.admin, {
        action: 'set',
        spec: {
          dn42Asn: ADMIN_ASN,
          rpkiServers: [{ host: 'rpki.example.net', port: 8282 }],
          blockedAsns: [64512, 64513],
          communities: { enabled: true, bandwidth: 24 },
          maxPendingPerAsn: 3,
        },
      }),
    );
    const res = await expectOk(
      h.post('/admin/policy', h.admin, {
        action: 'patch',
        spec: {
          blockedAsns: [64514],
          communities: { bandwidth: null, crypto: 33 },
          maxPendingPerAsn: null,
          importLimit: { ipv6: 2000 },
        },
      }),
    );
    const expected = {
      dn42Asn: ADMIN_ASN,
      rpkiServers: [{ host: 'rpki.example.net', port: 8282 }],
      blockedAsns: [64514],
      communities: { enabled: true, crypto: 33 },
      importLimit: { ipv6: 2000 },
      mergeIsApproval: false,
    };
    expect(res.json()).toEqual({ name: 'default', spec: expected });
    expect(h.store.getPolicy('default')?.spec).toEqual(expected);
    expect(await lastCommit()).toContain(ADMIN_AUTHOR);
  });
  it('patch refuses removing dn42Asn from the default, a bad field and an unknown one; nothing stored', async () => {
    const stored = h.store.getPolicy('default')?.spec;
    const drop = await refused(
      '/admin/policy',
      { action: 'patch', spec: { dn42Asn: null } },
      { status: 400, code: 'INVALID_REQUEST' },
    );
    expect(drop.errors[0]).toMatch(/^\/spec\/dn42Asn: the default policy must set dn42Asn/);
    const bad = await refused(
      '/admin/policy',
      { action: 'patch', spec: { maxPendingPerAsn: -1, communities: { bogus: true } } },
      { status: 400, code: 'INVALID_REQUEST' },
    );
    expect(bad.errors.map((e) => e.split(':')[0])).toEqual(
      expect.arrayContaining(['/spec/maxPendingPerAsn', '/spec/communities/bogus']),
    );
    await refused(
      '/admin/policy',
      { action: 'patch', spec: { blockedAsns: null, nope: 1 } },
      { status: 400, code: 'INVALID_REQUEST' },
    );
    expect(h.store.getPolicy('default')?.spec).toEqual(stored);
    await refused(
      '/admin/policy',
      { action: 'patch', name: 'ghost', spec: { maxPendingPerAsn: 1 } },
      { status: 404, code: 'ROUTER_NOT_FOUND' },
    );
  });
  it("patch of a router's override starts from what it holds (nothing: an empty one)", async () => {
    await h.addRouter('ovr1');
    const res = await expectOk(
      h.post('/admin/policy', h.admin, { action: 'patch', name: 'ovr1', spec: { maxPendingPerAsn: 1 } }),
    );
    expect(res.json()).toEqual({ name: 'ovr1', spec: { maxPendingPerAsn: 1, mergeIsApproval: false } });
    const again = await expectOk(
      h.post('/admin/policy', h.admin, { action: 'patch', name: 'ovr1', spec: { maxPendingPerAsn: null } }),
    );
    expect(again.json()).toEqual({ name: 'ovr1', spec: { mergeIsApproval: false } });
  });
  it('patches sent at once all land: none is lost to another read before it', async () => {
    await h.addRouter('par1');
    // each names a different field: a patch that read the policy before another was written would drop it
    const patches = [
      { maxPendingPerAsn: 7 },
      { blockedAsns: [64999] },
      { rpkiServers: [] },
      { importLimit: { ipv6: 9 } },
    ];
    await Promise.all(
      patches.map((spec) =>
        expectOk(h.post('/admin/policy', h.admin, { action: 'patch', name: 'par1', spec })),
      ),
    );
    expect(h.store.getPolicy('par1')?.spec).toMatchObject(Object.assign({}, ...patches));
  });
  it('the answer of get is valid set input, and set then get gives back what was set', async () => {
    for (const name of ['default', 'ovr1']) {
      const got = await expectOk(h.post('/admin/policy', h.admin, { action: 'get', name }));
      const record = got.json() as { name: string; spec: Record<string, unknown> };
      const set = await expectOk(h.post('/admin/policy', h.admin, { action: 'set', ...record }));
      expect(set.json()).toEqual(got.json());
      expect((await expectOk(h.post('/admin/policy', h.admin, { action: 'get', name }))).json()).toEqual(
        got.json(),
      );
    }
    const spec = { dn42Asn: ADMIN_ASN, blockedAsns: [64512], communities: { enabled: false } };
    const set = await expectOk(h.post('/admin/policy', h.admin, { action: 'set', spec }));
    const got = await expectOk(h.post('/admin/policy', h.admin, { action: 'get' }));
    expect(got.json()).toEqual(set.json());
    expect(got.json().spec).toEqual({ ...spec, mergeIsApproval: false });
  });
});

describe('openapi.json', () => {
  it('documents purge and patch, their bodies and answers', async () => {
    const doc = (await expectOk(h.get('/openapi.json'))).json();
    // each action's body is a named schema (`<operationId>-<action>`) the discriminator maps to
    const body = (path: string, action: string) => {
      const ref =
        doc.paths[path].post.requestBody.content['application/json'].schema.discriminator.mapping[action];
      return doc.components.schemas[ref.split('/').pop()];
    };
    const purge = body('/admin/session', 'purge');
    expect(purge.required).toEqual(expect.arrayContaining(['uuid', 'reason']));
    expect(ajv.validate(purge, { action: 'purge', uuid: '6f7b3f2a-1111-4222-8333-444455556666' })).toBe(
      false,
    );
    const patch = body('/admin/policy', 'patch');
    expect(patch.description).toMatch(/RFC 7386/);
    expect(
      ajv.validate(patch, { action: 'patch', spec: { dn42Asn: null, communities: { crypto: 33 } } }),
    ).toBe(true);
    expect(body('/admin/policy', 'set').description).toMatch(/Replaces the whole policy/);
    const update = body('/admin/router', 'update');
    expect(ajv.validate(update, { action: 'update', name: 'fra1', spec: { uuid: 'x' } })).toBe(false);
    const answer = doc.paths['/admin/policy'].post.responses['200'].content['application/json'].schema;
    const res = await expectOk(h.post('/admin/policy', h.admin, { action: 'patch', spec: {} }));
    expect(ajv.validate(answer, res.json()), ajv.errorsText()).toBe(true);
  });
});
