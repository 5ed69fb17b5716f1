/**
 * Screenshots of the portal's main pages, at desktop width (1280 px) and at 390 px, into docs/portal/
 * (`npm run screenshots`; docs/user-guide.md shows them). A controller on a temp git store is filled
 * through the API as the agent and users would (routers with heartbeats, one with a refused local
 * config; sessions in review, ACTIVE with metrics, in ERROR), and Debian's chromium (playwright-core)
 * logs in through the page with a key signed by ssh-keygen, as a peer and as an admin. fra1's looking
 * glass is answered through the agent API with the text a router prints (answerLookingGlass).
 *
 * The Chinese page needs a CJK font in the system (Debian: fonts-wqy-microhei); without one its
 * characters are drawn as boxes.
 *
 *   node scripts/screenshots.ts [--out docs/portal]
 */
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { chromium, type Page } from 'playwright-core';
import { DirectoryRegistry } from '../controller/auth/login/registry.ts';
import { ADMIN_ASN, expectOk, startHarness, USER_ASN, wgKey, type Harness } from '../test/api/helpers.ts';
import { sshKey, sshSign, tempDir, writeRegistry, type SshKey } from '../test/login/support.ts';
import { encodeSamples, type Sample } from '../controller/history/samples.ts';
import type { LgAnswer, LgQuery } from '../common/looking-glass.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const NETWORK_ASN = 4242420000;
const OTHER_PEER = 4242425678;
const MOVED_PEER = 4242424321;
const VIEWPORTS = { desktop: { width: 1280, height: 900 }, '390': { width: 390, height: 844 } };

const { values } = parseArgs({ options: { out: { type: 'string', default: 'docs/portal' } } });
const out = path.resolve(ROOT, values.out ?? 'docs/portal');

const ago = (seconds: number) => new Date(Date.now() - seconds * 1000).toISOString();

