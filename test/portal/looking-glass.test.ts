/**
 * The session's Looking glass panel in a browser, against the lab (test/agent/lab.ts: real BIRD and
 * wireguard-go in namespaces, the real agent): the peer logs in, opens the panel and sees its BGP
 * protocol, the route it sent, and a ping from the router to its address.
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Agent } from '../../agent/agent.ts';
import { DirectoryRegistry } from '../../controller/auth/login/registry.ts';
import { ADMIN_ASN } from '../api/helpers.ts';
import { startAgentLab, type AgentLab, type Peer } from '../agent/lab.ts';
import { waitFor } from '../support/netns.ts';
import { sshKey, tempDir, writeRegistry, type SshKey } from '../login/support.ts';
import { chooseLanguage, expectAccessible, launchBrowser, logInWithSsh, openPage } from './support.ts';

let L: AgentLab;
let peer: Peer;
let agent: Agent;
let browser: Browser;
let peerKey: SshKey;
let dir: string;
let address: string;
let prefix: string;

beforeAll(async () => {
  dir = await tempDir('portal-lg');
  const registryDir = path.join(dir, 'registry');
  L = await startAgentLab('plg', {
    registry: new DirectoryRegistry(registryDir),
    serviceHost: '127.0.0.1',
    admins: [ADMIN_ASN],
  });
  peer = await L.addPeer('peer', 'fe80::1234');
  peerKey = await sshKey(dir, 'ed25519', 'peer');
  prefix = `fd42:${(peer.asn % 10000).toString(16)}::/48`;
  await writeRegistry(registryDir, {
    autNums: { [peer.asn]: ['PEER-MNT'] },
    mntners: { 'PEER-MNT': [peerKey.publicLine] },
    routes: { [prefix]: [peer.asn] },
  });
  const uuid = await L.approvedSession(peer);
  const port = L.h.store.getSession(uuid)!.spec.listenPort;
  address = L.h.store.getSession(uuid)!.spec.ipv6!;
  agent = L.agent();
  agent.start();
  await L.connectPeer(peer, port);
  await peer.ns.run('ip', ['addr', 'add', `${address}/128`, 'dev', peer.iface]);
  await waitFor(
    "the peer's route in",
    async () => (await agent.bird.protocols(`dn42_${port}`))[0]?.routesImported === 1,
    60_000,
    500,
  );
  // BIRD's kernel routes carry the router's loopback as source, which the lab's node lacks (see
  // test/agent/looking-glass.test.ts): the lab routes the peer's address itself.
  // `proto static`: the agent removes the routes through a tunnel that it made itself (proto boot) and
  // its spec lacks (agent/wireguard/interface.ts); this one is the lab's
  await L.node.run('ip', [
    '-6',
    'route',
    'replace',
    `${address}/128`,
    'dev',
    `wg_${port}`,
    'proto',
    'static',
  ]);
  browser = await launchBrowser();
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await agent?.close();
  await L?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('the Looking glass panel', () => {
  it("shows the session's protocol, its routes and a ping from the router", async () => {
    const p = await openPage(browser, L.url);
    await p.page.goto(L.url);
    await logInWithSsh(p.page, peer.asn, peerKey);
    const card = p.page.locator('article.session');
    await card.getByRole('button', { name: 'Looking glass' }).click();
    const output = card.getByTestId('lg-output');
    await card.getByRole('button', { name: 'BGP protocol' }).click();
    await output.getByText(/BGP state:\s+Established/).waitFor();
    await card.getByRole('button', { name: 'Routes received' }).click();
    await output.getByText(prefix).waitFor();
    expect(await card.getByTestId('lg-page').textContent()).toBe('Routes 1–1 of 1');
    // the route with the filter's verdict and its ROA state (the lab's ROA tables are empty: unknown)
    expect(
      await card.getByTestId('lg-routes').getByRole('row').nth(1).getByRole('cell').allTextContents(),
    ).toEqual([prefix, 'accepted', 'unknown']);
    await expect.poll(() => card.getByLabel('Address').inputValue()).toBe(address);
    await card.getByRole('button', { name: 'Ping' }).click();
    await output.getByText(/4 received/).waitFor();
    await expectAccessible(p.page, 'the Looking glass panel');
    expect(p.problems).toEqual([]);
    await p.context.close();
  }, 120_000);

  it('shows the network page: the routers with their state and a looking glass over DN42', async () => {
    const p = await openPage(browser, L.url);
    await p.page.goto(L.url);
    await logInWithSsh(p.page, peer.asn, peerKey);
    await p.page.getByRole('navigation').getByRole('link', { name: 'Network' }).click();
    await p.page.getByRole('heading', { level: 1, name: 'The network' }).waitFor();
    const row = p.page.getByTestId('network-routers').locator(`tr[data-router="${L.router}"]`);
    // the agent reports: its router is ready, with the peer's session up
    await expect.poll(() => row.locator('.badge').textContent(), { timeout: 30_000 }).toBe('ready');
    expect(await row.getByRole('cell').nth(2).textContent()).toBe('1');
    const lg = p.page.locator('section.looking-glass');
    await lg.getByLabel('Router').selectOption(L.router);
    await lg.getByLabel('Address or prefix').fill(address);
    await lg.getByRole('button', { name: 'Ask the router' }).click();
    await lg
      .getByTestId('network-lg-output')
      .getByText(/4 received/)
      .waitFor();
    await lg.getByLabel('Query').selectOption('route');
    await lg.getByRole('button', { name: 'Ask the router' }).click();
    await lg.getByTestId('network-lg-output').getByText(prefix).waitFor();
    await expectAccessible(p.page, 'the network page');
    // outside DN42's ranges: refused by the controller, said beside the form
    await lg.getByLabel('Query').selectOption('ping');
    await lg.getByLabel('Address or prefix').fill('8.8.8.8');
    await lg.getByRole('button', { name: 'Ask the router' }).click();
    await lg
      .getByRole('alert')
      .getByText(/outside DN42/)
      .waitFor();
    // the page in Simplified Chinese
    await chooseLanguage(p.page, 'zh-CN');
    await p.page.getByRole('heading', { level: 1, name: '网络' }).waitFor();
    await expectAccessible(p.page, 'the network page in Chinese');
    expect(p.problems.filter((x) => !/status of 400/.test(x))).toEqual([]);
    await p.context.close();
  }, 120_000);
});
