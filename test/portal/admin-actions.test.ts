/**
 * The admin actions of the CLI done in the portal, against a real `peerops serve` (its own process, git
 * store, DN42 registry on disk) in chromium: routers added (a refused field named at its field, the agent
 * token shown once and taken by the agent API), edited (an optional field emptied is cleared), given a
 * new agent token, removed after a
 * confirmation that Escape closes;
 * the policy edited with the change shown before it is saved, and the controller's refusal shown; tokens
 * revoked one by id and all of an ASN, then refused by the API. axe-core on each page and state in en and
 * zh-CN at 1280 and 390 px.
 */
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadKey, TokenIssuer } from '../../controller/auth/jwt.ts';
import { ControllerProcess } from '../support/controller-process.ts';
import { freePort } from '../support/ports.ts';
import { sshKey, tempDir, writeRegistry, type SshKey } from '../login/support.ts';
import { accessibleEverywhere, launchBrowser, logInWithSsh, openPage } from './support.ts';

const ADMIN_ASN = 4242420000;
/** One admin ASN per test: each has the rate limit of one user (60 requests a minute) to itself. */
const ADMINS = [ADMIN_ASN, ADMIN_ASN + 1, ADMIN_ASN + 2];
const PEER_ASN = 4242421111;
const wgKey = () => randomBytes(32).toString('base64');

let dir: string;
let controller: ControllerProcess;
let tokens: TokenIssuer;
let admin: string;
let browser: Browser;
let adminKey: SshKey;

