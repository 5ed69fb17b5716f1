/**
 * common/net.ts: the one reading of prefixes (policies, manifests, address checks), the special-purpose
 * addresses no peer can own, and WireGuard keys no peer holds (issue 24, docs/operator-guide.md).
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  canonicalPrefix,
  DN42_PEER_ADDRESS_RANGES,
  inRanges,
  isIpv6,
  isLowOrderKey,
  isPrefix,
  parsePrefix,
  prefixProblem,
  sameWireGuardKey,
  specialPurposeProblem,
  wireGuardKeyId,
} from '../../common/net.ts';
import { englishText } from '../../common/messages.ts';
import { PolicySpec } from '../../common/schema.ts';
import { validate } from '../../common/validate.ts';

/** prefixProblem's keyed answer as its English sentence. */
function prefixText(value: string, family: 'ipv4' | 'ipv6'): string | undefined {
  const said = prefixProblem(value, family);
  return said && englishText(said.key, said.params);
}

/** specialPurposeProblem's keyed answer as its English sentence. */
function specialPurposeText(address: string): string | undefined {
  const said = specialPurposeProblem(address);
  return said && englishText(said.key, said.params);
}

describe('prefixes: one strict reading', () => {
  it('refuses leading zeros, other IPv4 spellings and bad lengths, in both families', () => {
    for (const bad of [
      '010.0.0.0/8',
      '172.020.0.0/14',
      '10.0.0.0/08',
      '10/8',
      '10.0.0/8',
      '0x0a.0.0.0/8',
      '10.0.0.0/33',
      '10.0.0.0',
      '10.0.0.0/',
      '10.0.0.0/8/8',
      ' 10.0.0.0/8',
      'fd00::/129',
      'fd00::/008',
      'fd00::%eth0/8',
      '::ffff:010.0.0.0/104',
    ])
      expect(parsePrefix(bad), bad).toBeUndefined();
    expect(parsePrefix('10.0.0.0/8', 'ipv6')).toBeUndefined();
    expect(parsePrefix('fd00::/8', 'ipv4')).toBeUndefined();
    expect(parsePrefix('0.0.0.0/0')?.length).toBe(0);
    expect(parsePrefix('::/0')?.family).toBe('ipv6');
  });

  it('refuses host bits with the network it would be, and reads IPv6 in any case and zero form', () => {
    expect(prefixText('10.1.0.0/8', 'ipv4')).toBe(
      'has bits set after /8: the network is 10.0.0.0/8 (or give a longer length)',
    );
    expect(prefixText('fd42:1234::1/48', 'ipv6')).toMatch(/the network is fd42:1234::\/48/);
    expect(prefixText('010.0.0.0/8', 'ipv4')).toMatch(/without leading zeros/);
    expect(isPrefix('10.0.0.0/8', 'ipv4')).toBe(true);
    expect(isPrefix('fd00:0::/8', 'ipv6')).toBe(true);
    expect(isPrefix('FD00:0000::/8', 'ipv6')).toBe(true);
    expect(canonicalPrefix('fd00:0::/8')).toBe('fd00::/8');
    expect(canonicalPrefix('FD42:0000:0001::/48')).toBe('fd42:0:1::/48');
    expect(() => canonicalPrefix('010.0.0.0/8')).toThrow(/not a prefix/);
  });

  it('inRanges reads prefixes the same way: a lenient spelling matches nothing', () => {
    expect(inRanges('172.20.0.1', ['172.20.0.0/14'])).toBe(true);
    expect(inRanges('172.16.0.1', ['172.020.0.0/14'])).toBe(false);
    expect(inRanges('8.0.0.1', ['010.0.0.0/8'])).toBe(false);
    expect(inRanges('fd42::1', ['fd00:0::/8'])).toBe(true);
  });

  it('an IPv6 address with a dotted tail needs a plain IPv4 tail', () => {
    expect(isIpv6('::ffff:172.20.0.1')).toBe(true);
    expect(isIpv6('::ffff:172.020.0.1')).toBe(false);
    expect(isIpv6('::ffff:010.0.0.1')).toBe(false);
  });

  it('a policy stores its prefixes canonical and refuses the others with a field error', () => {
    const ok = validate<PolicySpec>(PolicySpec, {
      ownPrefixes: { ipv6: ['FD42:0:0::/48'], ipv4: ['172.20.0.0/24'] },
      peerAddressRanges: { ipv6: ['fd00:0::/8'] },
    });
    expect(ok).toEqual({
      ok: true,
      value: {
        mergeIsApproval: false,
        ownPrefixes: { ipv6: ['fd42::/48'], ipv4: ['172.20.0.0/24'] },
        peerAddressRanges: { ipv6: ['fd00::/8'] },
      },
    });
    const bad = validate(
      PolicySpec,
      {
        ownPrefixes: { ipv4: ['010.0.0.0/8'] },
        peerAddressRanges: { ipv4: ['172.020.0.0/14', '10.1.0.0/8'] },
      },
      '/spec',
    );
    expect(bad.ok).toBe(false);
    if (bad.ok) return;
    expect(bad.errors.map(({ pointer, message }) => ({ pointer, message }))).toEqual([
      {
        pointer: '/spec/ownPrefixes/ipv4/0',
        message:
          'must be an IPv4 prefix such as 172.20.0.0/14: four decimal numbers 0-255 without leading zeros, / and a length 0-32',
      },
      {
        pointer: '/spec/peerAddressRanges/ipv4/0',
        message:
          'must be an IPv4 prefix such as 172.20.0.0/14: four decimal numbers 0-255 without leading zeros, / and a length 0-32',
      },
      {
        pointer: '/spec/peerAddressRanges/ipv4/1',
        message: 'has bits set after /8: the network is 10.0.0.0/8 (or give a longer length)',
      },
    ]);
  });
});

