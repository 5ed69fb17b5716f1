/**
 * A session keeps running while a change of it waits for review, and what IPv4 and MP-BGP changes cost
 * it, with a real agent, BIRD and WireGuard in namespaces (test/agent/lab.ts; the router has a DN42 IPv4
 * on its tunnels). The first test: a peer's new address sends its ACTIVE session back to review; the
 * router keeps the approved values and BGP stays Established for longer than a hold time (the peer's
 * card in the browser says so, axe on it), then the admin's approval applies the new address, BGP
 * still up. The second: an admin's modify (its own review) sets and changes the IPv4 address, turns
 * extended next hop off, MP-BGP off and on again; each step prints whether BGP restarted and when it
 * was Established again (docs/agent.md, Changing a running session, quotes the figures).
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentSession } from '../../common/agent-api.ts';
import { SessionStatus } from '../../common/status.ts';
import { sessionIpv4ProtocolName, sessionProtocolName } from '../../agent/bird/names.ts';
import { DirectoryRegistry } from '../../controller/auth/login/registry.ts';
import { ADMIN_ASN, expectOk } from '../api/helpers.ts';
import { startAgentLab, type AgentLab, type AgentProcess, type Peer } from '../agent/lab.ts';
import { waitFor } from '../support/netns.ts';
import { sshKey, tempDir, writeRegistry, type SshKey } from '../login/support.ts';
import { loadAverage, pollBgp, POLL_MS, routerBgp, sinceMoved } from './bgp-watch.ts';
import { accessibleEverywhere, launchBrowser, logInWithSsh, openPage } from './support.ts';

/** Approval → Established through a real agent on a busy 2-core machine: seconds, with a wide margin. */
const ESTABLISHED_TIMEOUT_MS = 120_000;
/** The lab peer's BGP hold time is 9 s: a session lost while the change waits is gone after it. */
const HOLD_TIME_MS = 10_000;
/** Readings kept after a change applied: a restart BIRD makes is at its configure, seconds at most. */
const SETTLE_MS = 3_000;
const TUNNEL_IPV4 = '172.20.55.33';

let L: AgentLab;
let peer: Peer;
let agent: AgentProcess;
let browser: Browser;
let peerKey: SshKey;
let dir: string;
let uuid: string;

