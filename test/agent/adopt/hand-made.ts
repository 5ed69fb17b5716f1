/**
 * Routers set up by hand, as operators do before peerops, for the takeover tests and the benchmark: a
 * router namespace with its hand-made WireGuard links (peerops-wireguard hosts them: this machine's
 * kernel has no WireGuard), their files and a BIRD tree in one of three layouts, and one peer namespace
 * holding every peer's tunnel and one BIRD with a protocol per peer (its own local AS each), joined by a
 * veth. Layouts:
 *   wiki      the DN42 wiki's BIRD 2 example: bird.conf with `template bgp dnpeers`, one file per peer in
 *             bird/peers (`protocol bgp <peer>_v6 from dnpeers`), wg-quick files; peer 1 has IPv4 tunnel
 *             addresses and no MP-BGP (a `_v4` and a `_v6` protocol, the other family closed in each),
 *             and a GRE tunnel with its own protocol is not adopted.
 *   wgquick   wg-quick files with a key of their own (not the router's), per-peer BIRD files in bird/dn42
 *             from a two-level template with extended next hop; peer 2 is behind NAT (no Endpoint); one
 *             more `wg_` link that no session names.
 *   networkd  systemd-networkd .netdev/.network pairs, one BIRD file holding every peer.
 */
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execFile } from 'node:child_process';
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import pino from 'pino';
import type { AgentSession, BirdConfigResponse, ModifyBody } from '../../../common/agent-api.ts';
import { SessionStatus } from '../../../common/status.ts';
import type { Plan } from '../../../agent/adopt/plan.ts';
import { REMAINDER_FILE } from '../../../agent/adopt/remainder.ts';
import { Adoption, adoptionDir } from '../../../agent/adopt/takeover.ts';
import { BirdApplier } from '../../../agent/bird/apply.ts';
import { BirdControl } from '../../../agent/bird/control.ts';
import { parseConfig } from '../../../agent/config.ts';
import { NodeReconciler } from '../../../agent/reconcile/node-reconciler.ts';
import { systemWireGuard } from '../../../agent/wireguard/interface.ts';
import { mapLimit } from '../../../common/concurrency.ts';
import { birdTimeApartMs } from '../../support/bird-time.ts';
import { waitFor, type BirdInstance, type Namespace, type NetnsLab } from '../../support/netns.ts';

export type Layout = 'wiki' | 'wgquick' | 'networkd';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '..', '..', '..');

export const ROUTER_ASN = 4242420066;
const ROUTER_ID = '172.20.66.1';
const ROUTER_LL = 'fe80::66';
export const PORT_BASE = 31000;

export interface HandPeer {
  index: number;
  asn: number;
  /** The router's hand-made link towards this peer. */
  iface: string;
  port: number;
  /** The peer's BIRD protocols (in the peer namespace). */
  peerProtocols: string[];
}

export interface HandRouter {
  layout: Layout;
  router: Namespace;
  peer: Namespace;
  root: string;
  routerBird: BirdInstance;
  peerBird: BirdInstance;
  peers: HandPeer[];
  /** The router's own key (the agent's tunnel.privateKeyPath). */
  routerKeyFile: string;
  dirs: { wireguard: string; networkd: string; bird: string };
  policy: BirdConfigResponse;
}

/** A WireGuard key pair (X25519), made here rather than by two `wg` runs a key: hundreds at 200 peers. */
function keyPair(): { privateKey: string; publicKey: string } {
  const jwk = generateKeyPairSync('x25519').privateKey.export({ format: 'jwk' });
  const b64 = (v: string | undefined) => Buffer.from(v ?? '', 'base64url').toString('base64');
  return { privateKey: b64(jwk.d), publicKey: b64(jwk.x) };
}

