/** Address and key rules shared by schema formats, canonicalisation and policy checks. */
import ipaddr from 'ipaddr.js';
import { type FieldSaid, saidText } from './messages.ts';

const HOSTNAME =
  /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*\.?$/i;

// ipaddr.js throws and catches internally on non-addresses (about 25 µs each); a cheap shape check first
// keeps host-name validation fast on a cold start with thousands of manifests.
export function isIpv6(value: string): boolean {
  if (!value.includes(':') || value.includes('%') || !ipaddr.IPv6.isValid(value)) return false;
  // ipaddr.js reads a dotted tail leniently (`::ffff:010.0.0.1`); it must be a plain IPv4 address too
  return !value.includes('.') || isIpv4(value.slice(value.lastIndexOf(':') + 1));
}

export function isIpv4(value: string): boolean {
  return /^[0-9]{1,3}(\.[0-9]{1,3}){3}$/.test(value) && ipaddr.IPv4.isValidFourPartDecimal(value);
}

/** fe80::/10, the IPv6 link-local unicast range. */
export function isLinkLocal(value: string): boolean {
  return isIpv6(value) && ipaddr.IPv6.parse(value).range() === 'linkLocal';
}

/** Lower-case, zero-compressed RFC 5952 form: the one spelling stored and compared. */
export function canonicalIpv6(value: string): string {
  return ipaddr.IPv6.parse(value).toRFC5952String();
}

/**
 * Base64 of exactly 32 bytes (WireGuard keys, Ed25519 public keys): 43 characters and one `=`, the last
 * character carrying the 4 bits left of 256 and two zero bits, so the pattern alone proves the length.
 */
export const KEY32_BASE64_PATTERN = '^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$';

/** Per character code below 128: bit 1 set for the base64 alphabet, bit 2 for those that may be a key's last. */
const KEY32_CHARS = new Uint8Array(128);
for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/')
  KEY32_CHARS[c.charCodeAt(0)] = 1;
for (const c of 'AEIMQUYcgkosw048') KEY32_CHARS[c.charCodeAt(0)] = 3;

/**
 * KEY32_BASE64_PATTERN as a table lookup per character: every heartbeat and session checks a key, and the
 * regular expression cost about twice as much there. test/common/net.test.ts holds the two to the same answers.
 */
export function isWireGuardKey(value: string): boolean {
  if (value.length !== 44 || value[43] !== '=') return false;
  for (let i = 0; i < 42; i++) if ((KEY32_CHARS[value.charCodeAt(i)] ?? 0) === 0) return false;
  return ((KEY32_CHARS[value.charCodeAt(42)] ?? 0) & 2) !== 0;
}

export function isHostname(value: string): boolean {
  return HOSTNAME.test(value);
}

/** A tunnel host: a DNS name, an IPv4 literal or an IPv6 literal (without brackets). */
export function isHost(value: string): boolean {
  return isIpv4(value) || isIpv6(value) || (isHostname(value) && !/^[0-9.]+$/.test(value));
}

export interface HostPort {
  host: string;
  port: number;
}

/** `host:port`, `[v6]:port`. Returns undefined for anything else (a bare v6 without brackets is ambiguous). */
export function parseEndpoint(value: string): HostPort | undefined {
  const match = /^(?:\[([^\]]+)\]|([^:[\]]+)):([0-9]{1,5})$/.exec(value);
  if (!match) return undefined;
  const port = Number(match[3]);
  if (port < 1 || port > 65535) return undefined;
  if (match[1] !== undefined) return isIpv6(match[1]) ? { host: match[1], port } : undefined;
  const host = match[2] ?? '';
  return isIpv4(host) || (isHostname(host) && !/^[0-9.]+$/.test(host)) ? { host, port } : undefined;
}

export function formatEndpoint({ host, port }: HostPort): string {
  return isIpv6(host) ? `[${canonicalIpv6(host)}]:${port}` : `${host.toLowerCase()}:${port}`;
}

