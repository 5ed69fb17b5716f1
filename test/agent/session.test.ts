/**
 * A session end to end: real controller, the agent's reconcile against a node namespace with real BIRD
 * and wireguard-go, and a peer namespace running its own BIRD and WireGuard as the user's router would.
 */
import { readdir, readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Agent } from '../../agent/agent.ts';
import { VERSION } from '../../common/version.ts';
import { listInterfaces, readInterface } from '../../agent/wireguard/interface.ts';
import { waitFor } from '../support/netns.ts';
import { startAgentLab, type AgentLab, type Peer } from './lab.ts';

let L: AgentLab;
let agent: Agent;
let peer: Peer;
let uuid: string;
let port: number;

const status = (id: string) => L.h.store.getSession(id)?.status.code;

beforeAll(async () => {
  L = await startAgentLab('ags');
  agent = L.agent();
  peer = await L.addPeer('peer', 'fe80::1234');
});
afterAll(async () => {
  await agent?.close();
  await L?.close();
});

describe('agent session machinery', () => {
  it('sets up a session in status 4: tunnel, BIRD protocol, BGP Established, reports 1', async () => {
    uuid = await L.approvedSession(peer);
    expect(status(uuid)).toBe(4);
    port = L.h.store.getSession(uuid)!.spec.listenPort;
    await L.connectPeer(peer, port);
    const pass = await agent.syncOnce();
    expect(pass?.failed.size).toBe(0);
    expect(pass?.reports).toEqual([{ uuid, status: 1, interface: `wg_${port}` }]);
    expect(status(uuid)).toBe(1);
    const link = await readInterface(`wg_${port}`);
    expect(link).toMatchObject({ mtu: 1420, up: true, addrGenModeNone: true });
    expect(link?.addresses).toContain('fe80::1/64');
    expect(await readFile(`${L.config.routing.peerConfDir}/dn42_${port}.conf`, 'utf8')).toContain(
      `neighbor fe80::1234 % 'wg_${port}' as ${peer.asn};`,
    );
    await waitFor(
      'BGP Established',
      async () => {
        const [p] = await agent.bird.protocols(`dn42_${port}`);
        return p?.bgpState === 'Established';
      },
      45_000,
      500,
    );
    expect(await peer.bird.birdc('show protocols node')).toMatch(/Established/);
  });

  it('heartbeat and metric report reach the controller (RTT by ping through the tunnel)', async () => {
    await agent.heartbeatOnce();
    expect(L.h.store.getRouter(L.router)?.status).toMatchObject({ agentVersion: VERSION });
    const report = await agent.reportMetricsOnce();
    const mine = report?.sessions.find((r) => r.uuid === uuid);
    expect(mine?.rtt).toBeGreaterThan(0);
    expect(mine?.rxBytes).toBeGreaterThan(0);
    expect(mine?.txBytes).toBeGreaterThan(0);
    const [proto] = await agent.bird.protocols(`dn42_${port}`);
    expect(mine?.routesImported).toBe(proto?.routesImported);
    expect(L.h.store.getSession(uuid)?.status.metrics).toMatchObject({ rtt: mine?.rtt });
  });

  it('the measured RTT sets the latency community; then a pass with nothing to change makes zero writes and zero configure calls', async () => {
    const rttPass = await agent.syncOnce();
    expect(rttPass?.writes).toBe(1);
    expect(await readFile(`${L.config.routing.peerConfDir}/dn42_${port}.conf`, 'utf8')).toMatch(
      /import where dn42_import_filter\(1, /,
    );
    const before = agent.applier.configureCalls;
    const pass = await agent.syncOnce();
    expect(pass).toMatchObject({
      writes: 0,
      configured: false,
      interfacesChanged: 0,
      interfacesRemoved: 0,
      reports: [],
    });
    expect(agent.applier.configureCalls).toBe(before);
  });

  it('applies an endpoint and MTU modify in place, without a BGP flap', async () => {
    const ifindex = async () =>
      JSON.parse(await L.node.run('ip', ['-j', 'link', 'show', `wg_${port}`]))[0].ifindex;
    const before = await ifindex();
    const [protoBefore] = await agent.bird.protocols(`dn42_${port}`);
    // The user moved their tunnel to another port.
    const newPort = peer.port + 100;
    await peer.ns.run('wg', ['set', peer.iface, 'listen-port', String(newPort)]);
    const endpoint = String(peer.createBody('x').endpoint).replace(/:\d+$/, `:${newPort}`);
    const res = await L.h.post('/session', peer.userToken, { action: 'modify', uuid, endpoint, mtu: 1400 });
    expect(res.statusCode).toBe(200);
    expect(status(uuid)).toBe(4);
    const pass = await agent.syncOnce();
    expect(pass?.reports).toEqual([{ uuid, status: 1, interface: `wg_${port}` }]);
    expect(await ifindex()).toBe(before);
    const link = await readInterface(`wg_${port}`);
    expect(link?.mtu).toBe(1400);
    expect(link?.wg?.peers[0]?.endpoint).toBe(endpoint);
    const [protoAfter] = await agent.bird.protocols(`dn42_${port}`);
    expect(protoAfter?.bgpState).toBe('Established');
    expect(protoAfter?.since).toBe(protoBefore?.since);
  });

  it('a restart re-creates the tunnel and BGP comes back', async () => {
    const before = (await readInterface(`wg_${port}`))?.generation;
    const res = await L.h.post('/session', peer.userToken, { action: 'restart', uuid });
    expect(res.statusCode).toBe(200);
    expect(status(uuid)).toBe(4);
    const pass = await agent.syncOnce();
    expect(pass?.reports).toEqual([{ uuid, status: 1, interface: `wg_${port}` }]);
    expect((await readInterface(`wg_${port}`))?.generation).toBe((before ?? 0) + 1);
    await waitFor(
      'BGP Established again',
      async () => (await agent.bird.protocols(`dn42_${port}`))[0]?.bgpState === 'Established',
      45_000,
      500,
    );
  }, 90_000);

  it('deleting the session tears everything down, reports 0, and leaves nothing on the node', async () => {
    const res = await L.h.post('/session', peer.userToken, { action: 'delete', uuid });
    expect(res.statusCode).toBe(200);
    expect(status(uuid)).toBe(5);
    const pass = await agent.syncOnce();
    expect(pass?.reports).toEqual([{ uuid, status: 0, interface: `wg_${port}` }]);
    expect(L.h.store.getSession(uuid)).toBeUndefined();
    expect(await listInterfaces('wg_')).toEqual([]);
    expect(await readdir(L.config.routing.peerConfDir)).toEqual([]);
    expect(await agent.bird.protocols(`dn42_${port}`)).toEqual([]);
  });
});
