/**
 * Time to truth for faults on the router (docs/agent.md, "When something is wrong"), with real BIRD and
 * WireGuard: the agent runs with a 60 s sync and heartbeat interval, so what reaches the API within 10 s
 * came from its fault watch, not from a loop's next round. BIRD killed → the router not Ready (BirdDown)
 * and its session not ACTIVE; BIRD back → Ready and ACTIVE, lastError cleared; the peer's BIRD stopped →
 * not ACTIVE with the BGP hint, then ACTIVE again; the session's WireGuard
 * device deleted → not ACTIVE with a WireGuard hint, then ACTIVE again; the agent stopped → the router not
 * Ready (AgentNotReporting) within 2 heartbeat intervals. Each figure is printed.
 */
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Agent } from '../../agent/agent.ts';
import { ControlPlaneClient } from '../../agent/sync/client.ts';
import { removeInterface } from '../../agent/wireguard/interface.ts';
import type { Condition } from '../../common/schema.ts';
import { SessionReconciler } from '../../controller/reconcile/session-reconciler.ts';
import { waitFor } from '../support/netns.ts';
import { startAgentLab, type AgentLab, type Peer } from './lab.ts';

const LIMIT_S = 10;

let L: AgentLab;
let agent: Agent;
let peer: Peer;
let uuid: string;
let port: number;

interface ApiSession {
  uuid: string;
  statusName: string;
  lastError: { message: string } | null;
}

/** The router's Ready condition as the admin API answers it. */
async function ready(): Promise<Condition | undefined> {
  const res = await L.h.post('/admin/router', L.h.admin, { action: 'list' });
  const routers = (res.json() as { routers: { name: string; status: { conditions?: Condition[] } }[] })
    .routers;
  return routers.find((r) => r.name === L.router)?.status.conditions?.find((c) => c.type === 'Ready');
}

/** The session as the admin API answers it. */
async function session(): Promise<ApiSession | undefined> {
  const res = await L.h.post('/admin/session', L.h.admin, { action: 'list', router: L.router });
  return (res.json() as { sessions: ApiSession[] }).sessions.find((s) => s.uuid === uuid);
}

/** Seconds from `since` until `check` holds (polled every 200 ms), printed with `what`. */
async function secondsUntil(what: string, since: number, check: () => Promise<boolean>, limitMs: number) {
  await waitFor(what, check, limitMs, 200);
  const s = (Date.now() - since) / 1000;
  console.log(`time to truth: ${what}: ${s.toFixed(1)} s`);
  return s;
}

const established = async () =>
  (await agent.bird.protocols(`dn42_${port}`).catch(() => []))[0]?.bgpState === 'Established';

/** Once BGP is Established again: the session ACTIVE with its lastError cleared within LIMIT_S. */
async function activeAgain(): Promise<void> {
  await waitFor('BGP Established again', established, 60_000, 200);
  const up = Date.now();
  const active = await secondsUntil(
    'BGP up again → session ACTIVE, lastError cleared',
    up,
    async () => {
      const now = await session();
      return now?.statusName === 'ACTIVE' && now.lastError === null;
    },
    20_000,
  );
  expect(active).toBeLessThanOrEqual(LIMIT_S);
}

beforeAll(async () => {
  L = await startAgentLab('agt');
  peer = await L.addPeer('pf', 'fe80::f');
  // Long intervals: anything the API shows within seconds was sent because of the fault itself.
  const controlPlane = { ...L.config.controlPlane, syncInterval: 60, heartbeatInterval: 60 };
  agent = new Agent(
    { ...L.config, controlPlane },
    pino({ level: process.env.PEEROPS_TEST_LOG ?? 'silent' }),
    new ControlPlaneClient({ ...controlPlane, router: L.router }),
  );
  uuid = await L.approvedSession(peer);
  port = L.h.store.getSession(uuid)!.spec.listenPort;
  await L.connectPeer(peer, port);
  agent.start();
  await waitFor('session ACTIVE', async () => (await session())?.statusName === 'ACTIVE', 60_000, 500);
  await waitFor('router Ready', async () => (await ready())?.status === 'True', 10_000, 200);
}, 120_000);

afterAll(async () => {
  await agent?.close();
  await L?.close();
});

