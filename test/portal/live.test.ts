/**
 * The portal's session list is live (docs/user-guide.md): what the router's agent reports shows on the
 * peer's and the admin's open pages within seconds, without a reload, from the controller's event stream
 * (docs/api.md, Live updates); so do the admin's sessions waiting for review. A real browser against a
 * real controller; logins signed by ssh-keygen.
 */
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_ASN, driver, expectOk, OTHER_ASN, USER_ASN, type Harness } from '../api/helpers.ts';
import { sshKey, tempDir, writeRegistry, type SshKey } from '../login/support.ts';
import { logInWithSsh, openPage, startPortal, stopPortal } from './support.ts';

let dir: string;
let h: Harness;
let url: string;
let browser: Browser;
let peerKey: SshKey;
let adminKey: SshKey;
let agentToken: string;

beforeAll(async () => {
  dir = await tempDir('portal-live');
  [peerKey, adminKey] = await Promise.all([sshKey(dir, 'ed25519', 'peer'), sshKey(dir, 'ed25519', 'admin')]);
  await writeRegistry(path.join(dir, 'registry'), {
    autNums: { [USER_ASN]: ['PEER-MNT'], [ADMIN_ASN]: ['NET-MNT'] },
    mntners: { 'PEER-MNT': [peerKey.publicLine], 'NET-MNT': [adminKey.publicLine] },
    routes: { 'fd42:1234::/48': [USER_ASN], 'fd42:5678::/48': [OTHER_ASN] },
  });
  ({ h, url, browser } = await startPortal(dir, [ADMIN_ASN]));
  agentToken = await h.addRouter('fra1');
  await expectOk(h.post('/admin/policy', h.admin, { action: 'set', spec: { dn42Asn: ADMIN_ASN } }));
});

afterAll(() => stopPortal({ browser, h }, dir));

/** A logged-in page on the session list, marked so that a reload (which would drop the mark) shows. */
async function sessionsPage(asn: number, key: SshKey, heading: string) {
  const opened = await openPage(browser, url);
  const requests: string[] = [];
  opened.page.on('request', (r) => requests.push(`${r.method()} ${new URL(r.url()).pathname}`));
  await opened.page.goto(url);
  await logInWithSsh(opened.page, asn, key);
  await opened.page.getByRole('heading', { name: heading }).waitFor();
  await opened.page.evaluate('window.notReloaded = true');
  return { ...opened, requests };
}

const card = (page: Page, uuid: string) => page.locator('article.session', { hasText: uuid });

describe('portal: live session list', () => {
  it("shows the agent's report on the peer's and the admin's pages without a reload", async () => {
    const peer = await sessionsPage(USER_ASN, peerKey, 'Your sessions');
    const admin = await sessionsPage(ADMIN_ASN, adminKey, 'All sessions');
    const d = driver(h, 'fra1', agentToken);
    // created and approved elsewhere (the CLI, another tab): both lists show it as it happens
    const uuid = await d.create(h.user);
    await card(peer.page, uuid).getByText('PENDING_REVIEW').waitFor({ timeout: 5000 });
    await expectOk(d.admin('approve', uuid));
    await card(peer.page, uuid).getByText('QUEUED_FOR_SETUP').waitFor({ timeout: 5000 });

    const reported = performance.now();
    await expectOk(d.reportBgp(uuid, 1, 'Established'));
    await Promise.all(
      [peer.page, admin.page].map((page) => card(page, uuid).getByText('ACTIVE').waitFor({ timeout: 5000 })),
    );
    // well within the 10 s the page used to poll at
    expect(performance.now() - reported).toBeLessThan(3000);
    for (const { page, requests, problems } of [peer, admin]) {
      expect(await page.evaluate('window.notReloaded')).toBe(true);
      // one stream carried every change: no list asked for, no stream opened again
      expect(requests.filter((r) => r === 'GET /session/events')).toHaveLength(1);
      expect(requests).not.toContain('POST /session');
      expect(problems).toEqual([]);
    }
    await peer.context.close();
    await admin.context.close();
  });

  it('shows a new request on the Reviews page and takes it off once decided, without a reload', async () => {
    const admin = await sessionsPage(ADMIN_ASN, adminKey, 'All sessions');
    await admin.page.getByRole('link', { name: 'Reviews' }).click();
    await admin.page.getByRole('heading', { name: 'Sessions waiting for review' }).waitFor();
    const d = driver(h, 'fra1', agentToken);
    const uuid = await d.create(h.other, { ipv6: 'fd42:5678::1' }); // another network's request
    const review = admin.page.locator(`article[data-uuid="${uuid}"]`);
    await review.waitFor({ timeout: 5000 });
    // another admin (or the CLI) approves it: it leaves this admin's queue
    await expectOk(d.admin('approve', uuid));
    await review.waitFor({ state: 'detached', timeout: 5000 });
    expect(await admin.page.evaluate('window.notReloaded')).toBe(true);
    expect(admin.problems).toEqual([]);
    await admin.context.close();
  });
});
