/**
 * Adopted sessions in a real browser against a real controller (git store, DN42 registry on disk): a
 * plan applied through POST /admin/adoptions shows on the Reviews page and on a session's review page
 * as "adopted from <files> by <who>" with the names the router keeps (en and zh-CN), the admin table
 * marks them, and the admin approves them with the table's bulk approve (docs/api.md, Adoptions). The
 * second peer names no DN42 IPv6, as the DN42 wiki's peers: its IPv6 reads "none" and the table shows
 * its link-local.
 * axe-core in en and zh-CN at 1280 and 390 px on the Reviews page and the review page.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { SessionStatus } from '../../common/status.ts';
import { ADMIN_ASN, expectOk } from '../api/helpers.ts';
import {
  accessibleEverywhere,
  chooseLanguage,
  logInWithSsh,
  openPage,
  UI_TIMEOUT_MS,
  useAdminPortal,
} from './support.ts';

const PEERS = [4242426001, 4242426002];
const prefix = (i: number) => `fd42:${(0x6000 + i).toString(16)}::`;

const portal = useAdminPortal('adopted', ADMIN_ASN);
const uuids: string[] = [];

beforeAll(async () => {
  const registry = path.join(portal.dir, 'registry');
  await mkdir(path.join(registry, 'data', 'route6'), { recursive: true });
  for (const [i, asn] of PEERS.entries())
    await writeFile(
      path.join(registry, 'data', 'route6', `${prefix(i)}_48`),
      `route6: ${prefix(i)}/48\norigin: AS${asn}\nmnt-by: PEER${i}-MNT\nsource: DN42\n`,
    );
  await portal.h.addRouter('fra1', { displayName: 'Frankfurt 1' });
  await expectOk(
    portal.h.post('/admin/policy', portal.h.admin, { action: 'set', spec: { dn42Asn: 4242420000 } }),
  );
  const res = await expectOk(
    portal.h.post('/admin/adoptions', portal.h.admin, {
      sessions: PEERS.map((asn, i) => ({
        asn,
        router: 'fra1',
        listenPort: 31100 + i,
        publicKey: randomBytes(32).toString('base64'),
        linkLocal: `fe80::${i + 10}`,
        // the second speaks BGP over its link-local alone
        ...(i === 0 ? { ipv6: `${prefix(i)}1` } : {}),
        mpbgp: true,
        extendedNextHop: true,
        adopted: {
          interface: `wg_peer${i}`,
          protocols: [`dn42_peer${i}`],
          files: [`/etc/wireguard/wg_peer${i}.conf`, `/etc/bird/peers/as${asn}.conf`],
        },
      })),
    }),
  );
  for (const s of (res.json() as { sessions: { uuid: string }[] }).sessions) uuids.push(s.uuid);
}, 120_000);

describe('adopted sessions in the portal', () => {
  it('say where they came from and who adopted them, and are approved in bulk', async () => {
    const { context, page, problems } = await openPage(portal.browser, portal.url);
    await page.goto(portal.url);
    await logInWithSsh(page, ADMIN_ASN, portal.key);

    // the Reviews page: each card says it
    await page.getByRole('link', { name: 'Reviews' }).click();
    const card = page.locator(`article[data-uuid="${uuids[0]}"]`);
    const note = card.getByTestId('adopted');
    await note.waitFor();
    expect(await note.textContent()).toContain(
      `Adopted from /etc/wireguard/wg_peer0.conf, /etc/bird/peers/as${PEERS[0]}.conf by admin AS${ADMIN_ASN}`,
    );
    expect(await note.textContent()).toContain('interface wg_peer0 and BIRD protocols dn42_peer0');
    await accessibleEverywhere(page, 'the Reviews page with adopted sessions', () => note.waitFor());
    await chooseLanguage(page, 'zh-CN');
    await expect.poll(() => note.textContent()).toContain(`由 admin AS${ADMIN_ASN} 于`);
    expect(await note.textContent()).toContain('接管');
    await chooseLanguage(page, 'en');

    // the session's review page says it too
    await page.goto(`${portal.url}#/admin/review/${uuids[1]}`);
    const own = page.getByTestId('adopted');
    await own.waitFor();
    expect(await own.textContent()).toContain('/etc/wireguard/wg_peer1.conf');
    const ipv6 = page.locator('dl.facts > div').filter({ has: page.locator('dt', { hasText: /^IPv6$/ }) });
    expect(await ipv6.locator('dd').textContent()).toBe('none');
    await accessibleEverywhere(page, "an adopted session's review page", () => own.waitFor());

    // the admin table marks them; the existing bulk approve takes them both
    await page.goto(`${portal.url}#/admin/sessions`);
    for (const uuid of uuids) {
      const row = page.locator(`tr[data-uuid="${uuid}"]`);
      await expect.poll(() => row.textContent(), { timeout: UI_TIMEOUT_MS }).toContain('adopted');
      expect(await row.textContent()).toContain(uuid === uuids[0] ? `${prefix(0)}1` : 'fe80::11');
      await row.getByRole('checkbox').check();
    }
    await page.getByRole('button', { name: 'Approve' }).click();
    await expect
      .poll(() => page.getByTestId('bulk-progress').textContent(), { timeout: UI_TIMEOUT_MS })
      .toContain('Finished 2: 0 refused');
    for (const uuid of uuids)
      expect(portal.h.store.getSession(uuid)?.status.code).toBe(SessionStatus.QUEUED_FOR_SETUP);
    expect(problems).toEqual([]);
    await context.close();
  });
});
