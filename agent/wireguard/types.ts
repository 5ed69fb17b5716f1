/**
 * Desired state of one point-to-point WireGuard interface: a peering session tunnel (`wg_<port>`) or a
 * mesh tunnel (`wgm_<nodeId>`). The wireguard module makes the system match it; session and mesh code
 * only compute these.
 */
import type { WgInterfaceState } from './read.ts';

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
  /**
   * A hand-made link taken over (docs/agent.md, Adopting a running router): without the agent's
   * generation stamp it is stamped in place, not re-created, and its IPv6 address generation is left as
   * it was made (one the agent makes anew gets none, as its own links).
   */
  adopted?: boolean;
  /** The MULTICAST flag on: Babel speaks to ff02::1:6 on mesh tunnels, and kernel WireGuard links come without it. */
  multicast?: boolean;
}

/**
 * What the reconcile steps need from WireGuard, injected as BIRD's control is: the real one is
 * `systemWireGuard` (interface.ts); the decision tests give a table instead of a kernel.
 */
export interface WireGuard {
  /** The actual state of every link whose name starts with one of the prefixes. */
  readAll(prefixes: string[]): Promise<Map<string, WgInterfaceState>>;
  /** Makes the link match the spec; `known` is its state already read this pass (null: no link). */
  ensure(spec: WgInterfaceSpec, known?: WgInterfaceState | null): Promise<EnsureResult>;
  /** Deletes the link and what the agent made for it; false when there was none. */
  remove(name: string): Promise<boolean>;
}

export interface EnsureResult {
  created: boolean;
  /** What was changed, in words (empty when the interface already matched). */
  changes: string[];
}
