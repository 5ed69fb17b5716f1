/**
 * The one classification of WireGuard endpoints (common/net.ts endpointAddressProblem / endpointProblem),
 * which the controller applies to `endpoint` and the agent to what a name resolves to: each range of the
 * IANA special-purpose registries that a router cannot reach a peer in, private ranges only with the
 * policy's allowPrivateEndpoints, addresses embedding IPv4 judged by that IPv4 address.
 */
import { describe, expect, it } from 'vitest';
import { saidText } from '../../common/messages.ts';
import { endpointAddressProblem, endpointProblem } from '../../common/net.ts';

/** The rules' keyed findings as their English sentences. */
const addressText = (address: string, allowPrivate?: boolean) => {
  const said = endpointAddressProblem(address, allowPrivate);
  return said && saidText(said);
};
const endpointText = (endpoint: string, allowPrivate?: boolean) => {
  const said = endpointProblem(endpoint, allowPrivate);
  return said && saidText(said);
};

/** address → the reason given (a prefix of it), whatever the policy allows. */
const ALWAYS_REFUSED: [string, string][] = [
  ['0.0.0.0', 'is the unspecified address (0.0.0.0/32)'],
  ['0.1.2.3', "is an address of 'this network' (0.0.0.0/8)"],
  ['127.0.0.1', 'is a loopback address (127.0.0.0/8)'],
  ['127.255.0.9', 'is a loopback address (127.0.0.0/8)'],
  ['100.64.0.1', 'is a shared (carrier-grade NAT) address (100.64.0.0/10)'],
  ['169.254.169.254', 'is a link-local address (169.254.0.0/16)'],
  ['192.0.0.8', 'is an IETF protocol assignment (192.0.0.0/24)'],
  ['192.0.2.1', 'is a documentation address (192.0.2.0/24)'],
  ['192.88.99.1', 'is a 6to4 relay anycast address (deprecated) (192.88.99.0/24)'],
  ['198.18.0.1', 'is a benchmarking address (198.18.0.0/15)'],
  ['198.51.100.7', 'is a documentation address (198.51.100.0/24)'],
  ['203.0.113.9', 'is a documentation address (203.0.113.0/24)'],
  ['224.0.0.1', 'is a multicast address (224.0.0.0/4)'],
  ['239.255.255.250', 'is a multicast address (224.0.0.0/4)'],
  ['240.0.0.1', 'is a reserved address (240.0.0.0/4)'],
  ['255.255.255.255', 'is the broadcast address (255.255.255.255/32)'],
  ['::', 'is the unspecified address (::/128)'],
  ['::1', 'is the loopback address (::1/128)'],
  ['::7f00:1', 'is an IPv4-compatible address (deprecated) (::/96)'],
  ['64:ff9b:1::1', 'is a NAT64 address (64:ff9b:1::/48)'],
  ['100::1', 'is a discard-only address (100::/64)'],
  ['2001::1', 'is a Teredo address (2001::/32)'],
  ['2001:2::1', 'is a benchmarking address (2001:2::/48)'],
  ['2001:10::1', 'is an IETF protocol assignment (2001::/23)'],
  ['2001:db8::1', 'is a documentation address (2001:db8::/32)'],
  ['3fff::1', 'is a documentation address (3fff::/20)'],
  ['5f00::1', 'is an SRv6 segment identifier (5f00::/16)'],
  ['fe80::1', 'is a link-local address (fe80::/10)'],
  ['fec0::1', 'is a site-local address (deprecated) (fec0::/10)'],
  ['ff02::1', 'is a multicast address (ff00::/8)'],
  // IPv6 spellings of an IPv4 address are judged by that address
  ['::ffff:127.0.0.1', 'is an IPv4-mapped address of 127.0.0.1, which is a loopback address (127.0.0.0/8)'],
  ['::ffff:a9fe:a9fe', 'is an IPv4-mapped address of 169.254.169.254, which is a link-local address'],
  ['64:ff9b::7f00:1', 'is a NAT64 address of 127.0.0.1, which is a loopback address (127.0.0.0/8)'],
  ['2002:7f00:1::1', 'is a 6to4 address of 127.0.0.1, which is a loopback address (127.0.0.0/8)'],
];

/** Refused by default, allowed by allowPrivateEndpoints. */
const PRIVATE: [string, string][] = [
  ['10.0.0.1', 'is a private address (10.0.0.0/8)'],
  ['172.16.5.1', 'is a private address (172.16.0.0/12)'],
  ['172.31.255.254', 'is a private address (172.16.0.0/12)'],
  ['192.168.1.1', 'is a private address (192.168.0.0/16)'],
  ['fd00::1', 'is a unique local address (fc00::/7)'],
  ['fc00::1', 'is a unique local address (fc00::/7)'],
  ['::ffff:10.1.2.3', 'is an IPv4-mapped address of 10.1.2.3, which is a private address (10.0.0.0/8)'],
];

/** Globally reachable: never refused. */
const REACHABLE = [
  '8.8.8.8',
  '1.1.1.1',
  '100.63.255.255',
  '100.128.0.0',
  '172.15.255.255',
  '172.32.0.1',
  '192.0.0.9',
  '198.20.0.1',
  '223.255.255.255',
  '2001:4860:4860::8888',
  '2a01:4f8::1',
  '2001:3::1',
  '2001:20::1',
  '2001:1::1',
  '64:ff9b::808:808',
  '::ffff:8.8.8.8',
  '2002:808:808::1',
];

describe('endpointAddressProblem', () => {
  it.each(ALWAYS_REFUSED)('%s %s, with or without allowPrivateEndpoints', (address, reason) => {
    expect(addressText(address)).toMatch(new RegExp(`^${escape(reason)}`));
    expect(addressText(address, true)).toMatch(new RegExp(`^${escape(reason)}`));
  });

  it.each(PRIVATE)('%s %s: refused unless the policy allows private endpoints', (address, reason) => {
    expect(addressText(address)).toBe(
      `${reason}, which only a routing policy with allowPrivateEndpoints allows`,
    );
    expect(addressText(address, true)).toBeUndefined();
  });

  it.each(REACHABLE)('%s is an address a router may send a tunnel to', (address) => {
    expect(addressText(address)).toBeUndefined();
  });
});

describe('endpointProblem', () => {
  it.each([
    ['127.0.0.1:22', 'is a loopback address (127.0.0.0/8)'],
    ['[::1]:53', 'is the loopback address (::1/128)'],
    ['169.254.169.254:80', 'is a link-local address (169.254.0.0/16)'],
    ['0.0.0.0:1', 'is the unspecified address (0.0.0.0/32)'],
    ['255.255.255.255:1', 'is the broadcast address (255.255.255.255/32)'],
    ['localhost:51820', 'names this machine (localhost, a loopback name)'],
    ['LocalHost.:51820', 'names this machine (localhost, a loopback name)'],
    ['wg.localhost:51820', 'names this machine (localhost, a loopback name)'],
  ])('%s %s', (endpoint, reason) => {
    expect(endpointText(endpoint)).toBe(reason);
  });

  it('judges private literals by the policy, and leaves other names to the agent', () => {
    expect(endpointText('10.0.0.1:51820')).toMatch(/^is a private address \(10\.0\.0\.0\/8\)/);
    expect(endpointText('10.0.0.1:51820', true)).toBeUndefined();
    expect(endpointText('[2a01:4f8::1]:51820')).toBeUndefined();
    expect(endpointText('peer.example.org:51820')).toBeUndefined();
    expect(endpointText('notlocalhost.example:51820')).toBeUndefined();
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