/** A WireGuard link as wg-quick or networkd would have made it, through peerops-wireguard. */
async function handLink(
  ns: Namespace,
  name: string,
  o: {
    keyFile: string;
    port: number;
    peerKey: string;
    endpoint?: string;
    keepalive?: number;
    addresses: string[];
  },
): Promise<void> {
  await ns.run('peerops-wireguard', [name]);
  await ns.run('wg', [
    'set',
    name,
    'listen-port',
    String(o.port),
    'private-key',
    o.keyFile,
    'peer',
    o.peerKey,
    'allowed-ips',
    '172.20.0.0/14,fd00::/8,fe80::/64',
    ...(o.endpoint ? ['endpoint', o.endpoint] : []),
    ...(o.keepalive ? ['persistent-keepalive', String(o.keepalive)] : []),
  ]);
  // a kernel WireGuard link (what wg-quick and networkd make) has no link-local of its own; a tun link
  // would get one, and BGP would speak from it instead of the configured one
  const batch = [
    `link set dev ${name} addrgenmode none`,
    `link set dev ${name} mtu 1420`,
    ...o.addresses.map((a) => `addr add ${a} dev ${name}${a.includes(':') ? ' nodad' : ''}`),
    `link set dev ${name} up`,
  ];
  const r = await ns.exec('ip', ['-batch', '-'], { input: `${batch.join('\n')}\n` });
  if (r.code !== 0) throw new Error(`ip -batch: ${r.stderr}`);
}

const TIMERS = 'connect delay time 1;\n  connect retry time 3;\n  hold time 30;\n  keepalive time 10;';

function routerMain(layout: Layout, root: string): string {
  const filters = `
function is_self_net() {
  if net.type = NET_IP4 then return net ~ [172.20.66.0/24+];
  return net ~ [fd42:66::/48+];
}
function is_valid_network() {
  if net.type = NET_IP4 then return net ~ [172.20.0.0/14{21,29}];
  return net ~ [fd00::/8{44,64}];
}`;
  const head = `# hand-made, ${layout}
define OWNAS = ${ROUTER_ASN};
define OWNIP = ${ROUTER_ID};
router id ${ROUTER_ID};
protocol device { scan time 10; }
protocol static { route fd42:66::/48 reject; ipv6 { import all; export none; }; }
${filters}
`;
  if (layout === 'wiki')
    return `${head}
template bgp dnpeers {
  local as OWNAS;
  path metric 1;
  ${TIMERS}
  ipv4 {
    import filter { if is_valid_network() && !is_self_net() then accept; else reject; };
    export filter { if is_valid_network() && source ~ [RTS_STATIC, RTS_BGP] then accept; else reject; };
    import limit 1000 action block;
  };
  ipv6 {
    import filter { if is_valid_network() && !is_self_net() then accept; else reject; };
    export filter { if is_valid_network() && source ~ [RTS_STATIC, RTS_BGP] then accept; else reject; };
    import limit 1000 action block;
  };
}
include "${root}/bird/peers/*.conf";
`;
  if (layout === 'wgquick')
    return `${head}
template bgp dn42_base {
  local as OWNAS;
  ${TIMERS}
  graceful restart on;
}
template bgp dn42_peer from dn42_base {
  path metric 1;
  ipv4 { import where is_valid_network() && !is_self_net(); export where is_valid_network(); extended next hop on; };
  ipv6 { import where is_valid_network() && !is_self_net(); export where is_valid_network(); };
}
include "${root}/bird/dn42/*.conf";
`;
  return `${head}
template bgp peers {
  local as OWNAS;
  ${TIMERS}
  enable extended messages on;
  ipv4 { import all; export filter { if source = RTS_STATIC then accept; reject; }; };
  ipv6 { import all; export filter { if source = RTS_STATIC then accept; reject; }; };
}
include "${root}/bird/peers.conf";
`;
}