describe('peer addresses no peer can own', () => {
  it('names the special-purpose range of each', () => {
    const cases: [string, string][] = [
      ['::1', 'is the loopback address (::1/128), which no peer can own'],
      ['::', 'is the unspecified address (::/128), which no peer can own'],
      ['ff02::1', 'is a multicast address (ff00::/8), which no peer can own'],
      ['fe80::99', 'is a link-local address (fe80::/10), which no peer can own'],
      ['2001:db8::1', 'is a documentation address (2001:db8::/32), which no peer can own'],
      ['3fff::1', 'is a documentation address (3fff::/20), which no peer can own'],
      ['64:ff9b::808:808', 'is a NAT64 address (64:ff9b::/96), which no peer can own'],
      ['0.0.0.0', 'is the unspecified address (0.0.0.0/32), which no peer can own'],
      ['0.1.2.3', "is an address of 'this network' (0.0.0.0/8), which no peer can own"],
      ['255.255.255.255', 'is the broadcast address (255.255.255.255/32), which no peer can own'],
      ['127.0.0.1', 'is a loopback address (127.0.0.0/8), which no peer can own'],
      ['169.254.1.1', 'is a link-local address (169.254.0.0/16), which no peer can own'],
      ['224.0.0.5', 'is a multicast address (224.0.0.0/4), which no peer can own'],
      ['240.0.0.1', 'is a reserved address (240.0.0.0/4), which no peer can own'],
      ['192.0.2.1', 'is a documentation address (192.0.2.0/24), which no peer can own'],
      ['198.51.100.7', 'is a documentation address (198.51.100.0/24), which no peer can own'],
      ['203.0.113.9', 'is a documentation address (203.0.113.0/24), which no peer can own'],
    ];
    for (const [address, message] of cases) expect(specialPurposeText(address), address).toBe(message);
  });

  it('refuses an IPv4-mapped IPv6 address, naming the IPv4 address it stands for', () => {
    expect(specialPurposeText('::ffff:172.20.0.1')).toBe(
      'is an IPv4-mapped address (::ffff:0:0/96): give the IPv4 address 172.20.0.1 as ipv4',
    );
    expect(specialPurposeText('::ffff:ac14:1')).toMatch(/IPv4-mapped.*172\.20\.0\.1/);
    // ipaddr.js reads the deprecated IPv4-compatible spelling as mapped: refused all the same
    expect(specialPurposeText('::172.20.0.1')).toMatch(/IPv4-mapped|IPv4-compatible/);
    expect(specialPurposeText('::ac14:1')).toMatch(/IPv4-compatible/);
  });

  it('lets ordinary addresses through: the policy ranges decide about those', () => {
    for (const address of ['fd42:1234::1', '172.20.0.1', '10.127.0.1', '2606:4700:4700::1111', '8.8.8.8'])
      expect(specialPurposeText(address), address).toBeUndefined();
  });

  it("the default ranges are DN42's", () => {
    expect(DN42_PEER_ADDRESS_RANGES).toEqual({
      ipv6: ['fd00::/8'],
      ipv4: ['172.20.0.0/14', '172.31.0.0/16', '10.0.0.0/8'],
    });
    for (const p of [...DN42_PEER_ADDRESS_RANGES.ipv6, ...DN42_PEER_ADDRESS_RANGES.ipv4])
      expect(canonicalPrefix(p)).toBe(p);
  });
});

