/**
 * The peer-side configuration of each format, checked by the format's own tool: BIRD 2's parser
 * (`bird -p`) on the snippet inside a minimal bird.conf, FRR's (`vtysh -C`), wg-quick's (`wg-quick
 * strip`, then `wg setconf` on a wireguard-go interface in a namespace of this test), and for
 * systemd-networkd, which has no offline checker (`systemd-analyze verify` takes units only), every
 * section and key against the setting table of the installed systemd-networkd binary.
 */
import { execFileSync } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  PRIVATE_KEY_PLACEHOLDER,
  peerConfig,
  peerInterfaceName,
  type PeerConfigInput,
} from '../../common/peer-config/index.ts';
import { exec, NetnsLab, type Namespace } from '../support/netns.ts';

const wgKey = (): { privateKey: string; publicKey: string } => {
  const privateKey = execFileSync('wg', ['genkey']).toString().trim();
  const publicKey = execFileSync('wg', ['pubkey'], { input: `${privateKey}\n` })
    .toString()
    .trim();
  return { privateKey, publicKey };
};

const routerKey = wgKey();
/** The peer's key pair: the public half is the session's, the private half the peer keeps. */
const peerKey = wgKey();

/** The session shapes the generator distinguishes. */
const CASES: Record<string, PeerConfigInput> = {
  'MP-BGP with IPv4 and extended next hop': {
    session: {
      uuid: '3f1c2b4a-1111-4222-8333-444455556666',
      asn: 4242421234,
      ipv6: 'fd42:1234::1',
      linkLocal: 'fe80::1234',
      publicKey: peerKey.publicKey,
      ipv4: '172.22.1.1',
      endpoint: 'peer.example.org:51820',
      mtu: 1420,
      mpbgp: true,
      extendedNextHop: true,
      listenPort: 21234,
    },
    router: {
      name: 'fra1',
      displayName: 'Frankfurt "1"\nsecond line',
      // an address: wg setconf resolves a host name, and this test has no DNS
      endpointHost: '198.51.100.1',
      publicKey: routerKey.publicKey,
      linkLocal: 'fe80::1',
      ipv4: '172.20.0.1',
    },
    networkAsn: 4242420000,
  },
  'IPv4 in a session of its own (no MP-BGP)': {
    session: {
      uuid: '9a1c2b4a-1111-4222-8333-444455556666',
      asn: 4242421235,
      ipv6: 'fd42:1235::1',
      linkLocal: 'fe80::1235',
      publicKey: peerKey.publicKey,
      ipv4: '172.22.2.1',
      mtu: 1400,
      mpbgp: false,
      extendedNextHop: false,
      listenPort: 21235,
    },
    router: {
      name: 'ams-long-router-name',
      displayName: 'Amsterdam',
      endpointHost: '2001:db8::7',
      publicKey: routerKey.publicKey,
      linkLocal: 'fe80::42',
      ipv4: '172.20.0.2',
    },
    networkAsn: 4242420000,
  },
  'IPv6 only, no peer endpoint': {
    session: {
      uuid: '0b1c2b4a-1111-4222-8333-444455556666',
      asn: 64512,
      ipv6: 'fd42:64::1',
      linkLocal: 'fe80::64',
      publicKey: peerKey.publicKey,
      mtu: 1420,
      mpbgp: true,
      extendedNextHop: true,
      listenPort: 30001,
    },
    router: {
      name: 'sin',
      displayName: 'Singapore',
      endpointHost: '192.0.2.7',
      publicKey: routerKey.publicKey,
      linkLocal: 'fe80::1',
    },
    networkAsn: 4242420000,
  },
};

let dir: string;
let lab: NetnsLab;
let ns: Namespace;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-peercfg-'));
  lab = new NetnsLab('pcf');
  ns = await lab.namespace('wg');
});
afterAll(async () => {
  await lab?.cleanup();
  if (dir) await rm(dir, { recursive: true, force: true });
});

function only(files: { name: string; content: string }[]): { name: string; content: string } {
  expect(files).toHaveLength(1);
  return files[0] as { name: string; content: string };
}

