/** Every transition of docs/architecture.md (the life of a session), driven through the user, admin and agent APIs on the git store. */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_ASN,
  driver,
  expectOk,
  problem,
  sessionFields,
  startHarness,
  type Harness,
} from './helpers.ts';

const exec = promisify(execFile);
const ADMIN_AUTHOR = `admin AS${ADMIN_ASN} <admin-as${ADMIN_ASN}@peerops.invalid>`;

/**
 * Author and message of the store's newest commit on `ref` (a status change commits to peerops-status):
 * the audit log of docs/store.md.
 */
async function lastCommit(ref = 'main'): Promise<string> {
  const git = ['--git-dir', join(h.dir, 'store.git'), 'log', '-1', '--format=%an <%ae>%n%B', ref];
  return (await exec('git', git)).stdout;
}

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

describe('user create', () => {
  it('— → 3 PENDING_REVIEW with the router data of docs/api.md (create)', async () => {
    const res = await h.post('/session', d.freshUser(), {
      action: 'create',
      router: h.store.getRouter('fra1')?.spec.uuid,
      ipv6: 'fd42:1234::1',
      linkLocal: 'fe80::1234',
      endpoint: 'peer.example.org:51820',
      publicKey: 'mHQAvg2DG5ndhWXJPCN6xvUbZGgs1jpT5vK82V9HZ3c=',
      mtu: 1420,
    });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ status: 3, statusName: 'PENDING_REVIEW', serverLinkLocal: 'fe80::1' });
    expect(body.serverEndpoint).toMatch(/^fra1\.example\.net:2\d{4}$/);
    expect(body.serverPublicKey).toBe(h.store.getRouter('fra1')?.spec.publicKey);
  });
  it('— → 4 when the router auto-approves', async () => {
    const uuid = await auto.create();
    expect(auto.status(uuid)).toBe(4);
  });
});

describe('admin review', () => {
  it('3 approve → 4', async () => {
    const uuid = await d.inStatus(3);
    const res = await expectOk(d.admin('approve', uuid, 'looks fine'));
    expect(res.json()).toMatchObject({ status: 4, statusName: 'QUEUED_FOR_SETUP' });
  });
  it('3 reject → 7 REJECTED with the decision, committed with the admin as author and the reason', async () => {
    const uuid = await d.inStatus(3);
    const name = h.store.getSession(uuid)?.name;
    const res = await expectOk(d.admin('reject', uuid, 'unknown ASN'));
    expect(res.json()).toMatchObject({
      uuid,
      status: 7,
      statusName: 'REJECTED',
      decision: { action: 'reject', reason: 'unknown ASN', by: `admin AS${ADMIN_ASN}` },
    });
    expect(d.status(uuid)).toBe(7);
    const commit = await lastCommit('peerops-status');
    expect(commit).toContain(ADMIN_AUTHOR);
    expect(commit).toContain(`reject session ${name}: unknown ASN`);
    expect(commit).toContain('Peerops-Role: admin');
  });
  for (const from of [1, 2, 4, 6])
    it(`${from} disable → 0`, async () => {
      const uuid = await d.inStatus(from);
      await expectOk(d.admin('disable', uuid));
      expect(d.status(uuid)).toBe(0);
    });
  it('0 enable → 4', async () => {
    const uuid = await d.inStatus(0);
    await expectOk(d.admin('enable', uuid));
    expect(d.status(uuid)).toBe(4);
  });
  it('the admin session actions answer under /api/v1 with the same effect', async () => {
    const admin = (action: string, uuid: string) =>
      h.post('/api/v1/admin/session', h.admin, { action, uuid, reason: 'via v1' });
    const uuid = await d.inStatus(3);
    const listed = await expectOk(h.post('/api/v1/admin/session', h.admin, { action: 'list' }));
    expect(listed.json().sessions.map((s: { uuid: string }) => s.uuid)).toContain(uuid);
    expect((await expectOk(admin('approve', uuid))).json()).toMatchObject({ uuid, status: 4 });
    expect(d.status(uuid)).toBe(4);
    await expectOk(admin('disable', uuid));
    expect(d.status(uuid)).toBe(0);
    await expectOk(admin('enable', uuid));
    expect(d.status(uuid)).toBe(4);
    const rejected = await d.inStatus(3);
    expect((await expectOk(admin('reject', rejected))).json()).toMatchObject({ uuid: rejected, status: 7 });
    expect(d.status(rejected)).toBe(7);
  });
  it('refuses approve outside status 3 with INVALID_STATE and changes nothing', async () => {
    const uuid = await d.inStatus(1);
    const res = await d.admin('approve', uuid);
    expect(problem(res)).toMatchObject({ status: 409, code: 'INVALID_STATE' });
    expect(d.status(uuid)).toBe(1);
  });
});

