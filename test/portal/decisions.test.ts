/**
 * An admin's decisions as the owner reads them in the portal (docs/user-guide.md, statuses; docs/api.md,
 * Decisions): a peer logs in in a real browser (en) and finds the rejected request's card with REJECTED,
 * the admin's reason, who and when and until when it is shown, what to do, and a Delete that removes it;
 * a disabled session's card gives the admin's reason instead of "ask them why".
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_ASN, expectOk, sessionFields, USER_ASN } from '../api/helpers.ts';
import { expectAccessible, logInWithSsh, openPage, usePeerPortal } from './support.ts';

const portal = usePeerPortal('portal-decisions', USER_ASN, []);

beforeAll(async () => {
  await portal.h.addRouter('fra1', { displayName: 'Frankfurt 1' });
  await portal.h.addRouter('ams1', { displayName: 'Amsterdam 1' });
  await expectOk(
    portal.h.post('/admin/policy', portal.h.admin, { action: 'set', spec: { dn42Asn: ADMIN_ASN } }),
  );
});

const create = async (router: string): Promise<string> =>
  (await expectOk(portal.h.post('/session', portal.h.user, sessionFields(router)))).json().uuid as string;

describe('portal: the admin’s decisions reach the peer', () => {
  it('a rejected request shows REJECTED with the reason until it is deleted; a disable shows its reason', async () => {
    const rejected = await create('fra1');
    await expectOk(
      portal.h.post('/admin/session', portal.h.admin, {
        action: 'reject',
        uuid: rejected,
        reason: 'fd42:1234::1 is not in your route object',
      }),
    );
    const disabled = await create('ams1');
    await expectOk(portal.h.post('/admin/session', portal.h.admin, { action: 'approve', uuid: disabled }));
    await expectOk(
      portal.h.post('/admin/session', portal.h.admin, {
        action: 'disable',
        uuid: disabled,
        reason: 'your side announced 10.0.0.0/8',
      }),
    );

    const { page, problems } = await openPage(portal.browser, portal.url);
    await page.goto(portal.url);
    await logInWithSsh(page, USER_ASN, portal.key);

    const card = page.locator(`article[data-uuid="${rejected}"]`);
    await card.waitFor();
    expect(await card.locator('.badge').textContent()).toBe('REJECTED');
    expect(await card.getByTestId('status-words').textContent()).toBe('Rejected by an administrator.');
    const decision = card.getByTestId('decision');
    expect(await decision.locator('strong').textContent()).toMatch(
      new RegExp(`^Rejected by admin AS${ADMIN_ASN} on `),
    );
    expect(await card.getByTestId('decision-reason').textContent()).toBe(
      'fd42:1234::1 is not in your route object',
    );
    expect(await decision.textContent()).toMatch(/This record is shown until /);
    expect(await card.locator('.advice li').allTextContents()).toEqual([
      'Fix what the reason says, then delete this record and ask again; otherwise it goes by itself after the date above.',
    ]);
    // nothing to change or restart on a rejected request
    expect(await card.getByRole('button', { name: 'Change' }).count()).toBe(0);
    expect(await card.getByRole('button', { name: 'Restart' }).count()).toBe(0);

    const off = page.locator(`article[data-uuid="${disabled}"]`);
    expect(await off.getByTestId('decision-reason').textContent()).toBe('your side announced 10.0.0.0/8');
    const advice = (await off.locator('.advice li').allTextContents()).join('\n');
    expect(advice).toContain('for the reason above');
    expect(advice).not.toContain('ask them why');
    await expectAccessible(page, 'a rejected and a disabled session');

    // Delete removes the REJECTED record at once
    page.once('dialog', (dialog) => void dialog.accept());
    await card.getByRole('button', { name: 'Delete' }).click();
    await card.waitFor({ state: 'detached' });
    expect(portal.h.store.getSession(rejected)).toBeUndefined();
    expect(problems).toEqual([]);
  });
});
