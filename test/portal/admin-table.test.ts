/**
 * The admin table and the review page in a real browser against a real controller (git store, DN42
 * registry on disk): with ADMIN_TABLE_SESSIONS sessions (500 by default) of as many ASNs, an admin finds
 * one by ASN prefix, filters by status, bulk-approves 20 with one reason; on the review page reads the
 * registry's as-name, mnt-by, contact and route objects, rejects, disables, enables and purges; closes a
 * router to new sessions and opens it again. axe-core
 * runs on both pages in en and zh-CN at 1280 and 390 px.
 */
import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Page } from 'playwright-core';
import { beforeAll, describe, expect, it } from 'vitest';
import { SessionStatus } from '../../common/status.ts';
import { ADMIN_ASN, expectOk, sessionFields } from '../api/helpers.ts';
import {
  accessibleEverywhere,
  expectAccessible,
  logInWithSsh,
  openPage,
  UI_TIMEOUT_MS,
  useAdminPortal,
} from './support.ts';

/** Sessions in the table; CI's default keeps the seeding (one git commit each) to a few seconds. */
const SESSIONS = Number(process.env.ADMIN_TABLE_SESSIONS ?? 500);
const FIRST_ASN = 4242423000;
const APPROVED = 100;
const DISABLED = 20;

const portal = useAdminPortal('admin-table', ADMIN_ASN);
const uuids: string[] = [];

/** Peer i's address: its own route6 object, fd42:<0x1000 + i>::/48. */
const peerPrefix = (i: number) => `fd42:${(0x1000 + i).toString(16)}::`;

beforeAll(async () => {
  const registry = path.join(portal.dir, 'registry');
  await mkdir(path.join(registry, 'data', 'route6'), { recursive: true });
  for (let i = 0; i < SESSIONS; i++) {
    const asn = FIRST_ASN + i;
    await writeFile(
      path.join(registry, 'data', 'aut-num', `AS${asn}`),
      `aut-num: AS${asn}\nas-name: PEER${i}-AS\nadmin-c: PEER${i}-DN42\ntech-c: NOC${i}-DN42\nmnt-by: PEER${i}-MNT\nsource: DN42\n`,
    );
    await writeFile(
      path.join(registry, 'data', 'route6', `${peerPrefix(i)}_48`),
      `route6: ${peerPrefix(i)}/48\norigin: AS${asn}\nmnt-by: PEER${i}-MNT\nsource: DN42\n`,
    );
  }
  await portal.h.addRouter('fra1', { displayName: 'Frankfurt 1' });
  await portal.h.addRouter('ams1', { displayName: 'Amsterdam 1' });
  await expectOk(
    portal.h.post('/admin/policy', portal.h.admin, { action: 'set', spec: { dn42Asn: 4242420000 } }),
  );
  // a few creates at once: the store batches them into fewer commits
  const started = Date.now();
  for (let i = 0; i < SESSIONS; i += 10)
    await Promise.all(
      Array.from({ length: Math.min(10, SESSIONS - i) }, async (_, k) => {
        const n = i + k;
        const token = portal.h.tokens.issueToken(FIRST_ASN + n, 'user').token;
        const res = await expectOk(
          portal.h.post(
            '/session',
            token,
            sessionFields(n % 2 ? 'ams1' : 'fra1', { ipv6: `${peerPrefix(n)}1` }),
          ),
        );
        uuids[n] = (res.json() as { uuid: string }).uuid;
      }),
    );
  for (const uuid of uuids.slice(0, APPROVED))
    await expectOk(portal.h.post('/admin/session', portal.h.admin, { action: 'approve', uuid }));
  for (const uuid of uuids.slice(0, DISABLED))
    await expectOk(
      portal.h.post('/admin/session', portal.h.admin, { action: 'disable', uuid, reason: 'seeding' }),
    );
  console.log(`seeded ${SESSIONS} sessions in ${Date.now() - started} ms`);
}, 300_000);

const countText = (page: Page) => page.getByTestId('table-count');

