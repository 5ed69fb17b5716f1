/**
 * Taking over hand-made routers without a flap (docs/agent.md, Adopting a running router), with real
 * BIRD 2 and userspace WireGuard (peerops-wireguard) in network namespaces this test makes: for each of
 * three layouts (hand-made.ts) the real `peerops adopt` plans the router, the agent's reconcile pass takes
 * the planned sessions over, a link lost (a reboot) is made anew from the agent's record, and `peerops
 * adopt --undo` gives the hand-made files back byte for byte; BIRD's protocol `since` is polled every
 * 200 ms on both sides through the takeover and through the undo, and no session may move.
 * The sessions are fed to the agent as the controller serves them (the contract's `adopted` block).
 * ADOPT_PEERS peers per router (default 20).
 */
import { readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SessionStatus } from '../../../common/status.ts';
import { adoptionDir } from '../../../agent/adopt/takeover.ts';
import { BirdControl } from '../../../agent/bird/control.ts';
import { sessionProtocols } from '../../../agent/bird/names.ts';
import { answerQuery } from '../../../agent/looking-glass/queries.ts';
import { NetnsLab, waitFor } from '../../support/netns.ts';
import { useWireGuardHost } from '../../support/wireguard-host.ts';
import {
  agentOn,
  agentSessions,
  flapWatch,
  handMadeRouter,
  planOf,
  snapshot,
  undoOn,
  type HandRouter,
  type Layout,
} from './hand-made.ts';

const PEERS = Number(process.env.ADOPT_PEERS ?? 20);
const lab = new NetnsLab('adt');

useWireGuardHost();

afterAll(async () => {
  delete process.env.PEEROPS_AGENT_NETNS;
  await lab.cleanup();
});

async function ifindexes(hand: HandRouter): Promise<Record<string, number>> {
  const links = JSON.parse(await hand.router.run('ip', ['-j', 'link', 'show'])) as {
    ifname: string;
    ifindex: number;
  }[];
  return Object.fromEntries(links.map((l) => [l.ifname, l.ifindex]));
}

const exists = (path: string) =>
  stat(path).then(
    () => true,
    () => false,
  );

