/**
 * The portal's sign-in, keyboard paths and failure messages in a real browser against a real controller
 * (git store, login registry on disk, ssh-keygen signatures): the sign-in survives a reload and a second
 * tab with no token a script can read; logout revokes it, so a reload is signed out and the old cookie is
 * refused by the API; a peer goes from login to the configuration's download by keyboard alone, focus
 * following each navigation and submit; each path that used to fail silently shows its message; axe-core
 * finds nothing serious on these pages in English and Chinese at 1280 and 390 px (docs/login.md, The
 * portal's sign-in; docs/user-guide.md, Keyboard).
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DirectoryRegistry } from '../../controller/auth/login/registry.ts';
import { expectOk, startHarness, USER_ASN, wgKey, type Harness } from '../api/helpers.ts';
import { sshKey, sshSign, tempDir, writeRegistry, type SshKey } from '../login/support.ts';
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
let peerKey: SshKey;

async function registry(root: string): Promise<DirectoryRegistry> {
  await writeRegistry(root, {
    autNums: { [USER_ASN]: ['PEER-MNT'] },
    mntners: { 'PEER-MNT': [peerKey.publicLine] },
    routes: { 'fd42:1234::/48': [USER_ASN] },
  });
  return new DirectoryRegistry(root);
}

beforeAll(async () => {
  dir = await tempDir('portal-signin');
  peerKey = await sshKey(dir, 'ed25519', 'peer');
  await registry(path.join(dir, 'registry'));
  ({ h, url, browser } = await startPortal(dir, []));
  await h.addRouter('fra1', { displayName: 'Frankfurt 1', location: 'Frankfurt' });
  await expectOk(h.post('/admin/policy', h.admin, { action: 'set', spec: { dn42Asn: 4242420000 } }));
});

afterAll(() => stopPortal({ browser, h }, dir));

/** Whether `target` has the keyboard focus. */
const focused = (target: Locator) =>
  // typed structurally: the tests' TypeScript has no DOM types
  target.evaluate(
    (el: { ownerDocument: { activeElement: unknown } }) => el === el.ownerDocument.activeElement,
  );

/** Presses Tab (or Shift+Tab) until `target` has the focus, as a keyboard user moves through the page. */
async function tabTo(page: Page, target: Locator, key: 'Tab' | 'Shift+Tab' = 'Tab'): Promise<void> {
  for (let i = 0; i < 60; i++) {
    if (await focused(target)) return;
    await page.keyboard.press(key);
  }
  throw new Error(`${String(target)} is not reached by ${key}`);
}

/** The request a page sent with the sign-in cookie, from Node: what a captured cookie could do. */
async function withCookie(base: string, cookies: { name: string; value: string }[], body: unknown) {
  const csrf = cookies.find((c) => c.name === 'peerops_csrf')?.value ?? '';
  return fetch(`${base}/session`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      cookie: cookies.map((c) => `${c.name}=${c.value}`).join('; '),
      'x-peerops-csrf': csrf,
    },
    body: JSON.stringify(body),
  });
}