async function fill(h: Harness): Promise<{ fra1Token: string }> {
  const tokens: Record<string, string> = {};
  tokens.fra1 = await h.addRouter('fra1', {
    displayName: 'Frankfurt 1',
    location: 'Frankfurt',
    maxSessions: 50,
  });
  tokens.ams1 = await h.addRouter('ams1', {
    displayName: 'Amsterdam 1',
    location: 'Amsterdam',
    region: 'eu-west',
  });
  tokens.sin1 = await h.addRouter('sin1', {
    displayName: 'Singapore 1',
    location: 'Singapore',
    region: 'ap-southeast',
    acceptingSessions: false,
  });
  await expectOk(h.post('/admin/policy', h.admin, { action: 'set', spec: { dn42Asn: NETWORK_ASN } }));
  const agent = (router: string, route: string, body: unknown) =>
    expectOk(h.post(`/agent/${router}/${route}`, tokens[router], body));
  await agent('fra1', 'heartbeat', { version: '0.1.0', uptime: 86_400 });
  await agent('ams1', 'heartbeat', {
    version: '0.1.0',
    uptime: 3_600,
    conditions: [
      {
        type: 'ConfigApplied',
        status: 'False',
        reason: 'LocalConfigRejected',
        message: "BIRD refused /etc/bird/local.d/blackhole.conf, line 3: syntax error, unexpected '}'",
        lastTransitionTime: ago(600),
      },
    ],
  });

  const user = h.user;
  const create = async (token: string, router: string, extra: Record<string, unknown>) =>
    (
      await expectOk(
        h.post('/session', token, {
          action: 'create',
          router,
          linkLocal: 'fe80::1234',
          publicKey: wgKey(),
          endpoint: 'peer.example.org:51820',
          ...extra,
        }),
      )
    ).json<{ uuid: string; listenPort: number }>();
  const up = await create(user, 'fra1', { ipv6: 'fd42:1234::1' });
  const down = await create(user, 'ams1', { ipv6: 'fd42:1234::1' });
  const other = h.tokens.issueToken(OTHER_PEER, 'user').token;
  await create(other, 'fra1', {
    ipv6: 'fd42:5678::1',
    ipv4: '172.20.53.1',
    endpoint: 'as5678.example.com:20000',
  });
  // A policy tightened after a request: the review shows what the controller's checks now refuse.
  await expectOk(
    h.post('/admin/policy', h.admin, {
      action: 'patch',
      spec: { ownPrefixes: { ipv4: ['172.20.53.0/26'] } },
    }),
  );
  for (const s of [up, down])
    await expectOk(h.post('/admin/session', h.admin, { action: 'approve', uuid: s.uuid }));
  await agent('fra1', 'modify', {
    uuid: up.uuid,
    status: 1,
    interface: `wg_${up.listenPort}`,
    bgpState: 'Established',
    bgpSince: ago(7_200),
  });
  await agent('fra1', 'report', {
    sessions: [
      {
        uuid: up.uuid,
        rtt: 12.4,
        rxBytes: 48_213_004,
        txBytes: 1_920_331_112,
        routesImported: 3,
        lastHandshake: ago(40),
      },
    ],
  });
  // the last day of the up session's history, as a minute's reports would have left it (docs/store.md,
  // Session history): an evening's traffic peak, a few minutes without an answer to ping
  const now = Math.floor(Date.now() / 60_000);
  const day: Sample[] = Array.from({ length: 24 * 60 }, (_, i) => {
    const minute = now - 24 * 60 + i;
    const evening = Math.max(0, Math.sin(((minute % 1440) / 1440) * 2 * Math.PI - 1));
    return {
      minute,
      rtt: i > 700 && i < 712 ? null : 12 + 3 * evening + Math.sin(i / 9) / 4,
      rxBytes: Math.round(30_000 + 400_000 * evening),
      txBytes: Math.round(900_000 + 9_000_000 * evening),
      routesImported: 3,
      routesExported: i < 900 ? 1478 : 1481,
    };
  });
  await mkdir(path.join(h.dir, 'history'), { recursive: true });
  await writeFile(path.join(h.dir, 'history', `${up.uuid}.hist`), encodeSamples(day));
  await agent('ams1', 'modify', {
    uuid: down.uuid,
    status: 2,
    interface: `wg_${down.listenPort}`,
    message: 'no WireGuard handshake from the peer since setup 4 minutes ago: check the peer’s WireGuard',
    bgpState: 'Active',
    bgpSince: ago(240),
  });
  // a running session whose owner asked for a new address and MTU: back in review, the router keeps
  // the approved values (the Reviews page shows old → new)
  const moved = h.tokens.issueToken(MOVED_PEER, 'user').token;
  const running = await create(moved, 'fra1', { ipv6: 'fd42:4321::1' });
  await expectOk(h.post('/admin/session', h.admin, { action: 'approve', uuid: running.uuid }));
  await agent('fra1', 'modify', {
    uuid: running.uuid,
    status: 1,
    interface: `wg_${running.listenPort}`,
    bgpState: 'Established',
    bgpSince: ago(86_400),
  });
  await expectOk(
    h.post('/session', moved, { action: 'modify', uuid: running.uuid, ipv6: 'fd42:4321::2', mtu: 1400 }),
  );
  return { fra1Token: tokens.fra1 };
}

/**
 * fra1's agent's side of the looking glass (GET /agent/fra1/lg, POST …/lg/<id>), answering with the
 * text a router's ping and BIRD print (docs/agent.md, Looking glass): the screenshots have no router.
 */
