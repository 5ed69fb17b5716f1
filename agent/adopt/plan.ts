/**
 * The adoption plan (docs/agent.md, Adopting a running router): each BGP protocol matched to its tunnel,
 * one session per peer, and each thing that cannot be adopted with its reason. Pure: files in, plan out.
 */
import { isIP } from 'node:net';
import { englishText, type AdoptMessageKey, type MessageParams } from '../../common/messages.ts';
import { DEFAULT_PORT_RANGE } from '../../common/naming.ts';
import type { HandProtocol, HandTunnel } from './read-files.ts';

/** Where an adopted session came from: the names the agent keeps so BIRD and WireGuard see no change. */
export interface AdoptedFrom {
  interface: string;
  protocols: string[];
  files: string[];
}

export interface PlannedSession {
  asn: number;
  router: string;
  listenPort: number;
  publicKey: string;
  endpoint?: string;
  mtu?: number;
  linkLocal?: string;
  ipv6?: string;
  ipv4?: string;
  mpbgp: boolean;
  extendedNextHop: boolean;
  adopted: AdoptedFrom;
}

/** Why a tunnel or protocol is left as it is: a key and the English sentence. */
export interface NotAdopted {
  what: string;
  reason: Reason;
  text: string;
}

/** Key into ADOPT_MESSAGES without its `adopt.` prefix, kept short in the plan's `reason`. */
type Reason = AdoptMessageKey extends `adopt.${infer R}` ? R : never;

function notAdopted(what: string, reason: Reason, params: MessageParams): NotAdopted {
  return { what, reason, text: englishText(`adopt.${reason}`, { what, ...params }) };
}

export interface Plan {
  sessions: PlannedSession[];
  notAdopted: NotAdopted[];
}

export interface PlanOptions {
  router: string;
  portRange?: { min: number; max: number };
}

/** The tunnel a protocol runs over: its `%iface` or `interface`, else the tunnel holding a neighbor on-link. */
function tunnelOf(p: HandProtocol, tunnels: HandTunnel[]): HandTunnel | undefined {
  if (p.interface) return tunnels.find((t) => t.interface === p.interface);
  // a /32 or /128 peer address is often written as the tunnel's peer: match the tunnel whose own address
  // shares all but the last group with the neighbor, as the DN42 wiki's point-to-point examples do
  const net = (a: string) => a.slice(0, a.lastIndexOf(isIP(a) === 4 ? '.' : ':'));
  return tunnels.find((t) => t.addresses.some((a) => net(a) === net(p.neighbor)));
}

export function planAdoption(tunnels: HandTunnel[], protocols: HandProtocol[], options: PlanOptions): Plan {
  const range = options.portRange ?? DEFAULT_PORT_RANGE;
  const plan: Plan = { sessions: [], notAdopted: [] };
  const byTunnel = new Map<HandTunnel, HandProtocol[]>();
  for (const p of protocols) {
    const tunnel = tunnelOf(p, tunnels);
    if (!tunnel) plan.notAdopted.push(notAdopted(`protocol ${p.name}`, 'noTunnel', { neighbor: p.neighbor }));
    else byTunnel.set(tunnel, [...(byTunnel.get(tunnel) ?? []), p]);
  }
  for (const [t, ps] of byTunnel) {
    const what = `tunnel ${t.interface} (${t.file})`;
    const asns = [...new Set(ps.map((p) => p.asn))];
    if (t.kind !== 'wireguard') plan.notAdopted.push(notAdopted(what, 'unsupportedTunnel', { kind: t.kind }));
    else if (asns.length > 1) plan.notAdopted.push(notAdopted(what, 'twoAsns', { asns: asns.join(', ') }));
    else if (t.listenPort === undefined) plan.notAdopted.push(notAdopted(what, 'noListenPort', {}));
    else if (t.listenPort < range.min || t.listenPort > range.max)
      plan.notAdopted.push(notAdopted(what, 'portOutsideRange', { port: t.listenPort, ...range }));
    else if (!t.publicKey) plan.notAdopted.push(notAdopted(what, 'noPeerKey', {}));
    else plan.sessions.push(session(t, ps, asns[0]!, options.router, t.listenPort, t.publicKey));
  }
  plan.sessions.sort((a, b) => a.asn - b.asn || a.listenPort - b.listenPort);
  return plan;
}

function session(
  t: HandTunnel,
  ps: HandProtocol[],
  asn: number,
  router: string,
  listenPort: number,
  publicKey: string,
): PlannedSession {
  // the protocol of the IPv6 (link-local) neighbour first: the session's own, as the agent names them
  ps = [...ps].sort((a, b) => Number(isIP(a.neighbor) === 4) - Number(isIP(b.neighbor) === 4));
  const neighbors = ps.map((p) => p.neighbor);
  const linkLocal = neighbors.find((n) => n.toLowerCase().startsWith('fe80:'));
  const ipv6 = neighbors.find((n) => isIP(n) === 6 && !n.toLowerCase().startsWith('fe80:'));
  const ipv4 = neighbors.find((n) => isIP(n) === 4);
  // one protocol carrying both channels is MP-BGP; a protocol per family is not (docs/agent.md)
  const mpbgp = ps.some((p) => p.channels.includes('ipv4') && p.channels.includes('ipv6'));
  return {
    asn,
    router,
    listenPort,
    publicKey,
    ...(t.endpoint ? { endpoint: t.endpoint } : {}),
    ...(t.mtu ? { mtu: t.mtu } : {}),
    ...(linkLocal ? { linkLocal } : {}),
    ...(ipv6 ? { ipv6 } : {}),
    ...(ipv4 ? { ipv4 } : {}),
    mpbgp,
    extendedNextHop: ps.some((p) => p.extendedNextHop),
    adopted: {
      interface: t.interface,
      protocols: ps.map((p) => p.name),
      files: [...new Set([t.file, ...ps.map((p) => p.file)])],
    },
  };
}
