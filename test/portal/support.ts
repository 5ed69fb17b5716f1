/**
 * The portal tests' browser: Debian's chromium driven by playwright-core, axe-core run inside each page,
 * and the login a person does (the challenge read from the page, signed by ssh-keygen, pasted back).
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import axe from 'axe-core';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { expect } from 'vitest';
import { DirectoryRegistry } from '../../controller/auth/login/registry.ts';
import { startHarness, type Harness } from '../api/helpers.ts';
import { perFile } from '../support/per-file.ts';
import {
  sshKey,
  sshSign,
  tempDir,
  writeRegistry,
  type RegistryFixture,
  type SshKey,
} from '../login/support.ts';

export const CHROMIUM = '/usr/bin/chromium';
/** Waits in a browser on a loaded 2-core machine: generous, the tests assert behaviour, not speed. */
export const UI_TIMEOUT_MS = 30_000;

export async function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM });
}

/** A portal on loopback: the API harness, its URL and a browser. */
export interface Portal {
  h: Harness;
  url: string;
  browser: Browser;
}

/**
 * The portal the browser tests sign in to: logins checked against the directory registry the caller
 * wrote at `<dir>/registry`, `admins` the ASNs with the admin role.
 */
export async function startPortal(dir: string, admins: number[]): Promise<Portal> {
  const h = await startHarness(
    {},
    { registry: new DirectoryRegistry(path.join(dir, 'registry')), serviceHost: '127.0.0.1', admins },
  );
  const url = await h.app.listen({ host: '127.0.0.1', port: 0 });
  return { h, url, browser: await launchBrowser() };
}

/** Closes what startPortal opened, as far as it got, and removes the test's dir. */
export async function stopPortal(portal: Partial<Portal>, dir: string | undefined): Promise<void> {
  await portal.browser?.close();
  await portal.h?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
}

/** A portal where one person signs in with their SSH key, and the temp dir that holds them. */
export interface SignedInPortal extends Portal {
  dir: string;
  key: SshKey;
}

/**
 * For one test file (test/support/per-file.ts), a portal (startPortal) whose registry holds
 * `objects(key)` for an ed25519 `key`; the registry is read at each login, so objects the file writes
 * there after the start count.
 */
function useSignedInPortal(
  prefix: string,
  objects: (key: SshKey) => RegistryFixture,
  admins: number[],
): SignedInPortal {
  return perFile(
    async () => {
      const dir = await tempDir(prefix);
      const key = await sshKey(dir, 'ed25519', 'person');
      await writeRegistry(path.join(dir, 'registry'), objects(key));
      return { dir, key, ...(await startPortal(dir, admins)) };
    },
    (portal) => stopPortal(portal, portal.dir),
  );
}

/** A portal where the peer `asn`, holding fd42:1234::/48, signs in with `key`. */
export function usePeerPortal(prefix: string, asn: number, admins: number[]): SignedInPortal {
  return useSignedInPortal(
    prefix,
    (key) => ({
      autNums: { [asn]: ['PEER-MNT'] },
      mntners: { 'PEER-MNT': [key.publicLine] },
      routes: { 'fd42:1234::/48': [asn] },
    }),
    admins,
  );
}

/** A portal where the admin `asn` signs in with `key`; the file writes its peers' objects. */
export function useAdminPortal(prefix: string, asn: number): SignedInPortal {
  return useSignedInPortal(
    prefix,
    (key) => ({ autNums: { [asn]: ['NET-MNT'] }, mntners: { 'NET-MNT': [key.publicLine] } }),
    [asn],
  );
}

/**
 * A context for `origin` that may use the clipboard, and a page whose CSP reports and page errors are
 * collected: a test ends with `expect(problems).toEqual([])`.
 */
export async function openPage(
  browser: Browser,
  origin: string,
  viewport = { width: 1280, height: 900 },
): Promise<{ context: BrowserContext; page: Page; problems: string[] }> {
  const context = await browser.newContext({ viewport, locale: 'en-US' });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin });
  const page = await context.newPage();
  page.setDefaultTimeout(UI_TIMEOUT_MS);
  const problems: string[] = [];
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() === 'error' && /Content Security Policy|Refused to/i.test(msg.text()))
      problems.push(`console: ${msg.text()}`);
  });
  return { context, page, problems };
}

