/**
 * An adoption end to end through a real controller (docs/operator-guide.md §10): a router set up by hand
 * in the DN42 wiki's layout (hand-made.ts; its peers speak BGP over the link-local alone and name no DN42
 * IPv6, peer 1 has IPv4 tunnel addresses and no MP-BGP) with real BIRD 2 and userspace WireGuard in
 * network namespaces this test makes; the real `peerops adopt` plans it inside the router's namespace;
 * `peerops adopt --plan FILE --apply` sends the plan to a real `peerops serve` (git store, the DN42
 * registry fixture, which gives peer 1's IPv4 to nobody: that session comes back DISABLED with the
 * reason); the admin approves the others through the API; a real `peerops agent` (its commands in the
 * router's namespace, PEEROPS_AGENT_NETNS) takes them over. BIRD's `since` of every BGP protocol on both
 * sides is polled every 200 ms from before the apply to the end: no session may move. The controller's
 * status of each adopted session reaches ACTIVE, Established as the router's BIRD sees it.
 * ADOPT_E2E_PEERS peers (default 5).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createPrivateKey, createPublicKey } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REMAINDER_FILE } from '../../../agent/adopt/remainder.ts';
import { adoptionDir } from '../../../agent/adopt/takeover.ts';
import { SessionStatus } from '../../../common/status.ts';
import { startWithRegistry, type ControllerProcess } from '../../support/controller-process.ts';
import { runPeerops } from '../../cli/run.ts';
import { NetnsLab, waitFor } from '../../support/netns.ts';
import { useWireGuardHost } from '../../support/wireguard-host.ts';
import {
  agentFileConfig,
  flapWatch,
  handMadeRouter,
  planOf,
  ROUTER_ASN,
  writeAgentConfig,
  type HandRouter,
} from './hand-made.ts';

const ROOT = join(import.meta.dirname, '..', '..', '..');
const BIN = join(ROOT, 'bin', 'peerops.ts');
const REGISTRY = join(ROOT, 'test', 'fixtures', 'dn42-registry');
const PEERS = Number(process.env.ADOPT_E2E_PEERS ?? 5);
const lab = new NetnsLab('ade');

let controller: ControllerProcess | undefined;
let agent: ChildProcess | undefined;
let agentOutput = '';

useWireGuardHost();

afterAll(async () => {
  if (agent && agent.exitCode === null && agent.signalCode === null) {
    const gone = new Promise((r) => agent?.once('exit', r));
    agent.kill('SIGTERM');
    await gone;
  }
  await controller?.kill();
  await lab.cleanup();
});

type SessionRow = {
  uuid: string;
  asn: number;
  status: number;
  statusName: string;
  ipv6: string;
  ipv4: string | null;
  bgpState: string | null;
  lastError: { key?: string; message: string } | null;
  adopted: { interface: string; protocols: string[] } | null;
};

/** The router's own WireGuard public key, as the operator registers it (`wg pubkey` of its key file). */
async function publicKeyOf(hand: HandRouter): Promise<string> {
  // an X25519 private key in PKCS #8: the fixed prefix, then the key's 32 bytes
  const raw = Buffer.from((await readFile(hand.routerKeyFile, 'utf8')).trim(), 'base64');
  const der = Buffer.concat([Buffer.from('302e020100300506032b656e04220420', 'hex'), raw]);
  const jwk = createPublicKey(createPrivateKey({ key: der, format: 'der', type: 'pkcs8' })).export({
    format: 'jwk',
  });
  return Buffer.from(jwk.x ?? '', 'base64url').toString('base64');
}

