/**
 * A session end to end: real controller, the agent's reconcile against a node namespace with real BIRD
 * and wireguard-go, and a peer namespace running its own BIRD and WireGuard as the user's router would.
 */
import { access, readdir, readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import type { Agent } from '../../agent/agent.ts';
import { BirdControl } from '../../agent/bird/control.ts';
import { latencyCommunity } from '../../agent/bird/names.ts';
import { NodeReconciler } from '../../agent/reconcile/node-reconciler.ts';
import { VERSION } from '../../common/version.ts';
import { listInterfaces, readInterface, systemWireGuard } from '../../agent/wireguard/interface.ts';
import { waitFor } from '../support/netns.ts';
import { promtool } from '../support/promtool.ts';
import {
  expectSameBirdTime,
  ROUTER_ASN,
  settledProtocols,
  startAgentLab,
  type AgentLab,
  type Peer,
} from './lab.ts';

let L: AgentLab;
let agent: Agent;
let peer: Peer;
let uuid: string;
let port: number;
let measuredRtt: number | null = null;

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
  it('sets up a session in status 4: tunnel, BIRD protocol; reports 1 once BGP is Established, with bgpState', async () => {
    uuid = await L.approvedSession(peer);
    expect(status(uuid)).toBe(4);
    port = L.h.store.getSession(uuid)!.spec.listenPort;
    await L.connectPeer(peer, port);
    let confirmed = false;
    void agent.firstPass.then(() => (confirmed = true));
    await Promise.resolve();
    expect(confirmed).toBe(false); // what ends a self-update's probation: no pass yet
    const pass = await agent.syncOnce();
    await expect(agent.firstPass).resolves.toBeUndefined();
    expect(pass?.failed.size).toBe(0);
    // Configured, BGP not Established yet: within the grace the session stays 4, reported with BIRD's
    // state (the router waits for the peer while that is Idle, Connect or Active: docs/api.md, Waiting).
    expect(pass?.reports).toEqual([
      { uuid, status: 4, interface: `wg_${port}`, bgpState: expect.anything(), bgpSince: expect.any(String) },
    ]);
    expect(status(uuid)).toBe(4);
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
    const established = await agent.syncOnce();
    expect(established?.reports).toEqual([
      { uuid, status: 1, interface: `wg_${port}`, bgpState: 'Established', bgpSince: expect.any(String) },
    ]);
    const record = (await L.h.post('/session', peer.userToken, { action: 'list' })).json().sessions[0];
    expect(record).toMatchObject({
      uuid,
      status: 1,
      bgpState: 'Established',
      lastError: null,
      networkAsn: ROUTER_ASN,
    });
    expect(Date.parse(record.bgpSince)).toBeLessThanOrEqual(Date.now());
  });

  it('heartbeat and metric report reach the controller (RTT by ping through the tunnel)', async () => {
    await agent.heartbeatOnce();
    expect(L.h.store.getRouter(L.router)?.status).toMatchObject({ agentVersion: VERSION });
    // The peer's one prefix can arrive just after Established: wait for it, so that the report and the
    // BIRD query below count the same routes.
    await waitFor(
      "the peer's prefix imported",
      async () => (await agent.bird.protocols(`dn42_${port}`))[0]?.routesImported === 1,
      15_000,
      200,
    );
    const report = await agent.reportMetricsOnce();
    const mine = report?.sessions.find((r) => r.uuid === uuid);
    measuredRtt = mine?.rtt ?? null;
    expect(mine?.rtt).toBeGreaterThan(0);
    expect(mine?.rxBytes).toBeGreaterThan(0);
    expect(mine?.txBytes).toBeGreaterThan(0);
    const [proto] = await agent.bird.protocols(`dn42_${port}`);
    expect(mine?.routesImported).toBe(proto?.routesImported);
    // what the router exports, the peer's BIRD imports (its `node` protocol imports all)
    const peerBird = new BirdControl(peer.bird.socket);
    const [fromNode] = await peerBird.protocols('node');
    peerBird.close();
    expect(mine?.routesExported).toBe(fromNode?.routesImported);
    expect(L.h.store.getSession(uuid)?.status.metrics).toMatchObject({ rtt: mine?.rtt });
    // the same figures on the router's own /metrics, with BIRD's and the controller's state
    const text = await agent.metrics.registry.metrics();
    const series = `{interface="wg_${port}",asn="${peer.asn}"}`;
    expect(text).toContain(`peerops_agent_session_rtt_seconds${series} ${(mine?.rtt ?? 0) / 1000}`);
    expect(text).toContain(`peerops_agent_session_receive_bytes${series} ${mine?.rxBytes}`);
    expect(text).toContain(`peerops_agent_session_routes_imported${series} ${mine?.routesImported}`);
    expect(text).toMatch(/^peerops_agent_sessions\{status="ACTIVE"\} 1$/m);
    // Prometheus's own parser and linter accept the whole exposition
    expect(await promtool(['check', 'metrics'], text)).toEqual({ code: 0, output: '' });
    expect(text).toMatch(/^peerops_agent_up\{part="bird"\} 1$/m);
    expect(text).toMatch(/^peerops_agent_up\{part="controller"\} 1$/m);
    expect(text).toMatch(/^peerops_agent_bird_configures_total [1-9]\d*$/m);
    expect(text).toMatch(/^peerops_agent_sync_pass_seconds_count [1-9]\d*$/m);
  });

  it('the measured RTT sets the latency community; then a pass with nothing to change makes zero writes and zero configure calls', async () => {
    const rttPass = await agent.syncOnce();
    expect(rttPass?.writes).toBe(1);
    expect(await readFile(`${L.config.routing.peerConfDir}/dn42_${port}.conf`, 'utf8')).toContain(
      `import where dn42_import_filter(${latencyCommunity(measuredRtt)}, `,
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
    await settledProtocols(agent.bird);
    const [protoBefore] = await agent.bird.protocols(`dn42_${port}`);
    // The user moved their tunnel to another port.
    const newPort = peer.port + 100;
    await peer.ns.run('wg', ['set', peer.iface, 'listen-port', String(newPort)]);
    const endpoint = String(peer.createBody('x').endpoint).replace(/:\d+$/, `:${newPort}`);
    const res = await L.h.post('/session', peer.userToken, { action: 'modify', uuid, endpoint, mtu: 1400 });
    expect(res.statusCode).toBe(200);
    expect(status(uuid)).toBe(4);
    const pass = await agent.syncOnce();
    expect(pass?.reports).toEqual([
      expect.objectContaining({ uuid, status: 1, interface: `wg_${port}`, bgpState: 'Established' }),
    ]);
    expect(await ifindex()).toBe(before);
    const link = await readInterface(`wg_${port}`);
    expect(link?.mtu).toBe(1400);
    expect(link?.wg?.peers[0]?.endpoint).toBe(endpoint);
    const [protoAfter] = await agent.bird.protocols(`dn42_${port}`);
    expect(protoAfter?.bgpState).toBe('Established');
    expectSameBirdTime(`dn42_${port}`, protoAfter?.since, protoBefore?.since);
  });

  it("leaves a roamed endpoint while the tunnel lives: a NAT's new port is not set back each pass", async () => {
    const configured = L.h.store.getSession(uuid)!.spec.endpoint!;
    const configuredPort = Number(configured.replace(/^.*:/, ''));
    const routerEndpoint = async () => (await readInterface(`wg_${port}`))?.wg?.peers[0]?.endpoint;
    /** The peer's WireGuard sends from `listenPort` (as a NAT that maps it anew would); the router roams to it. */
    const sendFrom = async (listenPort: number) => {
      await peer.ns.run('wg', ['set', peer.iface, 'listen-port', String(listenPort)]);
      const roamedTo = configured.replace(/:\d+$/, `:${listenPort}`);
      await waitFor(
        `router's WireGuard roamed to ${roamedTo}`,
        async () => {
          await peer.ns.run('ping', ['-c', '1', '-W', '1', `fe80::1%${peer.iface}`]).catch(() => '');
          return (await routerEndpoint()) === roamedTo;
        },
        15_000,
        200,
      );
      return roamedTo;
    };
    try {
      const roamed = await sendFrom(configuredPort + 1);
      const [protoBefore] = await agent.bird.protocols(`dn42_${port}`);
      const pass = await agent.syncOnce();
      expect(pass).toMatchObject({ interfacesChanged: 0, reports: [] });
      expect(await routerEndpoint()).toBe(roamed);
      const [protoAfter] = await agent.bird.protocols(`dn42_${port}`);
      expect(protoAfter?.bgpState).toBe('Established');
      expectSameBirdTime(`dn42_${port}`, protoAfter?.since, protoBefore?.since);
    } finally {
      // back where the session says, for the tests after this one
      await sendFrom(configuredPort);
    }
  }, 60_000);

  it('a restart re-creates the tunnel and BGP comes back', async () => {
    const before = (await readInterface(`wg_${port}`))?.generation;
    const res = await L.h.post('/session', peer.userToken, { action: 'restart', uuid });
    expect(res.statusCode).toBe(200);
    expect(status(uuid)).toBe(4);
    await agent.syncOnce();
    expect((await readInterface(`wg_${port}`))?.generation).toBe((before ?? 0) + 1);
    await waitFor(
      'BGP Established again',
      async () => (await agent.bird.protocols(`dn42_${port}`))[0]?.bgpState === 'Established',
      45_000,
      500,
    );
    await waitFor('reported 1', async () => (await agent.syncOnce(), status(uuid) === 1), 20_000, 200);
  }, 90_000);

  it('1 → 2 with the BGP hint when BGP is down but WireGuard handshakes; 2 → 1 and lastError cleared when it is back', async () => {
    // Judged at once: no grace.
    const judge = new NodeReconciler({
      config: L.config,
      wireguard: systemWireGuard,
      bird: agent.bird,
      applier: agent.applier,
      reporter: agent.client,
      log: pino({ level: 'silent' }),
      graceMs: 0,
    });
    const pass = async () => {
      const sessions = (await agent.client.sessions()).body?.sessions ?? [];
      return judge.pass(sessions, await agent.client.birdConfig());
    };
    await pass(); // a new reconciler reports what it sees once
    expect(status(uuid)).toBe(1);
    await peer.bird.birdc('disable node');
    await waitFor(
      'BGP down',
      async () => (await agent.bird.protocols(`dn42_${port}`))[0]?.bgpState !== 'Established',
      30_000,
      250,
    );
    // Level-triggered: the verdict comes on one of the next passes.
    await waitFor('reported 2', async () => (await pass(), status(uuid) === 2), 20_000, 100);
    const down = L.h.store.getSession(uuid)?.status;
    expect(down?.lastError?.message).toMatch(
      /^BGP was Established until .*, then lost; WireGuard handshakes \(the tunnel is up\) but BGP (Idle|Connect|Active|OpenSent)\b.*check the BGP settings/,
    );
    expect(down?.bgpState).not.toBe('Established');
    await peer.bird.birdc('enable node');
    await waitFor(
      'BGP back',
      async () => (await agent.bird.protocols(`dn42_${port}`))[0]?.bgpState === 'Established',
      45_000,
      250,
    );
    await waitFor('reported 1', async () => (await pass(), status(uuid) === 1), 20_000, 100);
    expect(L.h.store.getSession(uuid)?.status).toMatchObject({ bgpState: 'Established' });
    expect(L.h.store.getSession(uuid)?.status.lastError).toBeUndefined();
  }, 90_000);

  it('deleting the session tears everything down, reports 0, and leaves nothing on the node', async () => {
    const res = await L.h.post('/session', peer.userToken, { action: 'delete', uuid });
    expect(res.statusCode).toBe(200);
    expect(status(uuid)).toBe(5);
    const pass = await agent.syncOnce();
    expect(pass?.reports).toEqual([{ uuid, status: 0, interface: `wg_${port}` }]);
    expect(L.h.store.getSession(uuid)).toBeUndefined();
    expect(await listInterfaces('wg_')).toEqual([]);
    // and what the agent made for the tunnel: wireguard-go's log
    await expect(access(`/var/run/wireguard/wg_${port}.peerops.log`)).rejects.toMatchObject({
      code: 'ENOENT',
    });
    expect(await readdir(L.config.routing.peerConfDir)).toEqual([]);
    expect(await agent.bird.protocols(`dn42_${port}`)).toEqual([]);
  });
});
