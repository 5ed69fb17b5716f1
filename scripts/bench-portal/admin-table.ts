/**
 * The admin table with 10,000 sessions (docs/benchmarks.md, "Portal"): `peerops serve` in a process of
 * its own on a git store of 8 routers × 1,250 sessions (written straight into git, as bench:api does),
 * its portal in chromium. The controller searches, sorts and pages (docs/api.md, Admin API, list), so the
 * figure is the whole path: the page's request, the controller's filter over 10,000 sessions, the 50
 * records, the rendering. The login is answered by this script (page.route, removed once signed in, so
 * that no measured request passes through it); the browser then sends an admin's token as a header, a
 * fresh ASN per run so that no run meets the rate limit of another. Per run: from the navigation to `#/admin/sessions` to its first page of rows in the
 * document, and from typing an ASN prefix in the search to the table showing its matches. Targets: first
 * page < 200 ms, filter < 100 ms (medians).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { loadavg } from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { loadKey, TokenIssuer } from '../../controller/auth/jwt.ts';
import { freePort } from '../../test/support/ports.ts';
import { buildFixture, FIXTURE_ASN } from '../bench-api/harness.ts';

const ROUTERS = 8;
const PER_ROUTER = 1_250;
export const ADMIN_TABLE_SESSIONS = ROUTERS * PER_ROUTER;
const FIRST_PAGE_TARGET_MS = 200;
const FILTER_TARGET_MS = 100;
const ADMIN_ASN = 4242420000;
const ROOT = path.resolve(import.meta.dirname, '..', '..');

/** `peerops serve` on the fixture; resolves once it answers /livez. */
async function serve(data: string, port: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'peerops.ts'), 'serve', '--data', data], {
    env: { ...process.env, PEEROPS_LISTEN: `127.0.0.1:${port}`, PEEROPS_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  for (const deadline = Date.now() + 300_000; Date.now() < deadline;) {
    const up = await fetch(`http://127.0.0.1:${port}/livez`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) return child;
    await new Promise((r) => setTimeout(r, 200));
  }
  child.kill('SIGTERM');
  throw new Error('the controller on the 10,000 sessions did not start within 300 s');
}

/** Answers the portal's login as an admin of `asn`, and the peer's pages it passes through. */
async function answerLogin(page: Page, asn: number): Promise<void> {
  const json = (body: unknown) => ({
    status: 200,
    contentType: 'application/json',
    body: JSON.stringify(body),
  });
  const expiresAt = new Date(Date.now() + 3_600_000).toISOString();
  await page.route('**/login', (route) => {
    const body = route.request().postDataJSON() as { action: string };
    return route.fulfill(
      body.action === 'challenge'
        ? json({
            challenge: `peerops login challenge\nasn: ${asn}\n`,
            host: 'bench',
            asn,
            expiresAt,
            namespace: 'peerops',
            methods: [],
            skipped: [],
          })
        : json({ expiresAt, role: 'admin', asn }),
    );
  });
  // by path: a glob `**/session` would catch /admin/session too
  await page.route(
    (u) => u.pathname === '/session',
    (route) => route.fulfill(json({ sessions: [] })),
  );
  await page.route(
    (u) => u.pathname === '/session/events',
    (route) =>
      route.fulfill({
        status: 200,
        contentType: 'text/event-stream',
        body: 'event: sessions\ndata: {"sessions":[]}\n\n',
      }),
  );
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

/**
 * Waits in the page until `done` (a JS expression) holds, and answers the ms since `start` was set; after
 * 30 s fails with what the page shows instead.
 */
const untilInPage = (done: string) => `new Promise((resolve, reject) => {
  const check = () => (${done})
    ? resolve(performance.now() - window.__benchStart)
    : performance.now() - window.__benchStart > 30000
      ? reject(new Error('not shown within 30 s: ' + document.querySelector('main').innerText.slice(0, 500)))
      : requestAnimationFrame(check);
  check();
})`;

/** Prints the figures and their verdicts; true when both targets are met. */
export async function benchAdminTable(browser: Browser, runs: number): Promise<boolean> {
  const t = Date.now();
  const fixture = await buildFixture(ROUTERS, PER_ROUTER);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}/`;
  const controller = await serve(fixture.data, port);
  const tokens = new TokenIssuer(await loadKey(path.join(fixture.data, 'jwt-ed25519.pem')));
  // listening comes before the store has read every manifest: wait for all of them
  const admin = tokens.issueToken(ADMIN_ASN, 'admin').token;
  for (let total = 0; total < ADMIN_TABLE_SESSIONS; await new Promise((r) => setTimeout(r, 500))) {
    const res = await fetch(`${url}admin/session`, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({ action: 'list', limit: 1 }),
    });
    total = res.ok ? ((await res.json()) as { total: number }).total : 0;
  }
  console.log(
    `Admin table: ${ADMIN_TABLE_SESSIONS} sessions written and loaded by peerops serve in ${((Date.now() - t) / 1000).toFixed(0)} s`,
  );
  // 424242111x: ten ASNs, each with a session on every router
  const prefix = String(FIXTURE_ASN + 111).slice(0, -1);
  const expected = 10 * ROUTERS;
  const firstPage: number[] = [];
  const filter: number[] = [];
  try {
    for (let i = 0; i < runs; i++) {
      const asn = ADMIN_ASN + 1 + i;
      const context = await browser.newContext({
        extraHTTPHeaders: { authorization: `Bearer ${tokens.issueToken(asn, 'admin').token}` },
      });
      const page = await context.newPage();
      await answerLogin(page, asn);
      await page.goto(url, { waitUntil: 'load' });
      await page.getByLabel('Your ASN').fill(String(asn));
      await page.getByRole('button', { name: 'Get a challenge' }).click();
      await page
        .getByLabel('The signature')
        .fill('-----BEGIN SSH SIGNATURE-----\nbench\n-----END SSH SIGNATURE-----');
      await page.getByRole('button', { name: 'Log in', exact: true }).click();
      await page.getByRole('link', { name: 'All sessions' }).waitFor();
      // signed in: from here every request goes to the controller as it would, not through this script
      await page.unrouteAll();
      await page.evaluate(`window.__benchStart = performance.now(); location.hash = '#/admin/sessions'`);
      firstPage.push(
        await page.evaluate<number>(untilInPage(`document.querySelectorAll('tbody tr').length === 50`)),
      );
      await page.evaluate(`(() => {
        const input = document.getElementById('table-search');
        window.__benchStart = performance.now();
        input.value = '${prefix}';
        input.dispatchEvent(new Event('input', { bubbles: true }));
      })()`);
      filter.push(
        await page.evaluate<number>(
          untilInPage(
            `document.querySelector('[data-testid="table-count"]').textContent.includes('of ${expected} matching')` +
              ` && [...document.querySelectorAll('tbody tr a')].every((a) => a.textContent.startsWith('AS${prefix}'))`,
          ),
        ),
      );
      await context.close();
    }
  } finally {
    controller.kill('SIGTERM');
    await new Promise((r) => controller.once('exit', r));
    await rm(fixture.data, { recursive: true, force: true });
  }
  const fmt = (xs: number[]) =>
    `median ${median(xs).toFixed(0)} ms, min ${Math.min(...xs).toFixed(0)}, max ${Math.max(...xs).toFixed(0)}`;
  const firstOk = median(firstPage) < FIRST_PAGE_TARGET_MS;
  const filterOk = median(filter) < FILTER_TARGET_MS;
  const verdict = (ok: boolean) => (ok ? 'met' : 'MISSED');
  console.log(
    `Admin table, ${ADMIN_TABLE_SESSIONS} sessions, ${runs} runs (load average ${loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')}):`,
  );
  console.log(
    `  first page of 50 rows:             ${fmt(firstPage)} (target < ${FIRST_PAGE_TARGET_MS} ms): ${verdict(firstOk)}`,
  );
  console.log(
    `  ASN-prefix search, ${expected} matching: ${fmt(filter)} (target < ${FILTER_TARGET_MS} ms): ${verdict(filterOk)}`,
  );
  return firstOk && filterOk;
}
