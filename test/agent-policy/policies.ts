/** Fixture routing policies (GET /agent/:router/bird-config bodies) for the renderer tests. */
import type { BirdConfigResponse } from '../../common/agent-api.ts';
import { BUILTIN_FILTER, parseFilter } from '../../common/dn42-filter.ts';

export const basePolicy: BirdConfigResponse = {
  dn42Asn: 4242420101,
  rpkiServers: [],
  ownPrefixes: { ipv4: ['172.20.10.0/27'], ipv6: ['fd42:10::/48'] },
  importLimit: { ipv4: 9000, ipv6: 9000, action: 'block' },
  communities: { enabled: true, bandwidth: 24, crypto: 34, region: 41 },
  routerId: '172.20.10.1',
  loopback: { ipv4: '172.20.10.1', ipv6: 'fd42:10::1' },
  ibgpPeers: [],
};

const ibgpPeers: BirdConfigResponse['ibgpPeers'] = [
  { router: 'ams1', nodeId: 2, loopback: { ipv4: '172.20.10.2', ipv6: 'fd42:10::2' } },
  { router: 'sin-2', nodeId: 3, loopback: { ipv6: 'fd42:10::3' } },
];

/** The matrix: each case must pass `bird -p` and match its golden file. */
export const policyMatrix: { name: string; policy: BirdConfigResponse; meshInterfaces?: string[] }[] = [
  { name: 'fallback-rpki', policy: basePolicy },
  {
    name: 'two-rpki-servers',
    policy: {
      ...basePolicy,
      rpkiServers: [
        { host: 'rpki.example.dn42', port: 8082 },
        { host: 'fd42:10::53', port: 3323 },
      ],
    },
  },
  { name: 'asn-changed', policy: { ...basePolicy, dn42Asn: 4242429999, routerId: '172.20.10.9' } },
  {
    name: 'communities-off',
    policy: { ...basePolicy, communities: { enabled: false, bandwidth: 24, crypto: 34, region: null } },
  },
  {
    name: 'communities-no-region',
    policy: { ...basePolicy, communities: { enabled: true, bandwidth: 25, crypto: 33, region: null } },
  },
  { name: 'no-own-prefixes', policy: { ...basePolicy, ownPrefixes: { ipv4: [], ipv6: [] } } },
  {
    name: 'no-loopbacks',
    policy: { ...basePolicy, loopback: {}, importLimit: { ipv4: 100, ipv6: 200, action: 'disable' } },
  },
  {
    // a registry's own filter as the controller sends it: a deny line between permits, one family's
    // lines all permits
    name: 'registry-filter',
    policy: {
      ...basePolicy,
      filter: {
        ipv4: parseFilter(
          [
            '0001 deny    172.22.166.0/24 24 32 # filter test',
            '0010 permit  172.20.0.0/14   21 29',
            '0015 deny    172.21.128.0/18 18 32 # between two permits',
            '0020 permit  10.0.0.0/8      15 24',
            '9999 deny    0.0.0.0/0       0  32',
          ].join('\n'),
          'ipv4',
        ),
        ipv6: parseFilter('1001 permit fd00::/8 44 64\n', 'ipv6'),
      },
    },
  },
  { name: 'builtin-filter-sent', policy: { ...basePolicy, filter: BUILTIN_FILTER } },
  {
    name: 'mesh-and-ibgp',
    policy: { ...basePolicy, ibgpPeers },
    meshInterfaces: ['wgm_2', 'wgm_3'],
  },
];