/** Builds the router and its peers, then waits until every BGP session is Established on both sides. */
export async function handMadeRouter(lab: NetnsLab, layout: Layout, count: number): Promise<HandRouter> {
  const router = await lab.namespace(`r${layout}`);
  const peer = await lab.namespace(`p${layout}`);
  // WireGuard's UAPI sockets share one directory across namespaces: names unique to this lab
  const tag = lab.id.slice(-6);
  await lab.veth(router, peer, { a: '10.66.0.1/24', b: '10.66.0.2/24' });
  const root = await lab.tempDir(`hand-${layout}`);
  const dirs = {
    wireguard: join(root, 'wireguard'),
    networkd: join(root, 'network'),
    bird: join(root, 'bird'),
  };
  for (const d of [
    ...Object.values(dirs),
    join(root, 'keys'),
    join(dirs.bird, 'peers'),
    join(dirs.bird, 'dn42'),
  ])
    await mkdir(d, { recursive: true });
  const routerKey = keyPair();
  const routerKeyFile = join(dirs.wireguard, 'private.key');
  await writeFile(routerKeyFile, `${routerKey.privateKey}\n`, { mode: 0o600 });
  // wgquick: the tunnels have a key of their own, as a router set up before it had one per node
  const tunnelKey = layout === 'wgquick' ? keyPair() : routerKey;
  const tunnelKeyFile = join(root, 'keys', 'tunnel.key');
  await writeFile(tunnelKeyFile, `${tunnelKey.privateKey}\n`, { mode: 0o600 });

  const peers: HandPeer[] = [];
  const peerBird: string[] = [
    'router id 10.66.0.2;',
    'protocol device { scan time 10; }',
    'protocol static { route fd42:1100::/48 unreachable; ipv6 { import all; export none; }; }',
    'protocol static { route 172.20.200.0/24 unreachable; ipv4 { import all; export none; }; }',
  ];
  const singleFile: string[] = [];
  const links: (() => Promise<void>)[] = [];
  for (let i = 0; i < count; i++) {
    const asn = 4242421100 + i;
    const port = PORT_BASE + i;
    const peerPort = 41000 + i;
    const iface =
      layout === 'wiki' ? `dn42-${tag}${i}` : layout === 'wgquick' ? `wg_p${tag}${i}` : `dn42n${tag}${i}`;
    const peerIface = `pw${tag}${layout[1]}${i}`;
    const peerLL = `fe80::${(0x100 + i).toString(16)}`;
    const ipv4 = layout === 'wiki' && i === 1;
    const nat = layout === 'wgquick' && i === 2;
    const keys = keyPair();
    const keyFile = join(root, 'keys', `p${i}.key`);
    await writeFile(keyFile, `${keys.privateKey}\n`, { mode: 0o600 });
    const routerAddrs = [`${ROUTER_LL}/64`, ...(ipv4 ? [`172.20.66.1 peer 172.20.66.${101 + i}/32`] : [])];
    links.push(() =>
      handLink(router, iface, {
        keyFile: tunnelKeyFile,
        port,
        peerKey: keys.publicKey,
        ...(nat ? {} : { endpoint: `10.66.0.2:${peerPort}` }),
        addresses: routerAddrs,
      }),
    );
    links.push(() =>
      handLink(peer, peerIface, {
        keyFile,
        port: peerPort,
        peerKey: tunnelKey.publicKey,
        endpoint: `10.66.0.1:${port}`,
        ...(nat ? { keepalive: 5 } : {}),
        addresses: [`${peerLL}/64`, ...(ipv4 ? [`172.20.66.${101 + i} peer 172.20.66.1/32`] : [])],
      }),
    );
    // the router's tunnel file, in the layout's form
    const endpointLine = nat ? '' : `Endpoint = 10.66.0.2:${peerPort}\n`;
    if (layout === 'networkd') {
      await writeFile(
        join(dirs.networkd, `50-${iface}.netdev`),
        `[NetDev]\nName = ${iface}\nKind = wireguard\nMTUBytes = 1420\n\n[WireGuard]\nPrivateKey = ${tunnelKey.privateKey}\nListenPort = ${port}\n\n[WireGuardPeer]\nPublicKey = ${keys.publicKey}\n${endpointLine}AllowedIPs = 172.20.0.0/14, fd00::/8, fe80::/64\n`,
      );
      await writeFile(
        join(dirs.networkd, `50-${iface}.network`),
        `[Match]\nName = ${iface}\n\n[Network]\n${routerAddrs.map((a) => `Address = ${a}\n`).join('')}`,
      );
    } else {
      await writeFile(
        join(dirs.wireguard, `${iface}.conf`),
        `[Interface]\nPrivateKey = ${tunnelKey.privateKey}\nListenPort = ${port}\nTable = off\nMTU = 1420\nAddress = ${ROUTER_LL}/64\n${ipv4 ? `PostUp = ip addr add 172.20.66.1 peer 172.20.66.${101 + i}/32 dev %i\n` : ''}\n[Peer]\nPublicKey = ${keys.publicKey}\n${endpointLine}AllowedIPs = 172.20.0.0/14, fd00::/8, fe80::/64\n`,
      );
    }
    // the router's BIRD protocols for this peer
    const name = `p${i}`;
    let protocols: string;
    if (layout === 'wiki') {
      protocols =
        `protocol bgp ${name}_v6 from dnpeers {\n  neighbor ${peerLL}%'${iface}' as ${asn};\n  direct;\n` +
        (ipv4 ? '  ipv4 { import none; export none; };\n' : '') +
        '}\n' +
        (ipv4
          ? `protocol bgp ${name}_v4 from dnpeers {\n  neighbor 172.20.66.${101 + i} as ${asn};\n  direct;\n  ipv6 { import none; export none; };\n}\n`
          : '');
      await writeFile(join(dirs.bird, 'peers', `${name}.conf`), protocols);
    } else if (layout === 'wgquick') {
      protocols = `protocol bgp dn42_${name} from dn42_peer {\n  neighbor ${peerLL} % '${iface}' as ${asn};\n}\n`;
      await writeFile(join(dirs.bird, 'dn42', `${name}.conf`), protocols);
    } else {
      singleFile.push(`protocol bgp ${name} from peers {\n  neighbor ${peerLL}%${iface} as ${asn};\n}\n`);
    }
    const peerProtocols = [`r${i}`, ...(ipv4 ? [`r${i}_v4`] : [])];
    peerBird.push(
      `protocol bgp r${i} {\n  local as ${asn};\n  neighbor ${ROUTER_LL}%'${peerIface}' as ${ROUTER_ASN};\n  ${TIMERS}\n` +
        (ipv4
          ? '  ipv6 { import all; export all; };\n'
          : '  ipv4 { import all; export none; extended next hop on; };\n  ipv6 { import all; export all; };\n') +
        '}',
    );
    if (ipv4)
      peerBird.push(
        `protocol bgp r${i}_v4 {\n  local as ${asn};\n  neighbor 172.20.66.1 as ${ROUTER_ASN};\n  direct;\n  ${TIMERS}\n  ipv4 { import all; export all; };\n}`,
      );
    peers.push({ index: i, asn, iface, port, peerProtocols });
  }
  if (layout === 'networkd') await writeFile(join(dirs.bird, 'peers.conf'), singleFile.join('\n'));
  if (layout === 'wgquick') {
    // a hand-made `wg_` link no session names: the agent leaves it alone
    const spare = keyPair();
    links.push(() =>
      handLink(router, `wg_s${tag}`, {
        keyFile: tunnelKeyFile,
        port: PORT_BASE - 1,
        peerKey: spare.publicKey,
        addresses: [`${ROUTER_LL}/64`],
      }),
    );
  }
  // the first link of each namespace starts its peerops-wireguard host; the rest a few at once
  await links[0]!();
  await links[1]!();
  await mapLimit(links.slice(2), 8, (make) => make());
  if (layout === 'wiki') {
    // a peer over GRE, planned as not adopted and its protocol left where it is: a networkd .netdev only,
    // as this machine's kernel has no GRE to make the link with
    await writeFile(
      join(dirs.networkd, '60-gre-p.netdev'),
      '[NetDev]\nName = gre-p\nKind = gre\n\n[Tunnel]\nLocal = 10.66.0.1\nRemote = 10.66.0.2\n',
    );
    await writeFile(
      join(dirs.networkd, '60-gre-p.network'),
      '[Match]\nName = gre-p\n\n[Network]\nAddress = 172.20.66.1/32\n',
    );
    await writeFile(
      join(dirs.bird, 'peers', 'gre.conf'),
      `protocol bgp gre_v4 from dnpeers {\n  neighbor 172.20.66.250%'gre-p' as 4242421999;\n  direct;\n  ipv6 { import none; export none; };\n}\n`,
    );
  }
  const main = join(dirs.bird, 'bird.conf');
  await writeFile(main, routerMain(layout, root));
  const routerBird = await lab.startBird(router, { configPath: main, socket: join(dirs.bird, 'bird.ctl') });
  const peerBirdInstance = await lab.startBird(peer, `${peerBird.join('\n')}\n`);
  const hand: HandRouter = {
    layout,
    router,
    peer,
    root,
    routerBird,
    peerBird: peerBirdInstance,
    peers,
    routerKeyFile,
    dirs,
    policy: {
      dn42Asn: ROUTER_ASN,
      rpkiServers: [{ host: '127.0.0.1', port: 8282 }],
      ownPrefixes: { ipv4: ['172.20.66.0/24'], ipv6: ['fd42:66::/48'] },
      importLimit: { ipv4: 9000, ipv6: 9000, action: 'block' },
      communities: { enabled: true, bandwidth: 24, crypto: 34, region: 41 },
      routerId: ROUTER_ID,
      loopback: { ipv4: ROUTER_ID },
      allowPrivateEndpoints: true,
      ibgpPeers: [],
    },
  };
  await waitFor(
    `${count} hand-made sessions Established on both sides`,
    async () => {
      const up = async (b: BirdInstance) =>
        ((await b.birdc('show protocols')).match(/\bEstablished\b/g) ?? []).length;
      const want = peers.reduce((n, p) => n + p.peerProtocols.length, 0);
      return (await up(routerBird)) >= want && (await up(peerBirdInstance)) >= want;
    },
    Number(process.env.ADOPT_UP_MS ?? 120_000),
    500,
  ).catch(async (err: Error) => {
    const show = async (b: BirdInstance) =>
      (await b.birdc('show protocols all'))
        .split('\n')
        .filter((l) => /BGP|state|error|Neighbor address/.test(l))
        .join('\n');
    throw new Error(
      `${err.message}\nrouter:\n${await show(routerBird)}\npeer:\n${await show(peerBirdInstance)}`,
    );
  });
  return hand;
}

