/** Reads the actual state of a WireGuard interface back from the system: `ip -j -d link/addr/route`, `wg show dump`. */
import { run } from '../system/exec.ts';

export interface WgPeerState {
  publicKey: string;
  /** As WireGuard reports it: the resolved `ip:port` (`[v6]:port`), or undefined. */
  endpoint: string | undefined;
  allowedIps: string[];
  /** Unix seconds; 0 when there never was a handshake. */
  latestHandshake: number;
  rxBytes: number;
  txBytes: number;
  persistentKeepalive: number;
}

export interface WgInterfaceState {
  name: string;
  /** `tun` for wireguard-go, `wireguard` for the kernel; `new` for a link just created, not read back. */
  kind: string;
  mtu: number;
  up: boolean;
  /** The link's MULTICAST flag, which Babel on a mesh tunnel needs. */
  multicast: boolean;
  addrGenModeNone: boolean;
  /** `addr/prefixlen` of every address on the link; a point-to-point one as `local peer remote/len`. */
  addresses: string[];
  /** Destinations of routes through the link (`10.0.0.1`, `fd00::/64`), kernel-made ones excluded. */
  routes: string[];
  /**
   * Those of them the agent put there itself: `ip route replace` without a protocol makes them `boot`,
   * which BIRD's (`bird`) and the kernel's are not: the peer routes (WgInterfaceSpec.peerRoutes).
   */
  ownRoutes: string[];
  /** The generation the agent stamped on the link (its alias `peerops gen=<n>`), undefined if none. */
  generation: number | undefined;
  /** undefined when the link exists but WireGuard does not answer for it (a broken userspace daemon). */
  wg:
    | {
        publicKey: string;
        listenPort: number;
        peers: WgPeerState[];
      }
    | undefined;
}

const ALIAS_PREFIX = 'peerops gen=';
export function generationAlias(generation: number): string {
  return `${ALIAS_PREFIX}${generation}`;
}

interface IpLink {
  ifname: string;
  mtu: number;
  flags?: string[];
  ifalias?: string;
  inet6_addr_gen_mode?: string;
  linkinfo?: { info_kind?: string };
}
interface IpAddr {
  ifname: string;
  /** `address` is the far end of a point-to-point address (`ip addr add A peer B/32`). */
  addr_info?: { family: string; local: string; address?: string; prefixlen: number }[];
}
interface IpRoute {
  dst: string;
  protocol?: string;
}

async function ipJson<T>(args: string[]): Promise<T | undefined> {
  const r = await run('ip', ['-j', ...args]);
  if (r.code !== 0) return undefined;
  return JSON.parse(r.stdout || '[]') as T;
}

/** Names of links whose name starts with `prefix` (e.g. `wg_`). */
export async function listLinks(prefix: string): Promise<string[]> {
  const links = (await ipJson<IpLink[]>(['link', 'show'])) ?? [];
  return links.map((l) => l.ifname).filter((n) => n.startsWith(prefix));
}

export function parseWgDump(dump: string): WgInterfaceState['wg'] {
  const lines = dump.split('\n').filter((l) => l.trim() !== '');
  if (lines.length === 0) return undefined;
  const [, publicKey = '', listenPort = '0'] = lines[0]!.split('\t');
  const peers = lines.slice(1).map((line): WgPeerState => {
    const [key = '', , endpoint = '', allowed = '', handshake = '0', rx = '0', tx = '0', keepalive = 'off'] =
      line.split('\t');
    return {
      publicKey: key,
      endpoint: endpoint === '(none)' ? undefined : endpoint,
      allowedIps: allowed === '(none)' ? [] : allowed.split(','),
      latestHandshake: Number(handshake),
      rxBytes: Number(rx),
      txBytes: Number(tx),
      persistentKeepalive: keepalive === 'off' ? 0 : Number(keepalive),
    };
  });
  return { publicKey, listenPort: Number(listenPort), peers };
}

