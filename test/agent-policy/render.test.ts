/**
 * Routing policy → BIRD config: every case of the matrix passes real `bird -p` (with per-session files
 * from the session renderer, the iBGP files and an empty local.d included) and matches its golden file.
 * `UPDATE_GOLDEN=1 npx vitest run test/agent-policy/render.test.ts` rewrites the golden files.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { renderIbgpConfigs } from '../../agent/bird/ibgp.ts';
import { localConfDir, renderMainConfig } from '../../agent/bird/main-config.ts';
import { renderNetworkFilter } from '../../agent/bird/network-filter.ts';
import { peerFileName, peerView, renderPeerConfig } from '../../agent/bird/peer-config.ts';
import { FALLBACK_RPKI_SERVER, type AgentSession, type BirdConfigResponse } from '../../common/agent-api.ts';
import { BUILTIN_FILTER, parseFilter } from '../../common/dn42-filter.ts';
import { DomainError } from '../../common/errors.ts';
import { DN42_REGIONS, DN42_REGION_NAMES, dn42RegionCode } from '../../common/schema.ts';
import { basePolicy, policyMatrix } from './policies.ts';

const run = promisify(execFile);
const GOLDEN = path.join(import.meta.dirname, '..', 'fixtures', 'bird-golden');
const UPDATE = process.env.UPDATE_GOLDEN === '1';
/** Fixed paths for the golden files, so they do not depend on the temp dir of a run. */
const goldenPaths = {
  peerConfDir: '/etc/bird/peers',
  ibgpConfDir: '/etc/bird/ibgp.d',
  meshConfDir: '/etc/bird/mesh.d',
};

/** Per-session files from the session renderer (peer-config.ts): one with IPv4 + extended next hop, one IPv6 only. */
function sessionFiles(policy: BirdConfigResponse): Map<string, string> {
  const base: AgentSession = {
    uuid: '6f1c2a3e-7a6b-4c1d-9e2f-0a1b2c3d4e5f',
    asn: 4242420001,
    status: 1,
    statusName: 'ACTIVE',
    interface: 'wg_20001',
    listenPort: 20001,
    endpoint: null,
    publicKey: 'A'.repeat(43) + '=',
    ipv6: 'fd42:1::1',
    linkLocal: 'fe80::1234',
    ipv4: null,
    mtu: 1420,
    mpbgp: true,
    extendedNextHop: true,
    restartGeneration: 0,
  };
  const v6only = { ...base, asn: 4242420002, interface: 'wg_20002', listenPort: 20002, mpbgp: false };
  const files = new Map<string, string>();
  for (const [s, rtt] of [
    [base, 12.5],
    [v6only, null],
  ] as const) {
    files.set(peerFileName(s), renderPeerConfig(peerView(s, policy, rtt)));
  }
  files.set(peerFileName(withoutMpbgp), renderPeerConfig(peerView(withoutMpbgp, policy, 3, '172.20.10.1')));
  return files;
}

/** A peer without multiprotocol BGP: IPv4 in a session of its own. */
const withoutMpbgp: AgentSession = {
  uuid: '7a2d3b4f-8b7c-4d2e-8f30-1b2c3d4e5f60',
  asn: 4242420003,
  status: 1,
  statusName: 'ACTIVE',
  interface: 'wg_20003',
  listenPort: 20003,
  endpoint: null,
  publicKey: 'B'.repeat(43) + '=',
  ipv6: 'fd42:3::1',
  linkLocal: 'fe80::3',
  ipv4: '172.20.3.1',
  mtu: 1420,
  mpbgp: false,
  extendedNextHop: false,
  restartGeneration: 0,
};

async function golden(name: string, text: string): Promise<void> {
  const file = path.join(GOLDEN, name);
  if (UPDATE) {
    await mkdir(GOLDEN, { recursive: true });
    await writeFile(file, text);
    return;
  }
  expect(text, `golden file ${name} (UPDATE_GOLDEN=1 to rewrite)`).toBe(await readFile(file, 'utf8'));
}

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

