/**
 * The controller's words in the reader's language (docs/api.md, Errors, Message keys): in the Chinese
 * portal, a field error of a refused create and a session's lastError that the router's agent reported
 * with its key are shown from the portal's zh-CN catalogue, not in the controller's English. The report
 * is sent over the agent API with the router's token, as the agent sends it (test/agent covers what the
 * agent keys).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { englishText } from '../../common/messages.ts';
import zhCN from '../../web/i18n/problems/zh-CN.ts';
import { ADMIN_ASN, expectOk, sessionFields, USER_ASN } from '../api/helpers.ts';
import { chooseLanguage, expectAccessible, logInWithSsh, openPage, usePeerPortal } from './support.ts';

const portal = usePeerPortal('portal-language', USER_ASN, []);
let agentToken: string;

beforeAll(async () => {
  agentToken = await portal.h.addRouter('fra1', { displayName: 'Frankfurt 1' });
  await portal.h.addRouter('ams1', { displayName: 'Amsterdam 1' });
  await expectOk(
    portal.h.post('/admin/policy', portal.h.admin, { action: 'set', spec: { dn42Asn: ADMIN_ASN } }),
  );
});

describe("portal: the controller's words in Chinese", () => {
  it("a session's lastError and a create's field error read in Chinese", async () => {
    const uuid = (await expectOk(portal.h.post('/session', portal.h.user, sessionFields('fra1')))).json()
      .uuid as string;
    await expectOk(portal.h.post('/admin/session', portal.h.admin, { action: 'approve', uuid }));
    const iface = `wg_${portal.h.store.getSession(uuid)?.spec.listenPort ?? 0}`;
    const report = (status: number, extra: Record<string, unknown> = {}) =>
      expectOk(portal.h.post('/agent/fra1/modify', agentToken, { uuid, status, interface: iface, ...extra }));
    await report(1);
    const port = String(portal.h.store.getSession(uuid)?.spec.listenPort);
    const message = `no WireGuard handshake since 2026-01-01T00:00:00.000Z, BGP Active: ${englishText('lastError.noHandshake', { port })}`;
    await report(2, { message, key: 'lastError.noHandshake', params: { port } });
    expect(portal.h.store.getSession(uuid)?.status.lastError).toMatchObject({
      key: 'lastError.noHandshake',
      params: { port },
    });

    const { page, problems } = await openPage(portal.browser, portal.url);
    await page.goto(portal.url);
    await logInWithSsh(page, USER_ASN, portal.key);
    await chooseLanguage(page, 'zh-CN');

    const lastError = page.locator(`article[data-uuid="${uuid}"] .last-error p`);
    await lastError.waitFor();
    const chinese = zhCN['lastError.noHandshake'].replace('{port}', port);
    expect(await lastError.textContent()).toBe(chinese);
    expect(chinese).toMatch(/[\u4e00-\u9fff]/);
    await expectAccessible(page, 'a lastError in Chinese');

    await page.getByRole('link', { name: '新建会话' }).first().click();
    await page.getByLabel('Amsterdam 1', { exact: false }).check();
    await page.locator('#f-ipv6').fill('fd42:1234::99');
    await page.locator('#f-linkLocal').fill('fd00::1');
    await page.locator('#f-publicKey').fill(sessionFields('ams1').publicKey);
    await page.getByRole('button', { name: '创建会话' }).click();
    const fieldError = page.locator('#f-linkLocal-error');
    await fieldError.waitFor();
    expect(await fieldError.textContent()).toBe(zhCN['field.format.link-local']);
    await expectAccessible(page, 'a field error in Chinese');
    expect(problems).toEqual([]);
  });
});