function toState(
  link: IpLink,
  addrs: NonNullable<IpAddr['addr_info']>,
  routes: IpRoute[],
  wg: WgInterfaceState['wg'],
): WgInterfaceState {
  const alias = link.ifalias ?? '';
  return {
    name: link.ifname,
    kind: link.linkinfo?.info_kind ?? 'unknown',
    mtu: link.mtu,
    up: (link.flags ?? []).includes('UP'),
    multicast: (link.flags ?? []).includes('MULTICAST'),
    addrGenModeNone: link.inet6_addr_gen_mode === 'none',
    addresses: addrs.map((a) =>
      a.address && a.address !== a.local
        ? `${a.local} peer ${a.address}/${a.prefixlen}`
        : `${a.local}/${a.prefixlen}`,
    ),
    routes: routes.filter((r) => r.protocol !== 'kernel').map((r) => r.dst),
    // `ip -j route` leaves the protocol out for `boot`
    ownRoutes: routes.filter((r) => (r.protocol ?? 'boot') === 'boot').map((r) => r.dst),
    generation: alias.startsWith(ALIAS_PREFIX) ? Number(alias.slice(ALIAS_PREFIX.length)) : undefined,
    wg,
  };
}

/** The interface as the system has it, or undefined when there is no such link. */
export async function readInterface(name: string): Promise<WgInterfaceState | undefined> {
  const links = await ipJson<IpLink[]>(['-d', 'link', 'show', 'dev', name]);
  const link = links?.[0];
  if (!link) return undefined;
  const addrs = (await ipJson<IpAddr[]>(['addr', 'show', 'dev', name]))?.[0]?.addr_info ?? [];
  const routes4 = (await ipJson<IpRoute[]>(['-4', 'route', 'show', 'dev', name])) ?? [];
  const routes6 = (await ipJson<IpRoute[]>(['-6', 'route', 'show', 'dev', name])) ?? [];
  const dump = await run('wg', ['show', name, 'dump']);
  return toState(
    link,
    addrs,
    [...routes4, ...routes6],
    dump.code === 0 ? parseWgDump(dump.stdout) : undefined,
  );
}

/**
 * Every link whose name starts with one of `prefixes`, read with one command per kind of state (links,
 * addresses, routes, WireGuard's) instead of five per link: a pass over 100 sessions stays cheap.
 * WireGuard's state comes from `wg show all dump`, which asks every userspace tunnel's socket in turn
 * (0.8 s at 1,000), or with `hostDump`, from peerops-wireguard's `--dump` (one request for all the
 * tunnels it hosts), then `wg show <link> dump` for any link it does not host (a wireguard-go daemon
 * left from before, a kernel link).
 */
export async function readAllInterfaces(
  prefixes: readonly string[],
  options: { hostDump?: boolean } = {},
): Promise<Map<string, WgInterfaceState>> {
  const wanted = (n: string) => prefixes.some((p) => n.startsWith(p));
  // the five reads at once: each is a process the pass would otherwise wait for in turn
  const [linkList, addrList, routes4, routes6, all] = await Promise.all([
    ipJson<IpLink[]>(['-d', 'link', 'show']),
    ipJson<IpAddr[]>(['addr', 'show']),
    ipJson<(IpRoute & { dev?: string })[]>(['-4', 'route', 'show']),
    ipJson<(IpRoute & { dev?: string })[]>(['-6', 'route', 'show']),
    options.hostDump ? run('peerops-wireguard', ['--dump']) : run('wg', ['show', 'all', 'dump']),
  ]);
  const links = (linkList ?? []).filter((l) => wanted(l.ifname));
  const out = new Map<string, WgInterfaceState>();
  if (links.length === 0) return out;
  const addrs = new Map((addrList ?? []).map((a) => [a.ifname, a.addr_info ?? []]));
  const routes = new Map<string, IpRoute[]>();
  for (const r of [...(routes4 ?? []), ...(routes6 ?? [])]) {
    if (!r.dev || !wanted(r.dev)) continue;
    const list = routes.get(r.dev);
    if (list) list.push(r);
    else routes.set(r.dev, [r]);
  }
  const dumps = new Map<string, string[]>();
  for (const line of all.stdout.split('\n')) {
    const tab = line.indexOf('\t');
    if (tab < 0) continue;
    const name = line.slice(0, tab);
    const lines = dumps.get(name);
    if (lines) lines.push(line.slice(tab + 1));
    else dumps.set(name, [line.slice(tab + 1)]);
  }
  if (options.hostDump)
    for (const link of links.filter((l) => !dumps.has(l.ifname))) {
      const one = await run('wg', ['show', link.ifname, 'dump']);
      if (one.code === 0) dumps.set(link.ifname, one.stdout.split('\n'));
    }
  for (const link of links) {
    const dump = dumps.get(link.ifname);
    out.set(
      link.ifname,
      toState(
        link,
        addrs.get(link.ifname) ?? [],
        routes.get(link.ifname) ?? [],
        dump ? parseWgDump(dump.join('\n')) : undefined,
      ),
    );
  }
  return out;
}