describe('portal sign-in, keyboard and messages', () => {
  it('goes from login to the configuration download by keyboard, focus following each step', async () => {
    const { context, page, problems } = await openPage(browser, url);
    await page.goto(url);
    await page.getByRole('heading', { name: 'Log in' }).waitFor();
    await tabTo(page, page.getByLabel('Your ASN'));
    await page.keyboard.type(String(USER_ASN));
    await page.keyboard.press('Enter');
    const challenge = (await page.getByTestId('challenge').textContent()) ?? '';
    await tabTo(page, page.getByLabel('The signature'));
    await page.keyboard.insertText(await sshSign(peerKey, challenge));
    await tabTo(page, page.getByRole('button', { name: 'Log in', exact: true }));
    await page.keyboard.press('Enter');
    const sessionsHeading = page.getByRole('heading', { name: 'Your sessions' });
    await sessionsHeading.waitFor();
    await expect.poll(() => focused(sessionsHeading), { timeout: 5000 }).toBe(true);

    // no script of the page can read the sign-in: the cookie is HttpOnly, SameSite=Strict
    const cookies = await context.cookies();
    expect(cookies.find((c) => c.name === 'peerops_session')).toMatchObject({
      httpOnly: true,
      sameSite: 'Strict',
    });
    expect(await page.evaluate('document.cookie')).not.toContain('peerops_session');

    await tabTo(page, page.getByRole('link', { name: 'New session' }).last());
    await page.keyboard.press('Enter');
    const createHeading = page.getByRole('heading', { name: 'New session' });
    await createHeading.waitFor();
    await expect.poll(() => focused(createHeading), { timeout: 5000 }).toBe(true);

    // the skip link goes to this page's main region and keeps the half-filled form
    await tabTo(page, page.getByLabel('Your DN42 IPv6 address'));
    await page.keyboard.type('::1');
    await tabTo(page, page.getByRole('link', { name: 'Skip to the content' }), 'Shift+Tab');
    await page.keyboard.press('Enter');
    await expect.poll(() => focused(page.locator('main')), { timeout: 5000 }).toBe(true);
    expect(await page.evaluate('location.hash')).toBe('#/new');
    expect(await page.getByLabel('Your DN42 IPv6 address').inputValue()).toBe('::1');

    await tabTo(page, page.getByRole('radio', { name: /Frankfurt 1/ }));
    await page.keyboard.press('Space');
    await tabTo(page, page.getByLabel('Your link-local address on the tunnel'));
    await page.keyboard.type('fe80::1234');
    await tabTo(page, page.getByLabel('Your WireGuard public key'));
    await page.keyboard.type(wgKey());
    await tabTo(page, page.getByRole('button', { name: 'Create the session' }));
    await page.keyboard.press('Enter');
    // refused: the focus goes to the first field the API named
    const ipv6 = page.getByLabel('Your DN42 IPv6 address');
    await page.locator('#f-ipv6-error').waitFor();
    await expect.poll(() => focused(ipv6), { timeout: 5000 }).toBe(true);
    await expectAccessible(page, 'create with a field error, focused');
    await page.keyboard.press('ControlOrMeta+A');
    await page.keyboard.type('fd42:1234::1');
    await tabTo(page, page.getByRole('button', { name: 'Create the session' }));
    await page.keyboard.press('Enter');
    const created = page.getByRole('heading', { name: 'Session created: PENDING_REVIEW' });
    await created.waitFor();
    await expect.poll(() => focused(created), { timeout: 5000 }).toBe(true);

    // "Show" says it is loading while the answer is on its way (held back 1 s on the wire, not changed)
    await page.route('**/session', async (route) => {
      if (route.request().postData()?.includes('"config"')) await new Promise((r) => setTimeout(r, 1000));
      await route.continue();
    });
    await tabTo(page, page.getByRole('button', { name: 'Show' }));
    await page.keyboard.press('Enter');
    await page.getByTestId('config-loading').waitFor();
    await page.getByTestId('config-content').waitFor();
    await page.unroute('**/session');
    await expectAccessible(page, 'created, with the configuration');
    await tabTo(page, page.getByRole('button', { name: /^Download / }));
    const download = page.waitForEvent('download');
    await page.keyboard.press('Enter');
    const file = await download;
    expect(file.suggestedFilename()).toMatch(/\.conf$/);
    expect(await readFile((await file.path())!, 'utf8')).toContain('[Interface]');

    // "New session" in the navigation after a create: the form again, its heading focused
    await page.getByRole('link', { name: 'New session' }).first().click();
    await createHeading.waitFor();
    await expect.poll(() => focused(createHeading), { timeout: 5000 }).toBe(true);
    expect(problems).toEqual([]);
    await context.close();
  });

  it('shows the API error of Save with nothing changed; Escape closes the form and the panel', async () => {
    const { context, page, problems } = await openPage(browser, url);
    await page.goto(url);
    await logInWithSsh(page, USER_ASN, peerKey);
    for (const [lang, width] of [
      ['en', 1280],
      ['zh-CN', 390],
      ['en', 390],
      ['zh-CN', 1280],
    ] as const) {
      const label = `${lang} at ${width} px`;
      await page.setViewportSize({ width, height: 900 });
      await chooseLanguage(page, lang);
      const card = page.locator('article.session');
      await card.waitFor();
      // the disclosure buttons: the configuration's, then Change
      const change = card.locator('button[aria-expanded]').nth(1);
      await change.click();
      await card.locator('form.modify button[type="submit"]').click();
      const problem = card.locator('form.modify .problem');
      await problem.waitFor();
      expect(await problem.textContent(), label).toContain('INVALID_REQUEST');
      await expect.poll(() => focused(problem), { timeout: 5000, message: label }).toBe(true);
      await expectAccessible(page, `change with nothing changed, ${label}`);
      await page.keyboard.press('Escape');
      await card.locator('form.modify').waitFor({ state: 'detached' });
      await expect.poll(() => focused(change), { timeout: 5000, message: label }).toBe(true);
      // the configuration panel closes on Escape too, from any control inside it
      const config = card.locator('button[aria-expanded]').first();
      await config.click();
      await card.locator('.config select').focus();
      await page.keyboard.press('Escape');
      await card.locator('.config').waitFor({ state: 'detached' });
      await expect.poll(() => focused(config), { timeout: 5000, message: label }).toBe(true);
      await page
        .getByRole('link', { name: lang === 'en' ? 'New session' : '新建会话' })
        .first()
        .click();
      await page.locator('#create-title').waitFor();
      await expectAccessible(page, `create, ${label}`);
      await page.locator('nav a').first().click();
    }
    expect(problems).toEqual([]);
    await context.close();
  });

  it('stays signed in across a reload and a second tab; logout then reload is signed out, the old cookie refused', async () => {
    const { context, page, problems } = await openPage(browser, url);
    await page.goto(url);
    await logInWithSsh(page, USER_ASN, peerKey);
    await page.getByRole('heading', { name: 'Your sessions' }).waitFor();
    await page.reload();
    await page.getByRole('heading', { name: 'Your sessions' }).waitFor();
    await page.getByText(`AS${USER_ASN} · peer`).waitFor();
    const second = await context.newPage();
    await second.goto(`${url}/#/new`);
    await second.getByRole('heading', { name: 'New session' }).waitFor();
    await second.close();

    const cookies = await context.cookies();
    expect((await withCookie(url, cookies, { action: 'list' })).status).toBe(200);
    const revoked = page.waitForResponse((res) => new URL(res.url()).pathname === '/token');
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.getByRole('heading', { name: 'Log in' }).waitFor();
    expect((await revoked).status()).toBe(200);
    expect((await context.cookies()).map((c) => c.name)).toEqual([]);
    await page.reload();
    await page.getByRole('heading', { name: 'Log in' }).waitFor();
    const after = await withCookie(url, cookies, { action: 'list' });
    expect(after.status).toBe(401);
    expect(((await after.json()) as { detail: string }).detail).toBe('the token was revoked; log in again');

    for (const [lang, width] of [
      ['en', 1280],
      ['en', 390],
      ['zh-CN', 390],
      ['zh-CN', 1280],
    ] as const) {
      await page.setViewportSize({ width, height: 900 });
      await chooseLanguage(page, lang);
      await page.locator('#login-title').waitFor();
      await expectAccessible(page, `login, ${lang} at ${width} px`);
    }
    expect(problems).toEqual([]);
    await context.close();
  });

  it('says so, with a retry, when the page loads while rate-limited', async () => {
    const limited = await startHarness(
      { rateLimit: { perMinute: 6, agentPerMinute: 100 } },
      {
        registry: await registry(path.join(dir, 'registry-limited')),
        serviceHost: '127.0.0.1',
        admins: [],
      },
    );
    try {
      const base = await limited.app.listen({ host: '127.0.0.1', port: 0 });
      const { context, page, problems } = await openPage(browser, base);
      await page.goto(`${base}/#/new`);
      await logInWithSsh(page, USER_ASN, peerKey);
      // the signed-in user's minute is used up (the limit counts per user)
      const cookies = await context.cookies();
      for (let i = 0; i < 10; i++)
        if ((await withCookie(base, cookies, { action: 'list' })).status === 429) break;
      await page.reload();
      const alert = page.getByRole('alert').filter({ hasText: 'RATE_LIMITED' });
      await alert.waitFor();
      expect(await alert.textContent()).toContain('Too many requests');
      expect(await page.locator('main').textContent()).not.toContain('This network has no routers yet.');
      const again = page.waitForResponse((res) => new URL(res.url()).pathname === '/token');
      await page.getByRole('button', { name: 'Try again' }).click();
      expect((await again).status()).toBe(429);
      await alert.waitFor();
      await expectAccessible(page, 'rate-limited');
      expect(problems).toEqual([]);
      await context.close();
    } finally {
      await limited.close();
    }
  });
});