describe('adopting a hand-made router through the controller', () => {
  it(`plans, applies, approves and takes over ${PEERS} peers with 0 BGP flaps; ACTIVE in the controller`, async () => {
    const t0 = Date.now();
    const hand = await handMadeRouter(lab, 'wiki', PEERS);
    const setupMs = Date.now() - t0;

    // the controller, with the DN42 registry its adoptions are checked against
    const dir = await lab.tempDir('controller');
    controller = await startWithRegistry(dir, REGISTRY);
    const c = controller;
    const admin = await c.token(4242420000, 'admin');
    // the network's ASN and the router as the hand-made configuration has them: the BIRD router id as
    // the IPv4 loopback, the hand-made `local as` as dn42Asn (docs/operator-guide.md §10, step 1)
    const policy = await c.post(admin, '/admin/policy', {
      action: 'set',
      spec: { dn42Asn: ROUTER_ASN, ownPrefixes: { ipv6: ['fd42:66::/48'] }, allowPrivateEndpoints: true },
    });
    expect(policy.status, JSON.stringify(policy.body)).toBe(200);
    const added = await c.post(admin, '/admin/router', {
      action: 'add',
      name: 'r1',
      displayName: 'Hand-made r1',
      nodeId: 1,
      region: 'eu',
      endpointHost: 'r1.example.net',
      publicKey: await publicKeyOf(hand),
      linkLocal: 'fe80::66',
      loopback: { ipv4: '172.20.66.1' },
    });
    expect(added.status, JSON.stringify(added.body)).toBe(200);
    const agentToken = added.body.agentToken as string;

    const watch = flapWatch([
      { label: 'router', socket: hand.routerBird.socket },
      { label: 'peer', socket: hand.peerBird.socket },
    ]);
    try {
      await watch.ready;

      // the plan, by the real command inside the router's namespace; applied from its file by the
      // admin's machine (here: the root namespace, where the controller listens)
      const planStart = Date.now();
      const plan = await planOf(hand);
      const planMs = Date.now() - planStart;
      expect(plan.sessions.map((s) => s.asn)).toEqual(hand.peers.map((p) => p.asn));
      // the wiki's peers name no DN42 IPv6: applied as they are
      expect(plan.sessions.every((s) => s.ipv6 === undefined && s.linkLocal !== undefined)).toBe(true);
      const planFile = join(dir, 'plan.json');
      await writeFile(planFile, JSON.stringify(plan));
      const applied = await runPeerops([
        'adopt',
        '--plan',
        planFile,
        '--apply',
        '--url',
        c.base,
        '--token',
        admin,
      ]);
      expect(applied.stderr).toContain(`${PEERS} adopted, 0 already adopted, 0 refused`);
      expect(applied.code, applied.stderr).toBe(0);

      const list = async () =>
        (await c.post(admin, '/admin/session', { action: 'list', router: 'r1' })).body
          .sessions as SessionRow[];
      const [refused, ...adopted] = await (async () => {
        const all = await list();
        const one = all.find((s) => s.asn === hand.peers[1]!.asn)!;
        return [one, ...all.filter((s) => s !== one)];
      })();
      // peer 1's IPv4 tunnel address: no route object gives it to the peer, so DISABLED with why
      expect(refused).toMatchObject({
        statusName: 'DISABLED',
        ipv4: '172.20.66.102',
        lastError: { key: 'lastError.registryRefused' },
      });
      expect(refused!.lastError?.message).toMatch(
        /\/ipv4: no route object in the registry gives 172\.20\.66\.102/,
      );
      expect(adopted).toHaveLength(PEERS - 1);
      for (const s of adopted) expect(s).toMatchObject({ statusName: 'PENDING_REVIEW', ipv6: '' });

      // the admin approves (the Reviews page's bulk approve does the same per session)
      for (const s of adopted) {
        const ok = await c.post(admin, '/admin/session', { action: 'approve', uuid: s.uuid });
        expect(ok.status, JSON.stringify(ok.body)).toBe(200);
      }

      // the peer peerops does not run needs no step of the operator's: its file is set aside with the
      // others and the agent keeps its protocols running (docs/operator-guide.md §10, step 4)
      const leftFile = join(hand.dirs.bird, 'peers', 'p1.conf');

      // the real agent; its commands run in the router's namespace, it reaches the controller on loopback
      const configFile = await writeAgentConfig(
        hand,
        agentFileConfig(
          hand,
          {
            url: c.base,
            token: agentToken,
            syncInterval: 2,
            heartbeatInterval: 2,
            metricInterval: 2,
            retryInitialDelay: 200,
          },
          { metric: { pingCount: 1, pingTimeout: 1, pingWorkers: 2 } },
        ),
      );
      const takeoverStart = Date.now();
      agent = spawn(process.execPath, [BIN, 'agent', '--config', configFile], {
        env: { ...process.env, PEEROPS_AGENT_NETNS: hand.router.name },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      agent.stdout?.on('data', (b: Buffer) => (agentOutput += b.toString()));
      agent.stderr?.on('data', (b: Buffer) => (agentOutput += b.toString()));

      const wanted = new Set(adopted.map((s) => s.uuid));
      await waitFor(
        'every adopted session ACTIVE and Established in the controller',
        async () => {
          if (agent?.exitCode !== null) throw new Error(`peerops agent exited:\n${agentOutput}`);
          const now = (await list()).filter((s) => wanted.has(s.uuid));
          return now.every((s) => s.status === SessionStatus.ACTIVE && s.bgpState === 'Established');
        },
        45_000,
        250,
      ).catch((err: Error) => {
        throw new Error(`${err.message}\nagent:\n${agentOutput.slice(-4000)}`);
      });
      const takeoverMs = Date.now() - takeoverStart;

      // what the controller says is what the router's BIRD runs: the kept protocols, Established
      const protocols = (await hand.routerBird.birdc('show protocols')).split('\n');
      for (const s of await list()) {
        if (!wanted.has(s.uuid)) continue;
        expect(s.adopted?.protocols).toEqual([`p${hand.peers.findIndex((p) => p.asn === s.asn)}_v6`]);
        for (const p of s.adopted?.protocols ?? [])
          expect(protocols.find((l) => l.startsWith(`${p} `)) ?? `${p} missing`).toMatch(/ Established/);
      }
      // taken over, not just found running: the hand-made files set aside, the agent's own written
      const record = JSON.parse(
        await readFile(join(adoptionDir(hand.dirs.wireguard), 'record.json'), 'utf8'),
      ) as { setAside: { from: string }[] };
      for (const s of adopted) {
        const i = hand.peers.findIndex((p) => p.asn === s.asn);
        expect(record.setAside.map((m) => m.from)).toContain(join(hand.dirs.bird, 'peers', `p${i}.conf`));
        const own = await readFile(join(hand.dirs.bird, 'peers', `dn42_${hand.peers[i]!.port}.conf`), 'utf8');
        expect(own).toContain(`protocol bgp p${i}_v6 `);
      }
      expect(record.setAside.map((m) => m.from)).toContain(leftFile);
      const kept = await readFile(join(hand.dirs.bird, 'peers', REMAINDER_FILE), 'utf8');
      for (const p of ['p1_v6', 'p1_v4']) expect(kept).toContain(`protocol bgp ${p} from hand_dnpeers`);
      // the refused one stays DISABLED in the controller, its hand-made peer left running as it was
      expect((await list()).find((s) => s.uuid === refused!.uuid)).toMatchObject({ statusName: 'DISABLED' });

      // on through two more of the agent's syncs (every 2 s)
      const { moves, watched, polls } = await watch.stop(4000);
      console.log(
        `adopt through the controller: ${PEERS} peers, setup ${setupMs} ms, plan ${planMs} ms, ` +
          `approved to all ACTIVE ${takeoverMs} ms (${polls} polls of ${watched} protocols, ${moves.length} flaps)`,
      );
      expect(watched).toBe(2 * hand.peers.reduce((n, p) => n + p.peerProtocols.length, 0));
      expect(moves).toEqual([]);
    } finally {
      await watch.stop().catch(() => undefined);
    }
  }, 180_000);
});