export function canonicalEndpoint(value: string): string {
  const parsed = parseEndpoint(value);
  if (!parsed) throw new Error(`not an endpoint: ${value}`);
  return formatEndpoint(parsed);
}

export type Family = 'ipv4' | 'ipv6';

/** A prefix read by parsePrefix: its family, its address as written (host bits and all) and its length. */
export interface ParsedPrefix {
  family: Family;
  address: ipaddr.IPv4 | ipaddr.IPv6;
  length: number;
}

/**
 * The one reading of a prefix, for policies, manifests and the address checks alike: `<address>/<length>`
 * with the address in a spelling isIpv4 / isIpv6 accept (IPv4: four decimal numbers without leading
 * zeros, never ipaddr.js's octal or hex forms, which made `010.0.0.0/8` mean 8.0.0.0/8) and the length
 * in decimal without leading zeros, at most 32 / 128. Host bits are not judged here (isPrefix does).
 */
export function parsePrefix(value: string, family?: Family): ParsedPrefix | undefined {
  const key = `${family ?? ''} ${value}`;
  if (parsedPrefixes.has(key)) return parsedPrefixes.get(key);
  return remember(parsedPrefixes, key, parsePrefixText(value, family));
}

/**
 * Results of pure functions that the store runs per session (at a start, for every stored session) on
 * the same few values, by their text: policy ranges and special-purpose ranges, WireGuard keys. Bounded:
 * emptied when full, so hostile input cannot grow them for ever.
 */
const MEMO_LIMIT = 100_000;
const parsedPrefixes = new Map<string, ParsedPrefix | undefined>();
const keyIds = new Map<string, string>();

function remember<V>(memo: Map<string, V>, key: string, value: V): V {
  if (memo.size >= MEMO_LIMIT) memo.clear();
  memo.set(key, value);
  return value;
}

function parsePrefixText(value: string, family?: Family): ParsedPrefix | undefined {
  const slash = value.indexOf('/');
  if (slash < 0) return undefined;
  const text = value.slice(0, slash);
  const len = value.slice(slash + 1);
  if (!/^(0|[1-9][0-9]{0,2})$/.test(len)) return undefined;
  const kind: Family | undefined = isIpv4(text) ? 'ipv4' : isIpv6(text) ? 'ipv6' : undefined;
  const length = Number(len);
  if (kind === undefined || (family !== undefined && kind !== family)) return undefined;
  if (length > (kind === 'ipv4' ? 32 : 128)) return undefined;
  return {
    family: kind,
    address: kind === 'ipv4' ? ipaddr.IPv4.parse(text) : ipaddr.IPv6.parse(text),
    length,
  };
}

function networkOf({ family, address, length }: ParsedPrefix): string {
  const text = address.toString();
  const base =
    family === 'ipv6'
      ? ipaddr.IPv6.networkAddressFromCIDR(`${text}/${length}`).toRFC5952String()
      : ipaddr.IPv4.networkAddressFromCIDR(`${text}/${length}`).toString();
  return `${base}/${length}`;
}

function written({ family, address, length }: ParsedPrefix): string {
  return `${family === 'ipv6' ? (address as ipaddr.IPv6).toRFC5952String() : address.toString()}/${length}`;
}

/**
 * Why `value` is not a prefix of `family` as policies and manifests take them, or undefined when it is.
 * Bits set after the length are refused rather than cleared: `10.1.0.0/8` is as likely a mistyped
 * `10.1.0.0/16` as a `10.0.0.0/8`, and guessing would announce or accept the wrong network.
 */
export function prefixProblem(value: string, family: Family): FieldSaid | undefined {
  const parsed = parsePrefix(value, family);
  if (!parsed) return { key: `field.prefixForm.${family}`, params: {} };
  const network = networkOf(parsed);
  if (network !== written(parsed))
    return { key: 'field.prefixBits', params: { length: parsed.length, network } };
  return undefined;
}