describe('the admin table and the review page', () => {
  it(`finds one of ${SESSIONS} by ASN prefix, filters by status, bulk-approves 20 with one reason`, async () => {
    const { context, page, problems } = await openPage(portal.browser, portal.url);
    await page.goto(portal.url);
    await logInWithSsh(page, ADMIN_ASN, portal.key);
    await page.getByRole('link', { name: 'All sessions' }).click();
    await expect.poll(() => countText(page).textContent()).toContain(`of ${SESSIONS} matching`);
    expect(await page.locator('tbody tr').count()).toBe(50);
    await accessibleEverywhere(page, 'the admin table');

    // an ASN prefix: AS4242423123 and nothing else (the search also takes it without "AS")
    const target = 123;
    await page.getByLabel('Search').fill(`AS${FIRST_ASN + target}`);
    await expect.poll(() => countText(page).textContent()).toContain('of 1 matching');
    const row = page.locator(`tr[data-uuid="${uuids[target]}"]`);
    await expect.poll(() => row.textContent()).toContain(`PEER${target}-AS`);
    await page.getByLabel('Search').fill(String(FIRST_ASN + 12).slice(0, 9));
    // 424242301x: ten ASNs
    await expect.poll(() => countText(page).textContent()).toContain('of 10 matching');
    await page.getByLabel('Search').fill('');

    // the status filter: those still in review
    const pending = SESSIONS - APPROVED;
    await page.getByLabel('Status', { exact: true }).selectOption(String(SessionStatus.PENDING_REVIEW));
    await expect.poll(() => countText(page).textContent()).toContain(`of ${pending} matching`);
    const picked: string[] = [];
    for (const r of (await page.locator('tbody tr').all()).slice(0, 20)) {
      picked.push((await r.getAttribute('data-uuid')) ?? '');
      await r.getByRole('checkbox').check();
    }
    await page.getByLabel('Reason').fill('registry checked in bulk');
    await page.getByRole('button', { name: 'Approve' }).click();
    await expect
      .poll(() => page.getByTestId('bulk-progress').textContent(), { timeout: UI_TIMEOUT_MS })
      .toContain('Finished 20: 0 refused');
    await expect.poll(() => countText(page).textContent()).toContain(`of ${pending - 20} matching`);
    for (const uuid of picked)
      expect(portal.h.store.getSession(uuid)?.status.code).toBe(SessionStatus.QUEUED_FOR_SETUP);
    // the reason is in each approval's commit, the store's audit record
    const { stdout } = await promisify(execFile)('git', [
      '--git-dir',
      path.join(portal.h.dir, 'store.git'),
      'log',
      '--all',
      '-100',
      '--format=%s',
    ]);
    const approvals = new Set(
      stdout.split('\n').filter((l) => /^approve session .*: registry checked in bulk$/.test(l)),
    );
    expect(approvals.size).toBe(20);

    // one refused row says why, beside the others: approve again what is approved
    await page.getByLabel('Status', { exact: true }).selectOption(String(SessionStatus.QUEUED_FOR_SETUP));
    await page.getByLabel('Search').fill(picked[0]!);
    await expect.poll(() => countText(page).textContent()).toContain('of 1 matching');
    await page.locator(`tr[data-uuid="${picked[0]}"]`).getByRole('checkbox').check();
    await page.getByRole('button', { name: 'Approve' }).click();
    await expect
      .poll(() => page.getByTestId('bulk-progress').textContent(), { timeout: UI_TIMEOUT_MS })
      .toContain('Finished 1: 1 refused');
    await expect
      .poll(() => page.locator(`tr[data-uuid="${picked[0]}"] .field-error`).textContent())
      .toMatch(/QUEUED_FOR_SETUP/);

    // sort: the newest first by age
    await page.getByLabel('Search').fill('');
    await page.getByLabel('Status', { exact: true }).selectOption('');
    await page.getByRole('button', { name: 'Age' }).click();
    await page.getByRole('button', { name: 'Age' }).click();
    expect(await page.locator('th[aria-sort]').textContent()).toContain('Age');
    expect(await page.locator('th[aria-sort]').getAttribute('aria-sort')).toBe('descending');
    await page.getByRole('button', { name: 'Next' }).click();
    await expect.poll(() => countText(page).textContent()).toContain('Sessions 51–100');
    expect(problems).toEqual([]);
    await context.close();
  });

  it('the review page shows the registry and the policy checks; reject, disable, enable and purge', async () => {
    const { context, page, problems } = await openPage(portal.browser, portal.url);
    await page.goto(portal.url);
    await logInWithSsh(page, ADMIN_ASN, portal.key);
    const pendingIndex = SESSIONS - 1;
    await page.goto(`${portal.url}/#/admin/review/${uuids[pendingIndex]}`);
    await page.getByRole('heading', { name: `AS${FIRST_ASN + pendingIndex} on Amsterdam 1` }).waitFor();
    const main = page.locator('main');
    await expect.poll(() => main.textContent()).toContain(`PEER${pendingIndex}-AS`);
    const text = (await main.textContent()) ?? '';
    expect(text).toContain(`PEER${pendingIndex}-MNT`);
    expect(text).toContain(`PEER${pendingIndex}-DN42`);
    expect(text).toContain(`NOC${pendingIndex}-DN42`);
    expect(text).toContain(`route6 ${peerPrefix(pendingIndex)}/48`);
    expect(text).toContain(`is AS${FIRST_ASN + pendingIndex}'s by the registry`);
    expect(text).toContain("The controller's checks");
    await accessibleEverywhere(page, 'the review page');

    // reject needs a reason, named at its field; then it is the owner's to read
    await page.getByRole('button', { name: 'Reject' }).click();
    await page.getByText('Give a reason: the owner reads it.').waitFor();
    await page.getByLabel('Reason').fill('route object of another network');
    await page.getByRole('button', { name: 'Reject' }).click();
    await page.getByText('Done: the session is now REJECTED.').waitFor();
    expect(portal.h.store.getSession(uuids[pendingIndex]!)?.status.decision?.reason).toBe(
      'route object of another network',
    );

    // an approved session: disable with a reason, enable again
    const queued = uuids[APPROVED - 1]!;
    await page.goto(`${portal.url}/#/admin/review/${queued}`);
    await page.getByRole('button', { name: 'Disable' }).click();
    await page.getByLabel('Reason').fill('abuse report 42');
    await page.getByRole('button', { name: 'Disable' }).click();
    await page.getByText('Done: the session is now DISABLED.').waitFor();
    await page.getByRole('button', { name: 'Enable' }).click();
    await page.getByText('Done: the session is now QUEUED_FOR_SETUP.').waitFor();
    expect(portal.h.store.getSession(queued)?.status.code).toBe(SessionStatus.QUEUED_FOR_SETUP);

    // the owner deleted it and the router never confirmed: purge closes it
    const owner = portal.h.tokens.issueToken(FIRST_ASN + APPROVED - 1, 'user').token;
    await expectOk(portal.h.post('/session', owner, { action: 'delete', uuid: queued }));
    // away and back: the page asks the controller again
    await page.evaluate(`location.hash = '#/admin/sessions'`);
    await page.evaluate(`location.hash = '#/admin/review/${queued}'`);
    await page.getByRole('button', { name: 'Purge' }).click();
    await page.getByLabel('Reason').fill('router fra1 decommissioned');
    await page.getByRole('button', { name: 'Purge' }).click();
    await page.getByText('Done: the session is now PURGED.').waitFor();
    expect(portal.h.store.getSession(queued)?.status.code).toBe(SessionStatus.PURGED);
    expect(problems).toEqual([]);
    await context.close();
  });

  it('the routers page closes a router to new sessions and opens it again', async () => {
    const { context, page, problems } = await openPage(portal.browser, portal.url);
    await page.goto(portal.url);
    await logInWithSsh(page, ADMIN_ASN, portal.key);
    await page.getByRole('link', { name: 'Routers' }).click();
    const card = page.locator('article[data-router="fra1"]');
    await card.getByRole('button', { name: 'Stop accepting new sessions' }).click();
    await card.getByRole('button', { name: 'Accept new sessions' }).waitFor();
    expect(portal.h.store.getRouter('fra1')?.spec.acceptingSessions).toBe(false);
    await expectAccessible(page, 'the routers page with a closed router');
    await card.getByRole('button', { name: 'Accept new sessions' }).click();
    await card.getByRole('button', { name: 'Stop accepting new sessions' }).waitFor();
    expect(portal.h.store.getRouter('fra1')?.spec.acceptingSessions).toBe(true);
    expect(problems).toEqual([]);
    await context.close();
  });

  it('as-names refuses more than a page of ASNs, naming the field', async () => {
    const asns = Array.from({ length: 201 }, (_, i) => FIRST_ASN + i);
    const res = await portal.h.post('/admin/session', portal.h.admin, { action: 'as-names', asns });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'INVALID_REQUEST', errors: [{ pointer: '/asns' }] });
  });
});