/**
 * axe-core over the page as it is: no serious or critical violation. The script is evaluated through
 * the DevTools protocol, which the page's CSP does not govern (an injected <script> would be refused).
 */
export async function expectAccessible(page: Page, label: string): Promise<void> {
  await page.evaluate(axe.source);
  // Strings, not functions: this code runs in the page, and the tests' TypeScript has no DOM types.
  const violations = (await page.evaluate(`axe
    .run(document, { resultTypes: ['violations'] })
    .then((r) => r.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      nodes: v.nodes.map((n) => n.target.join(' ')).slice(0, 5),
    })))`)) as { id: string; impact: string | null; nodes: string[] }[];
  const bad = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  expect(bad, `axe on ${label}`).toEqual([]);
}

/** The page fits the viewport: nothing scrolls sideways (the 390 px check). */
export async function expectNoSidewaysScroll(page: Page, label: string): Promise<void> {
  const { scroll, client } = (await page.evaluate(
    '({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth })',
  )) as { scroll: number; client: number };
  expect(scroll, `${label} scrolls sideways`).toBeLessThanOrEqual(client);
}

/** Logs in through the page as a person does: ASN, challenge, `ssh-keygen -Y sign`, paste, log in. */
export async function logInWithSsh(page: Page, asn: number, key: SshKey): Promise<void> {
  await page.getByLabel('Your ASN').fill(String(asn));
  await page.getByRole('button', { name: /get a (new )?challenge/i }).click();
  const challenge = (await page.getByTestId('challenge').textContent()) ?? '';
  expect(challenge).toMatch(new RegExp(`^peerops login challenge\\n[\\s\\S]*asn: ${asn}\\n[\\s\\S]*\\n$`));
  const command = (await page.getByTestId('ssh-command').textContent()) ?? '';
  expect(command).toContain(`cat > challenge.txt <<'EOF'\n${challenge}EOF\n`);
  expect(command).toContain('ssh-keygen -Y sign -n peerops -f ~/.ssh/id_ed25519 challenge.txt');
  expect(await page.getByTestId('gpg-command').textContent()).toContain('gpg --clearsign challenge.txt');
  await expectAccessible(page, 'login with a challenge');
  await page.getByLabel('The signature').fill(await sshSign(key, challenge));
  await page.getByRole('button', { name: 'Log in', exact: true }).click();
  await page.getByRole('button', { name: 'Log out' }).waitFor();
}

/**
 * Chooses `lang` in the header, as a reader does, and waits until the page is in it: its words may be
 * fetched first (web/i18n/index.ts), and the page changes language only then.
 */
export async function chooseLanguage(page: Page, lang: 'en' | 'zh-CN'): Promise<void> {
  await page.locator('#lang').selectOption(lang);
  await expect
    .poll(() => page.evaluate('document.documentElement.lang'), { timeout: UI_TIMEOUT_MS })
    .toBe(lang);
}

/**
 * axe at 1280 and 390 px (nothing scrolling sideways there) in English and Chinese. `reach` brings the
 * page to the state to check after each change of language, which renders the page afresh (it finds
 * its elements by id or by either language's words); the page is then put back in English at 1280 px,
 * in that state.
 */
export async function accessibleEverywhere(
  page: Page,
  label: string,
  reach: () => Promise<void> = async () => undefined,
): Promise<void> {
  for (const lang of ['en', 'zh-CN'] as const) {
    await chooseLanguage(page, lang);
    await reach();
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: 900 });
      await expectAccessible(page, `${label}, ${lang}, ${width} px`);
      if (width === 390) await expectNoSidewaysScroll(page, `${label}, ${lang}`);
    }
    await page.setViewportSize({ width: 1280, height: 900 });
  }
  await chooseLanguage(page, 'en');
  await reach();
}