/** A prefix of the family in the one reading of parsePrefix, with no bits set after its length. */
export function isPrefix(value: string, family: Family): boolean {
  return prefixProblem(value, family) === undefined;
}

/**
 * The stored and compared spelling of a prefix: its network address (RFC 5952 for IPv6) and length,
 * `fd00:0::/8` → `fd00::/8`. Host bits are cleared here (the agent reads prefixes back from the system);
 * throws on anything parsePrefix does not read.
 */
export function canonicalPrefix(value: string): string {
  const parsed = parsePrefix(value);
  if (!parsed) throw new Error(`not a prefix: ${value}`);
  return networkOf(parsed);
}

/** A parsed IPv4 or IPv6 address (parseAddress). */
export type Address = ipaddr.IPv4 | ipaddr.IPv6;

/**
 * An IPv4 or IPv6 literal parsed once, for rules that ask several questions of one address. ipaddr.parse
 * would parse an IPv6 address twice (its isValid parses, then parse again); the colon tells the family.
 * Throws on anything that is not an address, as ipaddr.parse does.
 */
export function parseAddress(address: string): Address {
  return address.includes(':') ? ipaddr.IPv6.parse(address) : ipaddr.IPv4.parse(address);
}

/** Is the address inside one of the prefixes? An empty list allows everything; a prefix that does not parse matches nothing. */
export function inRanges(address: string | Address, prefixes: readonly string[] | undefined): boolean {
  if (!prefixes || prefixes.length === 0) return true;
  const addr = typeof address === 'string' ? parseAddress(address) : address;
  return prefixes.some((p) => {
    const net = parsePrefix(p);
    return net !== undefined && net.family === addr.kind() && addr.match(net.address, net.length);
  });
}

// ---- peer addresses: what a peer can own ----

/**
 * DN42's address space (docs/routing-policy.md, the import filter's ranges): where a session's peer
 * addresses must lie when the policy sets no `peerAddressRanges` of that family (docs/operator-guide.md).
 */
export const DN42_PEER_ADDRESS_RANGES: Readonly<Record<Family, readonly string[]>> = {
  ipv6: ['fd00::/8'],
  ipv4: ['172.20.0.0/14', '172.31.0.0/16', '10.0.0.0/8'],
};

/**
 * Special-purpose ranges (the IANA special-purpose address registries, RFC 6890) whose addresses no peer
 * can own as its tunnel address, refused whatever the policy allows: each peer address becomes a route
 * into that peer's tunnel on the router. The first match names the range, so narrow entries come first.
 */
const SPECIAL_PURPOSE: readonly { prefix: string; what: string }[] = [
  { prefix: '::/128', what: 'the unspecified address' },
  { prefix: '::1/128', what: 'the loopback address' },
  { prefix: '::ffff:0:0/96', what: 'an IPv4-mapped address' },
  { prefix: '::/96', what: 'an IPv4-compatible address (deprecated)' },
  { prefix: '64:ff9b::/96', what: 'a NAT64 address' },
  { prefix: '64:ff9b:1::/48', what: 'a NAT64 address' },
  { prefix: '100::/64', what: 'a discard-only address' },
  { prefix: '2001:2::/48', what: 'a benchmarking address' },
  { prefix: '2001:db8::/32', what: 'a documentation address' },
  { prefix: '3fff::/20', what: 'a documentation address' },
  { prefix: 'fe80::/10', what: 'a link-local address' },
  { prefix: 'fec0::/10', what: 'a site-local address (deprecated)' },
  { prefix: 'ff00::/8', what: 'a multicast address' },
  { prefix: '0.0.0.0/32', what: 'the unspecified address' },
  { prefix: '0.0.0.0/8', what: "an address of 'this network'" },
  { prefix: '127.0.0.0/8', what: 'a loopback address' },
  { prefix: '169.254.0.0/16', what: 'a link-local address' },
  { prefix: '192.0.0.0/24', what: 'an IETF protocol assignment' },
  { prefix: '192.0.2.0/24', what: 'a documentation address' },
  { prefix: '198.18.0.0/15', what: 'a benchmarking address' },
  { prefix: '198.51.100.0/24', what: 'a documentation address' },
  { prefix: '203.0.113.0/24', what: 'a documentation address' },
  { prefix: '224.0.0.0/4', what: 'a multicast address' },
  { prefix: '255.255.255.255/32', what: 'the broadcast address' },
  { prefix: '240.0.0.0/4', what: 'a reserved address' },
];

