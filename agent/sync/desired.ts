/** What the system should hold for a session: the WireGuard interface spec and the rule for statuses. */
import type { AgentSession } from '../../common/agent-api.ts';
import { SessionStatus } from '../../common/status.ts';
import type { AgentConfig } from '../config.ts';
import type { WgInterfaceSpec } from '../wireguard/types.ts';

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

export function sessionInterfaceSpec(session: AgentSession, config: AgentConfig): WgInterfaceSpec {
  const t = config.tunnel;
  const addresses = [`${t.dn42Ipv6LinkLocal}/64`];
  if (t.dn42Ipv4) addresses.push(`${t.dn42Ipv4}/32`);
  if (t.dn42Ipv6) addresses.push(`${t.dn42Ipv6}/128`);
  const peerRoutes: string[] = [];
  if (session.ipv4 && t.dn42Ipv4) peerRoutes.push(session.ipv4);
  if (t.dn42Ipv6) peerRoutes.push(session.ipv6);
  return {
    name: session.interface,
    listenPort: session.listenPort,
    privateKeyPath: t.privateKeyPath,
    mtu: session.mtu,
    addresses,
    peerRoutes,
    peer: {
      publicKey: session.publicKey,
      ...(session.endpoint ? { endpoint: session.endpoint } : {}),
      // BGP decides what goes through the tunnel; WireGuard lets everything pass.
      allowedIps: ['0.0.0.0/0', '::/0'],
      persistentKeepalive: t.persistentKeepaliveInterval,
    },
    generation: session.restartGeneration,
  };
}