for (const layout of ['wiki', 'wgquick', 'networkd'] as Layout[]) {
  describe(`takeover of a hand-made router: ${layout}`, () => {
    let hand: HandRouter;

    it(`plans, takes over and undoes ${PEERS} peers with 0 BGP flaps`, async () => {
      const t0 = Date.now();
      hand = await handMadeRouter(lab, layout, PEERS);
      const setupMs = Date.now() - t0;
      const handFiles = await snapshot(Object.values(hand.dirs));

      // the plan, by the real command inside the router's namespace
      const planStart = Date.now();
      const plan = await planOf(hand);
      const planMs = Date.now() - planStart;
      expect(plan.sessions.map((s) => s.asn)).toEqual(hand.peers.map((p) => p.asn));
      if (layout === 'wiki') {
        expect(plan.notAdopted).toMatchObject([
          { what: expect.stringContaining('gre-p'), reason: 'unsupportedTunnel' },
        ]);
        expect(plan.sessions[1]).toMatchObject({
          ipv4: '172.20.66.102',
          mpbgp: false,
          adopted: { protocols: ['p1_v6', 'p1_v4'] },
        });
      } else expect(plan.notAdopted).toEqual([]);
      if (layout === 'wgquick') expect(plan.sessions[2]!.endpoint).toBeUndefined();
      const sessions = agentSessions(plan);

      // the agent, on the hand-made router
      const agent = await agentOn(hand);
      const { reconciler, reports } = agent;
      const linksBefore = await ifindexes(hand);
      const watch = flapWatch([
        { label: 'router', socket: hand.routerBird.socket },
        { label: 'peer', socket: hand.peerBird.socket },
      ]);
      try {
        await watch.ready;
        const takeoverStart = Date.now();
        const first = await reconciler.pass(sessions, hand.policy);
        const takeoverMs = Date.now() - takeoverStart;
        expect(first.failed).toEqual(new Map());
        expect(first.configured).toBe(true);
        expect(first.interfacesRemoved).toBe(0);
        // a second pass finds everything as it should be
        const second = await reconciler.pass(sessions, hand.policy);
        expect({ writes: second.writes, configured: second.configured }).toEqual({
          writes: 0,
          configured: false,
        });
        expect(await ifindexes(hand)).toEqual(linksBefore);
        const active = new Set(reports.filter((r) => r.status === SessionStatus.ACTIVE).map((r) => r.uuid));
        expect([...active].sort()).toEqual(sessions.map((s) => s.uuid).sort());
        // every hand-made file the plan named is set aside; the agent's files define the protocols
        const record = JSON.parse(
          await readFile(join(adoptionDir(hand.dirs.wireguard), 'record.json'), 'utf8'),
        ) as { setAside: { from: string; to: string }[]; links: { keyFile?: string }[] };
        for (const m of record.setAside) {
          expect(await exists(m.to), m.to).toBe(true);
        }
        expect(record.links.every((l) => (l.keyFile !== undefined) === (layout === 'wgquick'))).toBe(true);
        if (layout === 'wgquick') {
          const keyMode = (await stat(record.links[0]!.keyFile!)).mode & 0o777;
          expect(keyMode).toBe(0o600);
        }
        for (const s of plan.sessions) {
          const file = await readFile(join(hand.dirs.bird, 'peers', `dn42_${s.listenPort}.conf`), 'utf8');
          for (const p of s.adopted.protocols) expect(file).toContain(`protocol bgp ${p} `);
        }
        const protocols = (await hand.routerBird.birdc('show protocols')).split('\n');
        for (const s of plan.sessions)
          for (const p of s.adopted.protocols)
            expect(protocols.find((l) => l.startsWith(`${p} `)) ?? `${p} missing`).toMatch(/Established/);

        // the looking glass asks for the session's protocols by its port: the kept names answer
        const lgBird = new BirdControl(hand.routerBird.socket);
        const pair = plan.sessions[layout === 'wiki' ? 1 : 0]!;
        const lg = await answerQuery(
          { id: 'adopted-lg', op: 'protocol', listenPort: pair.listenPort },
          lgBird,
          undefined,
          (port) =>
            sessionProtocols({
              listenPort: port,
              adopted: plan.sessions.find((x) => x.listenPort === port)?.adopted,
            }),
        );
        lgBird.close();
        for (const name of pair.adopted.protocols)
          expect(lg.output).toMatch(new RegExp(`^${name} +BGP .* Established`, 'm'));

        const takeover = await watch.stop(2000);
        expect(takeover.moves).toEqual([]);
        expect(takeover.watched).toBe(2 * hand.peers.reduce((n, p) => n + p.peerProtocols.length, 0));

        // a reboot took a peer's link (the last with an endpoint: one behind NAT comes back at its own
        // pace): the agent makes it anew from its record, the same link
        const lastAt = plan.sessions.findLastIndex((x) => x.endpoint !== undefined);
        const last = plan.sessions[lastAt]!;
        const wgShow = async () =>
          (await hand.router.run('wg', ['show', last.adopted.interface, 'dump'])).split('\t').slice(1, 3);
        const keyAndPort = await wgShow();
        await hand.router.run('ip', ['link', 'del', last.adopted.interface]);
        const again = await reconciler.pass(sessions, hand.policy);
        expect(again.failed).toEqual(new Map());
        expect(await wgShow()).toEqual(keyAndPort);
        const established = async (b: { birdc: (c: string) => Promise<string> }, name: string) =>
          / Established/.test((await b.birdc(`show protocols ${name}`)).split('\n').at(-2) ?? '');
        await waitFor(
          'the re-made link’s session Established on both sides',
          async () =>
            (await established(hand.routerBird, last.adopted.protocols[0]!)) &&
            (await established(hand.peerBird, `r${lastAt}`)),
          60_000,
          200,
        );

        // --undo, the real command: the hand-made files back byte for byte
        const undoWatch = flapWatch([
          { label: 'router', socket: hand.routerBird.socket },
          { label: 'peer', socket: hand.peerBird.socket },
        ]);
        await undoWatch.ready;
        const undoStart = Date.now();
        await undoOn(hand);
        const undoMs = Date.now() - undoStart;
        const after = await snapshot(Object.values(hand.dirs));
        for (const [path, bytes] of handFiles) expect(after.get(path)?.equals(bytes), path).toBe(true);
        expect([...after.keys()].filter((p) => p.endsWith('.peerops-adopted'))).toEqual([]);
        const undo = await undoWatch.stop(2000);
        console.log(
          `adopt ${layout}: ${PEERS} peers, setup ${setupMs} ms, plan ${planMs} ms, takeover ${takeoverMs} ms ` +
            `(${takeover.polls} polls of ${takeover.watched} protocols, ${takeover.moves.length} flaps), ` +
            `undo ${undoMs} ms (${undo.polls} polls of ${undo.watched}, ${undo.moves.length} flaps)`,
        );
        expect(undo.moves).toEqual([]);
        expect(undo.watched).toBe(takeover.watched);
        // the watch sees a flap when there is one: a restarted session moves its `since`
        const check = flapWatch([{ label: 'router', socket: hand.routerBird.socket }]);
        await check.ready;
        await hand.routerBird.birdc(`restart ${plan.sessions[0]!.adopted.protocols[0]!}`);
        expect((await check.stop(500)).moves.length).toBeGreaterThan(0);
      } finally {
        await watch.stop().catch(() => undefined);
        agent.close();
      }
    }, 240_000);
  });
}