describe('agent reports', () => {
  it('4 → 1 ACTIVE', async () => {
    const uuid = await d.inStatus(4);
    const res = await expectOk(d.report(uuid, 1));
    expect(res.json()).toMatchObject({ ok: true, status: 1, statusName: 'ACTIVE', removed: false });
    expect(h.store.getSession(uuid)?.status.interface).toMatch(/^wg_\d+$/);
  });
  it('4 → 6 SETUP_FAILED with lastError', async () => {
    const uuid = await d.inStatus(4);
    await expectOk(d.report(uuid, 6, 'bird: syntax error'));
    expect(h.store.getSession(uuid)?.status).toMatchObject({
      code: 6,
      lastError: { code: 'SETUP_FAILED', message: 'bird: syntax error' },
    });
  });
  it('6 → 6 and 6 → 1 (retry succeeds, error cleared)', async () => {
    const uuid = await d.inStatus(6);
    await expectOk(d.report(uuid, 6, 'again'));
    expect(h.store.getSession(uuid)?.status.lastError?.message).toBe('again');
    await expectOk(d.report(uuid, 1));
    expect(h.store.getSession(uuid)?.status.code).toBe(1);
    expect(h.store.getSession(uuid)?.status.lastError).toBeUndefined();
  });
  it('1 ↔ 2', async () => {
    const uuid = await d.inStatus(1);
    await expectOk(d.report(uuid, 2, 'no handshake for 5 min'));
    expect(d.status(uuid)).toBe(2);
    await expectOk(d.report(uuid, 1));
    expect(d.status(uuid)).toBe(1);
  });
  it('5 → reported 0 → removed', async () => {
    const uuid = await d.inStatus(5);
    const res = await expectOk(d.report(uuid, 0));
    expect(res.json()).toMatchObject({ removed: true });
    expect(h.store.getSession(uuid)).toBeUndefined();
  });
  it('any other report is 409 INVALID_STATE and changes nothing', async () => {
    const uuid = await d.inStatus(3);
    expect(problem(await d.report(uuid, 1))).toMatchObject({ status: 409, code: 'INVALID_STATE' });
    const active = await d.inStatus(1);
    expect(problem(await d.report(active, 0))).toMatchObject({ code: 'INVALID_STATE' });
    expect(d.status(uuid)).toBe(3);
    expect(d.status(active)).toBe(1);
  });
});

