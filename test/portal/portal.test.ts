/**
 * The portal in a real browser against a real controller (git store, login registry on disk, keys from
 * ssh-keygen): a peer logs in by pasting an `ssh-keygen -Y sign` signature, creates a session (a refused
 * address shown at its field first), copies the wg-quick configuration and sees PENDING_REVIEW; an admin
 * logs in the same way and approves it; the peer then sees QUEUED_FOR_SETUP. axe-core runs on every
 * page, at desktop width and at 390 px, and the page reports no CSP violation.
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DirectoryRegistry } from '../../controller/auth/login/registry.ts';
import {
  ADMIN_ASN,
  expectOk,
  OTHER_ASN,
  startHarness,
  USER_ASN,
  wgKey,
  type Harness,
} from '../api/helpers.ts';
import {
  gpgKey,
  gpgSign,
  sshKey,
  stopGpgAgent,
  tempDir,
  writeRegistry,
  type GpgKey,
  type SshKey,
} from '../login/support.ts';
import {
  chooseLanguage,
  expectAccessible,
  expectNoSidewaysScroll,
  launchBrowser,
  logInWithSsh,
  openPage,
} from './support.ts';

const NETWORK_ASN = 4242420000;
let dir: string;
let h: Harness;
let url: string;
let browser: Browser;
let peerKey: SshKey;
let adminKey: SshKey;
let pgp: GpgKey;

beforeAll(async () => {
  dir = await tempDir('portal');
  [peerKey, adminKey, pgp] = await Promise.all([
    sshKey(dir, 'ed25519', 'peer'),
    sshKey(dir, 'ed25519', 'admin'),
    gpgKey(path.join(dir, 'gnupg'), 'Other Peer <other@example.test>'),
  ]);
  await writeRegistry(path.join(dir, 'registry'), {
    autNums: { [USER_ASN]: ['PEER-MNT'], [ADMIN_ASN]: ['NET-MNT'], [OTHER_ASN]: ['PGP-MNT'] },
    mntners: {
      'PEER-MNT': [peerKey.publicLine],
      'NET-MNT': [adminKey.publicLine],
      'PGP-MNT': [`pgp-fingerprint ${pgp.fingerprint}`],
    },
    routes: { 'fd42:1234::/48': [USER_ASN], '172.20.53.0/24': [USER_ASN] },
  });
  h = await startHarness(
    {},
    {
      registry: new DirectoryRegistry(path.join(dir, 'registry')),
      serviceHost: '127.0.0.1',
      admins: [ADMIN_ASN],
    },
  );
  await h.addRouter('fra1', { displayName: 'Frankfurt 1', location: 'Frankfurt', maxSessions: 10 });
  await h.addRouter('ams1', { displayName: 'Amsterdam 1', location: 'Amsterdam', acceptingSessions: false });
  await expectOk(h.post('/admin/policy', h.admin, { action: 'set', spec: { dn42Asn: NETWORK_ASN } }));
  await h.app.listen({ host: '127.0.0.1', port: 0 });
  const address = h.app.server.address();
  url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await h?.close();
  if (pgp) await stopGpgAgent(pgp.home);
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('portal', () => {
  it('takes a peer from login to a session in review, and an admin to its approval', async () => {
    const peer = await openPage(browser, url);
    const { page } = peer;
    await page.goto(url);
    await page.getByRole('heading', { name: 'Log in' }).waitFor();
    await expectAccessible(page, 'login');
    await logInWithSsh(page, USER_ASN, peerKey);
    await page.getByRole('heading', { name: 'Your sessions' }).waitFor();
    await expectAccessible(page, 'sessions (empty)');

    // Create: a closed router cannot be picked; an address the rules refuse is named at its field.
    await page.getByRole('link', { name: 'New session' }).first().click();
    await page.getByRole('heading', { name: 'New session' }).waitFor();
    await expect(page.getByRole('radio', { name: /Amsterdam 1/ }).isDisabled()).resolves.toBe(true);
    await expectAccessible(page, 'create');
    await page.getByRole('radio', { name: /Frankfurt 1/ }).check();
    const publicKey = wgKey();
    await page.getByLabel('Your DN42 IPv6 address').fill('::1');
    await page.getByLabel('Your link-local address on the tunnel').fill('fe80::1234');
    await page.getByLabel('Your WireGuard public key').fill(publicKey);
    await page.getByLabel('Your WireGuard endpoint (optional)').fill('peer.example.org:51820');
    await page.getByLabel('Your tunnel IPv4 address (optional)').fill('172.20.53.1');
    await page.getByRole('button', { name: 'Create the session' }).click();
    const ipv6Error = page.locator('#f-ipv6-error');
    await ipv6Error.waitFor();
    expect(await ipv6Error.textContent()).toMatch(/loopback/);
    // said at its field alone, not again under the form as `/ipv6: …`
    expect(await page.locator('form .problem').count()).toBe(0);
    await expect(page.getByLabel('Your DN42 IPv6 address').getAttribute('aria-invalid')).resolves.toBe(
      'true',
    );
    await expectAccessible(page, 'create with a field error');
    await page.getByLabel('Your DN42 IPv6 address').fill('fd42:1234::1');
    await page.getByRole('button', { name: 'Create the session' }).click();
    await page.getByRole('heading', { name: 'Session created: PENDING_REVIEW' }).waitFor();
    expect(await page.locator('main').textContent()).toContain(`AS${NETWORK_ASN}`);
    await expectAccessible(page, 'created');

    // The wg-quick configuration (POST /session config, docs/api.md), copied to the clipboard.
    await page.getByLabel('Format').selectOption('wg-quick');
    await page.getByRole('button', { name: 'Show' }).click();
    const config = page.getByTestId('config-content');
    await config.waitFor();
    const text = (await config.textContent()) ?? '';
    expect(text).toContain('[Interface]');
    expect(text).toContain('[Peer]');
    expect(text).toContain('fra1.example.net:');
    await page.getByRole('button', { name: 'Copy', exact: true }).click();
    await page.getByRole('button', { name: 'Copied' }).waitFor();
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(text);
    await expectAccessible(page, 'created, with the configuration');

    // The session in the list: PENDING_REVIEW in plain words, with what to do.
    await page.getByRole('link', { name: 'Sessions', exact: true }).click();
    const card = page.locator('article.session');
    await card.getByText('PENDING_REVIEW').waitFor();
    expect(await card.getByTestId('status-words').textContent()).toBe(
      "Waiting for an administrator's approval.",
    );
    expect(await card.textContent()).toContain('an administrator reviews new sessions');
    await expectAccessible(page, 'sessions');
    expect(peer.problems).toEqual([]);

    // The admin: reviews with every address and the controller's checks; approve.
    const admin = await openPage(browser, url);
    await admin.page.goto(url);
    await logInWithSsh(admin.page, ADMIN_ASN, adminKey);
    await admin.page.getByRole('link', { name: 'Reviews' }).click();
    // The review's card, not the sessions page's card still shown while the page changes.
    const review = admin.page
      .locator('article', { hasText: `AS${USER_ASN}` })
      .filter({ hasText: 'Passes the current policy' });
    await review.waitFor();
    const reviewText = (await review.textContent()) ?? '';
    for (const shown of ['fd42:1234::1', '172.20.53.1', 'fe80::1234', 'peer.example.org:51820', publicKey])
      expect(reviewText).toContain(shown);
    expect(reviewText).toContain('Passes the current policy');
    await expectAccessible(admin.page, 'reviews');
    // A rejection needs a reason: without one the page asks for it and nothing is sent.
    await review.getByRole('button', { name: 'Reject' }).click();
    await review.getByText('Give a reason to reject.').waitFor();
    await review.getByLabel('Reason').fill('checked the registry');
    await review.getByRole('button', { name: 'Approve' }).click();
    await admin.page.getByText('Nothing to review.').waitFor();
    const stored = h.store.listSessions().find((s) => s.spec.asn === USER_ASN);
    expect(stored?.status.code).toBe(4);

    await admin.page.getByRole('link', { name: 'Routers' }).click();
    const router = admin.page.locator('article[data-router="fra1"]');
    await router.waitFor();
    expect(await router.textContent()).toContain('QUEUED_FOR_SETUP');
    expect(await router.textContent()).toContain('1 of 10');
    await expectAccessible(admin.page, 'routers');
    await admin.page.getByRole('link', { name: 'Policy' }).click();
    await admin.page.getByText('dn42Asn').waitFor();
    expect(await admin.page.locator('main').textContent()).toContain(String(NETWORK_ASN));
    await expectAccessible(admin.page, 'policy');
    expect(admin.problems).toEqual([]);
    await admin.context.close();

    // Back on the peer's page: the next refresh shows the approval, still signed in.
    await page.reload();
    await card.getByText('QUEUED_FOR_SETUP').waitFor();

    // Change: a refused MTU is named at its field; a good one is stored (the status stays in 4).
    await card.getByRole('button', { name: 'Change' }).click();
    const mtu = card.getByLabel('MTU');
    await mtu.fill('100');
    await card.getByRole('button', { name: 'Save' }).click();
    await card.locator('.field-error').waitFor();
    expect(await card.locator('.field-error').textContent()).toMatch(/1280|>=|minimum|at least/i);
    await expectAccessible(page, 'change with a field error');
    await mtu.fill('1400');
    await card.getByRole('button', { name: 'Save' }).click();
    await card.getByRole('button', { name: 'Save' }).waitFor({ state: 'detached' });
    expect(h.store.listSessions().find((s) => s.spec.asn === USER_ASN)?.spec.mtu).toBe(1400);

    // Delete, after the page's confirmation: QUEUED_FOR_DELETE until the router tears it down.
    page.once('dialog', (dialog) => void dialog.accept());
    await card.getByRole('button', { name: 'Delete' }).click();
    await card.getByText('QUEUED_FOR_DELETE').waitFor();
    expect(peer.problems).toEqual([]);
    await peer.context.close();
  });

  it('works at 390 px wide and in Simplified Chinese', async () => {
    const { context, page, problems } = await openPage(browser, url, { width: 390, height: 844 });
    await page.goto(url);
    await page.getByRole('heading', { name: 'Log in' }).waitFor();
    await expectNoSidewaysScroll(page, 'login at 390 px');
    await expectAccessible(page, 'login at 390 px');
    await logInWithSsh(page, USER_ASN, peerKey);
    await page.getByRole('heading', { name: 'Your sessions' }).waitFor();
    await expectNoSidewaysScroll(page, 'sessions at 390 px');
    await expectAccessible(page, 'sessions at 390 px');
    await chooseLanguage(page, 'zh-CN');
    await page.getByRole('heading', { name: '您的会话' }).waitFor();
    expect(await page.evaluate('document.documentElement.lang')).toBe('zh-CN');
    await expectAccessible(page, 'sessions in Chinese');
    await page.getByRole('link', { name: '新建会话' }).first().click();
    await page.getByRole('heading', { name: '新建会话' }).waitFor();
    await expectNoSidewaysScroll(page, 'create at 390 px');
    await expectAccessible(page, 'create at 390 px');
    expect(problems).toEqual([]);
    await context.close();
  });

  it('logs in with a gpg --clearsign signature and the public key the page asks for', async () => {
    const { context, page, problems } = await openPage(browser, url);
    await page.goto(url);
    await page.getByLabel('Your ASN').fill(`AS${OTHER_ASN}`);
    await page.getByRole('button', { name: 'Get a challenge' }).click();
    const challenge = (await page.getByTestId('challenge').textContent()) ?? '';
    expect(await page.getByTestId('gpg-command').textContent()).toContain(
      `cat > challenge.txt <<'EOF'\n${challenge}EOF\ngpg --clearsign challenge.txt`,
    );
    // The maintainer lists a fingerprint: the page asks for the key itself, naming the export command.
    const keyField = page.getByLabel('Your OpenPGP public key (for pgp-fingerprint)');
    const hint = (await page.locator('#login-publickey-hint').textContent()) ?? '';
    expect(hint.toLowerCase()).toContain(`gpg --export --armor ${pgp.fingerprint.toLowerCase()}`);
    await page.getByLabel('The signature').fill(await gpgSign(pgp, challenge, 'clear'));
    await keyField.fill(pgp.armoredPublic);
    await page.getByRole('button', { name: 'Log in', exact: true }).click();
    await page.getByText(`AS${OTHER_ASN} · peer`).waitFor();
    await page.getByRole('heading', { name: 'Your sessions' }).waitFor();
    expect(problems).toEqual([]);
    await context.close();
  });
});
