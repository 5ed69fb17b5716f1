/**
 * Configuration for the peer's side of a session (docs/user-guide.md, "Configure your side"): wg-quick,
 * systemd-networkd, BIRD 2 and FRR text, from the session record, the router and the network's ASN.
 * Pure: no store, no I/O, so the controller's `config` action and any client render the same text. Every
 * value written comes from a validated field (addresses, keys, numbers, names of the RouterName
 * pattern); the display name, free text, goes only into comments, with line breaks removed.
 *
 * The peer's WireGuard private key is never known to the controller: the files carry PRIVATE_KEY_PLACEHOLDER
 * (wg-quick) or a key file path (networkd) in its place.
 */
import { BGP_TIMERS, birdConnectTimers } from '../bgp-timers.ts';
import { formatEndpoint, parseEndpoint } from '../net.ts';
import type { PeerConfigFormat } from './formats.ts';

/** What stands for the peer's private key in the wg-quick file, to be replaced before use. */
export const PRIVATE_KEY_PLACEHOLDER = '<YOUR_WIREGUARD_PRIVATE_KEY>';

/** Keepalive from the peer's side: it lets the router learn (and keep) a peer endpoint behind NAT. */
const PERSISTENT_KEEPALIVE = 25;

/**
 * The BGP timers of the peer's BIRD sessions (docs/routing-policy.md, "BGP timers"): the router's
 * connection timers, and a keepalive short enough that a router which re-created its tunnel (a session
 * restart) gets the peer's next keepalive, answers it with a reset and is connected to again within
 * seconds; the hold time lets that many keepalives be lost before the session drops.
 */
export const PEER_BIRD_TIMERS = [
  ...birdConnectTimers(),
  `hold time ${BGP_TIMERS.hold};`,
  `keepalive time ${BGP_TIMERS.keepalive};`,
] as const;

export interface PeerConfigSession {
  uuid: string;
  /** The peer's ASN. */
  asn: number;
  /** The peer's DN42 IPv6; an adopted session may have none (docs/api.md, Adoptions). */
  ipv6?: string | undefined;
  /** The peer's link-local address on the tunnel. */
  linkLocal: string;
  /** The peer's WireGuard public key, as registered: the files need its private key, not a new one. */
  publicKey: string;
  ipv4?: string | undefined;
  /** Where the router reaches the peer (`host:port`); the port is the peer's WireGuard listen port. */
  endpoint?: string | undefined;
  mtu: number;
  mpbgp: boolean;
  extendedNextHop: boolean;
  /** The router's WireGuard port for this session. */
  listenPort: number;
}

export interface PeerConfigRouter {
  name: string;
  displayName: string;
  endpointHost: string;
  publicKey: string;
  linkLocal: string;
  /** The router's tunnel IPv4 (its IPv4 loopback), the far end of the peer's tunnel IPv4. */
  ipv4?: string | undefined;
}

export interface PeerConfigInput {
  session: PeerConfigSession;
  router: PeerConfigRouter;
  /** The network's own ASN (the policy's dn42Asn): the remote AS of the peer's BGP session. */
  networkAsn: number;
}

export interface PeerConfigFile {
  name: string;
  content: string;
}

/**
 * The peer's tunnel interface: `peerops-<router>` where that fits the kernel's 15 characters, else
 * `dn42-` and the first 8 hex digits of the session uuid (unique per session, stable for its life).
 */
export function peerInterfaceName(router: string, uuid: string): string {
  const name = `peerops-${router}`;
  return name.length <= 15 ? name : `dn42-${uuid.replace(/-/g, '').slice(0, 8)}`;
}

/** A BIRD protocol name (letters, digits, underscores). */
function birdName(router: string, suffix = ''): string {
  return `peerops_${router.replace(/-/g, '_')}${suffix}`;
}

/** Free text for a comment line: no line breaks or control characters. */
function commentText(value: string): string {
  return value.replace(/[\p{Cc}\p{Zl}\p{Zp}]/gu, ' ');
}

function header(input: PeerConfigInput, comment: string): string[] {
  const { session, router, networkAsn } = input;
  return [
    `${comment} peerops: your side of session ${session.uuid}`,
    `${comment} with router ${router.name} (${commentText(router.displayName)}) of AS${networkAsn}, for AS${session.asn}.`,
  ];
}

/** Does the session carry IPv4 over a BGP session of its own (the peer does not do MP-BGP)? */
function separateIpv4(input: PeerConfigInput): boolean {
  return input.session.ipv4 !== undefined && !input.session.mpbgp && input.router.ipv4 !== undefined;
}

function routerEndpoint(input: PeerConfigInput): string {
  return formatEndpoint({ host: input.router.endpointHost, port: input.session.listenPort });
}

