/**
 * The portal's login page follows the controller's login rules (docs/login.md, Which keys count), in a
 * real browser against a real controller and a DN42-format registry on disk: the lines of the
 * maintainers that cannot log in (an RSA-1024 ssh key, x509, a missing key-cert, a missing mntner) are
 * shown under the usable keys with why, in English and Simplified Chinese, and every reason the
 * controller gives for real keys (ssh-keygen, gpg: RSA-1024, revoked, under another key-cert's name…)
 * is worded by the page; a key-cert that expired in the registry is named by its fingerprint as gpg
 * prints it, and a login signed by the renewed key (gpg, extended with --quick-set-expire) goes through
 * once that key is pasted.
 */
import { readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Browser, Locator } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DirectoryRegistry } from '../../controller/auth/login/registry.ts';
import { startHarness, type Harness } from '../api/helpers.ts';
import {
  gpgKey,
  gpgRenewedKey,
  gpgSign,
  run,
  sshKey,
  sshSign,
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
  openPage,
} from './support.ts';

const AS_SKIPPED = 4242420301;
const AS_RENEWED = 4242420302;
const AS_EVERY = 4242420303;

let dir: string;
let h: Harness;
let url: string;
let browser: Browser;
let ed: SshKey;
let rsa1024: SshKey;
let renewed: { key: GpgKey; stale: string; staleHome: string };
let keyCert: string;
/** For AS_EVERY: an OpenPGP key that works, one of RSA-1024, one revoked, and an ssh RSA key. */
let plain: GpgKey;
let weak: GpgKey;
let revoked: GpgKey;
let rsa: SshKey;

const keyCertId = (k: GpgKey) => `PGPKEY-${k.fingerprint.slice(-8)}`;

/** The key as exported after `gpg --import` of the revocation certificate gpg made along with it. */
async function revokeKey(key: GpgKey): Promise<GpgKey> {
  const rev = await readFile(path.join(key.home, 'openpgp-revocs.d', `${key.fingerprint}.rev`), 'utf8');
  const file = path.join(key.home, 'revoke.asc');
  // gpg writes it with a ':' before BEGIN so that it is not imported by accident
  await writeFile(file, rev.replace(/^:-----BEGIN/m, '-----BEGIN'));
  const gpg = (...args: string[]) => run('gpg', ['--homedir', key.home, '--batch', ...args]);
  await gpg('--import', file);
  return { ...key, armoredPublic: (await gpg('--export', '--armor', key.fingerprint)).stdout };
}

/** A key-cert object in the registry's format (one certif: per armour line), `fpr` its fingerpr: line. */
async function writeKeyCert(name: string, armour: string | undefined, fpr?: string) {
  const pad = (k: string) => `${k}:`.padEnd(20);
  const certif = (armour?.trim().split('\n') ?? []).map((l) => `${pad('certif')}${l}`.trimEnd());
  const lines = [`${pad('key-cert')}${name}`, ...(fpr ? [`${pad('fingerpr')}${fpr}`] : []), ...certif];
  await writeFile(
    path.join(dir, 'registry', 'data', 'key-cert', name),
    [...lines, `${pad('source')}DN42`].join('\n') + '\n',
  );
}

