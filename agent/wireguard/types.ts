/**
 * Desired state of one point-to-point WireGuard interface: a peering session tunnel (`wg_<port>`) or a
 * mesh tunnel (`wgm_<nodeId>`). The wireguard module makes the system match it; session and mesh code
 * only compute these.
 */
export interface WgInterfaceSpec {
  name: string;
  listenPort: number;
  privateKeyPath: string;
  mtu: number;
  /** Addresses with prefix length, e.g. `fe80::1/64`, `172.20.0.1/32`. */
  addresses: string[];
  /** Addresses of the far side reached through this link without a prefix (peer routes), e.g. an IPv4 /32. */
  peerRoutes: string[];
  peer: {
    publicKey: string;
    /** `host:port`; undefined for a peer behind NAT that connects to us. */
    endpoint?: string;
    allowedIps: string[];
    persistentKeepalive: number;
  };
  /** Changing it re-creates the interface (a session `restart`). */
  generation: number;
}
