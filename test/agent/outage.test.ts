/**
 * The controller stopped for a while, then back (real BIRD and WireGuard in namespaces, the real agent
 * process with the product's retry and sync settings): during the outage the agent keeps the running
 * config (tunnel and BGP untouched), reports unhealthy and retries at most every retryMaxDelay ± 25 %;
 * once the controller is back the agent is healthy, has sent a heartbeat and a change made then is
 * applied within 5 s (docs/agent.md, "When the controller is down"). The stopped controller is a
 * loopback TCP proxy in front of the real one that closes its listener (connections refused, as on a
 * stopped controller) and listens again on the same port.
 *
 * PEEROPS_TEST_OUTAGE_MS sets the outage (default 30 s; 120000 is the two minutes). 30 s is
 * enough: after the first few failures every wait is at the cap, so the agent is in the same state at
 * the end of a 30 s outage as at the end of a 2-minute one; the cap, not the outage, sets how soon it
 * comes back.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BirdControl } from '../../agent/bird/control.ts';
import { readInterface } from '../../agent/wireguard/interface.ts';
import { waitFor } from '../support/netns.ts';
import { expectSameBirdTime, settledProtocols, startAgentLab, type AgentLab } from './lab.ts';
import { freePort } from '../support/ports.ts';

const OUTAGE_MS = Number(process.env.PEEROPS_TEST_OUTAGE_MS ?? 30_000);
/** The agent's defaults (agent/config.ts): what a router runs. */
const RETRIES = { maxRetries: 3, retryInitialDelay: 1000, retryMaxDelay: 2000 };
/** From the controller's return to the agent healthy and the change applied (docs/agent.md: within 5 s). */
const BACK_WITHIN_MS = 5000;

let L: AgentLab;
let bird: BirdControl;
let proxy: Server;
let proxyPort = 0;
const open = new Set<Socket>();

/** Listens on `port` (0: any); resolves with the port. */
function listen(port: number): Promise<number> {
  return new Promise((resolve) =>
    proxy.listen(port, '127.0.0.1', () => {
      const a = proxy.address();
      resolve(typeof a === 'object' && a ? a.port : 0);
    }),
  );
}

beforeAll(async () => {
  L = await startAgentLab('ago');
  bird = new BirdControl(L.config.routing.controlSocket, { poolSize: 1, poolSizeMax: 2 });
  const target = Number(new URL(L.url).port);
  proxy = createServer((client) => {
    const upstream = connect(target, '127.0.0.1');
    open.add(client).add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream).pipe(client);
  });
  proxyPort = await listen(0);
});
afterAll(async () => {
  bird?.close();
  proxy?.close();
  for (const s of open) s.destroy();
  await L?.close();
});

const health = (listen: number) =>
  fetch(`http://127.0.0.1:${listen}/health`).then(
    (r) => r.status,
    () => 0,
  );