/** The peer's WireGuard listen port: the port of the endpoint it gave, if any. */
function peerListenPort(session: PeerConfigSession): number | undefined {
  return session.endpoint ? parseEndpoint(session.endpoint)?.port : undefined;
}

function wgQuick(input: PeerConfigInput, iface: string): PeerConfigFile {
  const { session, router } = input;
  const port = peerListenPort(session);
  const lines = [
    ...header(input, '#'),
    `# Save as /etc/wireguard/${iface}.conf (mode 600), put your private key in, then: wg-quick up ${iface}`,
    '[Interface]',
    '# Your WireGuard private key (the controller never sees it): replace the placeholder.',
    `PrivateKey = ${PRIVATE_KEY_PLACEHOLDER}`,
    ...(port !== undefined ? [`ListenPort = ${port}`] : []),
    `MTU = ${session.mtu}`,
    '# BGP decides the routes: wg-quick adds none.',
    'Table = off',
    `Address = ${session.linkLocal}/64`,
    ...(session.ipv6 !== undefined ? [`Address = ${session.ipv6}/128`] : []),
  ];
  if (session.ipv4 !== undefined) {
    if (router.ipv4 !== undefined)
      lines.push(
        '# Your tunnel IPv4, point-to-point towards the router (wg-quick cannot write a peer address).',
        `PostUp = ip -4 address add ${session.ipv4}/32 peer ${router.ipv4}/32 dev %i`,
      );
    else lines.push(`Address = ${session.ipv4}/32`);
  }
  lines.push(
    '',
    '[Peer]',
    `PublicKey = ${router.publicKey}`,
    `Endpoint = ${routerEndpoint(input)}`,
    'AllowedIPs = 0.0.0.0/0, ::/0',
    `PersistentKeepalive = ${PERSISTENT_KEEPALIVE}`,
  );
  return { name: `${iface}.conf`, content: `${lines.join('\n')}\n` };
}

function networkd(input: PeerConfigInput, iface: string): PeerConfigFile[] {
  const { session, router } = input;
  const port = peerListenPort(session);
  const keyFile = `/etc/systemd/network/${iface}.key`;
  const netdev = [
    ...header(input, '#'),
    `# Save as /etc/systemd/network/${iface}.netdev, with ${iface}.network beside it.`,
    '[NetDev]',
    `Name=${iface}`,
    'Kind=wireguard',
    `MTUBytes=${session.mtu}`,
    '',
    '[WireGuard]',
    // The key the session registered: a new one (`wg genkey`) would not match it, and the router's
    // tunnel would never take a handshake.
    '# Your WireGuard private key (the controller never sees it) goes into this file: the one you have,',
    `# whose public key the session registered (${session.publicKey}), not a new one. From its file:`,
    `#   install -m 640 -g systemd-network /etc/wireguard/private.key ${keyFile}`,
    `#   wg pubkey < ${keyFile}   # must print ${session.publicKey}`,
    `PrivateKeyFile=${keyFile}`,
    ...(port !== undefined ? [`ListenPort=${port}`] : []),
    '',
    '[WireGuardPeer]',
    `PublicKey=${router.publicKey}`,
    `Endpoint=${routerEndpoint(input)}`,
    '# BGP decides the routes: networkd adds none for these (no RouteTable=).',
    'AllowedIPs=0.0.0.0/0,::/0',
    `PersistentKeepalive=${PERSISTENT_KEEPALIVE}`,
  ];
  const network = [
    ...header(input, '#'),
    `# Save as /etc/systemd/network/${iface}.network, then: networkctl reload`,
    '[Match]',
    `Name=${iface}`,
    '',
    '[Network]',
    'DHCP=no',
    'IPv6AcceptRA=no',
    "# The link-local address is the session's own (below), not one networkd makes up.",
    'LinkLocalAddressing=no',
    '',
    '[Address]',
    `Address=${session.linkLocal}/64`,
    ...(session.ipv6 !== undefined ? ['', '[Address]', `Address=${session.ipv6}/128`] : []),
  ];
  if (session.ipv4 !== undefined)
    network.push(
      '',
      '[Address]',
      `Address=${session.ipv4}/32`,
      ...(router.ipv4 !== undefined ? [`Peer=${router.ipv4}/32`] : []),
    );
  return [
    { name: `${iface}.netdev`, content: `${netdev.join('\n')}\n` },
    { name: `${iface}.network`, content: `${network.join('\n')}\n` },
  ];
}

/** BIRD's channel block for a family. */
function birdChannel(family: 'ipv4' | 'ipv6', extendedNextHop: boolean): string[] {
  return [
    `  ${family} {`,
    '    import all;',
    '    export where source ~ [RTS_STATIC, RTS_BGP];',
    ...(extendedNextHop ? ['    extended next hop on;'] : []),
    '  };',
  ];
}