/** Every file under the hand-made dirs, path → bytes: what `--undo` must give back. */
export async function snapshot(dirs: readonly string[]): Promise<Map<string, Buffer>> {
  const out = new Map<string, Buffer>();
  const walk = async (dir: string): Promise<void> => {
    for (const e of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, e.name);
      if (e.isDirectory()) await walk(path);
      else if (e.isFile()) out.set(path, await readFile(path));
    }
  };
  for (const d of dirs) await walk(d);
  return out;
}

/** Polls `show protocols` of both BIRDs every 200 ms; each BGP protocol's `since` must never move. */
export function flapWatch(birds: { label: string; socket: string }[]) {
  const controls = birds.map((b) => ({ ...b, control: new BirdControl(b.socket) }));
  const first = new Map<string, string>();
  const moves: string[] = [];
  let polls = 0;
  let stopped = false;
  let firstPoll: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => (firstPoll = resolve));
  const loop = (async () => {
    while (!stopped) {
      for (const b of controls) {
        for (const p of await b.control.protocols()) {
          if (p.proto !== 'BGP' || p.bgpState !== 'Established') {
            if (p.proto === 'BGP' && first.has(`${b.label}/${p.name}`))
              moves.push(`${b.label}/${p.name}: ${p.bgpState ?? p.state}`);
            continue;
          }
          const key = `${b.label}/${p.name}`;
          const before = first.get(key);
          if (before === undefined) first.set(key, p.since);
          // BIRD may move the last millisecond between queries (test/agent/lab.ts expectSameBirdTime);
          // a flap moves it by far more
          else if (birdTimeApartMs(p.since, before) >= 100)
            moves.push(`${key}: since ${before} → ${p.since}`);
        }
      }
      if (polls++ === 0) firstPoll();
      await new Promise((r) => setTimeout(r, 200));
    }
  })();
  return {
    /** Resolves once every protocol has been seen once: what comes after is watched. */
    ready,
    /** Polls on for `ms` more (after a configure: a session it restarted shows), then stops. */
    async stop(ms = 0) {
      const until = Date.now() + ms;
      while (Date.now() < until) await new Promise((r) => setTimeout(r, 200));
      stopped = true;
      await loop;
      for (const b of controls) b.control.close();
      return { moves: [...new Set(moves)], polls, watched: first.size };
    },
  };
}

