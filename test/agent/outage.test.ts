/**
 * The controller unreachable for 2 minutes (PEEROPS_TEST_OUTAGE_MS shortens it on a slow CI): the
 * agent keeps the running config (tunnel and BGP untouched), backs off, reports unhealthy, and picks up
 * what changed in the meantime once the controller is back. The outage is a loopback TCP proxy in front
 * of the real controller that refuses connections.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BirdControl } from '../../agent/bird/control.ts';
import { readInterface } from '../../agent/wireguard/interface.ts';
import { waitFor } from '../support/netns.ts';
import { expectSameBirdTime, settledProtocols, startAgentLab, type AgentLab } from './lab.ts';

const OUTAGE_MS = Number(process.env.PEEROPS_TEST_OUTAGE_MS ?? 120_000);

let L: AgentLab;
let bird: BirdControl;
let proxy: Server;
let down = false;
let refused = 0;
const open = new Set<Socket>();

beforeAll(async () => {
  L = await startAgentLab('ago');
  bird = new BirdControl(L.config.routing.controlSocket, { poolSize: 1, poolSizeMax: 2 });
  const target = Number(new URL(L.url).port);
  proxy = createServer((client) => {
    if (down) {
      refused++;
      client.destroy();
      return;
    }
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
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
});
afterAll(async () => {
  bird?.close();
  proxy?.close();
  for (const s of open) s.destroy();
  await L?.close();
});

describe('controller outage', () => {
  it(
    'keeps the running config, backs off, recovers when the controller returns',
    async () => {
      const address = proxy.address();
      const proxyUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
      const listen = 30000 + Math.floor(Math.random() * 9000);
      const peer = await L.addPeer('peer', 'fe80::77');
      const uuid = await L.approvedSession(peer);
      const port = L.h.store.getSession(uuid)!.spec.listenPort;
      await L.connectPeer(peer, port);
      const agent = L.spawnAgent({ url: proxyUrl, listen: `127.0.0.1:${listen}` });
      await waitFor('ACTIVE', () => L.h.store.getSession(uuid)?.status.code === 1, 60_000, 200);
      await waitFor(
        'Established',
        async () => (await bird.protocols(`dn42_${port}`))[0]?.bgpState === 'Established',
        45_000,
        500,
      );
      await settledProtocols(bird);
      const before = await bird.protocols(`dn42_${port}`);
      const ifindex = JSON.parse(await L.node.run('ip', ['-j', 'link', 'show', `wg_${port}`]))[0].ifindex;

      down = true;
      for (const s of open) s.destroy();
      const start = Date.now();
      await waitFor(
        'health 503',
        async () => (await fetch(`http://127.0.0.1:${listen}/health`)).status === 503,
        30_000,
        500,
      );
      // Halfway through, the user changes the MTU: the agent cannot know until the controller is back.
      let modified = false;
      while (Date.now() - start < OUTAGE_MS) {
        const [p] = await bird.protocols(`dn42_${port}`);
        expect(p?.bgpState).toBe('Established');
        expectSameBirdTime(`dn42_${port}`, p?.since, before[0]?.since);
        if (!modified && Date.now() - start > OUTAGE_MS / 2) {
          const res = await L.h.post('/session', peer.userToken, { action: 'modify', uuid, mtu: 1400 });
          expect(res.statusCode).toBe(200);
          modified = true;
        }
        await new Promise((r) => setTimeout(r, Math.min(5000, OUTAGE_MS / 10)));
      }
      expect(JSON.parse(await L.node.run('ip', ['-j', 'link', 'show', `wg_${port}`]))[0].ifindex).toBe(
        ifindex,
      );
      expect(refused).toBeGreaterThan(0);
      const waits = agent
        .output()
        .split('\n')
        .filter((l) => l.includes('sync failed; keeping the running config'))
        .map((l) => (JSON.parse(l) as { retryInMs: number }).retryInMs);
      expect(waits.length).toBeGreaterThan(2);
      // Exponential: the waits grow; over 2 minutes the sync loop tries a handful of times, not hundreds.
      expect(Math.max(...waits)).toBeGreaterThan(waits[0]! * 4);
      expect(waits.length).toBeLessThan(OUTAGE_MS / 1000);

      down = false;
      await waitFor(
        'the modify applied after the outage',
        async () =>
          (await readInterface(`wg_${port}`))?.mtu === 1400 && L.h.store.getSession(uuid)?.status.code === 1,
        90_000,
        500,
      );
      await waitFor(
        'health 200',
        async () => (await fetch(`http://127.0.0.1:${listen}/health`)).status === 200,
        30_000,
        500,
      );
      const [after] = await bird.protocols(`dn42_${port}`);
      expectSameBirdTime(`dn42_${port}`, after?.since, before[0]?.since);
      await agent.kill('SIGTERM');
    },
    OUTAGE_MS + 240_000,
  );
});