const SPECIAL_PARSED = SPECIAL_PURPOSE.map((r) => ({ ...r, net: parsePrefix(r.prefix) as ParsedPrefix }));

/**
 * Why no peer can own this address (a valid IPv4 or IPv6 literal), or undefined: the special-purpose
 * range it lies in. An IPv4-mapped IPv6 address (`::ffff:172.20.0.1`) is refused, not read as IPv4, so
 * that no rule sees an IPv4 address under an IPv6 spelling (a router loopback would slip past them).
 */
export function specialPurposeProblem(address: string | Address): FieldSaid | undefined {
  const addr = typeof address === 'string' ? parseAddress(address) : address;
  const hit = SPECIAL_PARSED.find(
    (r) => r.net.family === addr.kind() && addr.match(r.net.address, r.net.length),
  );
  if (!hit) return undefined;
  if (hit.prefix === '::ffff:0:0/96')
    return {
      key: 'field.mappedAddress',
      params: { prefix: hit.prefix, ipv4: (addr as ipaddr.IPv6).toIPv4Address().toString() },
    };
  return { key: 'field.specialAddress', params: { what: hit.what, prefix: hit.prefix } };
}

// ---- WireGuard endpoints: where a router sends a peer's tunnel packets ----

/**
 * Globally reachable assignments inside ranges refused below (the IANA special-purpose registries mark
 * them so: PCP and TURN anycast, AMT, AS112, ORCHIDv2, drone remote ID): a peer may sit behind one.
 */
const ENDPOINT_REACHABLE = [
  '192.0.0.9/32',
  '192.0.0.10/32',
  '2001:1::1/128',
  '2001:1::2/128',
  '2001:1::3/128',
  '2001:3::/32',
  '2001:4:112::/48',
  '2001:20::/28',
  '2001:30::/28',
].map((p) => parsePrefix(p) as ParsedPrefix);

/**
 * Ranges a router cannot reach a peer in over the internet, besides SPECIAL_PURPOSE (docs/api.md, the
 * endpoint field). Narrow entries first: the first match names the range.
 */
const ENDPOINT_UNREACHABLE = parsedRanges([
  { prefix: '100.64.0.0/10', what: 'a shared (carrier-grade NAT) address' },
  { prefix: '192.88.99.0/24', what: 'a 6to4 relay anycast address (deprecated)' },
  { prefix: '2001::/32', what: 'a Teredo address' },
  { prefix: '2001::/23', what: 'an IETF protocol assignment' },
  { prefix: '5f00::/16', what: 'an SRv6 segment identifier' },
]);

/** Private ranges: a router reaches them only inside its own site, so only a policy can allow them. */
const ENDPOINT_PRIVATE = parsedRanges([
  { prefix: '10.0.0.0/8', what: 'a private address' },
  { prefix: '172.16.0.0/12', what: 'a private address' },
  { prefix: '192.168.0.0/16', what: 'a private address' },
  { prefix: 'fc00::/7', what: 'a unique local address' },
]);

/** IPv6 ranges that carry an IPv4 address a router would end up sending to: that address is judged. */
const ENDPOINT_EMBEDDING = [
  { prefix: '::ffff:0:0/96', what: 'an IPv4-mapped address', at: 12 },
  { prefix: '64:ff9b::/96', what: 'a NAT64 address', at: 12 },
  { prefix: '2002::/16', what: 'a 6to4 address', at: 2 },
].map((e) => ({ ...e, net: parsePrefix(e.prefix) as ParsedPrefix }));

