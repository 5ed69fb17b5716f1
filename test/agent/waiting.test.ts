/**
 * Right after approval, a peer who has not configured their side reads that the router waits for them
 * (docs/api.md, Waiting): the agent sets the session up in a node namespace with real BIRD and
 * wireguard-go, BIRD tries to connect and nobody answers; the peer's record says `waiting.for: peer` at
 * the first pass. Once the peer configures its side and BGP is Established, the wait is over.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Agent } from '../../agent/agent.ts';
import { waitFor } from '../support/netns.ts';
import { startAgentLab, type AgentLab, type Peer } from './lab.ts';

let L: AgentLab;
let agent: Agent;
let peer: Peer;

beforeAll(async () => {
  L = await startAgentLab('agw');
  agent = L.agent();
  peer = await L.addPeer('peer', 'fe80::1234');
});
afterAll(async () => {
  await agent?.close();
  await L?.close();
});

const record = async (uuid: string) =>
  (
    (await L.h.post('/session', peer.userToken, { action: 'list' })).json() as {
      sessions: { uuid: string; status: number; bgpState: string | null; waiting: unknown }[];
    }
  ).sessions.find((s) => s.uuid === uuid);

describe('the router waits for the peer', () => {
  it('at the first pass after approval; no more once the peer is configured and BGP is Established', async () => {
    const uuid = await L.approvedSession(peer);
    const port = L.h.store.getSession(uuid)?.spec.listenPort ?? 0;
    const before = Date.now();
    await agent.syncOnce();
    const waiting = await record(uuid);
    expect(waiting).toMatchObject({
      status: 4,
      bgpState: expect.stringMatching(/^(Idle|Connect|Active)$/),
      waiting: { for: 'peer', since: expect.any(String) },
    });
    const since = Date.parse((waiting?.waiting as { since: string }).since);
    expect(since).toBeGreaterThanOrEqual(before - 1000);

    await L.connectPeer(peer, port);
    await waitFor(
      'Established and reported',
      async () => (await agent.syncOnce(), (await record(uuid))?.status === 1),
      45_000,
      500,
    );
    expect(await record(uuid)).toMatchObject({ status: 1, bgpState: 'Established', waiting: null });
  });
});