async function answerLookingGlass(url: string, token: string, signal: AbortSignal): Promise<void> {
  const call = (path: string, init: RequestInit = {}) =>
    fetch(`${url}agent/fra1/${path}`, {
      ...init,
      signal,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    });
  const route = (net: string, port: number, asPath: string) =>
    `${net.padEnd(20)} unicast [dn42_${port} ${ago(7_200).slice(11, 19)}] * (100) [AS${asPath.split(' ').at(-1)}i]\n` +
    `\tvia fe80::1234 on wg_${port}\n\tType: BGP univ\n\tBGP.origin: IGP\n\tBGP.as_path: ${asPath}\n` +
    `\tBGP.next_hop: :: fe80::1234\n\tBGP.local_pref: 100\n\tBGP.community: (64511,3) (64511,24) (64511,34)`;
  const answer = (q: LgQuery): LgAnswer => {
    if (q.op === 'ping')
      return {
        output:
          `PING ${q.target}(${q.target}) 56 data bytes\n` +
          [12.1, 12.4, 11.9, 12.6]
            .map((ms, i) => `64 bytes from ${q.target}: icmp_seq=${i + 1} ttl=63 time=${ms} ms`)
            .join('\n') +
          `\n\n--- ${q.target} ping statistics ---\n4 packets transmitted, 4 received, 0% packet loss, time 1504ms\n` +
          'rtt min/avg/max/mdev = 11.900/12.250/12.600/0.269 ms',
        truncated: false,
        timedOut: false,
        exitCode: 0,
      };
    const port = q.listenPort ?? 30000;
    const routes = [
      { net: 'fd42:1234::/48', verdict: 'accepted', roa: 'valid', asPath: '4242421234' },
      { net: 'fd42:1234:100::/48', verdict: 'accepted', roa: 'unknown', asPath: '4242421234' },
      { net: 'fd42:5678::/48', verdict: 'rejected', roa: 'invalid', asPath: '4242421234' },
    ] as const;
    return {
      output: routes.map((r) => route(r.net, port, r.asPath)).join('\n'),
      truncated: false,
      timedOut: false,
      page: { offset: 0, limit: 100, total: routes.length },
      routes: routes.map(({ net, verdict, roa }) => ({ net, verdict, roa })),
    };
  };
  while (!signal.aborted) {
    const res = await call('lg?wait=5').catch(() => undefined);
    if (!res) continue;
    const { queries } = (await res.json()) as { queries: LgQuery[] };
    for (const q of queries) await call(`lg/${q.id}`, { method: 'POST', body: JSON.stringify(answer(q)) });
  }
}

async function logIn(page: Page, asn: number, key: SshKey): Promise<void> {
  await page.getByLabel('Your ASN').fill(String(asn));
  await page.getByRole('button', { name: 'Get a challenge' }).click();
  const challenge = (await page.getByTestId('challenge').textContent()) ?? '';
  await page.getByLabel('The signature').fill(await sshSign(key, challenge));
  await page.getByRole('button', { name: 'Log in', exact: true }).click();
  await page.getByRole('button', { name: 'Log out' }).waitFor();
}

