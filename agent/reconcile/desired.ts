/** What the system should hold for a session: the WireGuard interface spec and the rule for statuses. */
import type { AgentSession } from '../../common/agent-api.ts';
import { SessionStatus } from '../../common/status.ts';
import type { AgentConfig } from '../config.ts';
import type { WgInterfaceSpec } from '../wireguard/types.ts';
import { type AdoptedLink } from '../adopt/takeover.ts';

/** Sessions whose tunnel and BGP should exist on the router. */
export function wantsUp(session: AgentSession): boolean {
  const s = session.status;
  return (
    s === SessionStatus.ACTIVE ||
    s === SessionStatus.ERROR ||
    s === SessionStatus.QUEUED_FOR_SETUP ||
    s === SessionStatus.SETUP_FAILED
  );
}

/** A session's link: `wg_<port>`, or the hand-made one an adopted session keeps. */
export function sessionLinkName(session: AgentSession): string {
  return session.adopted?.interface ?? session.interface;
}

/** The tunnel's one peer: BGP decides what goes through the tunnel, so WireGuard lets everything pass. */
function tunnelPeer(session: AgentSession, config: AgentConfig): WgInterfaceSpec['peer'] {
  return {
    publicKey: session.publicKey,
    ...(session.endpoint ? { endpoint: session.endpoint } : {}),
    allowedIps: ['0.0.0.0/0', '::/0'],
    persistentKeepalive: config.tunnel.persistentKeepaliveInterval,
  };
}

/**
 * The link's spec; an adopted session's (`kept`, its takeover record) keeps the hand-made link's name,
 * addresses, routes and key (docs/agent.md, Adopting a running router).
 */
export function sessionInterfaceSpec(
  session: AgentSession,
  config: AgentConfig,
  kept?: AdoptedLink,
): WgInterfaceSpec {
  const t = config.tunnel;
  if (kept)
    return {
      name: kept.interface,
      listenPort: session.listenPort,
      privateKeyPath: kept.keyFile ?? t.privateKeyPath,
      mtu: session.mtu,
      addresses: kept.addresses,
      peerRoutes: kept.routes,
      peer: tunnelPeer(session, config),
      generation: session.restartGeneration,
      adopted: true,
    };
  const addresses = [`${t.dn42Ipv6LinkLocal}/64`];
  // Point-to-point towards the peer's tunnel IPv4, as DN42 peers set it up: BIRD sees the peer as
  // directly connected, which a separate IPv4 BGP session (a peer without MP-BGP) needs.
  if (t.dn42Ipv4) addresses.push(session.ipv4 ? `${t.dn42Ipv4} peer ${session.ipv4}/32` : `${t.dn42Ipv4}/32`);
  if (t.dn42Ipv6) addresses.push(`${t.dn42Ipv6}/128`);
  // the peer's DN42 IPv6 routed into its tunnel; an adopted session may name none (docs/agent.md)
  const peerRoutes = t.dn42Ipv6 && session.ipv6 !== null ? [session.ipv6] : [];
  return {
    name: session.interface,
    listenPort: session.listenPort,
    privateKeyPath: t.privateKeyPath,
    mtu: session.mtu,
    addresses,
    peerRoutes,
    peer: tunnelPeer(session, config),
    generation: session.restartGeneration,
  };
}