describe('a takeover BIRD refuses one session of', () => {
  // a lab of its own: its namespaces and link names apart from the wiki layout's above
  const refusalLab = new NetnsLab('adr');
  afterAll(() => refusalLab.cleanup());

  it('moves and writes nothing until that session is mended, then takes all over: 0 flaps', async () => {
    const hand = await handMadeRouter(refusalLab, 'wiki', 3);
    // the IPv4 protocol of peer 1 names a define of the hand-made main file, which the agent's replaces
    const main = join(hand.dirs.bird, 'bird.conf');
    const peerFile = join(hand.dirs.bird, 'peers', 'p1.conf');
    await writeFile(
      main,
      (await readFile(main, 'utf8')).replace('router id', 'define MYV4 = 172.20.66.1;\nrouter id'),
    );
    const handV4 = await readFile(peerFile, 'utf8');
    await writeFile(
      peerFile,
      handV4.replace('  direct;\n  ipv6', '  direct;\n  source address MYV4;\n  ipv6'),
    );
    await hand.routerBird.birdc('configure');
    await waitFor(
      'every session Established again',
      async () => ((await hand.routerBird.birdc('show protocols')).match(/Established/g) ?? []).length === 4,
      60_000,
      200,
    );
    const handFiles = await snapshot(Object.values(hand.dirs));
    const plan = await planOf(hand);
    const sessions = agentSessions(plan);
    const refused = sessions[1]!.uuid;
    const agent = await agentOn(hand);
    const watch = flapWatch([
      { label: 'router', socket: hand.routerBird.socket },
      { label: 'peer', socket: hand.peerBird.socket },
    ]);
    try {
      await watch.ready;
      const held = await agent.reconciler.pass(sessions, hand.policy);
      expect([...held.failed.keys()]).toEqual([refused]);
      expect(held.failed.get(refused)).toMatch(/dn42_31001\.conf:\d+:\d+ syntax error/);
      expect({ writes: held.writes, configured: held.configured }).toEqual({ writes: 0, configured: false });
      const after = await snapshot(Object.values(hand.dirs));
      for (const [path, bytes] of handFiles) expect(after.get(path)?.equals(bytes), path).toBe(true);

      // mended as BIRD runs it: the same source address, written out
      await writeFile(peerFile, (await readFile(peerFile, 'utf8')).replace('MYV4', '172.20.66.1'));
      let taken: Awaited<ReturnType<typeof agent.reconciler.pass>> | undefined;
      await waitFor(
        'the takeover once the retry is due',
        async () => {
          taken = await agent.reconciler.pass(sessions, hand.policy);
          return taken.configured && taken.failed.size === 0;
        },
        30_000,
        1000,
      );
      expect(await readFile(join(hand.dirs.bird, `bird.conf.peerops-adopted`), 'utf8')).toContain('MYV4');
      const { moves, watched } = await watch.stop(2000);
      expect(watched).toBe(8);
      expect(moves).toEqual([]);
    } finally {
      await watch.stop().catch(() => undefined);
      agent.close();
    }
  }, 180_000);
});