function parsedRanges(ranges: readonly { prefix: string; what: string }[]) {
  return ranges.map((r) => ({ ...r, net: parsePrefix(r.prefix) as ParsedPrefix }));
}

const within = (addr: Address, net: ParsedPrefix) =>
  net.family === addr.kind() && addr.match(net.address, net.length);

/**
 * Why a host on the internet cannot be reached at this address, or undefined when it can: the one
 * classification of addresses that peers name for the network to send to, a WireGuard endpoint
 * (endpointAddressProblem) as a webhook's target (docs/notifications.md). Refused: loopback, unspecified,
 * link-local, multicast, broadcast and every other special-purpose range that is not globally reachable;
 * private ranges (RFC 1918, unique local) unless `privateRanges.allowed`, the refusal naming what would
 * allow them. An IPv6 address carrying an IPv4 one (mapped, NAT64, 6to4) is judged by that IPv4 address.
 */
export function internetAddressProblem(
  address: string | Address,
  privateRanges: { allowed: boolean; allowedBy: string },
): FieldSaid | undefined {
  const addr = typeof address === 'string' ? parseAddress(address) : address;
  if (ENDPOINT_REACHABLE.some((net) => within(addr, net))) return undefined;
  if (addr.kind() === 'ipv6') {
    const embedding = ENDPOINT_EMBEDDING.find((e) => within(addr, e.net));
    if (embedding) {
      const v4 = new ipaddr.IPv4(addr.toByteArray().slice(embedding.at, embedding.at + 4));
      const problem = internetAddressProblem(v4, privateRanges);
      return (
        problem && {
          key: 'field.embeddedAddress',
          params: { what: embedding.what, ipv4: v4.toString(), reason: saidText(problem) },
        }
      );
    }
  }
  const hit =
    SPECIAL_PARSED.find((r) => within(addr, r.net)) ?? ENDPOINT_UNREACHABLE.find((r) => within(addr, r.net));
  if (hit) return { key: 'field.unreachableAddress', params: { what: hit.what, prefix: hit.prefix } };
  const local = privateRanges.allowed ? undefined : ENDPOINT_PRIVATE.find((r) => within(addr, r.net));
  if (local)
    return {
      key: 'field.privateAddress',
      params: { what: local.what, prefix: local.prefix, allowedBy: privateRanges.allowedBy },
    };
  return undefined;
}

/**
 * Why a router must not send a peer's WireGuard packets to this address (internetAddressProblem), which
 * the controller applies to an `endpoint` literal and the agent to every address a host name resolves to
 * (docs/api.md, docs/agent.md); `allowPrivate` is the policy's allowPrivateEndpoints.
 */
export function endpointAddressProblem(
  address: string | Address,
  allowPrivate = false,
): FieldSaid | undefined {
  return internetAddressProblem(address, {
    allowed: allowPrivate,
    allowedBy: 'a routing policy with allowPrivateEndpoints',
  });
}

/**
 * endpointAddressProblem for a whole `host:port` (parseEndpoint's forms): an address literal is judged as
 * is; a host name only when it names this machine (`localhost`, RFC 6761), since the agent judges what
 * the others resolve to before it sets them.
 */
export function endpointProblem(value: string, allowPrivate = false): FieldSaid | undefined {
  const parsed = parseEndpoint(value);
  if (!parsed) return undefined;
  if (isIpv4(parsed.host) || isIpv6(parsed.host)) return endpointAddressProblem(parsed.host, allowPrivate);
  const name = parsed.host.toLowerCase().replace(/\.$/, '');
  if (name === 'localhost' || name.endsWith('.localhost')) return { key: 'field.localhostName', params: {} };
  return undefined;
}

// ---- WireGuard public keys ----

/** 2^255 - 19, the field of Curve25519. */
const P25519 = (1n << 255n) - 19n;

