/**
 * Each language but English is an asset of its own (web/i18n/index.ts; docs/decisions.md, Portal): a
 * Chinese reader's first render is Chinese, with no English before it; an English reader never fetches
 * the Chinese words; a change of language fetches them once, under the page's strict CSP; a fetch that
 * fails leaves the page in its language and says so. The failure is made by refusing the request in
 * the browser (playwright's routing): the controller itself always serves the file.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../api/helpers.ts';
import { chooseLanguage, expectAccessible, launchBrowser, UI_TIMEOUT_MS } from './support.ts';

let h: Harness;
let url: string;
let browser: Browser;

beforeAll(async () => {
  h = await startHarness();
  url = await h.app.listen({ host: '127.0.0.1', port: 0 });
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await h?.close();
});

/** A page for a reader whose browser asks for `locale`; the portal's scripts it fetches, in order. */
async function readerPage(locale: string) {
  const context = await browser.newContext({ locale });
  const page = await context.newPage();
  page.setDefaultTimeout(UI_TIMEOUT_MS);
  const problems: string[] = [];
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() === 'error') problems.push(`console: ${msg.text()}`);
  });
  const scripts: string[] = [];
  page.on('request', (req) => {
    const name = new URL(req.url()).pathname;
    if (name.endsWith('.js')) scripts.push(name);
  });
  return { context, page, problems, scripts };
}

/** Every text the app's root held, from before the portal's script ran (DevTools, outside the CSP). */
async function recordTexts(page: Page): Promise<void> {
  await page.addInitScript(`
    window.__texts = [];
    new MutationObserver(() => {
      const app = document.getElementById('app');
      if (app && app.textContent) window.__texts.push(app.textContent);
    }).observe(document, { subtree: true, childList: true, characterData: true });
  `);
}

describe('the language assets', () => {
  it('a Chinese reader sees Chinese from the first render, after the Chinese asset', async () => {
    const { context, page, problems, scripts } = await readerPage('zh-CN');
    await recordTexts(page);
    await page.goto(url);
    await page.getByRole('heading', { name: '登录' }).waitFor();
    expect(await page.evaluate('document.documentElement.lang')).toBe('zh-CN');
    const texts = (await page.evaluate('window.__texts')) as string[];
    expect(texts.length).toBeGreaterThan(0);
    expect(texts.filter((t) => t.includes('Log in'))).toEqual([]);
    expect(scripts.map((s) => s.replace(/-[A-Z0-9]+\.js$/, ''))).toEqual(['/assets/app', '/assets/zh-CN']);
    await expectAccessible(page, 'login, zh-CN, first render');
    expect(problems).toEqual([]);
    await context.close();
  });

  it('an English reader never fetches it; a change of language fetches it once', async () => {
    const { context, page, problems, scripts } = await readerPage('en-US');
    await page.goto(url);
    await page.getByRole('heading', { name: 'Log in' }).waitFor();
    expect(scripts.map((s) => s.replace(/-[A-Z0-9]+\.js$/, ''))).toEqual(['/assets/app']);
    await chooseLanguage(page, 'zh-CN');
    await page.getByRole('heading', { name: '登录' }).waitFor();
    await chooseLanguage(page, 'en');
    await page.getByRole('heading', { name: 'Log in' }).waitFor();
    await chooseLanguage(page, 'zh-CN');
    await page.getByRole('heading', { name: '登录' }).waitFor();
    expect(scripts.map((s) => s.replace(/-[A-Z0-9]+\.js$/, ''))).toEqual(['/assets/app', '/assets/zh-CN']);
    // the choice is kept: a reload is Chinese from its first render
    await page.reload();
    await page.getByRole('heading', { name: '登录' }).waitFor();
    expect(problems).toEqual([]);
    await context.close();
  });

  it('a language that cannot be fetched leaves the page in its language and says so', async () => {
    const { context, page } = await readerPage('zh-CN');
    await page.route('**/assets/zh-CN-*.js', (route) => route.abort());
    await page.goto(url);
    // the first render: English, saying why
    await page.getByRole('heading', { name: 'Log in' }).waitFor();
    const alert = page.getByRole('alert').filter({ hasText: '简体中文 could not be loaded' });
    await alert.waitFor();
    expect(await page.locator('#lang').inputValue()).toBe('en');
    await expectAccessible(page, 'login, the Chinese words not fetched');
    // once it can be fetched again, choosing it works
    await page.unroute('**/assets/zh-CN-*.js');
    await chooseLanguage(page, 'zh-CN');
    await page.getByRole('heading', { name: '登录' }).waitFor();
    expect(await alert.count()).toBe(0);
    await context.close();
  });
});
