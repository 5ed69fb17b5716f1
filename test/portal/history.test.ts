/**
 * A session's History tab in a real browser against a real controller (docs/user-guide.md, History): the
 * router's agent reports (through the agent API, as an agent does) become three graphs, each an image
 * named by its caption with a text summary, and the same points as a table; 7 days is a button that says
 * it is pressed; Chinese shows the tab's words from the zh-CN catalogue; axe-core finds nothing serious.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import zhCN from '../../web/i18n/zh-CN.ts';
import { ADMIN_ASN, expectOk, sessionFields } from '../api/helpers.ts';
import { chooseLanguage, expectAccessible, logInWithSsh, openPage, usePeerPortal } from './support.ts';

const PEER_ASN = 4242421234;

const portal = usePeerPortal('portal-history', PEER_ASN, [ADMIN_ASN]);

beforeAll(async () => {
  await expectOk(
    portal.h.post('/admin/policy', portal.h.admin, { action: 'set', spec: { dn42Asn: ADMIN_ASN } }),
  );
  const agentToken = await portal.h.addRouter('fra1', { displayName: 'Frankfurt 1', autoApprove: true });
  const peer = portal.h.tokens.issueToken(PEER_ASN, 'user').token;
  const created = await expectOk(portal.h.post('/session', peer, sessionFields('fra1')));
  const uuid = (created.json() as { uuid: string }).uuid;
  for (const [rx, rtt] of [
    [0, 11],
    [2_000_000, 14],
    [5_000_000, null],
  ] as const)
    await expectOk(
      portal.h.post(`/agent/fra1/report`, agentToken, {
        sessions: [{ uuid, rtt, rxBytes: rx, txBytes: rx / 2, routesImported: 2, routesExported: 900 }],
      }),
    );
}, 60_000);

describe('portal: a session’s history', () => {
  it('graphs RTT, traffic and routes, with a table and a summary for screen readers', async () => {
    const { page, problems } = await openPage(portal.browser, portal.url);
    await page.goto(portal.url);
    await logInWithSsh(page, PEER_ASN, portal.key);
    await page.getByRole('button', { name: 'History' }).click();
    const history = page.getByRole('region', { name: 'History' });
    const graphs = history.getByRole('img');
    await expect.poll(() => graphs.count()).toBe(3);
    const rttGraph = history.getByRole('img', { name: /^Round-trip time/ });
    // the reports fall in one or two minutes: means of 11 and 14 ms
    expect(await rttGraph.locator('desc').textContent()).toMatch(
      /^Round-trip time: lowest 1[1-4](\.\d)? ms, highest 1[1-4](\.\d)? ms, last 1[1-4](\.\d)? ms\.$/,
    );
    expect(
      await history
        .getByRole('img', { name: /^Routes/ })
        .locator('desc')
        .textContent(),
    ).toContain('Exported to you: lowest 900, highest 900, last 900.');
    await history.getByText('The same as a table').click();
    const rows = history.locator('tbody tr');
    expect(await rows.count()).toBeGreaterThan(0);
    expect(await rows.last().locator('td').nth(5).textContent()).toBe('900');
    await expectAccessible(page, 'the History tab, 24 hours');

    const week = history.getByRole('button', { name: '7 days' });
    await week.click();
    await expect.poll(() => week.getAttribute('aria-pressed')).toBe('true');
    expect(await history.getByRole('button', { name: '24 hours' }).getAttribute('aria-pressed')).toBe(
      'false',
    );
    await expect.poll(() => graphs.count()).toBe(3);
    await expectAccessible(page, 'the History tab, 7 days');

    await chooseLanguage(page, 'zh-CN');
    // the page is drawn anew in the language chosen: the tab opens again
    const tab = page.getByRole('button', { name: zhCN['session.history'], exact: true });
    if ((await tab.getAttribute('aria-expanded')) !== 'true') await tab.click();
    const zhHistory = page.getByRole('region', { name: zhCN['history.title'] });
    await expect.poll(() => zhHistory.getByRole('img').count()).toBe(3);
    expect(await zhHistory.getByRole('button', { name: zhCN['history.range.30d'] }).count()).toBe(1);
    await expectAccessible(page, 'the History tab in Chinese');
    expect(problems).toEqual([]);
  });
});