/** `Section.Key` names the installed systemd-networkd knows (its gperf tables, as strings in the binary). */
function networkdSettings(): Set<string> {
  const text = execFileSync('strings', ['/usr/lib/systemd/systemd-networkd'], { maxBuffer: 64 << 20 });
  return new Set(
    text
      .toString()
      .split('\n')
      .filter((l) => /^[A-Z][A-Za-z]+\.[A-Z][A-Za-z0-9]+$/.test(l)),
  );
}

/** An INI file's settings as `Section.Key` = value pairs, refusing anything outside a section. */
function iniSettings(content: string): [string, string][] {
  let section: string | undefined;
  const out: [string, string][] = [];
  for (const line of content.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const header = /^\[([A-Za-z]+)\]$/.exec(line);
    if (header) {
      section = header[1];
      continue;
    }
    const kv = /^([A-Za-z0-9]+)=(.+)$/.exec(line);
    expect(kv, `a Key=value line: ${line}`).not.toBeNull();
    expect(section, `inside a section: ${line}`).toBeDefined();
    out.push([`${section}.${kv?.[1]}`, kv?.[2] ?? '']);
  }
  return out;
}

describe.each(Object.entries(CASES))('peer configuration: %s', (label, input) => {
  const iface = peerInterfaceName(input.router.name, input.session.uuid);
  const slug = label.replace(/[^a-z0-9]+/gi, '-');

  it('names an interface the kernel accepts', () => {
    expect(iface).toMatch(/^[a-zA-Z0-9_=+.-]{1,15}$/);
  });

  it('BIRD 2 parses the snippet inside a minimal config', async () => {
    const file = only(peerConfig('bird', input));
    const snippet = join(dir, `${slug}-${file.name}`);
    await writeFile(snippet, file.content);
    const main = join(dir, `${slug}-bird.conf`);
    await writeFile(main, `router id 10.0.0.1;\nprotocol device {}\ninclude "${snippet}";\n`);
    const r = await exec('bird', ['-p', '-c', main]);
    expect(r.stderr, file.content).toBe('');
    expect(r.code).toBe(0);
    expect(file.content).toContain(`neighbor ${input.router.linkLocal} % '${iface}' as ${input.networkAsn};`);
    expect(file.content).toContain(`local as ${input.session.asn};`);
    const { ipv4, mpbgp, extendedNextHop } = input.session;
    expect(file.content.includes('ipv4 {')).toBe(ipv4 !== undefined);
    expect(file.content.includes('extended next hop on')).toBe(
      ipv4 !== undefined && mpbgp && extendedNextHop,
    );
    expect(file.content.includes(`neighbor ${input.router.ipv4} as`)).toBe(ipv4 !== undefined && !mpbgp);
    // every BGP session has the timers of a restart in seconds (docs/routing-policy.md, "BGP timers")
    const sessions = file.content.match(/protocol bgp /g)?.length ?? 0;
    for (const timer of [
      'connect delay time 1;',
      'connect retry time 5;',
      'error wait time 2, 300;',
      'hold time 30;',
      'keepalive time 5;',
    ])
      expect(file.content.split(`\n  ${timer}\n`).length - 1, timer).toBe(sessions);
    // the display name is free text: only in a comment, on one line
    expect(
      file.content
        .split('\n')
        .filter((l) => l.includes('Frankfurt'))
        .every((l) => l.startsWith('#')),
    ).toBe(true);
  });

  it("FRR's parser (vtysh -C) accepts the router bgp block", async () => {
    const file = only(peerConfig('frr', input));
    const path = join(dir, `${slug}-${file.name}`);
    await writeFile(path, file.content);
    const r = await exec('vtysh', ['-C', '-f', path]);
    expect(`${r.stdout}${r.stderr}`, file.content).not.toMatch(/Unknown command|error/i);
    expect(r.code).toBe(0);
    expect(file.content).toContain(`router bgp ${input.session.asn}\n`);
    expect(file.content).toContain(` neighbor ${input.router.linkLocal} remote-as ${input.networkAsn}\n`);
    expect(file.content).toContain(` neighbor ${input.router.linkLocal} interface ${iface}\n`);
    // each neighbour has the keepalive, hold and connect retry of the BIRD file
    const neighbors = file.content.match(/ remote-as /g)?.length ?? 0;
    expect(file.content.match(/^ neighbor \S+ timers 5 30$/gm)?.length).toBe(neighbors);
    expect(file.content.match(/^ neighbor \S+ timers connect 5$/gm)?.length).toBe(neighbors);
  });

  it('wg-quick strips it and wg setconf loads it once the private key is in', async () => {
    const file = only(peerConfig('wg-quick', input));
    expect(file.name).toBe(`${iface}.conf`);
    expect(file.content).toContain(`PrivateKey = ${PRIVATE_KEY_PLACEHOLDER}`);
    const peerKey = wgKey();
    // wg-quick takes the interface name from the file name: a directory per case
    await mkdir(join(dir, slug), { recursive: true });
    const path = join(dir, slug, file.name);
    await writeFile(path, file.content.replace(PRIVATE_KEY_PLACEHOLDER, peerKey.privateKey), {
      mode: 0o600,
    });
    await chmod(path, 0o600);
    const stripped = await exec('wg-quick', ['strip', path]);
    expect(stripped.stderr).toBe('');
    expect(stripped.code).toBe(0);
    // a name of this test's own: wireguard-go's control socket directory is shared by every namespace
    const name = `${lab.id}${Object.keys(CASES).indexOf(label)}`;
    await ns.run('wireguard-go', [name]);
    const strippedPath = join(dir, slug, 'stripped.conf');
    await writeFile(strippedPath, stripped.stdout, { mode: 0o600 });
    const r = await ns.exec('wg', ['setconf', name, strippedPath]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const dump = (await ns.run('wg', ['show', name, 'dump'])).trim().split('\n');
    const [ifLine, peerLine] = dump.map((l) => l.split('\t'));
    expect(ifLine?.[1]).toBe(peerKey.publicKey);
    expect(peerLine?.[0]).toBe(input.router.publicKey);
    expect(peerLine?.[2]).toMatch(new RegExp(`:${input.session.listenPort}$`));
    expect(peerLine?.[3]).toBe('0.0.0.0/0,::/0');
    expect(peerLine?.[7]).toBe('25');
    // the peer listens where it told the router to reach it
    if (input.session.endpoint) expect(ifLine?.[2]).toBe(input.session.endpoint.split(':').pop());
  });

  it('networkd: every setting is one the installed systemd-networkd knows', () => {
    const files = peerConfig('networkd', input);
    expect(files.map((f) => f.name)).toEqual([`${iface}.netdev`, `${iface}.network`]);
    const known = networkdSettings();
    expect(known.has('WireGuardPeer.PublicKey')).toBe(true); // the table was found at all
    const netdev = iniSettings(files[0]?.content ?? '');
    const network = iniSettings(files[1]?.content ?? '');
    for (const [key] of [...netdev, ...network]) expect(known, key).toContain(key);
    expect(netdev).toContainEqual(['NetDev.Name', iface]);
    expect(netdev).toContainEqual(['NetDev.Kind', 'wireguard']);
    expect(netdev).toContainEqual(['WireGuardPeer.PublicKey', input.router.publicKey]);
    // the private key the peer has, whose public key the session registered: never a new one
    const keyFile = netdev.find(([k]) => k === 'WireGuard.PrivateKeyFile')?.[1];
    expect(files[0]?.content).toContain(`# whose public key the session registered (${peerKey.publicKey})`);
    expect(files[0]?.content).toContain(`#   wg pubkey < ${keyFile}   # must print ${peerKey.publicKey}`);
    expect(files[0]?.content).not.toContain('genkey');
    expect(network).toContainEqual(['Match.Name', iface]);
    expect(network).toContainEqual(['Address.Address', `${input.session.linkLocal}/64`]);
    expect(network.some(([k, v]) => k === 'Address.Peer' && v === `${input.router.ipv4}/32`)).toBe(
      input.session.ipv4 !== undefined && input.router.ipv4 !== undefined,
    );
  });
});
