/**
 * The admin's pages in the reader's language (docs/api.md, Errors, Message keys): in the Chinese portal,
 * a router's condition the controller judged (Ready False, AgentNotReporting), a session's lastError in
 * the admin table, the review page's policy check and the refusal of an approve that the current policy
 * no longer allows are shown from the portal's zh-CN catalogue, not in the controller's English. The
 * silence is judged by the controller's own reconciler at a chosen time, as test/api/router-ready.test.ts
 * does, so that the test waits for no interval.
 */
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { englishText, fill } from '../../common/messages.ts';
import { SessionReconciler } from '../../controller/reconcile/session-reconciler.ts';
import zhCN from '../../web/i18n/problems/zh-CN.ts';
import portalZh from '../../web/i18n/zh-CN.ts';
import { ADMIN_ASN, expectOk, sessionFields, USER_ASN, type Harness } from '../api/helpers.ts';
import { sshKey, tempDir, writeRegistry, type SshKey } from '../login/support.ts';
import {
  chooseLanguage,
  expectAccessible,
  logInWithSsh,
  openPage,
  startPortal,
  stopPortal,
} from './support.ts';

let dir: string;
let h: Harness;
let url: string;
let browser: Browser;
let adminKey: SshKey;
let agentToken: string;
/** Approved, then reported in ERROR with a keyed lastError. */
let failing: string;
/** Pending review; the policy tightened afterwards no longer allows its address. */
let pending: string;

const chinese = /[\u4e00-\u9fff]/;

beforeAll(async () => {
  dir = await tempDir('portal-language-admin');
  adminKey = await sshKey(dir, 'ed25519', 'admin');
  await writeRegistry(path.join(dir, 'registry'), {
    autNums: { [ADMIN_ASN]: ['NET-MNT'], [USER_ASN]: ['PEER-MNT'] },
    mntners: { 'NET-MNT': [adminKey.publicLine] },
    routes: { 'fd42:1234::/48': [USER_ASN] },
  });
  ({ h, url, browser } = await startPortal(dir, [ADMIN_ASN]));
  agentToken = await h.addRouter('fra1', { displayName: 'Frankfurt 1' });
  await h.addRouter('ams1', { displayName: 'Amsterdam 1' });
  await expectOk(h.post('/admin/policy', h.admin, { action: 'set', spec: { dn42Asn: ADMIN_ASN } }));

  failing = (await expectOk(h.post('/session', h.user, sessionFields('fra1')))).json().uuid as string;
  await expectOk(h.post('/admin/session', h.admin, { action: 'approve', uuid: failing }));
  const listenPort = h.store.getSession(failing)?.spec.listenPort ?? 0;
  const report = (status: number, extra: Record<string, unknown> = {}) =>
    expectOk(
      h.post('/agent/fra1/modify', agentToken, {
        uuid: failing,
        status,
        interface: `wg_${listenPort}`,
        ...extra,
      }),
    );
  await report(1);
  const port = String(listenPort);
  await report(2, {
    message: englishText('lastError.noHandshake', { port }),
    key: 'lastError.noHandshake',
    params: { port },
  });

  pending = (
    await expectOk(h.post('/session', h.user, sessionFields('ams1', { ipv6: 'fd42:1234::77' })))
  ).json().uuid as string;
  // tightened after the request: the session's address is outside the ranges now
  await expectOk(
    h.post('/admin/policy', h.admin, {
      action: 'set',
      spec: { dn42Asn: ADMIN_ASN, peerAddressRanges: { ipv6: ['fd42:ffff::/32'] } },
    }),
  );

  // fra1's agent said it beats every 4 s, then fell silent: the reconciler judges it 6.001 s later
  await expectOk(
    h.post('/agent/fra1/heartbeat', agentToken, { version: '0.1.0', uptime: 5, heartbeatInterval: 4 }),
  );
  const last = Date.parse(h.store.getRouter('fra1')?.status.lastHeartbeat ?? '');
  new SessionReconciler({ store: h.store, stuckAfterSeconds: 600, offlineAfterSeconds: 300 }).markSilent(
    last + 6001,
  );
  expect(h.store.getRouter('fra1')?.status.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
    status: 'False',
    reason: 'AgentNotReporting',
    key: 'condition.noHeartbeat',
  });
});

afterAll(() => stopPortal({ browser, h }, dir));

describe("portal: the controller's words in Chinese on the admin's pages", () => {
  it('a router condition, a lastError in the table, a policy check and a refused approve', async () => {
    const { page, problems } = await openPage(browser, url);
    await page.goto(url);
    await logInWithSsh(page, ADMIN_ASN, adminKey);
    await chooseLanguage(page, 'zh-CN');

    // the routers page: fra1's Ready False, in the catalogue's words with the heartbeat's time
    await page.goto(`${url}/#/admin/routers`);
    const since = h.store.getRouter('fra1')?.status.lastHeartbeat ?? '';
    const silent = fill(zhCN['condition.noHeartbeat'], { since });
    const warning = page.locator('article[data-router="fra1"] [data-condition="Ready"] p').first();
    await expect.poll(() => warning.textContent()).toBe(silent);
    expect(silent).toMatch(chinese);
    await expectAccessible(page, 'a router condition in Chinese');

    // the admin table: the failing session's lastError
    await page.goto(`${url}/#/admin/sessions`);
    const lastError = page.locator(`tr[data-uuid="${failing}"] td.table-error`);
    const port = String(h.store.getSession(failing)?.spec.listenPort);
    await expect.poll(() => lastError.textContent()).toBe(fill(zhCN['lastError.noHandshake'], { port }));
    await expectAccessible(page, 'the admin table with a lastError in Chinese');

    // the review page: the policy's check of the address, then approve refused by it
    await page.goto(`${url}/#/admin/review/${pending}`);
    const outside = fill(zhCN['field.outsidePolicyRanges'], { ranges: 'fd42:ffff::/32', family: 'ipv6' });
    const checks = page.locator('.checks-failed li');
    await expect.poll(() => checks.first().textContent()).toBe(`/ipv6 ${outside}`);
    await page.getByRole('button', { name: portalZh['reviews.approve'], exact: true }).click();
    const refusal = page.locator('.problem p');
    const name = h.store.getSession(pending)?.name ?? '';
    await expect
      .poll(() => refusal.textContent())
      .toBe(fill(zhCN['session.breaksPolicy'], { action: 'approve', name, pointer: '/ipv6' }));
    expect(await refusal.textContent()).toMatch(chinese);
    await expectAccessible(page, 'a refused approve in Chinese');
    expect(problems).toEqual([]);
  });
});
