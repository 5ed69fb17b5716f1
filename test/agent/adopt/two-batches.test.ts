/**
 * Adopting a router in two batches (docs/agent.md, Taking the peers over), with real BIRD 2 and userspace
 * WireGuard (peerops-wireguard) in network namespaces this test makes, in the three layouts of
 * hand-made.ts: systemd-networkd's one BIRD file of every peer; the DN42 wiki's peer files in peerConfDir,
 * written `from dnpeers` with the hand-made `is_valid_network()`, names peerops's main file defines too;
 * wg-quick's peer files in a directory only the hand-made main file includes. The first batch adopts all
 * but the last peer, whose session must stay up while its file is set aside (the agent keeps it in
 * peerops-not-adopted.conf); the real `peerops adopt` then plans that peer from where it lives now, the
 * second batch takes it over, and `peerops adopt --undo` gives every hand-made file back byte for byte. BIRD's protocol `since` is
 * polled every 200 ms on both sides through each step: no session may move.
 * ADOPT_BATCH_PEERS peers (default 4).
 */
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { REMAINDER_FILE } from '../../../agent/adopt/remainder.ts';
import { NetnsLab } from '../../support/netns.ts';
import { useWireGuardHost } from '../../support/wireguard-host.ts';
import {
  agentOn,
  agentSessions,
  flapWatch,
  handMadeRouter,
  planOf,
  snapshot,
  undoOn,
  type Layout,
} from './hand-made.ts';

const PEERS = Number(process.env.ADOPT_BATCH_PEERS ?? 4);
const lab = new NetnsLab('adb');

useWireGuardHost();

afterAll(async () => {
  delete process.env.PEEROPS_AGENT_NETNS;
  await lab.cleanup();
});

const exists = (path: string) =>
  stat(path).then(
    () => true,
    () => false,
  );

/** What the layout's left peer is written as, and what the agent's copy of it must say. */
const LEFT: Record<Layout, { name: string; file: string; template: string; uses: string[] }> = {
  networkd: { name: 'p%', file: 'peers.conf', template: 'peers', uses: ['local as hand_OWNAS;'] },
  wiki: {
    name: 'p%_v6',
    file: 'peers/p%.conf',
    template: 'dnpeers',
    uses: ['local as hand_OWNAS;', 'function hand_is_valid_network()', 'if hand_is_valid_network() &&'],
  },
  // a file of a directory the agent's main file does not include: it would have gone unread
  wgquick: {
    name: 'dn42_p%',
    file: 'dn42/p%.conf',
    template: 'dn42_peer',
    uses: ['template bgp hand_dn42_peer from hand_dn42_base', 'import where hand_is_valid_network()'],
  },
};

it.each(['networkd', 'wiki', 'wgquick'] as const satisfies Layout[])(
  '%s: keeps a peer the first batch leaves up, adopts it in a second, undoes both: 0 flaps',
  async (layout) => {
    const t0 = Date.now();
    const hand = await handMadeRouter(lab, layout, PEERS);
    const { template, uses } = LEFT[layout];
    const protocolCount = hand.peers.reduce((n, p) => n + p.peerProtocols.length, 0);
    const handFiles = await snapshot(Object.values(hand.dirs));
    const birds = [
      { label: 'router', socket: hand.routerBird.socket },
      { label: 'peer', socket: hand.peerBird.socket },
    ];
    const remainderPath = join(hand.dirs.bird, 'peers', REMAINDER_FILE);
    const left = hand.peers.at(-1)!;
    const leftName = LEFT[layout].name.replace('%', String(left.index));
    const plan = await planOf(hand);
    expect(plan.sessions.map((s) => s.asn)).toEqual(hand.peers.map((p) => p.asn));
    const sessions = agentSessions(plan);
    const firstBatch = sessions.filter((s) => s.asn !== left.asn);

    const agent = await agentOn(hand);
    let watch = flapWatch(birds);
    try {
      // batch 1: the one BIRD file of every peer is set aside; the left peer's protocol goes on
      await watch.ready;
      const first = await agent.reconciler.pass(firstBatch, hand.policy);
      const batch1 = await watch.stop(2000);
      expect(batch1.moves).toEqual([]);
      expect(batch1.watched).toBe(2 * protocolCount);
      expect(first.failed).toEqual(new Map());
      expect(first.configured).toBe(true);
      const leftFile = LEFT[layout].file.replace('%', String(left.index));
      expect(await exists(join(hand.dirs.bird, `${leftFile}.peerops-adopted`))).toBe(true);
      const remainder = await readFile(remainderPath, 'utf8');
      expect(remainder).toContain(`protocol bgp ${leftName} from hand_${template}`);
      expect(remainder).toContain(`template bgp hand_${template}`);
      for (const u of uses) expect(remainder).toContain(u);
      for (const s of firstBatch) expect(remainder).not.toContain(`protocol bgp ${s.adopted!.protocols[0]} `);
      const shown = await hand.routerBird.birdc(`show protocols ${leftName}`);
      expect(shown).toMatch(/Established/);
      const again = await agent.reconciler.pass(firstBatch, hand.policy);
      expect({ writes: again.writes, configured: again.configured }).toEqual({
        writes: 0,
        configured: false,
      });

      // batch 2: the real command plans the left peer from the agent's file, and nothing adopted already
      const second = await planOf(hand);
      expect(second.sessions).toMatchObject([
        { asn: left.asn, adopted: { interface: left.iface, protocols: [`${leftName}`] } },
      ]);
      expect(second.sessions[0]!.adopted.files).toContain(remainderPath);
      // the wiki layout's GRE peer, left by both batches, runs from the agent's copy
      expect(second.notAdopted.map((n) => n.reason)).toEqual(layout === 'wiki' ? ['unsupportedTunnel'] : []);
      const secondSession = agentSessions(second)[0]!;
      watch = flapWatch(birds);
      await watch.ready;
      const taken = await agent.reconciler.pass([...firstBatch, secondSession], hand.policy);
      expect(taken.failed).toEqual(new Map());
      expect(taken.configured).toBe(true);
      expect(await exists(remainderPath)).toBe(layout === 'wiki');
      const file = await readFile(join(hand.dirs.bird, 'peers', `dn42_${left.port}.conf`), 'utf8');
      expect(file).toContain(`protocol bgp ${leftName} `);
      expect(await hand.routerBird.birdc(`show protocols ${leftName}`)).toMatch(/Established/);
      const batch2 = await watch.stop(2000);
      expect(batch2.moves).toEqual([]);
      expect(batch2.watched).toBe(2 * protocolCount);

      // --undo after two batches: every hand-made file back byte for byte
      watch = flapWatch(birds);
      await watch.ready;
      await undoOn(hand);
      const after = await snapshot(Object.values(hand.dirs));
      for (const [path, bytes] of handFiles) expect(after.get(path)?.equals(bytes), path).toBe(true);
      expect([...after.keys()].filter((p) => p.endsWith('.peerops-adopted'))).toEqual([]);
      expect(await exists(remainderPath)).toBe(false);
      const undo = await watch.stop(2000);
      expect(undo.moves).toEqual([]);
      console.log(
        `adopt ${layout} in two batches: ${PEERS} peers, ${Date.now() - t0} ms; polls ${batch1.polls}/${batch2.polls}/${undo.polls}, ` +
          `flaps ${batch1.moves.length}/${batch2.moves.length}/${undo.moves.length}`,
      );
    } finally {
      await watch.stop().catch(() => undefined);
      agent.close();
    }
  },
  180_000,
);
