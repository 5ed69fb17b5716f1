/**
 * iBGP over the loopbacks: one file per other router in ibgpConfDir (policy.ibgpPeers). A session runs
 * per address family both ends have a loopback of, so each channel's next hop is of its own family and
 * resolves recursively through the Babel host routes. When only IPv6 loopbacks are shared, the IPv6
 * session also carries IPv4 with extended next hop.
 */
import { BirdConfigResponse, type IbgpPeer } from '../../common/agent-api.ts';
import { validateOrThrow } from '../../common/validate.ts';
import { IBGP_FILTERS } from './main-config.ts';
import { BIRD_NAMES } from './names.ts';

/** BIRD protocol name of the iBGP session with `router` over `family` (router names have no `_`). */
export function ibgpProtocolName(router: string, family: 4 | 6): string {
  return `ibgp_${router.replace(/-/g, '_')}_v${family}`;
}

/** File name in ibgpConfDir → content; a router no session can be built with gets no file. */
export function renderIbgpConfigs(policy: BirdConfigResponse): Map<string, string> {
  const p = validateOrThrow<BirdConfigResponse>(BirdConfigResponse, policy, 'routing policy');
  const files = new Map<string, string>();
  for (const peer of [...p.ibgpPeers].sort((a, b) => a.router.localeCompare(b.router))) {
    const text = renderPeer(peer, p.loopback);
    if (text) files.set(`ibgp_${peer.router}.conf`, text);
  }
  return files;
}

function renderPeer(peer: IbgpPeer, own: BirdConfigResponse['loopback']): string | undefined {
  const v4 = Boolean(own.ipv4 && peer.loopback.ipv4);
  const v6 = Boolean(own.ipv6 && peer.loopback.ipv6);
  if (!v4 && !v6) return undefined;
  const blocks: string[] = [];
  if (v4) {
    blocks.push(session(peer, 4, peer.loopback.ipv4 as string, BIRD_NAMES.ownIp, [channel('ipv4')]));
  }
  if (v6) {
    const channels = [channel('ipv6')];
    if (!v4) channels.unshift(channel('ipv4', '    extended next hop on;\n'));
    blocks.push(session(peer, 6, peer.loopback.ipv6 as string, BIRD_NAMES.ownIpv6, channels));
  }
  return `# iBGP with ${peer.router} (node ${peer.nodeId}), rendered by peerops.\n${blocks.join('\n')}`;
}

function session(
  peer: IbgpPeer,
  family: 4 | 6,
  neighbor: string,
  source: string,
  channels: string[],
): string {
  return `protocol bgp ${ibgpProtocolName(peer.router, family)} from ${BIRD_NAMES.ibgpTemplate} {
  neighbor ${neighbor} as ${BIRD_NAMES.ownAs};
  source address ${source};
${channels.join('')}}
`;
}

function channel(family: 'ipv4' | 'ipv6', extra = ''): string {
  return `  ${family} {
${extra}    gateway recursive;
    next hop self;
    import where ${IBGP_FILTERS.import}();
    export where ${IBGP_FILTERS.export}();
  };
`;
}
