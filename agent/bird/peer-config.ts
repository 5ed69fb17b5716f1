/**
 * Per-session eBGP config: one file `<peerConfDir>/dn42_<port>.conf` per session, from a built-in
 * template or the operator's `routing.ebgpConfTemplateFile` (mustache, logic-less, escaping off). Every
 * value in the view comes from a validated, canonical field of the session or the policy: numbers,
 * canonical addresses, interface names. No free text reaches BIRD.
 */
import Mustache from 'mustache';
import type { AgentSession, BirdConfigResponse } from '../../common/agent-api.ts';
import { canonicalIpv6, isLinkLocal } from '../../common/net.ts';
import { BIRD_NAMES, latencyCommunity, sessionProtocolName } from './names.ts';

export const BUILTIN_PEER_TEMPLATE = `# Rendered by peerops for session {{uuid}}; changes here are overwritten.
protocol bgp {{protocol}} from {{template}} {
  neighbor {{linkLocal}} % '{{interface}}' as {{asn}};
{{#ipv4}}
  ipv4 {
    import where {{importFilter}}({{latency}}, {{bandwidth}}, {{crypto}});
    export where {{exportFilter}}({{latency}}, {{bandwidth}}, {{crypto}});
{{#extendedNextHop}}
    extended next hop on;
{{/extendedNextHop}}
  };
{{/ipv4}}
{{^ipv4}}
  ipv4 {
    import none;
    export none;
  };
{{/ipv4}}
  ipv6 {
    import where {{importFilter}}({{latency}}, {{bandwidth}}, {{crypto}});
    export where {{exportFilter}}({{latency}}, {{bandwidth}}, {{crypto}});
  };
}
`;

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

export function peerView(
  session: AgentSession,
  policy: Pick<BirdConfigResponse, 'communities'>,
  rttMs: number | null | undefined,
): PeerView {
  const safe = (ok: boolean, field: string) => {
    if (!ok) throw new TemplateError(`session ${session.uuid}: ${field} is not safe to render`);
  };
  safe(isLinkLocal(session.linkLocal), 'linkLocal');
  safe(/^wg_[0-9]{1,5}$/.test(session.interface), 'interface');
  safe(Number.isInteger(session.asn) && Number.isInteger(session.listenPort), 'asn/listenPort');
  return {
    uuid: session.uuid.toLowerCase().replace(/[^0-9a-f-]/g, ''),
    protocol: sessionProtocolName(session.listenPort),
    template: BIRD_NAMES.ebgpTemplate,
    interface: session.interface,
    linkLocal: canonicalIpv6(session.linkLocal),
    asn: session.asn,
    ipv4: session.mpbgp,
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

/** Renders one session's file; a template that does not parse is a TemplateError naming the reason. */
export function renderPeerConfig(view: PeerView, template = BUILTIN_PEER_TEMPLATE): string {
  try {
    // escape: identity — BIRD is not HTML, and every value is already a safe token.
    return Mustache.render(template, view, {}, { escape: (v: unknown) => String(v) });
  } catch (err) {
    throw new TemplateError(`eBGP template: ${(err as Error).message}`);
  }
}
