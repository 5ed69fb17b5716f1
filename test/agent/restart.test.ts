/**
 * The real `peerops agent` process killed with SIGKILL in the middle of a pass and started again:
 * it converges, makes no duplicate interfaces, and BGP sessions that were established keep their
 * uptime (no re-create, no reconfigure when the files are byte-identical). Also: /health, the token
 * never appears in the log, and a tunnel deleted behind the agent's back comes back within seconds.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProtocolInfo } from '../../agent/bird/control.ts';
import { BirdControl } from '../../agent/bird/control.ts';
import { listInterfaces } from '../../agent/wireguard/interface.ts';
import { waitFor } from '../support/netns.ts';
import { expectSameBirdTime, settledProtocols, startAgentLab, type AgentLab, type Peer } from './lab.ts';
import { freePort } from '../support/ports.ts';

let L: AgentLab;
let bird: BirdControl;
const peers: Peer[] = [];
const uuids: string[] = [];
const ports: number[] = [];

const status = (id: string) => L.h.store.getSession(id)?.status.code;
const ifindexes = async () =>
  Object.fromEntries(
    (JSON.parse(await L.node.run('ip', ['-j', 'link', 'show'])) as { ifname: string; ifindex: number }[])
      .filter((l) => l.ifname.startsWith('wg_'))
      .map((l) => [l.ifname, l.ifindex]),
  );

beforeAll(async () => {
  L = await startAgentLab('agr');
  bird = new BirdControl(L.config.routing.controlSocket, { poolSize: 1, poolSizeMax: 2 });
  for (const [i, ll] of ['fe80::11', 'fe80::12', 'fe80::13'].entries()) {
    const peer = await L.addPeer(`p${i}`, ll);
    peers.push(peer);
    const uuid = await L.approvedSession(peer);
    uuids.push(uuid);
    const port = L.h.store.getSession(uuid)!.spec.listenPort;
    ports.push(port);
    await L.connectPeer(peer, port);
  }
});
afterAll(async () => {
  bird?.close();
  await L?.close();
});

/** Milliseconds of the day of BIRD's `since` column (`HH:MM:SS.mmm`, possibly after a date); NaN if not one. */
describe('agent restart', () => {
  it('SIGKILL in the middle of the first pass, started again: converges without duplicates', async () => {
    const first = L.spawnAgent();
    // Kill as soon as the first tunnel exists: the pass has begun and has not finished.
    await waitFor('the first tunnel', async () => (await listInterfaces('wg_')).length > 0, 30_000, 20);
    await first.kill('SIGKILL');
    const done = uuids.filter((u) => status(u) === 1).length;
    expect(done).toBeLessThan(uuids.length);

    const port = await freePort();
    const second = L.spawnAgent({ listen: `127.0.0.1:${port}` });
    await waitFor('every session ACTIVE', () => uuids.every((u) => status(u) === 1), 45_000, 200);
    expect((await listInterfaces('wg_')).sort()).toEqual(ports.map((p) => `wg_${p}`).sort());
    await waitFor(
      'BGP Established everywhere',
      async () => {
        const protos = await bird.protocols();
        return ports.every((p) => protos.find((x) => x.name === `dn42_${p}`)?.bgpState === 'Established');
      },
      45_000,
      500,
    );
    const health = await fetch(`http://127.0.0.1:${port}/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ status: 'ok' });
    await second.kill('SIGTERM');
    expect(second.child.exitCode).toBe(0);
    expect(second.output()).not.toContain(L.agentToken);
    expect(first.output()).not.toContain(L.agentToken);
  }, 120_000);

  it('established sessions keep their uptime across a SIGKILL and restart', async () => {
    const before = await ifindexes();
    await settledProtocols(bird);
    const protosBefore = new Map((await bird.protocols()).map((p): [string, ProtocolInfo] => [p.name, p]));
    const mainBefore = await bird.command('show status');
    const third = L.spawnAgent();
    // Let it run a pass, then kill it hard and start another.
    await waitFor('a pass', () => third.output().includes('"msg":"agent started"'), 20_000, 50);
    await new Promise((r) => setTimeout(r, 1500));
    await third.kill('SIGKILL');
    const fourth = L.spawnAgent();
    await waitFor('a pass', () => fourth.output().includes('"msg":"agent started"'), 20_000, 50);
    await new Promise((r) => setTimeout(r, 3000));
    expect(await ifindexes()).toEqual(before);
    for (const p of ports) {
      const after = (await bird.protocols(`dn42_${p}`))[0];
      expect(after?.bgpState).toBe('Established');
      expectSameBirdTime(`dn42_${p}`, after?.since, protosBefore.get(`dn42_${p}`)?.since);
    }
    // "Last reconfiguration" in `show status` is unchanged: no configure was needed.
    const lastReconf = (r: { lines: { text: string }[] }) =>
      r.lines.find((l) => /reconfig/i.test(l.text))?.text;
    expectSameBirdTime(
      'last reconfiguration',
      lastReconf(await bird.command('show status')),
      lastReconf(mainBefore),
    );
    expect(fourth.output()).not.toMatch(/"msg":"tunnel changed"/);
    await fourth.kill('SIGTERM');
  }, 90_000);

  it('a tunnel deleted between passes (a crashed WireGuard process) is back in seconds, not at the next sync', async () => {
    // syncInterval 60: the agent holds a 55 s long poll; only the link watch can bring the tunnel back soon
    const agent = L.spawnAgent({ intervals: { syncInterval: 60 } });
    await waitFor(
      'every tunnel',
      async () => {
        const links = await ifindexes();
        return ports.every((p) => links[`wg_${p}`] !== undefined);
      },
      45_000,
      200,
    );
    await waitFor(
      'a pass, then the long poll',
      () => agent.output().includes('"msg":"agent started"'),
      20_000,
    );
    await new Promise((r) => setTimeout(r, 1000));
    const lost = `wg_${ports[0]}`;
    const before = (await ifindexes())[lost];
    const deleted = Date.now();
    await L.node.run('ip', ['link', 'del', lost]);
    await waitFor('the tunnel re-created', async () => (await ifindexes())[lost] !== undefined, 15_000, 50);
    const back = Date.now() - deleted;
    expect((await ifindexes())[lost]).not.toBe(before);
    expect(back).toBeLessThan(10_000);
    expect(agent.output()).toContain('tunnels deleted between passes; running a pass now');
    await waitFor(
      'BGP Established again',
      async () => (await bird.protocols(`dn42_${ports[0]}`))[0]?.bgpState === 'Established',
      45_000,
      500,
    );
    await agent.kill('SIGTERM');
    expect(agent.child.exitCode).toBe(0);
  }, 120_000);
});