/** The plan's sessions as the controller serves them to the agent: approved, with their `adopted` block. */
export function agentSessions(plan: Plan): AgentSession[] {
  return plan.sessions.map((s, i) => ({
    uuid: randomUUID(),
    asn: s.asn,
    status: SessionStatus.QUEUED_FOR_SETUP,
    statusName: 'QUEUED_FOR_SETUP',
    interface: `wg_${s.listenPort}`,
    listenPort: s.listenPort,
    endpoint: s.endpoint ?? null,
    publicKey: s.publicKey,
    ipv6: s.ipv6 ?? `fd42:1100::${i + 1}`,
    linkLocal: s.linkLocal ?? 'fe80::1',
    ipv4: s.ipv4 ?? null,
    mtu: s.mtu ?? 1420,
    mpbgp: s.mpbgp,
    extendedNextHop: s.extendedNextHop,
    restartGeneration: 0,
    adopted: { by: 'admin', at: new Date().toISOString(), ...s.adopted },
  }));
}

/** `peerops adopt -o json`, the real command, inside the router's namespace. */
export async function planOf(hand: HandRouter): Promise<Plan> {
  const { stdout } = await run('ip', [
    'netns',
    'exec',
    hand.router.name,
    process.execPath,
    join(ROOT, 'bin', 'peerops.ts'),
    'adopt',
    '--router=r1',
    `--wireguard-dir=${hand.dirs.wireguard}`,
    `--networkd-dir=${hand.dirs.networkd}`,
    `--bird-conf=${join(hand.dirs.bird, 'bird.conf')}`,
    '-o',
    'json',
  ]);
  return JSON.parse(stdout) as Plan;
}

