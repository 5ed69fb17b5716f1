/**
 * The live tunnels `peerops adopt` reads beside the files (docs/agent.md, Adopting a running router):
 * `ip -j -d link` and `wg show all dump` fill what a file leaves out (a key set by a script, a port
 * WireGuard chose) and add tunnels no file defines.
 */
import { readAllInterfaces } from '../wireguard/read.ts';
import type { HandTunnel } from './read-files.ts';

/** Tunnels up now: WireGuard (kernel or wireguard-go, whose links are `tun`), GRE, and other `tun` (OpenVPN). */
export async function readLiveTunnels(): Promise<HandTunnel[]> {
  const links = await readAllInterfaces(['']);
  const tunnels: HandTunnel[] = [];
  for (const link of links.values()) {
    const tunnelKind = link.wg ? 'wireguard' : /gre|^tun$/.test(link.kind) ? link.kind : undefined;
    if (!tunnelKind) continue;
    const peer = link.wg?.peers.length === 1 ? link.wg.peers[0] : undefined;
    tunnels.push({
      interface: link.name,
      kind: tunnelKind === 'tun' ? 'tun (OpenVPN or other)' : tunnelKind,
      file: `live link ${link.name}`,
      listenPort: link.wg?.listenPort || undefined,
      publicKey: peer?.publicKey,
      endpoint: peer?.endpoint,
      mtu: link.mtu,
      addresses: link.addresses.map((a) => a.split(/[ /]/)[0]!),
    });
  }
  return tunnels;
}

/** File tunnels with what they leave out taken from the live ones, then the live tunnels no file defines. */
export function mergeLive(files: HandTunnel[], live: HandTunnel[]): HandTunnel[] {
  const merged = files.map((f) => {
    const l = live.find((t) => t.interface === f.interface);
    if (!l) return f;
    return {
      ...f,
      listenPort: f.listenPort ?? l.listenPort,
      publicKey: f.publicKey ?? l.publicKey,
      // not the live endpoint: for a peer the file gives none (behind NAT) it is where the peer last
      // came from, which its NAT changes; the session is adopted without one (docs/agent.md)
      endpoint: f.endpoint,
      mtu: f.mtu ?? l.mtu,
      addresses: [...new Set([...f.addresses, ...l.addresses])],
    };
  });
  return [...merged, ...live.filter((l) => !files.some((f) => f.interface === l.interface))];
}