describe('user modify, restart, delete', () => {
  for (const from of [1, 2, 6])
    it(`${from} modify → 4 with the new endpoint and mtu`, async () => {
      const uuid = await d.inStatus(from);
      const res = await expectOk(d.user('modify', uuid, { endpoint: '[2a01:4f8::1]:51821', mtu: 1400 }));
      expect(res.json()).toMatchObject({ status: 4, endpoint: '[2a01:4f8::1]:51821', mtu: 1400 });
    });
  for (const from of [3, 4, 0])
    it(`${from} modify → unchanged status, data updated`, async () => {
      const uuid = await d.inStatus(from);
      const res = await expectOk(d.user('modify', uuid, { mtu: 1380 }));
      expect(res.json()).toMatchObject({ status: from, mtu: 1380 });
    });
  it('modify keeps what it is not given: an endpoint change leaves the mtu, an mtu change the endpoint', async () => {
    const uuid = await d.inStatus(3);
    await expectOk(d.user('modify', uuid, { mtu: 1400 }));
    const res = await expectOk(d.user('modify', uuid, { endpoint: '[2a01:4f8::7]:51820' }));
    expect(res.json()).toMatchObject({ mtu: 1400, endpoint: '[2a01:4f8::7]:51820' });
    const again = await expectOk(d.user('modify', uuid, { mtu: 1380 }));
    expect(again.json()).toMatchObject({ mtu: 1380, endpoint: '[2a01:4f8::7]:51820' });
  });
  it('a modify that changes nothing writes nothing and leaves ACTIVE as it is; an empty one is refused', async () => {
    const uuid = await d.inStatus(1);
    const { spec } = h.store.getSession(uuid) ?? {};
    const head = () =>
      exec('git', [`--git-dir=${join(h.dir, 'store.git')}`, 'rev-parse', 'main']).then((r) => r.stdout);
    const before = await head();
    const same = await expectOk(d.user('modify', uuid, { endpoint: spec?.endpoint, mtu: spec?.mtu }));
    expect(same.json()).toMatchObject({ status: 1, statusName: 'ACTIVE' });
    expect(await head()).toBe(before);
    expect(problem(await d.user('modify', uuid))).toMatchObject({ status: 400, code: 'INVALID_REQUEST' });
    expect(d.status(uuid)).toBe(1);
    // the status rule still comes first: unchanged values in status 5 are refused as any modify there
    const deleting = await d.inStatus(5);
    const s5 = h.store.getSession(deleting)?.spec;
    expect(problem(await d.user('modify', deleting, { mtu: s5?.mtu }))).toMatchObject({
      code: 'INVALID_STATE',
    });
  });
  it('a session uuid in upper case names the same session', async () => {
    const uuid = await d.inStatus(1);
    const res = await expectOk(d.user('restart', uuid.toUpperCase(), {}, d.ownerToken(uuid)));
    expect(res.json()).toMatchObject({ uuid, status: 4 });
  });
  it('modify with endpoint null drops the endpoint (peer behind NAT)', async () => {
    const uuid = await d.inStatus(3);
    const res = await expectOk(d.user('modify', uuid, { endpoint: null }));
    expect(res.json().endpoint).toBeNull();
  });
  for (const from of [1, 2, 6])
    it(`${from} restart → 4 with restartGeneration + 1`, async () => {
      const uuid = await d.inStatus(from);
      const before = h.store.getSession(uuid)?.spec.restartGeneration ?? 0;
      const res = await expectOk(d.user('restart', uuid));
      expect(res.json()).toMatchObject({ status: 4 });
      expect(h.store.getSession(uuid)?.spec.restartGeneration).toBe(before + 1);
    });
  for (const from of [3, 4, 0, 5])
    it(`${from} restart → INVALID_STATE`, async () => {
      const uuid = await d.inStatus(from);
      expect(problem(await d.user('restart', uuid))).toMatchObject({ status: 409, code: 'INVALID_STATE' });
      expect(d.status(uuid)).toBe(from);
    });
  for (const from of [0, 1, 2, 4, 6])
    it(`${from} delete → 5 QUEUED_FOR_DELETE`, async () => {
      const uuid = await d.inStatus(from);
      const res = await expectOk(d.user('delete', uuid));
      expect(res.json()).toMatchObject({ status: 5, statusName: 'QUEUED_FOR_DELETE' });
    });
  it('3 delete → removed at once', async () => {
    const uuid = await d.inStatus(3);
    const res = await expectOk(d.user('delete', uuid));
    expect(res.json()).toEqual({ uuid, deleted: true });
    expect(h.store.getSession(uuid)).toBeUndefined();
  });
  it("admins may modify, restart and delete another ASN's session through /session", async () => {
    const uuid = await d.inStatus(1);
    const modified = await expectOk(
      d.user('modify', uuid, { endpoint: 'admin-set.example.org:51999', mtu: 1380 }, h.admin),
    );
    expect(modified.json()).toMatchObject({ status: 4, endpoint: 'admin-set.example.org:51999', mtu: 1380 });
    await expectOk(d.report(uuid, 1));
    await expectOk(d.user('restart', uuid, {}, h.admin));
    expect(d.status(uuid)).toBe(4);
    await expectOk(d.user('delete', uuid, {}, h.admin));
    expect(d.status(uuid)).toBe(5);
  });
  for (const from of [1, 2, 6])
    it(`an admin's modify: ${from} → 4 with the new endpoint and mtu, committed as the admin`, async () => {
      const uuid = await d.inStatus(from);
      const change = { endpoint: `admin-${from}.example.org:51999`, mtu: 1380 };
      const res = await expectOk(d.user('modify', uuid, change, h.admin));
      expect(res.json()).toMatchObject({ uuid, status: 4, statusName: 'QUEUED_FOR_SETUP', ...change });
      expect(h.store.getSession(uuid)?.spec).toMatchObject(change);
      const commit = await lastCommit();
      expect(commit).toContain(ADMIN_AUTHOR);
      expect(commit).toContain(`modify session ${h.store.getSession(uuid)?.name}`);
    });
  for (const from of [3, 4, 0])
    it(`an admin's modify: ${from} → unchanged status, data updated`, async () => {
      const uuid = await d.inStatus(from);
      const res = await expectOk(d.user('modify', uuid, { mtu: 1390 }, h.admin));
      expect(res.json()).toMatchObject({ uuid, status: from, mtu: 1390 });
      expect(h.store.getSession(uuid)?.spec.mtu).toBe(1390);
      expect(d.status(uuid)).toBe(from);
    });
  for (const from of [1, 2, 6])
    it(`an admin's restart: ${from} → 4 with restartGeneration + 1`, async () => {
      const uuid = await d.inStatus(from);
      const before = h.store.getSession(uuid)?.spec.restartGeneration ?? 0;
      expect((await expectOk(d.user('restart', uuid, {}, h.admin))).json()).toMatchObject({ status: 4 });
      expect(h.store.getSession(uuid)?.spec.restartGeneration).toBe(before + 1);
    });
  for (const from of [0, 1, 2, 4, 6])
    it(`an admin's delete: ${from} → 5 QUEUED_FOR_DELETE`, async () => {
      const uuid = await d.inStatus(from);
      const res = await expectOk(d.user('delete', uuid, {}, h.admin));
      expect(res.json()).toMatchObject({ status: 5, statusName: 'QUEUED_FOR_DELETE' });
    });
  it("an admin's delete: 3 → removed at once, committed as the admin", async () => {
    const uuid = await d.inStatus(3);
    const name = h.store.getSession(uuid)?.name;
    expect((await expectOk(d.user('delete', uuid, {}, h.admin))).json()).toEqual({ uuid, deleted: true });
    expect(h.store.getSession(uuid)).toBeUndefined();
    const commit = await lastCommit();
    expect(commit).toContain(ADMIN_AUTHOR);
    expect(commit).toContain(`delete session ${name}`);
  });
  for (const token of ['owner', 'admin'] as const)
    it(`5: the ${token}'s delete, modify and restart are INVALID_STATE and change nothing`, async () => {
      const uuid = await d.inStatus(5);
      const before = JSON.stringify(h.store.getSession(uuid));
      const caller = token === 'admin' ? h.admin : d.ownerToken(uuid);
      for (const [action, extra] of [
        ['delete', {}],
        ['modify', { mtu: 1300 }],
        ['restart', {}],
      ] as const)
        expect(problem(await d.user(action, uuid, extra, caller)), action).toMatchObject({
          status: 409,
          code: 'INVALID_STATE',
        });
      expect(JSON.stringify(h.store.getSession(uuid))).toBe(before);
    });
  it('the session actions answer under /api/v1 with the same effect', async () => {
    const token = d.freshUser();
    const created = await expectOk(h.post('/api/v1/session', token, sessionFields('fra1')));
    const uuid = created.json().uuid as string;
    const listed = await expectOk(h.post('/api/v1/session', token, { action: 'list' }));
    expect(listed.json().sessions.map((s: { uuid: string }) => s.uuid)).toEqual([uuid]);
    await expectOk(d.admin('approve', uuid));
    await expectOk(d.report(uuid, 1));
    const modified = await expectOk(h.post('/api/v1/session', token, { action: 'modify', uuid, mtu: 1400 }));
    expect(modified.json()).toMatchObject({ status: 4, mtu: 1400 });
    await expectOk(d.report(uuid, 1));
    await expectOk(h.post('/api/v1/session', token, { action: 'restart', uuid }));
    expect(d.status(uuid)).toBe(4);
    await expectOk(h.post('/api/v1/session', token, { action: 'delete', uuid }));
    expect(d.status(uuid)).toBe(5);
  });
});
