/**
 * GET /agent/:router/mesh → the WireGuard interfaces of the mesh: one point-to-point tunnel to every
 * listed router, `wgm_<peer node id>`, keyed with this node's mesh key. Pure: the mesh step
 * (reconcile/mesh-step.ts) hands the specs to the WireGuard port. Each tunnel carries any
 * destination (allowed IPs 0/0 and ::/0); which destination goes through which tunnel is Babel's
 * decision, through the kernel routes BIRD installs. Babel speaks from a link-local address derived from the node id (meshLinkLocal): unique
 * in the network by construction, where the routers' session link-local (`linkLocal`) is often one
 * value shared by all routers of a network. The IPv4 loopback on each tunnel gives
 * Babel an IPv4 next hop (BIRD 2.0 has no IPv4-via-IPv6), and the peer's IPv4 loopback is routed onto
 * the link so that next hop is reachable.
 */
import type { MeshPeer, MeshResponse } from '../../common/agent-api.ts';
import { meshInterfaceName } from '../../common/naming.ts';
import type { WgInterfaceSpec } from '../wireguard/types.ts';

export const MESH_INTERFACE_PREFIX = 'wgm_';
export const DEFAULT_MESH_MTU = 1420;

export interface MeshSelf {
  /** This node's mesh private key file (key.ts). */
  privateKeyPath: string;
  /** This router's node id (unique in the network): its mesh link-local address derives from it. */
  nodeId: number;
  loopback: { ipv4?: string; ipv6?: string };
  mtu?: number;
  persistentKeepalive: number;
}

/** The link-local address a router speaks Babel from on every mesh tunnel: `fe80::1:<node id hex>`. */
export function meshLinkLocal(nodeId: number): string {
  return `fe80::1:${nodeId.toString(16)}`;
}

export function meshInterfaceSpecs(mesh: MeshResponse, self: MeshSelf): WgInterfaceSpec[] {
  return [...mesh.peers].sort((a, b) => a.nodeId - b.nodeId).map((peer) => meshInterfaceSpec(peer, self));
}

export function meshInterfaceSpec(peer: MeshPeer, self: MeshSelf): WgInterfaceSpec {
  const addresses = [`${meshLinkLocal(self.nodeId)}/64`];
  if (self.loopback.ipv4) addresses.push(`${self.loopback.ipv4}/32`);
  return {
    name: meshInterfaceName(peer.nodeId),
    listenPort: peer.listenPort,
    privateKeyPath: self.privateKeyPath,
    mtu: self.mtu ?? DEFAULT_MESH_MTU,
    addresses,
    peerRoutes: self.loopback.ipv4 && peer.loopback.ipv4 ? [peer.loopback.ipv4] : [],
    peer: {
      publicKey: peer.publicKey,
      endpoint: peer.endpoint,
      allowedIps: ['0.0.0.0/0', '::/0'],
      persistentKeepalive: self.persistentKeepalive,
    },
    generation: 0,
    multicast: true,
  };
}