export interface AgentOnRouter {
  reconciler: NodeReconciler;
  reports: ModifyBody[];
  configFile: string;
  close(): void;
}

/**
 * The config file of an agent on the hand-made router (its BIRD, its WireGuard directory and key), with
 * the control plane given and `extra` sections.
 */
export function agentFileConfig(
  hand: HandRouter,
  controlPlane: Record<string, unknown>,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    server: { listen: '127.0.0.1:0' },
    node: { name: 'r1', id: 1, region: 'eu' },
    controlPlane,
    routing: {
      controlSocket: hand.routerBird.socket,
      peerConfDir: join(hand.dirs.bird, 'peers'),
      ibgpConfDir: join(hand.dirs.bird, 'ibgp.d'),
    },
    tunnel: {
      configDir: hand.dirs.wireguard,
      privateKeyPath: hand.routerKeyFile,
      dn42Ipv6LinkLocal: ROUTER_LL,
    },
    autoUpdate: { enabled: false },
    ...extra,
  };
}

/** Writes `fileConfig` where `peerops agent` and `peerops adopt --undo` on the router read it (0600). */
export async function writeAgentConfig(
  hand: HandRouter,
  fileConfig: Record<string, unknown>,
): Promise<string> {
  const configFile = join(hand.root, 'agent.json');
  await writeFile(configFile, JSON.stringify(fileConfig), { mode: 0o600 });
  return configFile;
}

/**
 * The agent's reconciler on the hand-made router, its commands run in the router's namespace
 * (PEEROPS_AGENT_NETNS), with the config a `peerops agent` there would read (written for --undo).
 */
export async function agentOn(hand: HandRouter): Promise<AgentOnRouter> {
  const fileConfig = agentFileConfig(hand, { url: 'http://127.0.0.1:9', token: 'x'.repeat(32) });
  const configFile = await writeAgentConfig(hand, fileConfig);
  const config = parseConfig(fileConfig, configFile);
  process.env.PEEROPS_AGENT_NETNS = hand.router.name;
  const bird = new BirdControl(hand.routerBird.socket);
  const reports: ModifyBody[] = [];
  const reconciler = new NodeReconciler({
    config,
    wireguard: systemWireGuard,
    bird,
    applier: new BirdApplier(bird, config.birdMainConfig),
    log: pino({ level: process.env.PEEROPS_TEST_LOG ?? 'silent' }),
    reporter: { modify: async (body) => void reports.push(body) },
    adoption: new Adoption({
      dir: adoptionDir(config.tunnel.configDir),
      mainPath: config.birdMainConfig,
      routerKeyPath: config.tunnel.privateKeyPath,
      remainderPath: join(config.routing.peerConfDir, REMAINDER_FILE),
    }),
  });
  return {
    reconciler,
    reports,
    configFile,
    close() {
      bird.close();
      delete process.env.PEEROPS_AGENT_NETNS;
    },
  };
}

/** `peerops adopt --undo`, the real command, inside the router's namespace. */
export async function undoOn(hand: HandRouter): Promise<string> {
  const { stdout } = await run('ip', [
    'netns',
    'exec',
    hand.router.name,
    process.execPath,
    join(ROOT, 'bin', 'peerops.ts'),
    'adopt',
    '--undo',
    `--config=${join(hand.root, 'agent.json')}`,
  ]);
  return stdout;
}
