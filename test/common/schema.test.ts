/** Field rules of the shared schemas, including hostile strings that must never reach a file or a config. */
import { randomBytes, randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  PolicySpec,
  RouterName,
  RouterSpec,
  RouterStatus,
  SessionSpec,
  SessionSpecInput,
} from '../../common/schema.ts';
import { validate } from '../../common/validate.ts';

const key = () => randomBytes(32).toString('base64');

function session(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    uuid: randomUUID(),
    asn: 4242420001,
    router: 'fra1',
    ipv6: 'fd42:1::1',
    linkLocal: 'fe80::1',
    publicKey: key(),
    listenPort: 20001,
    ...extra,
  };
}

function check(extra: Record<string, unknown>) {
  return validate<Record<string, unknown>>(SessionSpec, session(extra));
}

function errorsAt(extra: Record<string, unknown>): string[] {
  const r = check(extra);
  return r.ok ? [] : r.errors.map((e) => e.pointer);
}

const HOSTILE = [
  'a\nb',
  'a\r\nb',
  'x"y',
  "x'y",
  'a;b',
  'a}b',
  'a{b',
  '$(reboot)',
  '`id`',
  'a|b',
  'a&&b',
  '../../etc/passwd',
  'a b',
  '\u202efra1',
  'fra\u200b1',
  'ｆｒａ1',
  'frа1', // Cyrillic a
  'a\u0000b',
  '',
];

describe('session field rules', () => {
  it('accepts a valid session and applies defaults', () => {
    const r = check({});
    expect(r.ok).toBe(true);
    if (r.ok)
      expect(r.value).toMatchObject({ mtu: 1420, mpbgp: true, extendedNextHop: true, restartGeneration: 0 });
  });

  it.each([1, 64512, 4242420000, 4294967295])('accepts ASN %s', (asn) => {
    expect(errorsAt({ asn })).toEqual([]);
  });

  it.each([0, -1, 4294967296, 1.5, '4242420001', null, 1e20])('refuses ASN %s', (asn) => {
    expect(errorsAt({ asn })).toContain('/asn');
  });

  it('stores link-local addresses in canonical form, anywhere inside fe80::/10', () => {
    for (const [input, canonical] of [
      ['FE80:0000:0000:0000:0000:0000:0000:0001', 'fe80::1'],
      ['fe80::0:abcd', 'fe80::abcd'],
      ['febf:ffff::1', 'febf:ffff::1'],
    ]) {
      const r = check({ linkLocal: input });
      expect(r.ok && r.value.linkLocal).toBe(canonical);
    }
  });

  it.each([
    'fec0::1',
    'fe7f::1',
    'fd00::1',
    '::1',
    'fe80::1%eth0',
    'fe80::/64',
    '169.254.0.1',
    'fe80::g',
    ...HOSTILE,
  ])('refuses link-local %j', (linkLocal) => {
    expect(errorsAt({ linkLocal })).toContain('/linkLocal');
  });

  it('canonicalises ipv6 and refuses anything else', () => {
    const r = check({ ipv6: 'FD42:0001:0000::0001' });
    expect(r.ok && r.value.ipv6).toBe('fd42:1::1');
    for (const ipv6 of ['fd42::1::1', '172.20.0.1', 'fd42:1::1/64', 'fd42:1::1%1', ...HOSTILE]) {
      expect(errorsAt({ ipv6 })).toContain('/ipv6');
    }
  });

  it('makes ipv4 optional and strict when given', () => {
    expect(errorsAt({})).toEqual([]);
    expect(errorsAt({ ipv4: '172.20.0.1' })).toEqual([]);
    for (const ipv4 of [
      '172.20.0.256',
      '172.20.1',
      '0x7f.1.1.1',
      '172.020.0.1',
      '172.20.0.1/32',
      ...HOSTILE,
    ]) {
      expect(errorsAt({ ipv4 })).toContain('/ipv4');
    }
  });

  it('accepts endpoints host:port with IPv6 in brackets, canonicalised', () => {
    for (const [input, canonical] of [
      ['Peer.Example.ORG:51820', 'peer.example.org:51820'],
      ['192.0.2.1:1', '192.0.2.1:1'],
      ['[2001:DB8::0001]:65535', '[2001:db8::1]:65535'],
    ]) {
      const r = check({ endpoint: input });
      expect(r.ok && r.value.endpoint).toBe(canonical);
    }
  });

  it.each([
    '2001:db8::1:51820',
    '[2001:db8::1]',
    'peer.example.org',
    'peer.example.org:0',
    'peer.example.org:65536',
    'peer.example.org:-1',
    '[fe80::1%eth0]:51820',
    '[peer.example.org]:51820',
    'peer_example.org:51820',
    'peer.example.org:51820\n',
    'peer.example.org:51820;reboot',
    'peer.example.org:51820 ',
    ':51820',
    '1.2.3:51820',
    ...HOSTILE,
  ])('refuses endpoint %j', (endpoint) => {
    expect(errorsAt({ endpoint })).toContain('/endpoint');
  });

  it('needs publicKey to be base64 of exactly 32 bytes', () => {
    expect(errorsAt({ publicKey: key() })).toEqual([]);
    for (const publicKey of [
      randomBytes(31).toString('base64'),
      randomBytes(33).toString('base64'),
      key().replace('=', ''),
      key().slice(0, 42) + 'B=', // last character carries bits past the 32nd byte
      key().replace(/.$/, '\n'),
      '"' + key().slice(1),
      ...HOSTILE,
    ]) {
      expect(errorsAt({ publicKey })).toContain('/publicKey');
    }
  });

  it('keeps mtu within 1280-9000, default 1420', () => {
    expect(errorsAt({ mtu: 1280 })).toEqual([]);
    expect(errorsAt({ mtu: 9000 })).toEqual([]);
    for (const mtu of [1279, 9001, 1420.5, '1420', -1]) expect(errorsAt({ mtu })).toContain('/mtu');
  });

  it('refuses unknown fields and names the field', () => {
    const r = check({ postUp: 'iptables -F' });
    expect(r.ok).toBe(false);
    if (!r.ok)
      expect(r.errors).toContainEqual({
        pointer: '/postUp',
        key: 'field.unknown',
        message: 'is not a known field',
      });
  });

  it("names a key's form once, not its length as well: empty, short or long", () => {
    for (const publicKey of ['', 'c2hvcnQ=', `${key()}AAAA`]) {
      const r = check({ publicKey });
      expect(r.ok ? [] : r.errors.filter((e) => e.pointer === '/publicKey')).toEqual([
        {
          pointer: '/publicKey',
          key: 'field.format.wireguard-key',
          message: 'must be a WireGuard key: base64 of exactly 32 bytes',
        },
      ]);
    }
  });

  it('lets a manifest from git omit uuid, listenPort and createdAt (the store allocates them)', () => {
    const { uuid: _u, listenPort: _p, ...rest } = session();
    expect(validate(SessionSpecInput, rest).ok).toBe(true);
    expect(validate(SessionSpec, rest).ok).toBe(false);
  });
});