beforeAll(async () => {
  dir = await tempDir('review-on-router');
  const registryDir = path.join(dir, 'registry');
  L = await startAgentLab(
    'prr',
    { registry: new DirectoryRegistry(registryDir), serviceHost: '127.0.0.1', admins: [ADMIN_ASN] },
    TUNNEL_IPV4,
  );
  peer = await L.addPeer('peer', 'fe80::1234');
  peerKey = await sshKey(dir, 'ed25519', 'peer');
  await writeRegistry(registryDir, {
    autNums: { [peer.asn]: ['PEER-MNT'] },
    mntners: { 'PEER-MNT': [peerKey.publicLine] },
    routes: { [`fd42:${(peer.asn % 10000).toString(16)}::/48`]: [peer.asn], '172.20.55.0/28': [peer.asn] },
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

const stored = () => L.h.store.getSession(uuid);
const served = async (): Promise<AgentSession | undefined> => {
  const res = await expectOk(L.h.get(`/agent/${L.router}/sessions`, L.agentToken));
  return (res.json() as { sessions: AgentSession[] }).sessions.find((s) => s.uuid === uuid);
};
const failWithAgent = (err: Error): never => {
  throw new Error(
    `${err.message}; status ${JSON.stringify(stored()?.status)}; agent: ${agent.output().slice(-3000)}`,
  );
};

describe('a change in review and the cost of IPv4 and MP-BGP changes, with an agent in the lab', () => {
  it('keeps BGP Established while a new address waits for review, then applies it on approval', async () => {
    uuid = await L.approvedSession(peer);
    const { listenPort } = stored()?.spec ?? { listenPort: 0 };
    const protocol = sessionProtocolName(listenPort);
    await L.connectPeer(peer, listenPort);
    await waitFor(
      'the session ACTIVE with BGP Established',
      () => stored()?.status.code === SessionStatus.ACTIVE && stored()?.status.bgpState === 'Established',
      ESTABLISHED_TIMEOUT_MS,
      500,
    ).catch(failWithAgent);

    const oldIpv6 = stored()?.spec.ipv6 ?? '';
    const newIpv6 = oldIpv6.replace(/::1$/, '::2');
    const before = await routerBgp(L.bird, protocol);
    expect(before.state).toBe('Established');
    const poll = pollBgp(L.bird, protocol);
    const asked = Date.now();
    const res = await expectOk(
      L.h.post('/session', peer.userToken, { action: 'modify', uuid, ipv6: newIpv6 }),
    );
    expect(res.json()).toMatchObject({ status: SessionStatus.PENDING_REVIEW, approved: { ipv6: oldIpv6 } });
    expect(await served()).toMatchObject({ status: SessionStatus.ACTIVE, ipv6: oldIpv6 });

    // the peer's card while the change waits: in review, BGP Established as the agent reports it
    const p = await openPage(browser, L.url);
    await p.page.goto(L.url);
    await logInWithSsh(p.page, peer.asn, peerKey);
    const card = p.page.locator('article.session');
    await card.getByText('PENDING_REVIEW', { exact: true }).waitFor();
    await card.getByTestId('bgp-state').getByText('Established').waitFor();
    expect(await card.getByTestId('status-words').textContent()).toContain(
      'until then the router keeps the session running as last approved (ACTIVE)',
    );
    await accessibleEverywhere(p.page, "the peer's session with a change in review", async () => {
      // in either language, the words of a change in review
      await expect
        .poll(() => card.getByTestId('status-words').textContent())
        .toMatch(/as last approved \(ACTIVE\)|按上次批准的设置继续运行该会话（ACTIVE）/);
    });
    await waitFor(
      'one BGP hold time in review',
      () => Date.now() - asked > HOLD_TIME_MS,
      2 * HOLD_TIME_MS,
      250,
    );
    expect(stored()?.status).toMatchObject({
      code: SessionStatus.PENDING_REVIEW,
      approved: { status: SessionStatus.ACTIVE },
      bgpState: 'Established',
    });

    const approved = Date.now();
    await expectOk(L.h.post('/admin/session', L.h.admin, { action: 'approve', uuid }));
    await waitFor(
      'the new address applied and the session ACTIVE',
      () => stored()?.status.code === SessionStatus.ACTIVE,
      ESTABLISHED_TIMEOUT_MS,
      250,
    ).catch(failWithAgent);
    const applied = Date.now();
    await waitFor('a few readings after', () => Date.now() - applied > SETTLE_MS, 2 * SETTLE_MS, 250);
    const seen = await poll.stop();
    const after = await routerBgp(L.bird, protocol);
    expect(await served()).toMatchObject({ status: SessionStatus.ACTIVE, ipv6: newIpv6 });
    const left = seen.filter((s) => s.state !== 'Established');
    const flapped = left.length > 0 || sinceMoved(before.since, after.since);
    console.log(
      `modify in review: ${approved - asked} ms in review, approval → ACTIVE with the new address ${applied - approved} ms; ` +
        `BGP ${flapped ? `left Established (${left.length} of ${seen.length} reads)` : `stayed Established (${seen.length} reads every ${POLL_MS} ms)`}; load ${loadAverage()}`,
    );
    expect(flapped, 'BGP left Established while the change waited or applied').toBe(false);
    await card.getByText('ACTIVE', { exact: true }).waitFor({ timeout: ESTABLISHED_TIMEOUT_MS });
    expect(p.problems).toEqual([]);
    await p.context.close();
  }, 300_000);

  it('measures what IPv4 and MP-BGP changes cost the BGP session', async () => {
    const listenPort = stored()?.spec.listenPort ?? 0;
    const protocol = sessionProtocolName(listenPort);
    const iface = `wg_${listenPort}`;
    // `restarts`: whether the link-local BGP session restarts, as docs/agent.md says (BIRD restarts a
    // protocol whose capabilities change: extended next hop; a channel's filters are reloaded in place)
    const steps: { what: string; change: Record<string, unknown>; restarts: boolean }[] = [
      { what: 'IPv4 set (MP-BGP)', change: { ipv4: '172.20.55.1' }, restarts: false },
      { what: 'IPv4 changed (MP-BGP)', change: { ipv4: '172.20.55.2' }, restarts: false },
      { what: 'extended next hop off', change: { extendedNextHop: false }, restarts: true },
      { what: 'MP-BGP off', change: { mpbgp: false }, restarts: false },
      { what: 'IPv4 changed (no MP-BGP)', change: { ipv4: '172.20.55.3' }, restarts: false },
      { what: 'MP-BGP on', change: { mpbgp: true }, restarts: false },
      { what: 'extended next hop on', change: { extendedNextHop: true }, restarts: true },
    ];
    const figures: string[] = [];
    const outcomes: { what: string; restarted: boolean }[] = [];
    let ipv4Since = '';
    for (const { what, change } of steps) {
      const before = await routerBgp(L.bird, protocol);
      expect(before.state, `Established before: ${what}`).toBe('Established');
      const poll = pollBgp(L.bird, protocol);
      const asked = Date.now();
      const res = await L.h.post('/session', L.h.admin, { action: 'modify', uuid, ...change });
      expect(res.statusCode, `${what}: ${res.body}`).toBe(200);
      await waitFor(
        `ACTIVE after: ${what}`,
        () => stored()?.status.code === SessionStatus.ACTIVE,
        ESTABLISHED_TIMEOUT_MS,
        POLL_MS,
      ).catch(failWithAgent);
      const applied = Date.now();
      await waitFor(
        `BIRD Established after: ${what}`,
        async () => (await routerBgp(L.bird, protocol)).state === 'Established',
        ESTABLISHED_TIMEOUT_MS,
        POLL_MS,
      );
      await waitFor('a few readings after', () => Date.now() - applied > SETTLE_MS, 2 * SETTLE_MS, 250);
      const seen = await poll.stop();
      const after = await routerBgp(L.bird, protocol);
      const down = seen.filter((s) => s.state !== 'Established');
      const restarted = down.length > 0 || sinceMoved(before.since, after.since);
      const back = seen.find((s) => s.state === 'Established' && sinceMoved(before.since, s.since));
      // the channels BIRD runs on the session after the change: ipv6, and ipv4 with MP-BGP
      const channels = [
        ...(await L.bird.birdc(`show protocols all ${protocol}`)).matchAll(/Channel (ipv[46])/g),
      ].map((m) => m[1]);
      // without MP-BGP, IPv4 has a session of its own to the peer's tunnel IPv4 (docs/agent.md)
      const ipv4Session = await routerBgp(L.bird, sessionIpv4ProtocolName(listenPort)).catch(() => ({
        state: 'absent',
        since: '',
      }));
      outcomes.push({ what, restarted });
      // the IPv4 session of its own restarts with a new neighbour
      if (what === 'IPv4 changed (no MP-BGP)') expect(sinceMoved(ipv4Since, ipv4Session.since)).toBe(true);
      ipv4Since = ipv4Session.since;
      figures.push(
        `${what} (channels ${channels.join(', ')}${ipv4Session.since ? `; IPv4 session ${ipv4Session.state} since ${ipv4Session.since}` : ''}): BGP ${restarted ? `restarted, Established again ${(back?.at ?? applied) - asked} ms after the modify (not Established in ${down.length} of ${seen.length} reads)` : `stayed Established (${seen.length} reads every ${POLL_MS} ms)`}`,
      );
    }
    // the router's tunnel carries the last IPv4 address as its point-to-point peer
    expect(await L.node.run('ip', ['-4', 'addr', 'show', 'dev', iface])).toContain(`peer 172.20.55.3/32`);
    console.log(`IPv4 and MP-BGP changes (load ${loadAverage()}):\n  ${figures.join('\n  ')}`);
    expect(outcomes).toEqual(steps.map(({ what, restarts }) => ({ what, restarted: restarts })));
  }, 300_000);
});
