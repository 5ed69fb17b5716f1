/** Address and key rules shared by schema formats, canonicalisation and policy checks. */
import ipaddr from 'ipaddr.js';

const HOSTNAME =
  /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*\.?$/i;

// ipaddr.js throws and catches internally on non-addresses (about 25 µs each); a cheap shape check first
// keeps host-name validation fast on a cold start with thousands of manifests.
export function isIpv6(value: string): boolean {
  return value.includes(':') && !value.includes('%') && ipaddr.IPv6.isValid(value);
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

export function isPrefix(value: string, family: 'ipv4' | 'ipv6'): boolean {
  try {
    const [addr, len] = ipaddr.parseCIDR(value);
    return addr.kind() === family && value.includes('/') && Number.isInteger(len);
  } catch {
    return false;
  }
}

export function canonicalPrefix(value: string): string {
  const [addr, len] = ipaddr.parseCIDR(value);
  const base =
    addr.kind() === 'ipv6'
      ? ipaddr.IPv6.networkAddressFromCIDR(value)
      : ipaddr.IPv4.networkAddressFromCIDR(value);
  return `${addr.kind() === 'ipv6' ? (base as ipaddr.IPv6).toRFC5952String() : base.toString()}/${len}`;
}

/** Is the address inside one of the prefixes? An empty list allows everything. */
export function inRanges(address: string, prefixes: readonly string[] | undefined): boolean {
  if (!prefixes || prefixes.length === 0) return true;
  const addr = ipaddr.parse(address);
  return prefixes.some((p) => {
    const [net, len] = ipaddr.parseCIDR(p);
    return net.kind() === addr.kind() && addr.match(net, len);
  });
}