describe('faults reach the API within seconds', () => {
  it('BIRD killed: the router not Ready (BirdDown), its session ERROR naming BIRD; BIRD back: Ready, ACTIVE, no lastError', async () => {
    const killed = Date.now();
    L.bird.process.kill('SIGKILL');
    const down = await secondsUntil(
      'BIRD killed → router not Ready and session not ACTIVE',
      killed,
      async () => (await ready())?.reason === 'BirdDown' && (await session())?.statusName !== 'ACTIVE',
      20_000,
    );
    expect(down).toBeLessThanOrEqual(LIMIT_S);
    expect(await ready()).toMatchObject({ status: 'False', reason: 'BirdDown' });
    expect((await ready())?.message).toContain(L.config.routing.controlSocket);
    const s = await session();
    expect(s?.statusName).toBe('ERROR');
    expect(s?.lastError?.message).toMatch(/^BIRD on the router does not answer/);

    const started = Date.now();
    L.bird = await L.lab.startBird(L.node, {
      configPath: L.config.birdMainConfig,
      socket: L.config.routing.controlSocket,
    });
    const back = await secondsUntil(
      'BIRD back → router Ready',
      started,
      async () => (await ready())?.status === 'True',
      20_000,
    );
    expect(back).toBeLessThanOrEqual(LIMIT_S);
    await activeAgain();
  }, 120_000);

  it("the peer's BIRD stopped (tunnel up): ERROR with the BGP hint; started again: ACTIVE, no lastError", async () => {
    const stopped = Date.now();
    await peer.bird.stop();
    let hint = '';
    const down = await secondsUntil(
      "peer's BIRD stopped → session not ACTIVE, BGP hint",
      stopped,
      async () => {
        const now = await session();
        hint = now?.lastError?.message ?? '';
        return now?.statusName !== 'ACTIVE' && hint !== '';
      },
      20_000,
    );
    expect(down).toBeLessThanOrEqual(LIMIT_S);
    expect(hint).toMatch(/then lost; WireGuard handshakes \(the tunnel is up\) but BGP \w+/);
    peer.bird = await L.lab.startBird(peer.ns, {
      configPath: peer.bird.configPath,
      socket: peer.bird.socket,
    });
    await activeAgain();
  }, 120_000);

  it("the session's WireGuard device deleted: ERROR with a WireGuard hint, then ACTIVE again", async () => {
    const deleted = Date.now();
    let hint = '';
    expect(await removeInterface(`wg_${port}`)).toBe(true);
    const down = await secondsUntil(
      'WireGuard device deleted → session not ACTIVE, WireGuard hint',
      deleted,
      async () => {
        const now = await session();
        hint = now?.lastError?.message ?? '';
        return now?.statusName !== 'ACTIVE' && /WireGuard tunnel/.test(hint);
      },
      20_000,
    );
    expect(down).toBeLessThanOrEqual(LIMIT_S);
    // every pass says so until BGP is Established again
    expect(hint).toMatch(new RegExp(`WireGuard tunnel wg_${port} was gone and was made anew at `));
    await activeAgain();
  }, 120_000);

  it('the agent stopped: the router not Ready (AgentNotReporting) within 2 heartbeat intervals', async () => {
    // the controller's check of silent agents (the leader's reconciler in `peerops serve`)
    const reconciler = new SessionReconciler({
      store: L.h.store,
      stuckAfterSeconds: 600,
      offlineAfterSeconds: 300,
    });
    // an agent with the lab's 5 s heartbeat says so in its heartbeat; the controller judges silence by it
    const lab = L.agent();
    await lab.heartbeatOnce();
    expect(L.h.store.getRouter(L.router)?.status.heartbeatInterval).toBe(5);
    await agent.close();
    const stopped = Date.now();
    reconciler.start();
    try {
      const silent = await secondsUntil(
        'agent stopped → router not Ready',
        stopped,
        async () => (await ready())?.reason === 'AgentNotReporting',
        20_000,
      );
      expect(silent).toBeLessThanOrEqual(2 * 5);
      expect(await ready()).toMatchObject({ status: 'False', reason: 'AgentNotReporting' });
      await lab.heartbeatOnce();
      expect(await ready()).toMatchObject({ status: 'True', reason: 'AgentReporting' });
    } finally {
      await reconciler.stop();
      await lab.close();
    }
  }, 60_000);
});
