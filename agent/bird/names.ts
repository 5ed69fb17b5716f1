/**
 * Names that the main BIRD config (main-config.ts) defines and the per-session and iBGP configs use. Both
 * sides import them from here so they cannot drift apart.
 */
export const BIRD_NAMES = {
  /** `define OWNAS = <dn42Asn>;` */
  ownAs: 'OWNAS',
  /** `define OWNIP = <loopback v4>;` / `define OWNIPv6 = <loopback v6>;` */
  ownIp: 'OWNIP',
  ownIpv6: 'OWNIPv6',
  /** `template bgp dnpeers { local as OWNAS; … }`: eBGP sessions inherit from it. */
  ebgpTemplate: 'dnpeers',
  /** `template bgp ibgp_peers { local as OWNAS; … }` */
  ibgpTemplate: 'ibgp_peers',
  /** `function dn42_import_filter(int link_latency; int link_bandwidth; int link_crypto) -> bool` */
  importFilter: 'dn42_import_filter',
  exportFilter: 'dn42_export_filter',
} as const;

/** BIRD protocol name of a session's eBGP peering: unique per router because ports are. */
export function sessionProtocolName(listenPort: number): string {
  return `dn42_${listenPort}`;
}

/** The second protocol of a session whose peer does not do multiprotocol BGP: IPv4 on its own. */
export function sessionIpv4ProtocolName(listenPort: number): string {
  return `${sessionProtocolName(listenPort)}_v4`;
}

/**
 * A session's BIRD protocols, the one carrying its link-local neighbour first: its own (`dn42_<port>`,
 * `dn42_<port>_v4`) or, adopted, the hand-made names it keeps (docs/agent.md, Adopting a running router).
 */
export function sessionProtocols(session: {
  listenPort: number;
  adopted?: { protocols: readonly string[] } | undefined;
}): readonly [string, ...string[]] {
  const kept = session.adopted?.protocols;
  if (kept?.[0] !== undefined) return [kept[0], ...kept.slice(1)];
  return [sessionProtocolName(session.listenPort), sessionIpv4ProtocolName(session.listenPort)];
}

/** DN42 link latency community (64511, 1..9) from a measured round-trip time in milliseconds. */
export function latencyCommunity(rttMs: number | null | undefined): number {
  if (rttMs === null || rttMs === undefined) return 9;
  const bounds = [2.7, 7.3, 20, 55, 148, 403, 1097, 2981];
  const tier = bounds.findIndex((b) => rttMs <= b);
  return tier === -1 ? 9 : tier + 1;
}