describe('router names and router fields', () => {
  it.each(['fra1', 'a', 'us-east-1', 'a'.repeat(31)])('accepts router name %j', (name) => {
    expect(validate(RouterName, name).ok).toBe(true);
    expect(errorsAt({ router: name })).toEqual([]);
  });

  it.each(['1fra', 'Fra1', '-fra', 'fra_1', 'fra.1', 'a'.repeat(32), 'fra1\n', ...HOSTILE])(
    'refuses router name %j',
    (name) => {
      expect(validate(RouterName, name).ok).toBe(false);
      expect(errorsAt({ router: name })).toContain('/router');
    },
  );

  const router = (extra: Record<string, unknown>) => ({
    uuid: randomUUID(),
    displayName: 'Frankfurt 1',
    nodeId: 1,
    region: 'eu-central',
    endpointHost: 'fra1.example.net',
    publicKey: key(),
    linkLocal: 'fe80::1',
    loopback: { ipv6: 'fd00::1' },
    ...extra,
  });

  it('accepts a router and refuses hostile display names and hosts', () => {
    expect(validate(RouterSpec, router({})).ok).toBe(true);
    for (const displayName of ['a\nb', 'x"y', 'a\\b', 'a\u0000b', 'a\u007fb', '']) {
      expect(validate(RouterSpec, router({ displayName })).ok).toBe(false);
    }
    for (const endpointHost of [
      'fra1.example.net;reboot',
      'a b',
      '$(id)',
      'fra1.example.net\n',
      '[2001:db8::1]',
    ]) {
      expect(validate(RouterSpec, router({ endpointHost })).ok).toBe(false);
    }
    for (const nodeId of [0, 4096, 1.5]) expect(validate(RouterSpec, router({ nodeId })).ok).toBe(false);
  });

  it('says an empty name is empty, in one sentence', () => {
    const r = validate(RouterSpec, router({ displayName: '' }));
    expect(r.ok ? [] : r.errors).toEqual([
      { pointer: '/displayName', key: 'field.empty', message: 'must not be empty' },
    ]);
  });
});

describe('policy fields', () => {
  it('takes dn42Asn as a JSON number only', () => {
    expect(validate(PolicySpec, { dn42Asn: 4242420000 }).ok).toBe(true);
    expect(validate(PolicySpec, { dn42Asn: '4242420000' }).ok).toBe(false);
    expect(validate(PolicySpec, { blockedAsns: [1, '2'] }).ok).toBe(false);
    expect(validate(PolicySpec, { rpkiServers: [{ host: 'rpki.example;x', port: 8282 }] }).ok).toBe(false);
    expect(validate(PolicySpec, { ownPrefixes: { ipv6: ['fd00::/8', 'fd00::1'] } }).ok).toBe(false);
  });
});

describe('validate()', () => {
  it('never changes its input and returns a value that shares no object with it', () => {
    // a schema without defaults is validated in place: the result must still be a copy
    const status = { uptime: 5, meshPeers: [{ router: 'fra1', reachable: true }] };
    const before = structuredClone(status);
    const result = validate<typeof status>(RouterStatus, status);
    if (!result.ok) throw new Error(`valid status refused: ${JSON.stringify(result.errors)}`);
    expect(result.value).toEqual(before);
    expect(result.value.meshPeers).not.toBe(status.meshPeers);
    expect(result.value.meshPeers[0]).not.toBe(status.meshPeers[0]);

    const input = session({ linkLocal: 'FE80:0:0::1' });
    delete input.mtu;
    const copy = structuredClone(input);
    const checked = validate<Record<string, unknown>>(SessionSpecInput, input);
    if (!checked.ok) throw new Error('valid session refused');
    expect(input).toEqual(copy); // the default mtu and the canonical address went into the result only
    expect(checked.value).toMatchObject({ mtu: 1420, linkLocal: 'fe80::1' });
  });
});
