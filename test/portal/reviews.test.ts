/**
 * The Reviews page in a real browser against a real controller (git store, DN42 registry on disk): the
 * requests in review are paged by the controller with the admin table's pager, the oldest first; a
 * session a modify sent back to review is marked, each changed value shown old → new, and the router's
 * status named (docs/api.md, modify), on the Reviews page and on the session's own review page. axe-core
 * in en and zh-CN at 1280 and 390 px on both with the mark shown.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { beforeAll, describe, expect, it } from 'vitest';
import { SessionStatus } from '../../common/status.ts';
import { ADMIN_ASN, expectOk, sessionFields } from '../api/helpers.ts';
import { accessibleEverywhere, chooseLanguage, logInWithSsh, openPage, useAdminPortal } from './support.ts';

/** Requests in review: three pages of 20 by default, seeded in a few seconds. */
const REQUESTS = Number(process.env.REVIEWS_SESSIONS ?? 45);
const FIRST_ASN = 4242425000;

const portal = useAdminPortal('reviews', ADMIN_ASN);
const uuids: string[] = [];

const peerPrefix = (i: number) => `fd42:${(0x2000 + i).toString(16)}::`;

beforeAll(async () => {
  const registry = path.join(portal.dir, 'registry');
  await mkdir(path.join(registry, 'data', 'route6'), { recursive: true });
  for (let i = 0; i < REQUESTS; i++)
    await writeFile(
      path.join(registry, 'data', 'route6', `${peerPrefix(i)}_48`),
      `route6: ${peerPrefix(i)}/48\norigin: AS${FIRST_ASN + i}\nmnt-by: PEER${i}-MNT\nsource: DN42\n`,
    );
  const agentToken = await portal.h.addRouter('fra1', { displayName: 'Frankfurt 1' });
  await expectOk(
    portal.h.post('/admin/policy', portal.h.admin, { action: 'set', spec: { dn42Asn: 4242420000 } }),
  );
  // one at a time: the first is the oldest, first on the page
  for (let i = 0; i < REQUESTS; i++) {
    const token = portal.h.tokens.issueToken(FIRST_ASN + i, 'user').token;
    const res = await expectOk(
      portal.h.post('/session', token, sessionFields('fra1', { ipv6: `${peerPrefix(i)}1` })),
    );
    uuids[i] = (res.json() as { uuid: string }).uuid;
  }
  // the oldest runs on its router, then its owner asks for a new address and MTU: back to review
  const first = uuids[0] ?? '';
  await expectOk(portal.h.post('/admin/session', portal.h.admin, { action: 'approve', uuid: first }));
  await expectOk(
    portal.h.post(`/agent/fra1/modify`, agentToken, {
      uuid: first,
      status: SessionStatus.ACTIVE,
      interface: `wg_${portal.h.store.getSession(first)?.spec.listenPort ?? 0}`,
    }),
  );
  const owner = portal.h.tokens.issueToken(FIRST_ASN, 'user').token;
  await expectOk(
    portal.h.post('/session', owner, { action: 'modify', uuid: first, ipv6: `${peerPrefix(0)}2`, mtu: 1400 }),
  );
}, 120_000);

const cards = (page: Page) => page.locator('section[aria-labelledby="reviews-title"] article.card');

describe('the Reviews page', () => {
  it('pages the requests in review and marks a modify of a running session, old → new', async () => {
    const { context, page, problems } = await openPage(portal.browser, portal.url);
    await page.goto(portal.url);
    await logInWithSsh(page, ADMIN_ASN, portal.key);
    await page.getByRole('link', { name: 'Reviews' }).click();
    await expect.poll(() => page.getByText(`Requests 1–20 of ${REQUESTS}`).count()).toBe(1);
    expect(await cards(page).count()).toBe(20);

    // the modify: first (the oldest), marked, its changed values old → new, the others as they are
    const modified = page.locator(`article[data-uuid="${uuids[0]}"]`);
    expect(await modified.getByTestId('modified').textContent()).toContain('status ACTIVE');
    const changed = modified.getByTestId('changed');
    expect(await changed.count()).toBe(2);
    expect(await changed.nth(0).locator('del').textContent()).toBe(`${peerPrefix(0)}1`);
    expect(await changed.nth(0).locator('ins').textContent()).toBe(`${peerPrefix(0)}2`);
    expect(await changed.nth(1).textContent()).toMatch(/1420\s*→\s*changed to\s*1400/);
    // a new request is not marked
    expect(await page.locator(`article[data-uuid="${uuids[1]}"]`).getByTestId('modified').count()).toBe(0);
    await accessibleEverywhere(page, 'the Reviews page with a modify', async () => {
      await modified.getByTestId('modified').waitFor();
    });
    await chooseLanguage(page, 'zh-CN');
    await expect.poll(() => modified.getByTestId('modified').textContent()).toContain('已批准的值');
    expect(await modified.getByTestId('changed').nth(1).textContent()).toMatch(/1420\s*→\s*改为\s*1400/);
    await chooseLanguage(page, 'en');

    // the session's own review page marks it the same way
    await page.goto(`${portal.url}#/admin/review/${uuids[0]}`);
    const own = page.getByTestId('modified');
    await own.waitFor();
    expect(await own.textContent()).toContain('status ACTIVE');
    expect(await page.getByTestId('changed').count()).toBe(2);
    await accessibleEverywhere(page, "a modify's review page", async () => {
      await page.getByTestId('modified').waitFor();
    });
    await page.goto(`${portal.url}#/admin/reviews`);
    await expect.poll(() => page.getByText(`Requests 1–20 of ${REQUESTS}`).count()).toBe(1);

    // the pages, asked of the controller: 20, 20, the rest
    const pager = page.getByRole('navigation', { name: 'Pages of the table' });
    await pager.getByRole('button', { name: 'Next' }).click();
    await expect.poll(() => page.getByText(`Requests 21–40 of ${REQUESTS}`).count()).toBe(1);
    expect(await page.locator(`article[data-uuid="${uuids[20]}"]`).count()).toBe(1);
    await pager.getByRole('button', { name: 'Next' }).click();
    const rest = REQUESTS - 40;
    await expect.poll(() => cards(page).count()).toBe(rest);
    expect(await pager.getByRole('button', { name: 'Next' }).isDisabled()).toBe(true);
    await pager.getByRole('button', { name: 'Previous' }).click();
    await pager.getByRole('button', { name: 'Previous' }).click();
    await expect.poll(() => page.getByText(`Requests 1–20 of ${REQUESTS}`).count()).toBe(1);

    // approving the modify takes it off the list; the router then applies the new values
    await modified.getByRole('button', { name: 'Approve' }).click();
    await expect.poll(() => page.getByText(`Requests 1–20 of ${REQUESTS - 1}`).count()).toBe(1);
    expect(portal.h.store.getSession(uuids[0] ?? '')?.status).toMatchObject({
      code: SessionStatus.QUEUED_FOR_SETUP,
    });
    expect(problems).toEqual([]);
    await context.close();
  }, 180_000);
});