describe('WireGuard keys no peer holds', () => {
  const b64 = (bytes: number[] | Buffer) => Buffer.from(bytes).toString('base64');
  const zero = Buffer.alloc(32);

  it('the all-zero key and the other low-order points, in any of their spellings', () => {
    expect(isLowOrderKey(b64(zero))).toBe(true);
    expect(b64(zero)).toBe('AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=');
    const topBit = Buffer.alloc(32);
    topBit[31] = 0x80;
    expect(isLowOrderKey(b64(topBit))).toBe(true);
    const one = Buffer.alloc(32);
    one[0] = 1;
    expect(isLowOrderKey(b64(one))).toBe(true);
    // p itself (edff…7f) is 0; p - 1 (ecff…7f) has order 2
    expect(isLowOrderKey(b64(Buffer.from(`ed${'ff'.repeat(30)}7f`, 'hex')))).toBe(true);
    expect(isLowOrderKey(b64(Buffer.from(`ec${'ff'.repeat(30)}7f`, 'hex')))).toBe(true);
    expect(
      isLowOrderKey(
        b64(Buffer.from('e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800', 'hex')),
      ),
    ).toBe(true);
    for (let i = 0; i < 50; i++) expect(isLowOrderKey(randomBytes(32).toString('base64'))).toBe(false);
  });

  it('keys that differ only in the bit X25519 ignores are the same key', () => {
    const bytes = randomBytes(32);
    bytes[31] = (bytes[31] ?? 0) & 0x7f;
    const key = b64(bytes);
    const high = Buffer.from(bytes);
    high[31] = (high[31] ?? 0) | 0x80;
    expect(wireGuardKeyId(key)).toBe(key);
    expect(wireGuardKeyId(b64(high))).toBe(key);
    expect(sameWireGuardKey(key, b64(high))).toBe(true);
    expect(sameWireGuardKey(key, randomBytes(32).toString('base64'))).toBe(false);
  });

  it('wireGuardKeyId: the text shortcut agrees with decoding, for random keys with and without the top bit', () => {
    const edges = ['ed', 'ee', 'f0', 'ff', 'ec'].flatMap((low) =>
      ['7f', 'ff'].map((high) => Buffer.from(`${low}${'ff'.repeat(30)}${high}`, 'hex')),
    );
    for (let i = 0; i < 3000 + edges.length; i++) {
      const bytes = edges[i - 3000] ?? randomBytes(32);
      // now and then bytes 1-30 all 0xff: the keys at or above p, which the shortcut must not pass
      if (i % 10 === 0 && i < 3000) bytes.fill(0xff, 1, 31);
      const cleared = Buffer.from(bytes);
      cleared[31] = (cleared[31] ?? 0) & 0x7f;
      let n = 0n;
      for (let j = 31; j >= 0; j--) n = (n << 8n) | BigInt(cleared[j] ?? 0);
      n %= (1n << 255n) - 19n;
      const expected = Buffer.alloc(32);
      for (let j = 0; j < 32; j++, n >>= 8n) expected[j] = Number(n & 0xffn);
      expect(wireGuardKeyId(b64(bytes)), b64(bytes)).toBe(b64(expected));
    }
  });
});
