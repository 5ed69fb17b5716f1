/**
 * The formats `config` writes a peer's side in (docs/user-guide.md, "Configure your side"): a module of
 * its own so the portal takes the list without the writers.
 */
export const PEER_CONFIG_FORMATS = ['wg-quick', 'networkd', 'bird', 'frr'] as const;
export type PeerConfigFormat = (typeof PEER_CONFIG_FORMATS)[number];
