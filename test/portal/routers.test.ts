/**
 * The portal's routers page reads each condition the right way round (docs/kubernetes.md, Conditions),
 * in a real browser against a real controller: an admin logs in with an `ssh-keygen -Y sign`
 * signature; a router whose agent reports shows no warning, its conditions only in the closed list; a
 * router not Ready and Stalled shows a warning for each with its reason and message, and none for its
 * healthy conditions; the badge says what Ready says. axe-core runs on the page.
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DirectoryRegistry } from '../../controller/auth/login/registry.ts';
import { ADMIN_ASN, startHarness, type Harness } from '../api/helpers.ts';
import { sshKey, tempDir, writeRegistry, type SshKey } from '../login/support.ts';
import { heartbeat, markStalled, STALLED } from '../support/router-conditions.ts';
import { expectAccessible, launchBrowser, logInWithSsh, openPage } from './support.ts';

let dir: string;
let h: Harness;
let url: string;
let browser: Browser;
let adminKey: SshKey;

beforeAll(async () => {
  dir = await tempDir('portal-routers');
  adminKey = await sshKey(dir, 'ed25519', 'admin');
  await writeRegistry(path.join(dir, 'registry'), {
    autNums: { [ADMIN_ASN]: ['NET-MNT'] },
    mntners: { 'NET-MNT': [adminKey.publicLine] },
  });
  h = await startHarness(
    {},
    {
      registry: new DirectoryRegistry(path.join(dir, 'registry')),
      serviceHost: '127.0.0.1',
      admins: [ADMIN_ASN],
    },
  );
  url = await h.app.listen({ host: '127.0.0.1', port: 0 });
  await heartbeat(url, 'fra1', await h.addRouter('fra1', { displayName: 'Frankfurt 1' }));
  await heartbeat(url, 'lon1', await h.addRouter('lon1', { displayName: 'London 1' }));
  markStalled(h, 'lon1', new Date(Date.now() - 20 * 60_000).toISOString());
  await h.addRouter('ams1', { displayName: 'Amsterdam 1' });
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await h?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('portal routers page: conditions', () => {
  it('a healthy router with no warning; an unhealthy one with its reasons', async () => {
    const { page, problems } = await openPage(browser, url);
    await page.goto(url);
    await logInWithSsh(page, ADMIN_ASN, adminKey);
    await page.getByRole('link', { name: 'Routers' }).click();

    const healthy = page.locator('article[data-router="fra1"]');
    await healthy.waitFor();
    // Reconciling=False and Stalled=False are their healthy states: no warning, only the quiet list
    expect(await healthy.locator('.warning').count()).toBe(0);
    const summary = healthy.locator('details summary');
    expect(await summary.textContent()).toBe('Conditions (4, all healthy)');
    expect(await healthy.locator('details').getAttribute('open')).toBeNull();
    expect(await healthy.getByText('Reconciling=False').isVisible()).toBe(false);
    expect(await healthy.locator('.badge').first().textContent()).toBe('ready');

    const unhealthy = page.locator('article[data-router="lon1"]');
    const warnings = unhealthy.locator('.warning');
    expect(await warnings.evaluateAll((els) => els.map((e) => e.getAttribute('data-condition')))).toEqual([
      'Ready',
      'Stalled',
    ]);
    const ready = unhealthy.locator('.warning[data-condition="Ready"]');
    expect(await ready.locator('strong').textContent()).toBe(`Ready=False: ${STALLED.ready.reason}`);
    expect(await ready.textContent()).toContain(STALLED.ready.message);
    const stalled = unhealthy.locator('.warning[data-condition="Stalled"]');
    expect(await stalled.locator('strong').textContent()).toBe(`Stalled=True: ${STALLED.stalled.reason}`);
    expect(await stalled.textContent()).toContain(STALLED.stalled.message);
    expect(await unhealthy.locator('details summary').textContent()).toBe('Conditions (4)');
    expect(await unhealthy.locator('.badge').first().textContent()).toBe('not ready');

    // a router whose agent never reported: no conditions to flag, and the badge says so
    const silent = page.locator('article[data-router="ams1"]');
    expect(await silent.locator('.badge').first().textContent()).toBe('agent never reported');
    expect(await silent.locator('.warning').count()).toBe(0);

    // the quiet list, opened: every condition with how long it has held
    await unhealthy.locator('details summary').click();
    const stalledItem = unhealthy.locator('details li', { hasText: 'Stalled=True' });
    expect(await stalledItem.textContent()).toContain('20 minutes ago');

    await expectAccessible(page, 'routers with conditions');
    expect(problems).toEqual([]);
  });
});
