/**
 * Mesh peer status for POST /agent/:router/mesh/status (MeshStatusBody): per peer the last WireGuard
 * handshake, bytes, a round-trip time measured by ping to the peer's link-local address through the
 * tunnel (meshLinkLocal of its node id), and reachability (the ping was answered). Read from the system every time, never cached.
 */
import type { MeshPeer, MeshResponse, MeshStatusBody } from '../../common/agent-api.ts';
import { meshInterfaceName } from '../../common/naming.ts';
import { run } from '../system/exec.ts';
import type { WgInterfaceState } from '../wireguard/read.ts';
import { meshLinkLocal } from './spec.ts';

export interface MeshStatusOptions {
  /** Seconds to wait for the ping reply (metric.pingTimeout). */
  pingTimeout?: number;
  /** The tunnel's state, read through the pass's WireGuard port (reconcile/mesh-step.ts). */
  readInterface: (name: string) => Promise<WgInterfaceState | undefined>;
  /** Round-trip time in ms to `address` through `iface`, or null when there is no answer. */
  ping?: (address: string, iface: string, timeoutSeconds: number) => Promise<number | null>;
}

export async function collectMeshStatus(
  mesh: MeshResponse,
  opts: MeshStatusOptions,
): Promise<MeshStatusBody> {
  const ping = opts.ping ?? pingOnce;
  const timeout = opts.pingTimeout ?? 5;
  const peers = await Promise.all(
    mesh.peers.map((peer) => peerStatus(peer, opts.readInterface, ping, timeout)),
  );
  return { peers };
}

async function peerStatus(
  peer: MeshPeer,
  read: MeshStatusOptions['readInterface'],
  ping: NonNullable<MeshStatusOptions['ping']>,
  timeout: number,
): Promise<MeshStatusBody['peers'][number]> {
  const iface = meshInterfaceName(peer.nodeId);
  const state = await read(iface);
  const wgPeer = state?.wg?.peers.find((p) => p.publicKey === peer.publicKey);
  if (!state || !wgPeer) return { router: peer.router, lastHandshake: null, rtt: null, reachable: false };
  const rtt = await ping(meshLinkLocal(peer.nodeId), iface, timeout);
  return {
    router: peer.router,
    lastHandshake: wgPeer.latestHandshake > 0 ? new Date(wgPeer.latestHandshake * 1000).toISOString() : null,
    rtt,
    rxBytes: wgPeer.rxBytes,
    txBytes: wgPeer.txBytes,
    reachable: rtt !== null,
  };
}

/** One ICMPv6 echo to a link-local address scoped to the tunnel. */
export async function pingOnce(
  address: string,
  iface: string,
  timeoutSeconds: number,
): Promise<number | null> {
  const r = await run('ping', ['-6', '-n', '-c', '1', '-W', String(timeoutSeconds), `${address}%${iface}`], {
    timeoutMs: (timeoutSeconds + 2) * 1000,
  }).catch(() => undefined); // no ping on this router (the preflight warned at start)
  if (r?.code !== 0) return null;
  const m = /time[=<]([0-9.]+) ?ms/.exec(r.stdout);
  return m ? Number(m[1]) : null;
}
