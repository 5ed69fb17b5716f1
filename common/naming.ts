/** Names derived from fields: one place, so controller, store and agent agree. */
import type { RouterSpec } from './schema.ts';

/** Deterministic session name: a second session for one (ASN, router) is a name clash in any store. */
export function sessionName(asn: number, router: string): string {
  return `as${asn}-${router}`;
}

/** Tunnel interface of a session: `wg_<port>`, at most 15 characters (IFNAMSIZ). */
export function interfaceName(listenPort: number): string {
  return `wg_${listenPort}`;
}

export const DEFAULT_PORT_RANGE = { min: 30000, max: 32767 } as const;
const DN42_ASN_MIN = 4242420000;
const DN42_ASN_MAX = 4242429999;

export function isDn42Asn(asn: number): boolean {
  return asn >= DN42_ASN_MIN && asn <= DN42_ASN_MAX;
}

/**
 * Listen port for a new session on a router (docs/store.md, Repository layout): DN42 ASNs get 20000 + asn % 10000, every
 * other ASN the lowest free port of the router's range. Undefined when nothing is free.
 */
export function allocateListenPort(
  asn: number,
  router: Pick<RouterSpec, 'portRange'>,
  used: ReadonlySet<number>,
): number | undefined {
  if (isDn42Asn(asn)) {
    const port = 20000 + (asn % 10000);
    return used.has(port) ? undefined : port;
  }
  const range = router.portRange ?? DEFAULT_PORT_RANGE;
  for (let port = range.min; port <= range.max; port++) if (!used.has(port)) return port;
  return undefined;
}

/** Mesh tunnel between two routers: each side listens on meshPortBase + the other side's node id. */
export const MESH_PORT_BASE = 33000;
export function meshListenPort(peerNodeId: number): number {
  return MESH_PORT_BASE + peerNodeId;
}
export function meshInterfaceName(peerNodeId: number): string {
  return `wgm_${peerNodeId}`;
}
