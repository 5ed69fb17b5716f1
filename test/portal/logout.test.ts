/**
 * The portal's Log out revokes the token of the login (docs/login.md, Revoking tokens): a peer logs in in
 * a real browser with an `ssh-keygen -Y sign` signature, the token its requests carry is taken from the
 * wire, and after Log out the controller refuses it.
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DirectoryRegistry } from '../../controller/auth/login/registry.ts';
import { startHarness, USER_ASN, type Harness } from '../api/helpers.ts';
import { sshKey, tempDir, writeRegistry, type SshKey } from '../login/support.ts';
import { launchBrowser, logInWithSsh, openPage } from './support.ts';

let dir: string;
let h: Harness;
let url: string;
let browser: Browser;
let peerKey: SshKey;

beforeAll(async () => {
  dir = await tempDir('portal-logout');
  peerKey = await sshKey(dir, 'ed25519', 'peer');
  await writeRegistry(path.join(dir, 'registry'), {
    autNums: { [USER_ASN]: ['PEER-MNT'] },
    mntners: { 'PEER-MNT': [peerKey.publicLine] },
  });
  h = await startHarness(
    {},
    { registry: new DirectoryRegistry(path.join(dir, 'registry')), serviceHost: '127.0.0.1', admins: [] },
  );
  url = await h.app.listen({ host: '127.0.0.1', port: 0 });
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await h?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('portal logout', () => {
  it("revokes the login's token: the controller refuses it afterwards", async () => {
    const { page } = await openPage(browser, url);
    const tokens = new Set<string>();
    page.on('request', (request) => {
      const auth = request.headers()['authorization'];
      if (auth?.startsWith('Bearer ')) tokens.add(auth.slice('Bearer '.length));
    });
    await page.goto(url);
    await logInWithSsh(page, USER_ASN, peerKey);
    await page.getByRole('heading', { name: 'Your sessions' }).waitFor();
    // the list's request (its live stream) may leave after the heading shows
    await expect.poll(() => tokens.size).toBe(1);
    const [token] = [...tokens] as [string];
    expect((await h.post('/session', token, { action: 'list' })).statusCode).toBe(200);

    const revoked = page.waitForResponse((res) => new URL(res.url()).pathname === '/token');
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.getByRole('heading', { name: 'Log in' }).waitFor();
    expect((await revoked).status()).toBe(200);
    const after = await h.post('/session', token, { action: 'list' });
    expect(after.statusCode).toBe(401);
    expect((after.json() as { detail: string }).detail).toBe('the token was revoked; log in again');
  });
});
