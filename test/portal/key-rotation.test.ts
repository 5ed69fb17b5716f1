/**
 * A peer rotates their WireGuard key in the portal and the tunnel comes back, with a real agent, BIRD and
 * WireGuard in namespaces (test/agent/lab.ts). The Change form refuses a malformed key at its field
 * (axe on the form, before and with the error, in English at 1280 px and Chinese at 390 px); a good one
 * is saved, the peer loads the new private key
 * on its side right after, as the form's hint says, and the router takes the new key in place (no new
 * review: the default policy). The router's BIRD protocol is polled throughout: the test prints whether
 * BGP left Established and how long the tunnel was without a handshake (docs/agent.md, Changing a
 * running session, quotes the figures).
 */
import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sessionProtocolName } from '../../agent/bird/names.ts';
import { DirectoryRegistry } from '../../controller/auth/login/registry.ts';
import { SessionStatus } from '../../common/status.ts';
import { ADMIN_ASN } from '../api/helpers.ts';
import { startAgentLab, wgKeyPair, type AgentLab, type AgentProcess, type Peer } from '../agent/lab.ts';
import { waitFor } from '../support/netns.ts';
import { sshKey, tempDir, writeRegistry, type SshKey } from '../login/support.ts';
import { loadAverage, pollBgp, POLL_MS, routerBgp, sinceMoved } from './bgp-watch.ts';
import { chooseLanguage, expectAccessible, launchBrowser, logInWithSsh, openPage } from './support.ts';

/** Approval → Established through a real agent on a busy 2-core machine: seconds, with a wide margin. */
const ESTABLISHED_TIMEOUT_MS = 120_000;

let L: AgentLab;
let peer: Peer;
let agent: AgentProcess;
let browser: Browser;
let peerKey: SshKey;
let dir: string;

