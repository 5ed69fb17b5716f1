/**
 * The nearest router (docs/api.md, Nearest router) with real agents' looking glass in network
 * namespaces: two routers, each its own namespace and its own agent process (the looking-glass service,
 * test/support/lg-agent.ts, whose ping is the real one), reach a peer's endpoint over paths of different
 * RTT; GET /routers/near and `peerops routers --near` list them nearest first, a third router closed to
 * new sessions not at all. A measurement is shared; endpoints the WireGuard endpoint rule refuses are
 * refused naming the field; a caller's new measurements are limited. In a browser, the portal's create
 * form shows each router's RTT, nearest first, and preselects the nearest.
 *
 * The distance: this kernel has no netem qdisc (`tc qdisc add … netem` answers "Specified qdisc kind is
 * unknown"), so the peer's namespace answers pings itself, late by the sender's address
 * (test/support/icmp-echo-delay.py), its kernel's own echo replies off.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DirectoryRegistry } from '../../controller/auth/login/registry.ts';
import type { NearRoutersResponse } from '../../controller/api/responses.ts';
import { expectOk, startHarness, type Harness } from '../api/helpers.ts';
import { runCli } from '../cli/run.ts';
import { sshKey, tempDir, writeRegistry, type SshKey } from '../login/support.ts';
import { expectAccessible, launchBrowser, logInWithSsh, openPage } from '../portal/support.ts';
import { NetnsLab, waitFor } from '../support/netns.ts';

const ENDPOINT = '10.61.9.9:51820';
const FAR_MS = 60;
const NEAR_MS = 5;
const PEER_ASN = 4242421111;

let h: Harness;
let lab: NetnsLab;
let url: string;
let home: string;
const agents: ChildProcess[] = [];
let names: { far: string; near: string; closed: string };
let peerKey: SshKey;
let browser: Browser | undefined;

/** One router's agent (looking glass only) with its commands in `netns`; resolves once it polls. */
async function startAgent(router: string, token: string, netns: string): Promise<void> {
  const child = spawn(process.execPath, ['test/support/lg-agent.ts', url, router, token], {
    env: { ...process.env, PEEROPS_AGENT_NETNS: netns },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  agents.push(child);
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (out += b.toString()));
  await waitFor(`${router}'s agent polling`, async () => out.includes('polling'), 30_000);
}

beforeAll(async () => {
  home = await tempDir('near');
  peerKey = await sshKey(home, 'ed25519', 'peer');
  await writeRegistry(join(home, 'registry'), {
    autNums: { [PEER_ASN]: ['PEER-MNT'] },
    mntners: { 'PEER-MNT': [peerKey.publicLine] },
  });
  h = await startHarness(
    {},
    { registry: new DirectoryRegistry(join(home, 'registry')), serviceHost: '127.0.0.1', admins: [] },
  );
  await h.app.listen({ host: '127.0.0.1', port: 0 });
  const address = h.app.server.address();
  url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  await expectOk(
    h.post('/admin/policy', h.admin, {
      action: 'set',
      // the lab's endpoint is a private address, which only this lets through
      spec: { dn42Asn: 4242420001, allowPrivateEndpoints: true },
    }),
  );
  lab = new NetnsLab('near');
  names = { far: `${lab.id}f`, near: `${lab.id}n`, closed: `${lab.id}c` };
  const far = await lab.namespace('far');
  const near = await lab.namespace('near');
  const peer = await lab.namespace('peer');
  await lab.veth(far, peer, { a: '10.61.1.1/24', b: '10.61.1.2/24' });
  await lab.veth(near, peer, { a: '10.61.2.1/24', b: '10.61.2.2/24' });
  await peer.run('ip', ['addr', 'add', '10.61.9.9/32', 'dev', 'lo']);
  await far.run('ip', ['route', 'add', '10.61.9.9/32', 'via', '10.61.1.2']);
  await near.run('ip', ['route', 'add', '10.61.9.9/32', 'via', '10.61.2.2']);
  await peer.run('sysctl', ['-q', '-w', 'net.ipv4.icmp_echo_ignore_all=1']);
  const echo = lab.spawn(peer, 'python3', [
    join(import.meta.dirname, '..', 'support', 'icmp-echo-delay.py'),
    `10.61.1.1=${FAR_MS}`,
    `10.61.2.1=${NEAR_MS}`,
  ]);
  let echoOut = '';
  echo.stdout?.on('data', (b: Buffer) => (echoOut += b.toString()));
  await waitFor('the echo responder', async () => echoOut.includes('ready'), 10_000);

  const farToken = await h.addRouter(names.far);
  const nearToken = await h.addRouter(names.near);
  await h.addRouter(names.closed, { acceptingSessions: false });
  await startAgent(names.far, farToken, far.name);
  await startAgent(names.near, nearToken, near.name);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  for (const a of agents) a.kill('SIGTERM');
  await lab?.cleanup();
  await h?.close();
  await rm(home, { recursive: true, force: true });
});

const nearFor = (token: string | undefined, endpoint: string) =>
  h.get(`/routers/near?endpoint=${encodeURIComponent(endpoint)}`, token);

describe('the nearest router', () => {
  it('lists the accepting routers by the RTT their agents measured, nearest first', async () => {
    const res = await nearFor(h.tokens.issueToken(PEER_ASN, 'user').token, ENDPOINT);
    expect(res.statusCode, res.body).toBe(200);
    const answer = res.json() as NearRoutersResponse;
    expect(answer.routers.map((r) => r.name)).toEqual([names.near, names.far]);
    const [nearest, farthest] = answer.routers;
    expect(nearest?.rtt).toBeGreaterThanOrEqual(NEAR_MS);
    expect(farthest?.rtt).toBeGreaterThanOrEqual(FAR_MS);
    expect(nearest!.rtt!).toBeLessThan(farthest!.rtt!);
    console.log(`measured: ${names.near} ${nearest?.rtt} ms, ${names.far} ${farthest?.rtt} ms`);

    // shared: another caller within 5 minutes gets the same measurement
    const again = await nearFor(h.tokens.issueToken(4242422222, 'user').token, ENDPOINT);
    expect((again.json() as NearRoutersResponse).measuredAt).toBe(answer.measuredAt);

    const cli = await runCli(['routers', '--near', ENDPOINT], {
      url,
      home,
      token: h.tokens.issueToken(PEER_ASN, 'user').token,
    });
    expect(cli.stderr).toBe('');
    const rows = cli.stdout.trim().split('\n');
    expect(rows[0]).toMatch(/^NAME\s+DISPLAY NAME\s+REGION\s+RTT MS\s+NOTE$/);
    expect(rows.slice(1).map((r) => r.split(/\s+/)[0])).toEqual([names.near, names.far]);
  });

  it('refuses an endpoint the WireGuard endpoint rule refuses, and callers without a login', async () => {
    const token = h.tokens.issueToken(4242423333, 'user').token;
    for (const [endpoint, said] of [
      ['127.0.0.1:51820', 'loopback'],
      ['[fe80::1]:51820', 'link-local'],
      ['peer.example.org', 'host:port'],
    ] as const) {
      const res = await nearFor(token, endpoint);
      expect(res.statusCode, endpoint).toBe(400);
      const body = res.json() as { errors: { pointer: string; message: string }[] };
      expect(body.errors[0]?.pointer).toBe('/endpoint');
      expect(body.errors[0]?.message).toContain(said);
    }
    expect((await nearFor(undefined, ENDPOINT)).statusCode).toBe(401);
  });

  it('limits the new measurements one caller starts, not the shared ones', async () => {
    const token = h.tokens.issueToken(4242424444, 'user').token;
    // addresses no router has a route to: each ping fails at once
    for (let i = 1; i <= 6; i++) {
      const res = await nearFor(token, `10.99.0.${i}:51820`);
      expect(res.statusCode, res.body).toBe(200);
      expect((res.json() as NearRoutersResponse).routers.every((r) => r.rtt === null && r.problem)).toBe(
        true,
      );
    }
    const limited = await nearFor(token, '10.99.0.7:51820');
    expect(limited.statusCode).toBe(429);
    expect(limited.json()).toMatchObject({ key: 'near.rateLimited' });
    expect((await nearFor(token, ENDPOINT)).statusCode).toBe(200);
  });

  it('shows each RTT in the portal’s create form, nearest first, the nearest chosen', async () => {
    browser = await launchBrowser();
    const { page, problems } = await openPage(browser, url);
    await page.goto(url);
    await logInWithSsh(page, PEER_ASN, peerKey);
    await page.goto(`${url}/#/new`);
    await page.getByRole('heading', { name: 'New session' }).waitFor();
    const measure = page.getByRole('button', { name: 'Measure the distance from your endpoint' });
    await measure.click();
    await page.getByText('Fill in your endpoint (host:port) below first.').waitFor();
    await page.getByLabel('Your WireGuard endpoint').fill(ENDPOINT);
    await measure.click();
    await expect.poll(() => page.getByTestId('router-rtt').count()).toBe(2);
    const options = page.locator('.router-option input');
    expect(
      await options.evaluateAll((els) => els.map((e) => (e as unknown as { value: string }).value)),
    ).toEqual([names.near, names.far, names.closed]);
    expect(await page.getByRole('radio', { name: new RegExp(`Router ${names.near}`) }).isChecked()).toBe(
      true,
    );
    expect(await page.getByTestId('router-rtt').first().textContent()).toMatch(
      /^\d+(\.\d)? ms from your endpoint · nearest$/,
    );
    await expectAccessible(page, 'the create form with distances');
    expect(problems).toEqual([]);
  });
});