beforeAll(async () => {
  dir = await tempDir('admin-actions');
  adminKey = await sshKey(dir, 'ed25519', 'admin');
  const registry = path.join(dir, 'registry');
  await writeRegistry(registry, {
    autNums: Object.fromEntries(ADMINS.map((asn) => [asn, ['NET-MNT']])),
    mntners: { 'NET-MNT': [adminKey.publicLine] },
  });
  controller = new ControllerProcess(path.join(dir, 'data'), await freePort(), {
    PEEROPS_REGISTRY: registry,
    PEEROPS_ADMIN_ASNS: ADMINS.join(','),
    PEEROPS_SERVICE_HOST: '127.0.0.1',
  });
  await controller.start();
  tokens = new TokenIssuer(await loadKey(path.join(dir, 'data', 'jwt-ed25519.pem')));
  admin = tokens.issueToken(ADMIN_ASN, 'admin').token;
  const set = await controller.post(admin, '/admin/policy', { action: 'set', spec: { dn42Asn: ADMIN_ASN } });
  expect(set.status).toBe(200);
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await controller?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function signedIn(
  asn: number,
): Promise<{ page: Page; problems: string[]; close: () => Promise<void> }> {
  const { context, page, problems } = await openPage(browser, controller.base);
  await page.goto(controller.base);
  await logInWithSsh(page, asn, adminKey);
  return { page, problems, close: () => context.close() };
}

const focusedId = (page: Page) => page.evaluate('document.activeElement?.id ?? ""');

describe('the admin actions in the portal', () => {
  it('adds a router (a refused key named at its field, the agent token once), edits and removes it', async () => {
    const { page, problems, close } = await signedIn(ADMINS[0]!);
    await page.getByRole('link', { name: 'Routers' }).click();
    await page.getByRole('heading', { name: 'Routers', level: 1 }).waitFor();
    const fill = async (key: string) => {
      await page.getByRole('button', { name: /^(Add a router|添加路由器)$/ }).click();
      const field = (name: string) => page.locator(`#add-router-${name}`);
      await field('name').fill('fra1');
      await field('displayName').fill('Frankfurt 1');
      await field('nodeId').fill('1');
      await field('region').fill('eu-central');
      await field('endpointHost').fill('fra1.example.net');
      await field('publicKey').fill(key);
      await field('linkLocal').fill('fe80::1');
      await field('loopback4').fill('172.20.53.1');
      await page.getByRole('button', { name: /^(Add the router|添加该路由器)$/ }).click();
    };
    // a key that is no WireGuard key: named at its field, which takes the focus
    await fill('not-a-key');
    const keyError = page.locator('#add-router-publicKey-error');
    await keyError.waitFor();
    expect(await keyError.textContent()).not.toBe('');
    expect(await page.locator('form.router-form .problem').count()).toBe(0);
    await expect.poll(() => focusedId(page)).toBe('add-router-publicKey');
    await accessibleEverywhere(page, 'a refused router', async () => {
      if (!(await keyError.isVisible())) await fill('not-a-key');
      await keyError.waitFor();
    });
    expect((await controller.post(admin, '/admin/router', { action: 'list' })).body.routers).toEqual([]);

    await page.getByLabel('WireGuard public key').fill(wgKey());
    await page.getByRole('button', { name: 'Add the router' }).click();
    const tokenCard = page.getByTestId('agent-token');
    await tokenCard.waitFor();
    await expect.poll(() => focusedId(page)).toBe('added-title');
    const agentToken = ((await tokenCard.locator('pre').textContent()) ?? '').trim();
    // the token shown is the router's: the agent API takes it
    expect((await controller.get('/agent/fra1/sessions', agentToken)).status).toBe(200);
    await accessibleEverywhere(page, 'the routers page with a router');
    const card = page.locator('article[data-router="fra1"]');

    // Escape closes the form, the focus back on the button that opened it
    const edit = card.getByRole('button', { name: 'Edit' });
    await edit.click();
    await card.getByLabel('Display name').press('Escape');
    await card.locator('form').waitFor({ state: 'detached' });
    await expect.poll(() => edit.evaluate((b) => b === b.ownerDocument.activeElement)).toBe(true);
    // edit: the fields changed are sent; nothing changed says so
    await edit.click();
    await card.getByRole('button', { name: 'Save the router' }).click();
    await card.getByText('Nothing changed: edit a field first.').waitFor();
    await card.getByLabel('Display name').fill('Frankfurt Eins');
    await card.getByLabel('Most sessions (optional)').fill('5');
    await card.getByRole('button', { name: 'Save the router' }).click();
    await expect.poll(() => page.getByTestId('routers-notice').textContent()).toBe('Router fra1 saved.');
    const listed = (await controller.post(admin, '/admin/router', { action: 'list' })).body.routers as {
      spec: Record<string, unknown>;
    }[];
    expect(listed[0]?.spec).toMatchObject({ displayName: 'Frankfurt Eins', maxSessions: 5, nodeId: 1 });
    // an optional field emptied is cleared (null in the update), as the form's hint says
    await edit.click();
    await card.getByText('An optional field left empty is removed', { exact: false }).waitFor();
    await accessibleEverywhere(page, 'the router edit form', async () => {
      if ((await card.locator('form').count()) === 0)
        await card.getByRole('button', { name: /^(Edit|编辑)$/ }).click();
      await card.locator('form').waitFor();
    });
    await card.getByLabel('Most sessions (optional)').fill('');
    await card.getByRole('button', { name: 'Save the router' }).click();
    await expect.poll(() => page.getByTestId('routers-notice').textContent()).toBe('Router fra1 saved.');
    const cleared = (await controller.post(admin, '/admin/router', { action: 'list' })).body.routers as {
      spec: Record<string, unknown>;
    }[];
    expect(cleared[0]?.spec).not.toHaveProperty('maxSessions');
    expect(cleared[0]?.spec).toMatchObject({ displayName: 'Frankfurt Eins' });

    // a new agent token, after a question: the old one is refused, the new one shown once is taken
    await card.getByRole('button', { name: 'New agent token' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Replace the token' }).click();
    await expect
      .poll(() => page.getByTestId('routers-notice').textContent())
      .toBe('Router fra1 has a new agent token.');
    const newToken = ((await tokenCard.locator('pre').textContent()) ?? '').trim();
    expect(newToken).not.toBe(agentToken);
    expect((await controller.get('/agent/fra1/sessions', agentToken)).status).toBe(401);
    expect((await controller.get('/agent/fra1/sessions', newToken)).status).toBe(200);

    // remove: Escape closes the question and keeps the router; the focus goes back to the button
    const remove = card.getByRole('button', { name: 'Remove the router' });
    await remove.click();
    const dialog = page.getByRole('dialog', { name: 'Remove router fra1?' });
    await dialog.waitFor();
    await accessibleEverywhere(page, 'the remove question', async () => {
      if (!(await page.getByRole('dialog').isVisible()))
        await card.getByRole('button', { name: /删除该路由器|Remove the router/ }).click();
      // the page renders after the click returns: the next key must find the dialog open
      await page.getByRole('dialog').waitFor();
    });
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });
    expect(await remove.evaluate((b) => b === b.ownerDocument.activeElement)).toBe(true);
    expect((await controller.post(admin, '/admin/router', { action: 'list' })).body.routers).toHaveLength(1);
    await remove.click();
    await dialog.getByRole('button', { name: 'Remove the router' }).click();
    await expect.poll(() => page.getByTestId('routers-notice').textContent()).toBe('Router fra1 removed.');
    expect((await controller.post(admin, '/admin/router', { action: 'list' })).body.routers).toEqual([]);
    expect(problems).toEqual([]);
    await close();
  });

  it('edits the policy: the change shown line by line before it is saved, a refusal shown', async () => {
    const { page, problems, close } = await signedIn(ADMINS[1]!);
    await page.getByRole('link', { name: 'Policy' }).click();
    const current = page.getByLabel('The policy as stored');
    await expect.poll(() => current.textContent()).toContain(`"dn42Asn": ${ADMIN_ASN}`);
    await accessibleEverywhere(page, 'the policy page');

    await page.getByRole('button', { name: 'Edit the policy' }).click();
    const editor = page.locator('#policy-text');
    await expect.poll(() => focusedId(page)).toBe('policy-text');
    // not JSON: said at the field, nothing sent
    await editor.fill('{ "dn42Asn": ');
    await page.getByRole('button', { name: 'Review the change' }).click();
    await page.locator('#policy-text-error').waitFor();
    await accessibleEverywhere(page, 'the policy editor with an error', async () => {
      if (await editor.isVisible()) return;
      await page.getByRole('button', { name: /Edit the policy|编辑策略/ }).click();
      await editor.fill('{');
      await page.getByRole('button', { name: /Review the change|查看改动/ }).click();
      await page.locator('#policy-text-error').waitFor();
    });

    // the editor is open again, with its error (accessibleEverywhere left it so)
    // the stored policy with its defaults (mergeIsApproval …), two fields added at its end
    const stored = (await controller.post(admin, '/admin/policy', { action: 'get' })).body.spec as object;
    const edited = { ...stored, blockedAsns: [4242429999], maxPendingPerAsn: 3 };
    await editor.fill(JSON.stringify(edited, null, 2));
    await page.getByRole('button', { name: 'Review the change' }).click();
    const diff = page.getByTestId('policy-diff');
    await diff.waitFor();
    await expect.poll(() => focusedId(page)).toBe('policy-diff-title');
    expect(await diff.locator('.diff-added').allTextContents()).toEqual(
      expect.arrayContaining(['+   "blockedAsns": [\n', '+     4242429999\n', '+   "maxPendingPerAsn": 3\n']),
    );
    // the old last line, which gains a comma
    expect(await diff.locator('.diff-removed').count()).toBe(1);
    // nothing is stored before Save
    expect((await controller.post(admin, '/admin/policy', { action: 'get' })).body.spec).toEqual(stored);
    await accessibleEverywhere(page, 'the policy change', async () => {
      if (await diff.isVisible()) return;
      await page.getByRole('button', { name: /Edit the policy|编辑策略/ }).click();
      await editor.fill(JSON.stringify(edited, null, 2));
      await page.getByRole('button', { name: /Review the change|查看改动/ }).click();
      await diff.waitFor();
    });
    // back to editing keeps the text; then save
    await page.getByRole('button', { name: 'Back to editing' }).click();
    expect(JSON.parse(await editor.inputValue())).toEqual(edited);
    await page.getByRole('button', { name: 'Review the change' }).click();
    await page.getByRole('button', { name: 'Save the policy' }).click();
    await page.getByText('Saved: the agents apply the policy on their next pass.').waitFor();
    expect((await controller.post(admin, '/admin/policy', { action: 'get' })).body.spec).toEqual(edited);

    // the controller refuses a default policy without the network's ASN: said, nothing stored
    await page.getByRole('button', { name: 'Edit the policy' }).click();
    await editor.fill(JSON.stringify({ ...edited, dn42Asn: undefined }));
    await page.getByRole('button', { name: 'Review the change' }).click();
    await page.getByRole('button', { name: 'Save the policy' }).click();
    await expect.poll(() => page.locator('.problem').first().textContent()).toContain('dn42Asn');
    expect((await controller.post(admin, '/admin/policy', { action: 'get' })).body.spec).toEqual(edited);
    expect(problems).toEqual([]);
    await close();
  });

  it('revokes one token by its id and every token of an ASN; the API then refuses them', async () => {
    const one = tokens.issueToken(PEER_ASN, 'user');
    const other = tokens.issueToken(PEER_ASN + 1, 'user');
    for (const t of [one, other])
      expect((await controller.post(t.token, '/session', { action: 'list' })).status).toBe(200);
    const { page, problems, close } = await signedIn(ADMINS[2]!);
    await page.getByRole('link', { name: 'Tokens' }).click();
    await page.getByText('Nothing is revoked.').waitFor();
    await accessibleEverywhere(page, 'the tokens page');

    // an id that is no token id: named at its field
    await page.getByLabel('Token id').fill('not a token id');
    await page.getByRole('button', { name: 'Revoke the token' }).click();
    await page.locator('#token-id-error').waitFor();
    await expect.poll(() => focusedId(page)).toBe('token-id');
    await accessibleEverywhere(page, 'a refused token id', async () => {
      if (await page.locator('#token-id-error').isVisible()) return;
      await page.locator('#token-id').fill('not a token id');
      await page.getByRole('button', { name: /Revoke the token|吊销该令牌/ }).click();
      await page.locator('#token-id-error').waitFor();
    });
    await page.getByLabel('Token id').fill(one.id);
    await page.getByRole('button', { name: 'Revoke the token' }).click();
    await expect.poll(() => page.getByTestId('tokens-notice').textContent()).toBe(`Token ${one.id} revoked.`);
    await expect.poll(() => page.getByTestId('revocations').textContent()).toContain(one.id);
    const refused = await controller.post(one.token, '/session', { action: 'list' });
    expect(refused).toMatchObject({ status: 401, body: { code: 'INVALID_TOKEN' } });

    // every token of an ASN: asked first; Escape leaves everything as it was
    const asnField = page.getByLabel('ASN', { exact: true });
    await asnField.fill('AS');
    await page.getByRole('button', { name: 'Revoke every token' }).click();
    await page.locator('#revoke-asn-error').waitFor();
    await asnField.fill(`AS${PEER_ASN + 1}`);
    await page.getByRole('button', { name: 'Revoke every token' }).click();
    const dialog = page.getByRole('dialog', { name: `Revoke every token of AS${PEER_ASN + 1}?` });
    await dialog.waitFor();
    await accessibleEverywhere(page, 'the revoke-asn question', async () => {
      if (await page.getByRole('dialog').isVisible()) return;
      await page.locator('#revoke-asn').fill(`AS${PEER_ASN + 1}`);
      await page.getByRole('button', { name: /Revoke every token|吊销全部令牌/ }).click();
      await page.getByRole('dialog').waitFor();
    });
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });
    expect((await controller.post(other.token, '/session', { action: 'list' })).status).toBe(200);
    await page.getByRole('button', { name: 'Revoke every token' }).click();
    await dialog.getByRole('button', { name: 'Revoke every token' }).click();
    await expect
      .poll(() => page.getByTestId('tokens-notice').textContent())
      .toBe(`Every token of AS${PEER_ASN + 1} issued until now revoked.`);
    await expect.poll(() => page.getByTestId('revocations').textContent()).toContain(`AS${PEER_ASN + 1}`);
    const refusedAsn = await controller.post(other.token, '/session', { action: 'list' });
    expect(refusedAsn).toMatchObject({ status: 401, body: { code: 'INVALID_TOKEN' } });
    expect(problems).toEqual([]);
    await close();
  });
});