beforeAll(async () => {
  dir = await tempDir('portal-key');
  const registryDir = path.join(dir, 'registry');
  L = await startAgentLab('pkr', {
    registry: new DirectoryRegistry(registryDir),
    serviceHost: '127.0.0.1',
    admins: [ADMIN_ASN],
  });
  peer = await L.addPeer('peer', 'fe80::1234');
  peerKey = await sshKey(dir, 'ed25519', 'peer');
  await writeRegistry(registryDir, {
    autNums: { [peer.asn]: ['PEER-MNT'] },
    mntners: { 'PEER-MNT': [peerKey.publicLine] },
    routes: { [`fd42:${(peer.asn % 10000).toString(16)}::/48`]: [peer.asn] },
  });
  agent = L.spawnAgent();
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await agent?.kill('SIGTERM');
  await L?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** The latest handshake with `publicKey` on the router's session tunnel, in epoch seconds (0: none). */
async function routerHandshake(iface: string, publicKey: string): Promise<number> {
  const out = await L.node.run('wg', ['show', iface, 'latest-handshakes']).catch(() => '');
  const line = out.split('\n').find((l) => l.startsWith(`${publicKey}\t`));
  return Number(line?.split('\t')[1] ?? 0);
}

describe('key rotation in the portal with an agent in the lab', () => {
  it('takes the new key on the router in place and the tunnel comes back, BGP polled', async () => {
    const uuid = await L.approvedSession(peer);
    const session = L.h.store.getSession(uuid);
    if (!session) throw new Error('the session was not stored');
    const { listenPort } = session.spec;
    const iface = `wg_${listenPort}`;
    const protocol = sessionProtocolName(listenPort);
    await L.connectPeer(peer, listenPort);
    const stored = () => L.h.store.getSession(uuid)?.status;
    const established = (what: string) =>
      waitFor(
        what,
        () => stored()?.code === SessionStatus.ACTIVE && stored()?.bgpState === 'Established',
        ESTABLISHED_TIMEOUT_MS,
        500,
      ).catch((err: Error) => {
        throw new Error(
          `${err.message}; status ${JSON.stringify(stored())}; agent: ${agent.output().slice(-3000)}`,
        );
      });
    await established('the session ACTIVE with BGP Established');

    const p = await openPage(browser, L.url);
    await p.page.goto(L.url);
    await logInWithSsh(p.page, peer.asn, peerKey);
    const card = p.page.locator('article.session');
    await card.getByTestId('bgp-state').getByText('Established').waitFor({ timeout: ESTABLISHED_TIMEOUT_MS });
    await card.getByRole('button', { name: 'Change' }).click();
    const keyField = card.getByLabel('Your WireGuard public key');
    expect(await keyField.inputValue()).toBe(peer.keys.publicKey);
    await expectAccessible(p.page, 'the Change form');

    // a malformed key: named at its field, in words, and nothing is sent to the router
    await keyField.fill('not-a-key');
    await card.getByRole('button', { name: 'Save' }).click();
    const fieldError = card.locator(`#modify-${uuid}-publicKey-error`);
    await fieldError.waitFor();
    expect(await fieldError.textContent()).not.toBe('');
    await expectAccessible(p.page, 'the Change form with a field error');
    // the same form in Chinese at 390 px: its labels in the reader's language, still accessible
    await p.page.setViewportSize({ width: 390, height: 844 });
    await chooseLanguage(p.page, 'zh-CN');
    // a new language renders the page anew: the form is opened again
    await card.getByRole('button', { name: '修改' }).click();
    await card.getByLabel('您的 WireGuard 公钥').fill('not-a-key');
    await card.getByRole('button', { name: '保存' }).click();
    await fieldError.waitFor();
    await expectAccessible(p.page, 'the Change form with a field error, zh-CN at 390 px');
    await chooseLanguage(p.page, 'en');
    await p.page.setViewportSize({ width: 1280, height: 900 });
    await card.getByRole('button', { name: 'Change' }).click();
    expect(L.h.store.getSession(uuid)?.spec.publicKey).toBe(peer.keys.publicKey);

    // BGP and the tunnel, read from the router while the key changes
    const before = await routerBgp(L.bird, protocol);
    expect(before.state).toBe('Established');
    const poll = pollBgp(L.bird, protocol);

    const next = await wgKeyPair();
    const keyFile = path.join(L.root, 'peer-next.key');
    await writeFile(keyFile, `${next.privateKey}\n`, { mode: 0o600 });
    await keyField.fill(next.publicKey);
    const saved = Date.now();
    await card.getByRole('button', { name: 'Save' }).click();
    await card.locator('form.modify').waitFor({ state: 'detached' });
    // the peer's side, right after the save (the form's hint says so)
    await peer.ns.run('wg', ['set', peer.iface, 'private-key', keyFile]);
    const peerSwitched = Date.now();
    expect(L.h.store.getSession(uuid)?.spec.publicKey).toBe(next.publicKey);

    const handshake = await waitFor(
      'a handshake with the new key on the router',
      async () => {
        const t = await routerHandshake(iface, next.publicKey);
        return t > 0 ? Date.now() : undefined;
      },
      ESTABLISHED_TIMEOUT_MS,
      100,
    ).catch((err: Error) => {
      throw new Error(`${err.message}; agent: ${agent.output().slice(-3000)}`);
    });
    await established('the session ACTIVE again with BGP Established');
    await card.getByText('ACTIVE', { exact: true }).waitFor({ timeout: ESTABLISHED_TIMEOUT_MS });
    await card.getByTestId('bgp-state').getByText('Established').waitFor({ timeout: ESTABLISHED_TIMEOUT_MS });
    // one hold time of the lab's peer (9 s) after the save: a BGP session lost with the tunnel would
    // have gone by then
    await waitFor('one BGP hold time after the save', () => Date.now() - saved > 10_000, 15_000, 250);
    const seen = await poll.stop();
    const after = await routerBgp(L.bird, protocol);

    // the old key is gone from the router's tunnel: one peer, the new key
    const peers = (await L.node.run('wg', ['show', iface, 'peers'])).trim().split('\n');
    expect(peers).toEqual([next.publicKey]);
    expect(after.state).toBe('Established');
    const left = seen.filter((s) => s.state !== 'Established');
    const flapped = left.length > 0 || sinceMoved(before.since, after.since);
    console.log(
      `key rotation: save → peer's new key ${peerSwitched - saved} ms, → handshake with the new key ` +
        `${handshake - saved} ms; BGP ${flapped ? `flapped (left Established in ${left.length} of ${seen.length} reads, since ${before.since} → ${after.since})` : `stayed Established (${seen.length} reads every ${POLL_MS} ms, since ${before.since})`}; load ${loadAverage()}`,
    );
    expect(flapped, 'BGP left Established while the key changed').toBe(false);
    await expectAccessible(p.page, 'the session after a key rotation');
    expect(p.problems).toEqual([]);
    await p.context.close();
  }, 300_000);

  it('moves the link-local in the portal with one BGP restart, and an IPv6 address without any', async () => {
    const uuid = L.h.store.listSessions().find((s) => s.spec.asn === peer.asn)?.spec.uuid;
    const session = uuid ? L.h.store.getSession(uuid) : undefined;
    if (!uuid || !session) throw new Error('no session from the test before');
    const { listenPort } = session.spec;
    const iface = `wg_${listenPort}`;
    const protocol = sessionProtocolName(listenPort);
    const stored = () => L.h.store.getSession(uuid)?.status;
    const ifindex = async () => (await L.node.run('cat', [`/sys/class/net/${iface}/ifindex`])).trim();
    const tunnel = await ifindex();

    // IPv6: an admin's modify (its own review). Only the route into the tunnel changes (none in this lab,
    // which gives the router no DN42 IPv6: test/agent/wireguard.test.ts moves one): BGP stays.
    const oldIpv6 = session.spec.ipv6!;
    const newIpv6 = oldIpv6.replace(/::1$/, '::2');
    let poll = pollBgp(L.bird, protocol);
    const before = await routerBgp(L.bird, protocol);
    const changed = await L.h.post('/session', L.h.admin, { action: 'modify', uuid, ipv6: newIpv6 });
    expect(changed.statusCode, changed.body).toBe(200);
    await waitFor(
      'the session ACTIVE again',
      () => stored()?.code === SessionStatus.ACTIVE,
      ESTABLISHED_TIMEOUT_MS,
      250,
    );
    let seen = await poll.stop();
    const afterIpv6 = await routerBgp(L.bird, protocol);
    const ipv6Flapped =
      seen.some((s) => s.state !== 'Established') || sinceMoved(before.since, afterIpv6.since);
    console.log(
      `ipv6 change: BGP ${ipv6Flapped ? 'restarted' : `stayed Established (${seen.length} reads)`}; load ${loadAverage()}`,
    );
    expect(ipv6Flapped).toBe(false);

    // link-local: in the portal; the peer moves its own address right after. BIRD's neighbor changes:
    // the BGP session restarts once, the tunnel stays.
    const p = await openPage(browser, L.url);
    await p.page.goto(L.url);
    await logInWithSsh(p.page, peer.asn, peerKey);
    const card = p.page.locator('article.session');
    await card.getByText('ACTIVE', { exact: true }).waitFor({ timeout: ESTABLISHED_TIMEOUT_MS });
    await card.getByRole('button', { name: 'Change' }).click();
    poll = pollBgp(L.bird, protocol);
    await card.getByLabel('Your link-local address on the tunnel').fill('fe80::5678');
    const saved = Date.now();
    await card.getByRole('button', { name: 'Save' }).click();
    await card.locator('form.modify').waitFor({ state: 'detached' });
    await peer.ns.run('ip', ['addr', 'del', 'fe80::1234/64', 'dev', peer.iface]);
    await peer.ns.run('ip', ['addr', 'add', 'fe80::5678/64', 'dev', peer.iface, 'nodad']);
    const back = await waitFor(
      'BGP Established again from the new link-local',
      async () => {
        const now = await routerBgp(L.bird, protocol);
        return now.state === 'Established' && sinceMoved(afterIpv6.since, now.since) ? Date.now() : undefined;
      },
      ESTABLISHED_TIMEOUT_MS,
      POLL_MS,
    ).catch((err: Error) => {
      throw new Error(`${err.message}; agent: ${agent.output().slice(-3000)}`);
    });
    seen = await poll.stop();
    const down = seen.filter((s) => s.state !== 'Established');
    console.log(
      `link-local change: BGP restarted once, Established again ${back - saved} ms after the save ` +
        `(not Established in ${down.length} of ${seen.length} reads every ${POLL_MS} ms); load ${loadAverage()}`,
    );
    expect(await ifindex(), 'the tunnel was kept').toBe(tunnel);
    await card.getByText('ACTIVE', { exact: true }).waitFor({ timeout: ESTABLISHED_TIMEOUT_MS });
    await card.getByTestId('bgp-state').getByText('Established').waitFor({ timeout: ESTABLISHED_TIMEOUT_MS });
    expect(p.problems).toEqual([]);
    await p.context.close();
  }, 300_000);
});