function bird(input: PeerConfigInput, iface: string): PeerConfigFile {
  const { session, router, networkAsn } = input;
  const ipv4OverMpbgp = session.ipv4 !== undefined && session.mpbgp;
  const lines = [
    ...header(input, '#'),
    '# BIRD 2: include it from bird.conf (include "/etc/bird/peers/*.conf";) and run birdc configure.',
    '# The filters are a start: replace `import all` and the export rule with your own (RPKI, ROA, prefix limits).',
    `protocol bgp ${birdName(router.name)} {`,
    `  local as ${session.asn};`,
    `  neighbor ${router.linkLocal} % '${iface}' as ${networkAsn};`,
    // The router accepts the session only from this address; a userspace tunnel also has one of its own.
    `  source address ${session.linkLocal};`,
    ...PEER_BIRD_TIMERS.map((t) => `  ${t}`),
    ...birdChannel('ipv6', false),
    ...(ipv4OverMpbgp ? birdChannel('ipv4', session.extendedNextHop) : []),
    '}',
  ];
  if (separateIpv4(input))
    lines.push(
      '',
      "# IPv4 in a session of its own (no multiprotocol BGP), over the tunnel's IPv4 addresses.",
      `protocol bgp ${birdName(router.name, '_v4')} {`,
      `  local as ${session.asn};`,
      `  neighbor ${router.ipv4} as ${networkAsn};`,
      '  direct;',
      ...PEER_BIRD_TIMERS.map((t) => `  ${t}`),
      ...birdChannel('ipv4', false),
      '}',
    );
  return { name: `${iface}.bird.conf`, content: `${lines.join('\n')}\n` };
}

/**
 * FRR's timers of a neighbour: keepalive and hold, connect retry (docs/routing-policy.md, "BGP timers");
 * its delay before a first connection and its wait after an error stay FRR's own.
 */
function frrTimers(neighbor: string): string[] {
  return [
    `neighbor ${neighbor} timers ${BGP_TIMERS.keepalive} ${BGP_TIMERS.hold}`,
    `neighbor ${neighbor} timers connect ${BGP_TIMERS.connectRetry}`,
  ];
}

function frr(input: PeerConfigInput, iface: string): PeerConfigFile {
  const { session, router, networkAsn } = input;
  const neighbor = router.linkLocal;
  const ipv4OverMpbgp = session.ipv4 !== undefined && session.mpbgp;
  const v4Neighbor = separateIpv4(input) ? router.ipv4 : undefined;
  const lines = [
    ...header(input, '!'),
    '! FRR: paste into vtysh (configure terminal) or frr.conf. The route maps pass everything: make them yours.',
    `router bgp ${session.asn}`,
    ' no bgp default ipv4-unicast',
    `neighbor ${neighbor} remote-as ${networkAsn}`,
    `neighbor ${neighbor} interface ${iface}`,
    ...frrTimers(neighbor),
    ...(ipv4OverMpbgp && session.extendedNextHop ? [`neighbor ${neighbor} capability extended-nexthop`] : []),
    ...(v4Neighbor !== undefined
      ? [`neighbor ${v4Neighbor} remote-as ${networkAsn}`, ...frrTimers(v4Neighbor)]
      : []),
    ' address-family ipv6 unicast',
    `  neighbor ${neighbor} activate`,
    `  neighbor ${neighbor} route-map PEEROPS-IN in`,
    `  neighbor ${neighbor} route-map PEEROPS-OUT out`,
    ' exit-address-family',
  ].map((line) => (line.startsWith('neighbor') ? ` ${line}` : line));
  const v4 = ipv4OverMpbgp ? neighbor : v4Neighbor;
  if (v4 !== undefined)
    lines.push(
      ' address-family ipv4 unicast',
      `  neighbor ${v4} activate`,
      `  neighbor ${v4} route-map PEEROPS-IN in`,
      `  neighbor ${v4} route-map PEEROPS-OUT out`,
      ' exit-address-family',
    );
  lines.push(
    'exit',
    '!',
    'route-map PEEROPS-IN permit 10',
    'exit',
    '!',
    'route-map PEEROPS-OUT permit 10',
    'exit',
  );
  return { name: `${iface}.frr.conf`, content: `${lines.join('\n')}\n` };
}

/** The files of one format. wg-quick, BIRD and FRR give one, networkd two (.netdev, .network). */
export function peerConfig(format: PeerConfigFormat, input: PeerConfigInput): PeerConfigFile[] {
  const iface = peerInterfaceName(input.router.name, input.session.uuid);
  switch (format) {
    case 'wg-quick':
      return [wgQuick(input, iface)];
    case 'networkd':
      return networkd(input, iface);
    case 'bird':
      return [bird(input, iface)];
    case 'frr':
      return [frr(input, iface)];
  }
}