describe('controller outage', () => {
  it(
    `keeps the running config, and ${BACK_WITHIN_MS / 1000} s after the controller is back is healthy with the change applied`,
    async () => {
      const listenPort = await freePort();
      const peer = await L.addPeer('peer', 'fe80::77');
      const uuid = await L.approvedSession(peer);
      const port = L.h.store.getSession(uuid)!.spec.listenPort;
      await L.connectPeer(peer, port);
      const agent = L.spawnAgent({
        url: `http://127.0.0.1:${proxyPort}`,
        listen: `127.0.0.1:${listenPort}`,
        // the product's: a long poll of 55 s, heartbeats every 30 s
        intervals: { syncInterval: 60, heartbeatInterval: 30, metricInterval: 60 },
        retries: RETRIES,
      });
      await waitFor('ACTIVE', () => L.h.store.getSession(uuid)?.status.code === 1, 60_000, 200);
      await waitFor(
        'Established',
        async () => (await bird.protocols(`dn42_${port}`))[0]?.bgpState === 'Established',
        45_000,
        500,
      );
      await settledProtocols(bird);
      await waitFor('health 200', async () => (await health(listenPort)) === 200, 30_000, 200);
      const before = await bird.protocols(`dn42_${port}`);
      const ifindex = JSON.parse(await L.node.run('ip', ['-j', 'link', 'show', `wg_${port}`]))[0].ifindex;

      // The controller stops: its port refuses connections, the held long poll is cut.
      await new Promise<void>((resolve) => {
        proxy.close(() => resolve());
        for (const s of open) s.destroy();
      });
      const start = Date.now();
      await waitFor('health 503', async () => (await health(listenPort)) === 503, 30_000, 200);
      while (Date.now() - start < OUTAGE_MS) {
        const [p] = await bird.protocols(`dn42_${port}`);
        expect(p?.bgpState).toBe('Established');
        expectSameBirdTime(`dn42_${port}`, p?.since, before[0]?.since);
        await new Promise((r) => setTimeout(r, Math.min(5000, OUTAGE_MS / 10)));
      }
      expect(JSON.parse(await L.node.run('ip', ['-j', 'link', 'show', `wg_${port}`]))[0].ifindex).toBe(
        ifindex,
      );
      const waits = agent
        .output()
        .split('\n')
        .filter((l) => l.includes('sync failed; keeping the running config'))
        .map((l) => (JSON.parse(l) as { retryInMs: number }).retryInMs);
      expect(waits.length).toBeGreaterThan(1);
      // never longer than retryMaxDelay + 25 %, and over the outage a handful of rounds, not hundreds
      expect(Math.max(...waits)).toBeLessThanOrEqual(RETRIES.retryMaxDelay * 1.25);
      expect(waits.length).toBeLessThan(OUTAGE_MS / 1000);

      // Back on the same port; the user changes the MTU at that moment.
      expect(await listen(proxyPort)).toBe(proxyPort);
      const back = Date.now();
      const res = await L.h.post('/session', peer.userToken, { action: 'modify', uuid, mtu: 1400 });
      expect(res.statusCode).toBe(200);
      let healthyAfter = 0;
      let appliedAfter = 0;
      let heartbeatAfter = 0;
      await waitFor(
        'healthy and the modify applied',
        async () => {
          if (!healthyAfter && (await health(listenPort)) === 200) healthyAfter = Date.now() - back;
          if (!appliedAfter && (await readInterface(`wg_${port}`))?.mtu === 1400)
            appliedAfter = Date.now() - back;
          // a heartbeat at once, not at the end of the 30 s interval
          const beat = L.h.store.getRouter(L.router)?.status.lastHeartbeat;
          if (!heartbeatAfter && beat && Date.parse(beat) >= back) heartbeatAfter = Date.now() - back;
          return healthyAfter > 0 && appliedAfter > 0 && heartbeatAfter > 0;
        },
        60_000,
        100,
      );
      console.log(
        `outage ${OUTAGE_MS / 1000} s (${waits.length} failed rounds, waits ${Math.min(...waits)}-${Math.max(...waits)} ms): healthy ${healthyAfter} ms, a heartbeat ${heartbeatAfter} ms and the modify applied ${appliedAfter} ms after the controller was back`,
      );
      expect(healthyAfter).toBeLessThanOrEqual(BACK_WITHIN_MS);
      expect(appliedAfter).toBeLessThanOrEqual(BACK_WITHIN_MS);
      expect(heartbeatAfter).toBeLessThanOrEqual(BACK_WITHIN_MS);
      await waitFor(
        'ACTIVE after the modify',
        () => L.h.store.getSession(uuid)?.status.code === 1,
        30_000,
        200,
      );
      const [after] = await bird.protocols(`dn42_${port}`);
      expectSameBirdTime(`dn42_${port}`, after?.since, before[0]?.since);
      await agent.kill('SIGTERM');
    },
    OUTAGE_MS + 240_000,
  );
});