beforeAll(async () => {
  dir = await tempDir('portal-login');
  [ed, rsa1024, rsa, renewed, plain, weak, revoked] = await Promise.all([
    sshKey(dir, 'ed25519', 'ed'),
    sshKey(dir, 'rsa', 'rsa1024', 1024),
    sshKey(dir, 'rsa', 'rsa'),
    gpgRenewedKey(path.join(dir, 'gnupg-renewed'), 'Renewed <renewed@example.test>'),
    gpgKey(path.join(dir, 'gnupg-plain'), 'Plain <plain@example.test>'),
    gpgKey(path.join(dir, 'gnupg-weak'), 'Weak <weak@example.test>', 'rsa1024'),
    gpgKey(path.join(dir, 'gnupg-revoked'), 'Revoked <revoked@example.test>'),
  ]);
  revoked = await revokeKey(revoked);
  keyCert = keyCertId(renewed.key);
  await writeRegistry(path.join(dir, 'registry'), {
    autNums: {
      [AS_SKIPPED]: ['SKIP-MNT', 'GONE-MNT'],
      [AS_RENEWED]: ['RENEWED-MNT'],
      [AS_EVERY]: ['EVERY-MNT', '-NOT-A-NAME'],
    },
    mntners: {
      'SKIP-MNT': [rsa1024.publicLine, ed.publicLine, 'x509 CN=old', 'PGPKEY-0BADC0DE'],
      'RENEWED-MNT': [keyCert],
      'EVERY-MNT': [
        ed.publicLine,
        `ssh-ed25519 ${rsa.publicLine.split(' ')[1]}`,
        'ssh-ed25519 not*base64',
        'ssh-ed25519 AAAA',
        'pgp-fingerprint 0123',
        keyCertId(weak),
        keyCertId(revoked),
        'PGPKEY-DEADBEEF',
        'PGPKEY-00000001',
        'PGPKEY-00000002',
        keyCertId(plain),
      ],
    },
    // The registry still holds the key as exported in 2020; it expired at the end of that year.
    keyCerts: { [keyCert]: renewed.stale },
  });
  await writeKeyCert(keyCertId(weak), weak.armoredPublic);
  await writeKeyCert(keyCertId(revoked), revoked.armoredPublic);
  // another key under this name; a key-cert without a key; one whose armour is broken
  await writeKeyCert('PGPKEY-DEADBEEF', plain.armoredPublic);
  await writeKeyCert('PGPKEY-00000001', undefined);
  await writeKeyCert('PGPKEY-00000002', plain.armoredPublic.replace(/\n[A-Za-z0-9+/]{20}/, '\n!!!!'));
  // the right key, with a fingerpr: line that is not its fingerprint
  await writeKeyCert(keyCertId(plain), plain.armoredPublic, weak.fingerprint);
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
  for (const home of [renewed?.key.home, renewed?.staleHome, plain?.home, weak?.home, revoked?.home])
    if (home) await stopGpgAgent(home);
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** The items of a list on the page, as the reader sees them (blanks collapsed). */
async function items(list: Locator): Promise<string[]> {
  return (await list.locator('li').allTextContents()).map((s) => s.replace(/\s+/g, ' ').trim());
}

/** The fingerprint line of `gpg --fingerprint`, as gpg prints it. */
async function gpgPrinted(key: GpgKey): Promise<string> {
  const { stdout } = await run('gpg', ['--homedir', key.home, '--batch', '--fingerprint', key.fingerprint]);
  return stdout.split('\n')[1]!.trim();
}

describe('portal login page', () => {
  it('shows the skipped lines under the usable key, with why; the usable key logs in', async () => {
    const { context, page, problems } = await openPage(browser, url);
    await page.goto(url);
    await page.getByLabel('Your ASN').fill(String(AS_SKIPPED));
    await page.getByRole('button', { name: 'Get a challenge' }).click();
    await page.getByTestId('challenge').waitFor();
    await page
      .getByRole('heading', {
        name: 'With an SSH key (ssh-ed25519, ssh-rsa of 2048 bits or more, ecdsa-sha2-nistp256, nistp384 or nistp521)',
      })
      .waitFor();
    expect(await items(page.getByTestId('methods'))).toEqual([
      `ssh-ed25519 SKIP-MNT ${ed.publicLine.split(' ')[1]!.slice(0, 40)}…`,
    ]);
    const skipped = await items(page.getByTestId('skipped'));
    expect(skipped).toHaveLength(4);
    expect(skipped[0]).toMatch(/^SKIP-MNT auth: ssh-rsa AAAA\S*…: RSA key under 2048 bits$/);
    expect(skipped.slice(1)).toEqual([
      "SKIP-MNT auth: x509 CN=old: 'x509' is not a login method peerops supports",
      'SKIP-MNT auth: PGPKEY-0BADC0DE: PGPKEY-0BADC0DE: not in the registry',
      'GONE-MNT mnt-by: GONE-MNT: mntner GONE-MNT is not in the registry',
    ]);
    // below the usable keys: the list of methods comes first in the page
    const order = (await page.evaluate(
      `[...document.querySelectorAll('[data-testid=methods],[data-testid=skipped]')].map((e) => e.dataset.testid)`,
    )) as string[];
    expect(order).toEqual(['methods', 'skipped']);
    await expectAccessible(page, 'login with skipped lines');
    // No OpenPGP key to paste for an ssh-only maintainer.
    await expect(page.locator('#login-publickey').count()).resolves.toBe(0);
    const challenge = (await page.getByTestId('challenge').textContent()) ?? '';
    await page.getByLabel('The signature').fill(await sshSign(ed, challenge));
    await page.getByRole('button', { name: 'Log in', exact: true }).click();
    await page.getByText(`AS${AS_SKIPPED} · peer`).waitFor();
    expect(problems).toEqual([]);
    await context.close();
  });

  it('says it in Simplified Chinese, at 390 px', async () => {
    const { context, page, problems } = await openPage(browser, url, { width: 390, height: 844 });
    await page.goto(url);
    await chooseLanguage(page, 'zh-CN');
    await page.getByLabel('您的 ASN').fill(String(AS_SKIPPED));
    await page.getByRole('button', { name: '获取挑战' }).click();
    await page.getByTestId('challenge').waitFor();
    await page
      .getByRole('heading', {
        name: '使用 SSH 密钥（ssh-ed25519、至少 2048 位的 ssh-rsa、ecdsa-sha2-nistp256、nistp384 或 nistp521）',
      })
      .waitFor();
    const skipped = await items(page.getByTestId('skipped'));
    expect(skipped[0]).toMatch(/^SKIP-MNT auth: ssh-rsa AAAA\S*…: RSA 密钥不足 2048 位$/);
    expect(skipped.slice(1)).toEqual([
      'SKIP-MNT auth: x509 CN=old: peerops 不支持 “x509” 登录方式',
      'SKIP-MNT auth: PGPKEY-0BADC0DE: PGPKEY-0BADC0DE：不在注册表中',
      'GONE-MNT mnt-by: GONE-MNT: 注册表中没有 mntner GONE-MNT',
    ]);
    await expectNoSidewaysScroll(page, 'login with skipped lines at 390 px');
    await expectAccessible(page, 'login with skipped lines in Chinese');

    await page.getByLabel('您的 ASN').fill(String(AS_RENEWED));
    await page.getByRole('button', { name: '获取新的挑战' }).click();
    await page.getByTestId('methods').getByText('注册表中的副本已于 2020-12-31 过期').waitFor();
    await page.getByLabel(`您续期后的 OpenPGP 公钥（用于 ${keyCert}）`).waitFor();
    expect(await page.locator('#login-publickey-hint').textContent()).toContain(
      `gpg --export --armor ${renewed.key.fingerprint.toLowerCase()}`,
    );
    await expectNoSidewaysScroll(page, 'login with an expired key-cert at 390 px');
    await expectAccessible(page, 'login with an expired key-cert in Chinese');
    expect(problems).toEqual([]);
    await context.close();
  });

  it("words every reason the controller gives for real keys; an unknown one in the controller's words", async () => {
    const { context, page, problems } = await openPage(browser, url);
    await page.goto(url);
    await page.getByLabel('Your ASN').fill(String(AS_EVERY));
    await page.getByRole('button', { name: 'Get a challenge' }).click();
    await page.getByTestId('skipped').locator('li').first().waitFor();
    const skipped = await items(page.getByTestId('skipped'));
    const expected: [string, string][] = [
      ['EVERY-MNT auth: ssh-ed25519 AAAA', 'the line says ssh-ed25519, the key is ssh-rsa'],
      ['EVERY-MNT auth: ssh-ed25519 not*base64', 'the key is not base64'],
      // a reason the page does not word itself: the controller's own text
      [
        'EVERY-MNT auth: ssh-ed25519 AAAA',
        'ssh-ed25519 key cannot verify signatures: truncated SSH wire data',
      ],
      ['EVERY-MNT auth: pgp-fingerprint 0123', 'a fingerprint has 40 or 64 hex digits'],
      [`EVERY-MNT auth: ${keyCertId(weak)}`, `${keyCertId(weak)}: RSA key under 2047 bits`],
      [`EVERY-MNT auth: ${keyCertId(revoked)}`, `${keyCertId(revoked)}: the key is revoked`],
      ['EVERY-MNT auth: PGPKEY-DEADBEEF', `PGPKEY-DEADBEEF: it holds another key (`],
      ['EVERY-MNT auth: PGPKEY-00000001', 'PGPKEY-00000001: it holds no public key'],
      ['EVERY-MNT auth: PGPKEY-00000002', 'PGPKEY-00000002: its key cannot be read'],
      [
        `EVERY-MNT auth: ${keyCertId(plain)}`,
        `${keyCertId(plain)}: its fingerpr: line is not the fingerprint of its key`,
      ],
      ['-NOT-A-NAME mnt-by: -NOT-A-NAME', 'not a valid maintainer name'],
    ];
    expect(skipped).toHaveLength(expected.length);
    expected.forEach(([line, reason], i) => {
      expect(skipped[i]).toContain(line);
      expect(skipped[i]).toContain(`: ${reason}`);
    });
    // another key's fingerprint as gpg prints it (blanks collapsed as the reader sees them)
    expect(skipped[6]).toContain(`(${(await gpgPrinted(plain)).replace(/\s+/g, ' ')})`);
    await expectAccessible(page, 'login with every kind of skipped line');
    expect(problems).toEqual([]);
    await context.close();
  });

  it('logs in with a key-cert that expired in the registry once the renewed key is pasted', async () => {
    const { context, page, problems } = await openPage(browser, url);
    await page.goto(url);
    await page.getByLabel('Your ASN').fill(`AS${AS_RENEWED}`);
    await page.getByRole('button', { name: 'Get a challenge' }).click();
    const challenge = (await page.getByTestId('challenge').textContent()) ?? '';
    // The key-cert by its name and its fingerprint exactly as `gpg --fingerprint` prints it.
    const printed = await gpgPrinted(renewed.key);
    expect(printed).toMatch(/^([0-9A-F]{4} ){4}[0-9A-F]{4} {2}([0-9A-F]{4} ){4}[0-9A-F]{4}$/);
    const methods = page.getByTestId('methods');
    expect(await methods.locator('code.fingerprint').textContent()).toBe(printed);
    expect(await items(methods)).toEqual([
      `${keyCert} RENEWED-MNT ${printed.replace(/\s+/g, ' ')} (expired in the registry on 2020-12-31)`,
    ]);
    await expect(page.getByTestId('skipped').count()).resolves.toBe(0);
    const keyField = page.getByLabel(`Your renewed OpenPGP public key (for ${keyCert})`);
    const hint = (await page.locator('#login-publickey-hint').textContent()) ?? '';
    expect(hint).toBe(
      `The registry's copy of ${keyCert} has expired, so if you have extended the key since, paste your current public key here (gpg --export --armor ${renewed.key.fingerprint.toLowerCase()}): it counts when its primary key is the key-cert's.`,
    );
    await expectAccessible(page, 'login with an expired key-cert');

    // Signed by the renewed key: without it pasted the registry's copy alone is refused, and says why.
    await page.getByLabel('The signature').fill(await gpgSign(renewed.key, challenge, 'clear'));
    await page.getByRole('button', { name: 'Log in', exact: true }).click();
    const problem = page.locator('.problem');
    await problem.waitFor();
    expect(await problem.textContent()).toMatch(/AUTH_FAILED[\s\S]*send your renewed key as publicKey/);
    await expectAccessible(page, 'login refused without the renewed key');

    await keyField.fill(renewed.key.armoredPublic);
    await page.getByRole('button', { name: 'Log in', exact: true }).click();
    await page.getByText(`AS${AS_RENEWED} · peer`).waitFor();
    await page.getByRole('heading', { name: 'Your sessions' }).waitFor();
    expect(problems).toEqual([]);
    await context.close();
  });
});