async function birdParse(
  policy: typeof basePolicy,
  meshInterfaces?: string[],
): Promise<{ code: number; out: string }> {
  const root = await mkdtemp(path.join(tmpdir(), 'apol-'));
  dirs.push(root);
  const paths = {
    peerConfDir: path.join(root, 'peers'),
    ibgpConfDir: path.join(root, 'ibgp.d'),
    meshConfDir: path.join(root, 'mesh.d'),
  };
  for (const d of [...Object.values(paths), localConfDir(paths)]) await mkdir(d, { recursive: true });
  for (const [name, text] of sessionFiles(policy)) await writeFile(path.join(paths.peerConfDir, name), text);
  for (const [name, text] of renderIbgpConfigs(policy))
    await writeFile(path.join(paths.ibgpConfDir, name), text);
  const main = path.join(root, 'bird.conf');
  await writeFile(main, renderMainConfig(policy, paths, meshInterfaces ? { meshInterfaces } : {}));
  try {
    const r = await run('bird', ['-p', '-c', main]);
    return { code: 0, out: r.stdout + r.stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, out: `${e.stdout}${e.stderr}` };
  }
}

describe('renderMainConfig + renderIbgpConfigs', () => {
  for (const c of policyMatrix) {
    it(`${c.name}: bird -p accepts the rendered tree`, async () => {
      const r = await birdParse(c.policy, c.meshInterfaces);
      expect(r.out).toBe('');
      expect(r.code).toBe(0);
    });

    it(`${c.name}: matches the golden files`, async () => {
      const text = renderMainConfig(
        c.policy,
        goldenPaths,
        c.meshInterfaces ? { meshInterfaces: c.meshInterfaces } : {},
      );
      await golden(`${c.name}.conf`, text);
      for (const [name, ibgp] of renderIbgpConfigs(c.policy)) await golden(`${c.name}.ibgp.${name}`, ibgp);
    });
  }

  it('gives a peer without MP-BGP a second, IPv4-only session when both ends have a tunnel IPv4', () => {
    const both = renderPeerConfig(peerView(withoutMpbgp, basePolicy, null, '172.20.10.1'));
    expect(both).toContain('protocol bgp dn42_20003 from dnpeers {');
    expect(both).toContain(
      'protocol bgp dn42_20003_v4 from dnpeers {\n  neighbor 172.20.3.1 as 4242420003;\n  direct;',
    );
    // the link-local session carries no IPv4, the IPv4 session no IPv6
    expect(both.match(/ipv4 \{\n\s+import none;\n\s+export none;/g)).toHaveLength(1);
    expect(both.match(/ipv6 \{\n\s+import none;\n\s+export none;/g)).toHaveLength(1);
    // no own tunnel IPv4, or MP-BGP: one session
    expect(renderPeerConfig(peerView(withoutMpbgp, basePolicy, null, ''))).not.toContain('_v4');
    expect(
      renderPeerConfig(peerView({ ...withoutMpbgp, mpbgp: true }, basePolicy, null, '172.20.10.1')),
    ).not.toContain('_v4');
  });

  it('the built-in session file and examples/ebgp-template.mustache (its form for operators) render the same bytes', async () => {
    const example = await readFile(
      path.join(import.meta.dirname, '..', '..', 'examples', 'ebgp-template.mustache'),
      'utf8',
    );
    const views = [
      peerView(withoutMpbgp, basePolicy, 3, '172.20.10.1'),
      peerView(withoutMpbgp, basePolicy, null, ''),
      peerView({ ...withoutMpbgp, mpbgp: true }, basePolicy, 40, '172.20.10.1'),
      peerView({ ...withoutMpbgp, mpbgp: true, extendedNextHop: false }, basePolicy, 2000, ''),
    ];
    for (const view of views) expect(renderPeerConfig(view, example)).toBe(renderPeerConfig(view));
  });

  it('takes the ASN and RPKI servers from the policy alone', () => {
    const fallback = renderMainConfig(basePolicy, goldenPaths);
    expect(fallback).toContain(`define OWNAS = ${basePolicy.dn42Asn};`);
    expect(fallback).toContain(`remote "${FALLBACK_RPKI_SERVER.host}" port ${FALLBACK_RPKI_SERVER.port};`);
    const changed = renderMainConfig(
      { ...basePolicy, dn42Asn: 4242421234, rpkiServers: [{ host: '172.20.0.53', port: 323 }] },
      goldenPaths,
    );
    expect(changed).toContain('define OWNAS = 4242421234;');
    expect(changed).toContain('remote 172.20.0.53 port 323;');
    expect(changed).not.toContain(FALLBACK_RPKI_SERVER.host);
    expect(changed.match(/local as OWNAS;/g)).toHaveLength(2); // eBGP and iBGP templates
  });

  it('leaves the community functions out when communities are off', () => {
    const off = renderMainConfig(
      { ...basePolicy, communities: { ...basePolicy.communities, enabled: false } },
      goldenPaths,
    );
    expect(off).not.toContain('update_flags');
    expect(renderMainConfig(basePolicy, goldenPaths)).toContain('bgp_community.add((64511, 41))');
  });

  it('canonicalises own prefixes before they reach BIRD, and refuses host bits and leading zeros', () => {
    const text = renderMainConfig(
      { ...basePolicy, ownPrefixes: { ipv4: ['172.20.10.0/27'], ipv6: ['FD42:0010:0::/48'] } },
      goldenPaths,
    );
    expect(text).toContain('route 172.20.10.0/27 unreachable;');
    expect(text).toContain('route fd42:10::/48 unreachable;');
    // one reading of prefixes everywhere (common/net.ts): 010.0.0.0/8 is not 8.0.0.0/8, 10.1.0.0/8 not 10.0.0.0/8
    for (const ipv4 of ['172.20.10.5/27', '010.0.0.0/8'])
      expect(() =>
        renderMainConfig({ ...basePolicy, ownPrefixes: { ipv4: [ipv4], ipv6: [] } }, goldenPaths),
      ).toThrow(/\/ownPrefixes\/ipv4\/0/);
  });

  it('refuses a policy with a bad field, naming it, and renders nothing', () => {
    const bad = { ...basePolicy, rpkiServers: [{ host: 'x"; protocol static {', port: 1 }] };
    expect(() => renderMainConfig(bad, goldenPaths)).toThrow(DomainError);
    expect(() => renderMainConfig(bad, goldenPaths)).toThrow(/\/rpkiServers\/0\/host/);
    expect(() => renderIbgpConfigs({ ...basePolicy, dn42Asn: -1 })).toThrow(/\/dn42Asn/);
  });

  it("renders each DN42 region name's community (64511, 41..57) on our own routes", () => {
    // the DN42 region list (docs/routing-policy.md, "DN42 communities"), in community order
    expect(Object.entries(DN42_REGIONS)).toEqual(
      [
        'eu',
        'na-east',
        'na-central',
        'na-west',
        'central-america',
        'sa-east',
        'sa-west',
        'africa-north',
        'africa-south',
        'asia-south',
        'asia-southeast',
        'asia-east',
        'pacific',
        'antarctica',
        'asia-north',
        'asia-west',
        'central-asia',
      ].map((name, i) => [name, 41 + i]),
    );
    for (const name of DN42_REGION_NAMES) {
      const region = dn42RegionCode(name);
      const config = renderMainConfig(
        { ...basePolicy, communities: { ...basePolicy.communities, region } },
        goldenPaths,
      );
      expect(config, name).toContain(
        `    if source = RTS_STATIC then bgp_community.add((64511, ${DN42_REGIONS[name]}));\n`,
      );
      // and no other region
      expect(config.match(/bgp_community\.add\(\(64511, \d+\)\)/g), name).toHaveLength(1);
    }
    const none = renderMainConfig(
      { ...basePolicy, communities: { ...basePolicy.communities, region: dn42RegionCode(undefined) } },
      goldenPaths,
    );
    expect(none).not.toContain('RTS_STATIC then bgp_community.add');
  });

  it('filters ROA-invalid routes only: ROA-unknown ones are accepted (docs/troubleshooting.md, 7)', () => {
    const config = renderMainConfig(basePolicy, goldenPaths);
    expect(config).toContain('roa_check(dn42_roa6, net, bgp_path.last) = ROA_INVALID;');
    expect(config).not.toContain('ROA_UNKNOWN');
  });

  it('renders one iBGP file per peer, per shared loopback family', () => {
    const files = renderIbgpConfigs(policyMatrix.find((c) => c.name === 'mesh-and-ibgp')!.policy);
    expect([...files.keys()]).toEqual(['ibgp_ams1.conf', 'ibgp_sin-2.conf']);
    expect(files.get('ibgp_ams1.conf')).toMatch(/ibgp_ams1_v4[\s\S]*neighbor 172\.20\.10\.2 as OWNAS;/);
    expect(files.get('ibgp_ams1.conf')).toMatch(/ibgp_ams1_v6[\s\S]*neighbor fd42:10::2 as OWNAS;/);
    // only IPv6 loopbacks in common: one session carrying IPv4 with extended next hop
    expect(files.get('ibgp_sin-2.conf')).toMatch(/ibgp_sin_2_v6[\s\S]*extended next hop on;/);
    expect(files.get('ibgp_sin-2.conf')).not.toContain('_v4');
  });

  it("renders the registry's deny lines, first match deciding; a filter BIRD could not take is refused", () => {
    const builtin = renderMainConfig(basePolicy, goldenPaths);
    expect(renderMainConfig({ ...basePolicy, filter: BUILTIN_FILTER }, goldenPaths)).toBe(
      builtin.replace(' (filter.txt, filter6.txt: the built-in copy)', ' (filter.txt, filter6.txt)'),
    );
    expect(builtin).toContain(
      '  if net ~ [\n    172.22.166.0/24{24,32} # filter.txt 0001\n  ] then return false;',
    );
    expect(builtin).toContain(
      '  if net ~ [\n    fdd6:6302:7c04::/48{48,128} # filter6.txt 0010\n  ] then return false;',
    );
    const bad = {
      ...basePolicy,
      filter: {
        ipv4: [],
        ipv6: [{ nr: 1, action: 'permit' as const, prefix: 'fd00::/8', minLength: 4, maxLength: 64 }],
      },
    };
    expect(() => renderMainConfig(bad, goldenPaths)).toThrow(
      /filter \/ipv6\/0: fd00::\/8 4\.\.64 is not a range BIRD takes/,
    );
    // the comments of a registry's file never reach BIRD
    const commented = parseFilter('0001 permit fd00::/8 44 64 # ]; protocol static x {\n', 'ipv6');
    expect(renderNetworkFilter({ ipv4: [], ipv6: commented })).not.toContain('protocol static');
  });

  it('a running BIRD takes what the filter permits and drops what its deny lines and lengths refuse', async () => {
    const root = await mkdtemp(path.join(tmpdir(), 'apol-run-'));
    dirs.push(root);
    const conf = path.join(root, 'bird.conf');
    const sock = path.join(root, 'bird.ctl');
    const routes = (family: 'ipv4' | 'ipv6', prefixes: string[]) =>
      `protocol static s_${family} {\n  ${family} { import where is_valid_network(); };\n${prefixes.map((p) => `  route ${p} unreachable;`).join('\n')}\n}`;
    await writeFile(
      conf,
      [
        'router id 192.0.2.1;',
        renderNetworkFilter(undefined),
        routes('ipv4', [
          '172.22.166.0/24',
          '172.20.16.0/22',
          '172.20.32.0/20',
          '172.20.0.53/32',
          '172.20.1.0/30',
        ]),
        routes('ipv6', ['fdd6:6302:7c04::/48', 'fd00:abcd:e::/48', 'fd00:abcd::/40', 'fd00:abcd:e:300::/72']),
        '',
      ].join('\n'),
    );
    await run('bird', ['-c', conf, '-s', sock, '-P', path.join(root, 'bird.pid')]);
    try {
      const shown = async () => (await run('birdc', ['-s', sock, 'show', 'route'])).stdout;
      let out = await shown();
      for (let i = 0; i < 50 && !out.includes('fd00:abcd:e::/48'); i++) {
        await new Promise((r) => setTimeout(r, 100));
        out = await shown();
      }
      const present = [...out.matchAll(/^([0-9a-f.:]+\/[0-9]+)/gm)].map((m) => m[1]).sort();
      expect(present).toEqual(['172.20.0.53/32', '172.20.16.0/22', 'fd00:abcd:e::/48']);
    } finally {
      await run('birdc', ['-s', sock, 'down']).catch(() => undefined);
    }
  });
});