function littleEndian(bytes: Uint8Array): bigint {
  let n = 0n;
  for (let i = bytes.length - 1; i >= 0; i--) n = (n << 8n) | BigInt(bytes[i] ?? 0);
  return n;
}

function toLittleEndian(n: bigint): Buffer {
  const out = Buffer.alloc(32);
  for (let i = 0; i < 32; i++, n >>= 8n) out[i] = Number(n & 0xffn);
  return out;
}

/**
 * The points of small order (libsodium's blocklist, reduced): a handshake with one proves no private key.
 * X25519 ignores a key's top bit and reads it modulo p, so each point has up to four 32-byte spellings:
 * the point v and, when v < 2^255 - p = 19, v + p, each with the top bit clear or set. Held as base64
 * (a key's only spelling that isWireGuardKey accepts), so a key is checked by one lookup of its text
 * instead of decoding or big-integer arithmetic per key (a start judges every session's).
 */
const LOW_ORDER_SPELLINGS = new Set<string>(
  [
    0n,
    1n,
    P25519 - 1n,
    littleEndian(Buffer.from('e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800', 'hex')),
    littleEndian(Buffer.from('5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157', 'hex')),
  ]
    .flatMap((v) => (v < (1n << 255n) - P25519 ? [v, v + P25519] : [v]))
    .flatMap((v) => [v, v | (1n << 255n)])
    .map((v) => toLittleEndian(v).toString('base64')),
);

/** Is this WireGuard key (a valid 32-byte base64 key) a low-order point, such as the all-zero key? */
export function isLowOrderKey(key: string): boolean {
  const text = isWireGuardKey(key) ? key : Buffer.from(key, 'base64').toString('base64');
  return LOW_ORDER_SPELLINGS.has(text);
}

/** The value of each base64 character by character code; 64 for anything else. */
const BASE64_VALUES = new Uint8Array(128).fill(64);
[...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'].forEach(
  (c, i) => (BASE64_VALUES[c.charCodeAt(0)] = i),
);

/**
 * One spelling per Curve25519 point, to compare and index keys by: the key itself when it is the
 * canonical encoding (top bit clear, below p: every key `wg genkey | wg pubkey` prints), else the
 * canonical encoding of its point. Cheap for canonical keys (two characters read, no decoding).
 */
export function wireGuardKeyId(key: string): string {
  // Read from the text first, no decoding and no lookup: the top bit of byte 31 is bit 2 of character 41
  // (value & 8), and a key at or above p has bytes 1-30 all 0xff, so character 20 (within byte 15) is
  // '/'. Stores compare a new key with every key on its router, and a start indexes every session's.
  const c41 = BASE64_VALUES[key.charCodeAt(41)] ?? 64;
  if (c41 < 64 && (c41 & 8) === 0 && key.charCodeAt(20) !== 0x2f) return key;
  return keyIds.get(key) ?? remember(keyIds, key, keyIdOf(key));
}

function keyIdOf(key: string): string {
  const bytes = Buffer.from(key, 'base64');
  const top = bytes[31] ?? 0;
  const belowP = top !== 0x7f || (bytes[0] ?? 0) < 0xed || bytes.subarray(1, 31).some((b) => b !== 0xff);
  if (top < 0x80 && belowP) return key;
  // the point: the top bit cleared, then p subtracted once when still at or above p (only values below
  // 2^255 remain, so the result is below 19 and lives in byte 0)
  bytes[31] = top & 0x7f;
  const atOrAboveP =
    bytes[31] === 0x7f && (bytes[0] ?? 0) >= 0xed && bytes.subarray(1, 31).every((b) => b === 0xff);
  if (atOrAboveP) {
    const low = (bytes[0] ?? 0) - 0xed;
    bytes.fill(0);
    bytes[0] = low;
  }
  return bytes.toString('base64');
}

/** Do two WireGuard keys name the same Curve25519 point? */
export function sameWireGuardKey(a: string, b: string): boolean {
  return a === b || wireGuardKeyId(a) === wireGuardKeyId(b);
}
