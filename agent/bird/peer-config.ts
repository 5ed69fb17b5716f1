/**
 * Per-session eBGP config: one file `<peerConfDir>/dn42_<port>.conf` per session. The project's own BIRD
 * text is rendered by typed functions (template literals), as the main config and the iBGP files are
 * (docs/decisions.md); an operator's `routing.ebgpConfTemplateFile` replaces this one with a mustache
 * template (logic-less, escaping off) over the same view, and examples/ebgp-template.mustache is the
 * built-in file in that form. Every value in the view comes from a validated, canonical field of the
 * session or the policy: numbers, canonical addresses, interface names. No free text reaches BIRD.
 */
import Mustache from 'mustache';
import type { AgentSession, BirdConfigResponse } from '../../common/agent-api.ts';
import { canonicalIpv6, isIpv4, isLinkLocal } from '../../common/net.ts';
import { BIRD_NAMES, latencyCommunity, sessionIpv4ProtocolName, sessionProtocolName } from './names.ts';

/** What a template sees. All fields are safe tokens for BIRD (numbers, addresses, names). */
export interface PeerView {
  uuid: string;
  protocol: string;
  template: string;
  interface: string;
  linkLocal: string;
  asn: number;
  /** The session carries IPv4 (MP-BGP over the link-local session). */
  ipv4: boolean;
  /** Without MP-BGP: the peer's tunnel IPv4, the neighbour of a second, IPv4-only session; else ''. */
  ipv4Neighbor: string;
  ipv4Protocol: string;
  extendedNextHop: boolean;
  latency: number;
  bandwidth: number;
  crypto: number;
  importFilter: string;
  exportFilter: string;
  listenPort: number;
  mtu: number;
}

export class TemplateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TemplateError';
  }
}

export function peerFileName(session: Pick<AgentSession, 'listenPort'>): string {
  return `${sessionProtocolName(session.listenPort)}.conf`;
}

/**
 * `ownIpv4` is the router's tunnel IPv4 (`tunnel.dn42Ipv4`, '' when none): a peer without MP-BGP gets its
 * IPv4 session only when both ends have an IPv4 on the tunnel.
 */
export function peerView(
  session: AgentSession,
  policy: Pick<BirdConfigResponse, 'communities'>,
  rttMs: number | null | undefined,
  ownIpv4 = '',
): PeerView {
  const safe = (ok: boolean, field: string) => {
    if (!ok) throw new TemplateError(`session ${session.uuid}: ${field} is not safe to render`);
  };
  safe(isLinkLocal(session.linkLocal), 'linkLocal');
  safe(/^wg_[0-9]{1,5}$/.test(session.interface), 'interface');
  safe(Number.isInteger(session.asn) && Number.isInteger(session.listenPort), 'asn/listenPort');
  const ipv4Neighbor = !session.mpbgp && session.ipv4 && ownIpv4 ? session.ipv4 : '';
  if (ipv4Neighbor) safe(isIpv4(ipv4Neighbor), 'ipv4');
  return {
    uuid: session.uuid.toLowerCase().replace(/[^0-9a-f-]/g, ''),
    protocol: sessionProtocolName(session.listenPort),
    template: BIRD_NAMES.ebgpTemplate,
    interface: session.interface,
    linkLocal: canonicalIpv6(session.linkLocal),
    asn: session.asn,
    ipv4: session.mpbgp,
    ipv4Neighbor,
    ipv4Protocol: sessionIpv4ProtocolName(session.listenPort),
    extendedNextHop: session.mpbgp && session.extendedNextHop,
    latency: latencyCommunity(rttMs),
    bandwidth: policy.communities.bandwidth,
    crypto: policy.communities.crypto,
    importFilter: BIRD_NAMES.importFilter,
    exportFilter: BIRD_NAMES.exportFilter,
    listenPort: session.listenPort,
    mtu: session.mtu,
  };
}

/** A channel's filter statements: the main config's import and export functions with the link's communities. */
export function channelFilters(
  v: Pick<PeerView, 'importFilter' | 'exportFilter' | 'latency' | 'bandwidth' | 'crypto'>,
  indent = '',
  end = '\n',
): string {
  return (
    `${indent}import where ${v.importFilter}(${v.latency}, ${v.bandwidth}, ${v.crypto});${end}` +
    `${indent}export where ${v.exportFilter}(${v.latency}, ${v.bandwidth}, ${v.crypto});${end}`
  );
}

/** The built-in file of a session. */
export function renderBuiltinPeer(v: PeerView): string {
  const filters = (indent: string) => channelFilters(v, indent);
  const none = '    import none;\n    export none;\n';
  const ipv4 = v.ipv4
    ? `  ipv4 {\n${filters('    ')}${v.extendedNextHop ? '    extended next hop on;\n' : ''}  };\n`
    : `  ipv4 {\n${none}  };\n`;
  const main =
    `# Rendered by peerops for session ${v.uuid}; changes here are overwritten.\n` +
    `protocol bgp ${v.protocol} from ${v.template} {\n` +
    `  neighbor ${v.linkLocal} % '${v.interface}' as ${v.asn};\n` +
    ipv4 +
    `  ipv6 {\n${filters('    ')}  };\n` +
    `}\n`;
  if (!v.ipv4Neighbor) return main;
  return (
    main +
    `\n# The peer does not do multiprotocol BGP: IPv4 in a session of its own, over the tunnel's IPv4 addresses.\n` +
    `protocol bgp ${v.ipv4Protocol} from ${v.template} {\n` +
    `  neighbor ${v.ipv4Neighbor} as ${v.asn};\n` +
    `  direct;\n` +
    `  ipv4 {\n${filters('    ')}  };\n` +
    `  ipv6 {\n${none}  };\n` +
    `}\n`
  );
}

/**
 * Renders one session's file: the built-in one, or the operator's mustache template; a template that
 * does not parse is a TemplateError naming the reason.
 */
export function renderPeerConfig(view: PeerView, template?: string): string {
  if (template === undefined) return renderBuiltinPeer(view);
  try {
    // escape: identity — BIRD is not HTML, and every value is already a safe token.
    return Mustache.render(template, view, {}, { escape: (v: unknown) => String(v) });
  } catch (err) {
    throw new TemplateError(`eBGP template: ${(err as Error).message}`);
  }
}