const dir = await tempDir('screenshots');
const [peerKey, adminKey] = await Promise.all([
  sshKey(dir, 'ed25519', 'peer'),
  sshKey(dir, 'ed25519', 'admin'),
]);
await writeRegistry(path.join(dir, 'registry'), {
  autNums: {
    [USER_ASN]: ['PEER-MNT'],
    [ADMIN_ASN]: ['NET-MNT'],
    [OTHER_PEER]: ['OTHER-MNT'],
    [MOVED_PEER]: ['MOVED-MNT'],
  },
  mntners: {
    'PEER-MNT': [peerKey.publicLine],
    'NET-MNT': [adminKey.publicLine],
    'OTHER-MNT': [],
    'MOVED-MNT': [],
  },
  routes: {
    'fd42:1234::/48': [USER_ASN],
    'fd42:5678::/48': [OTHER_PEER],
    '172.20.53.0/24': [OTHER_PEER],
    'fd42:4321::/48': [MOVED_PEER],
  },
});
const h = await startHarness(
  {},
  {
    registry: new DirectoryRegistry(path.join(dir, 'registry')),
    serviceHost: 'peering.example.net',
    admins: [ADMIN_ASN],
  },
);
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium' });
const lgAgent = new AbortController();
try {
  const { fra1Token } = await fill(h);
  await h.app.listen({ host: '127.0.0.1', port: 0 });
  const address = h.app.server.address();
  const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/`;
  void answerLookingGlass(url, fra1Token, lgAgent.signal).catch(() => undefined);
  await rm(out, { recursive: true, force: true });
  await mkdir(out, { recursive: true });
  const written: string[] = [];
  for (const [size, viewport] of Object.entries(VIEWPORTS)) {
    const shot = async (page: Page, name: string) => {
      await page.evaluate('document.fonts.ready');
      const file = path.join(out, `${name}-${size}.png`);
      await page.screenshot({ path: file, fullPage: true });
      written.push(path.relative(ROOT, file));
    };
    const context = await browser.newContext({ viewport, locale: 'en-US', deviceScaleFactor: 1 });
    const page = await context.newPage();
    await page.goto(url);
    await page.getByLabel('Your ASN').fill(String(USER_ASN));
    await page.getByRole('button', { name: 'Get a challenge' }).click();
    await page.getByTestId('challenge').waitFor();
    await shot(page, 'login');
    await page.reload();
    await logIn(page, USER_ASN, peerKey);
    await page.locator('article.session').first().waitFor();
    await page
      .locator('article.session', { hasText: 'Amsterdam 1' })
      .getByRole('button', { name: 'Your side’s configuration' })
      .click();
    await page.getByRole('button', { name: 'Show' }).click();
    await page.getByTestId('config-content').waitFor();
    await shot(page, 'sessions');
    const upCard = page.locator('article.session', { hasText: 'Frankfurt 1' });
    await upCard.getByRole('button', { name: 'History' }).click();
    await upCard.getByRole('img', { name: /^Round-trip time/ }).waitFor();
    await upCard.getByRole('region', { name: 'History' }).screenshot({
      path: path.join(out, `history-${size}.png`),
    });
    written.push(path.relative(ROOT, path.join(out, `history-${size}.png`)));
    await upCard.getByRole('button', { name: 'History' }).click();
    // the session's looking glass: the routes received with the filter's verdict and ROA state
    await upCard.getByRole('button', { name: 'Looking glass' }).click();
    await upCard.getByRole('button', { name: 'Routes received' }).click();
    await upCard.getByTestId('lg-routes').waitFor();
    await upCard.locator('section.looking-glass').screenshot({
      path: path.join(out, `looking-glass-${size}.png`),
    });
    written.push(path.relative(ROOT, path.join(out, `looking-glass-${size}.png`)));
    await upCard.getByRole('button', { name: 'Looking glass' }).click();
    // the network page: every router's state, a ping from fra1
    await page.goto(`${url}#/network`);
    await page.getByTestId('network-routers').waitFor();
    await page.getByLabel('Router', { exact: true }).selectOption('fra1');
    await page.getByLabel('Address or prefix').fill('fd42:1234::1');
    await page.getByRole('button', { name: 'Ask the router' }).click();
    await page
      .getByTestId('network-lg-output')
      .getByText(/4 received/)
      .waitFor();
    await shot(page, 'network');
    await page.goto(url);
    await page.locator('article.session').first().waitFor();
    await page.getByLabel('Language').selectOption('zh-CN');
    await page.getByRole('heading', { name: '您的会话' }).waitFor();
    await shot(page, 'sessions-zh-CN');
    await page.getByLabel('语言').selectOption('en');
    const change = page.locator('article.session', { hasText: 'Frankfurt 1' });
    await change.getByRole('button', { name: 'Change' }).click();
    await change.getByLabel('Your WireGuard public key').fill('not-a-key');
    await change.getByRole('button', { name: 'Save' }).click();
    await change.locator('.field-error').first().waitFor();
    await change.locator('form.modify').screenshot({ path: path.join(out, `session-change-${size}.png`) });
    written.push(path.relative(ROOT, path.join(out, `session-change-${size}.png`)));
    await page.goto(`${url}#/new`);
    await page.getByRole('radio', { name: /Frankfurt 1/ }).check();
    await page.getByLabel('Your DN42 IPv6 address').fill('fd42:1234::1');
    await page.getByRole('button', { name: 'Create the session' }).click();
    await page.locator('.field-error').first().waitFor();
    await shot(page, 'create');
    await context.close();

    const adminContext = await browser.newContext({ viewport, locale: 'en-US', deviceScaleFactor: 1 });
    const admin = await adminContext.newPage();
    await admin.goto(url);
    await logIn(admin, ADMIN_ASN, adminKey);
    await admin.goto(`${url}#/admin/reviews`);
    await admin.locator('article').first().waitFor();
    await shot(admin, 'reviews');
    await admin.goto(`${url}#/admin/routers`);
    await admin.locator('article[data-router]').first().waitFor();
    await shot(admin, 'routers');
    await admin.goto(`${url}#/admin/sessions`);
    await admin.locator('tbody tr').first().waitFor();
    await shot(admin, 'admin-sessions');
    await admin.locator('tbody tr', { hasText: 'PENDING_REVIEW' }).first().getByRole('link').click();
    await admin.getByRole('heading', { name: 'What the registry says' }).waitFor();
    await admin.locator('.facts').first().waitFor();
    await shot(admin, 'review');
    // a router being added, its key refused at its field
    await admin.goto(`${url}#/admin/routers`);
    await admin.getByRole('button', { name: 'Add a router' }).click();
    await admin.getByLabel('Name', { exact: true }).fill('par1');
    await admin.getByLabel('Display name').fill('Paris 1');
    await admin.getByLabel('Node id').fill('4');
    await admin.getByLabel('Region', { exact: true }).fill('eu-west');
    await admin.getByLabel('Endpoint host').fill('par1.example.net');
    await admin.getByLabel('WireGuard public key').fill('not-a-key');
    await admin.getByLabel('Link-local address').fill('fe80::1');
    await admin.getByRole('button', { name: 'Add the router' }).click();
    await admin.locator('#add-router-publicKey-error').waitFor();
    await admin.locator('form.router-form').screenshot({ path: path.join(out, `router-add-${size}.png`) });
    written.push(path.relative(ROOT, path.join(out, `router-add-${size}.png`)));
    // the policy's change before it is saved
    await admin.goto(`${url}#/admin/policy`);
    await admin.getByRole('button', { name: 'Edit the policy' }).click();
    const policy = JSON.parse(await admin.getByLabel('The policy (JSON)').inputValue()) as object;
    await admin
      .getByLabel('The policy (JSON)')
      .fill(JSON.stringify({ ...policy, blockedAsns: [4242429999], maxPendingPerAsn: 3 }, null, 2));
    await admin.getByRole('button', { name: 'Review the change' }).click();
    await admin.getByTestId('policy-diff').waitFor();
    await shot(admin, 'policy-diff');
    // tokens: one revoked by id, then every token of an ASN asked about
    await admin.goto(`${url}#/admin/tokens`);
    await admin.getByLabel('Token id').fill(h.tokens.issueToken(OTHER_PEER, 'user').id);
    await admin.getByRole('button', { name: 'Revoke the token' }).click();
    await admin.getByTestId('revocations').waitFor();
    await admin.getByLabel('ASN', { exact: true }).fill(`AS${OTHER_PEER}`);
    await admin.getByRole('button', { name: 'Revoke every token' }).click();
    await admin.getByRole('dialog').waitFor();
    await shot(admin, 'tokens');
    await admin.keyboard.press('Escape');
    await adminContext.close();
  }
  console.log(`wrote ${written.length} screenshots:\n  ${written.join('\n  ')}`);
} finally {
  lgAgent.abort();
  await browser.close();
  await h.close();
  await rm(dir, { recursive: true, force: true });
}
