/**
 * The portal with an agent in the lab (test/agent/lab.ts: a router namespace with the real `peerops
 * agent` executable, BIRD and wireguard-go; a peer namespace with its own BIRD and WireGuard): the peer
 * logs in and creates the session in the browser, the admin approves it in the browser, the agent sets
 * it up, and the peer's page shows the session ACTIVE, BGP Established and the route it imported.
 * The peer's router is configured by the lab (connectPeer), as a person would configure theirs.
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DirectoryRegistry } from '../../controller/auth/login/registry.ts';
import { ADMIN_ASN } from '../api/helpers.ts';
import { startAgentLab, type AgentLab, type AgentProcess, type Peer } from '../agent/lab.ts';
import { waitFor } from '../support/netns.ts';
import { sshKey, tempDir, writeRegistry, type SshKey } from '../login/support.ts';
import { expectAccessible, launchBrowser, logInWithSsh, openPage } from './support.ts';

/** Approval → Established through a real agent on a busy 2-core machine: seconds, with a wide margin. */
const ESTABLISHED_TIMEOUT_MS = 120_000;

let L: AgentLab;
let peer: Peer;
let agent: AgentProcess;
let browser: Browser;
let peerKey: SshKey;
let adminKey: SshKey;
let url: string;
let dir: string;

beforeAll(async () => {
  dir = await tempDir('portal-lab');
  const registryDir = path.join(dir, 'registry');
  L = await startAgentLab('prt', {
    registry: new DirectoryRegistry(registryDir),
    serviceHost: '127.0.0.1',
    admins: [ADMIN_ASN],
  });
  url = L.url;
  peer = await L.addPeer('peer', 'fe80::1234');
  [peerKey, adminKey] = await Promise.all([sshKey(dir, 'ed25519', 'peer'), sshKey(dir, 'ed25519', 'admin')]);
  await writeRegistry(registryDir, {
    autNums: { [peer.asn]: ['PEER-MNT'], [ADMIN_ASN]: ['NET-MNT'] },
    mntners: { 'PEER-MNT': [peerKey.publicLine], 'NET-MNT': [adminKey.publicLine] },
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

describe('portal with an agent in the lab', () => {
  it("shows the peer's session Established with its routes after an approval in the portal", async () => {
    const body = peer.createBody(L.router) as Record<string, string | number>;
    const p = await openPage(browser, url);
    await p.page.goto(url);
    await logInWithSsh(p.page, peer.asn, peerKey);
    await p.page.getByRole('link', { name: 'New session' }).first().click();
    await p.page.getByRole('radio', { name: new RegExp(`Router ${L.router}`) }).check();
    await p.page.getByLabel('Your DN42 IPv6 address').fill(String(body.ipv6));
    await p.page.getByLabel('Your link-local address on the tunnel').fill(String(body.linkLocal));
    await p.page.getByLabel('Your WireGuard public key').fill(String(body.publicKey));
    await p.page.getByLabel('Your WireGuard endpoint (optional)').fill(String(body.endpoint));
    // The lab's peer speaks MP-BGP over IPv6 only: no IPv4, no extended next hop needed.
    await p.page.getByRole('button', { name: 'Create the session' }).click();
    await p.page.getByRole('heading', { name: 'Session created: PENDING_REVIEW' }).waitFor();

    const admin = await openPage(browser, url);
    await admin.page.goto(url);
    await logInWithSsh(admin.page, ADMIN_ASN, adminKey);
    await admin.page.getByRole('link', { name: 'Reviews' }).click();
    const review = admin.page.locator('article', { hasText: `AS${peer.asn}` });
    await review.getByRole('button', { name: 'Approve' }).click();
    await admin.page.getByText('Nothing to review.').waitFor();
    await admin.context.close();

    const session = L.h.store.listSessions().find((s) => s.spec.asn === peer.asn);
    expect(session).toBeDefined();
    await L.connectPeer(peer, session!.spec.listenPort);
    // The store first, so that a failure says what the agent did rather than what the page lacks.
    const stored = () => L.h.store.getSession(session!.spec.uuid)?.status;
    await waitFor(
      'the agent to report the session ACTIVE',
      () => stored()?.code === 1,
      ESTABLISHED_TIMEOUT_MS,
      500,
    ).catch((err: Error) => {
      throw new Error(
        `${err.message}; status ${JSON.stringify(stored())}; agent: ${agent.output().slice(-3000)}`,
      );
    });

    await p.page.getByRole('link', { name: 'Sessions', exact: true }).click();
    const card = p.page.locator('article.session');
    await card.getByText('ACTIVE', { exact: true }).waitFor({ timeout: ESTABLISHED_TIMEOUT_MS });
    await card.getByTestId('bgp-state').getByText('Established').waitFor({ timeout: ESTABLISHED_TIMEOUT_MS });
    await card
      .getByTestId('routes')
      .getByText('1', { exact: true })
      .waitFor({ timeout: ESTABLISHED_TIMEOUT_MS });
    expect(await card.textContent()).not.toContain('Last error');
    // Restart from the page: the router re-creates tunnel and BGP session, and it comes back.
    await card.getByRole('button', { name: 'Restart' }).click();
    await card.getByText('QUEUED_FOR_SETUP').waitFor();
    await card.getByText('ACTIVE', { exact: true }).waitFor({ timeout: ESTABLISHED_TIMEOUT_MS });
    await card.getByTestId('bgp-state').getByText('Established').waitFor({ timeout: ESTABLISHED_TIMEOUT_MS });
    await expectAccessible(p.page, 'an established session');
    expect(p.problems).toEqual([]);
    await p.context.close();
  }, 300_000);
});
