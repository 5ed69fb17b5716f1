/**
 * `peerops adopt` planning from hand-made files in the DN42 wiki layouts, run as the real `peerops adopt`
 * command over files in a temp dir. Files only: live BIRD and WireGuard takeover is not in this file.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { load } from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Plan } from '../../../agent/adopt/plan.ts';

const run = promisify(execFile);
const KEY = (n: number) => Buffer.alloc(32, n).toString('base64');
let root: string;

async function put(path: string, text: string): Promise<void> {
  await mkdir(join(path, '..'), { recursive: true });
  await writeFile(path, text);
}

async function adopt(...args: string[]): Promise<{ stdout: string; code: number }> {
  try {
    const { stdout } = await run(process.execPath, ['bin/peerops.ts', 'adopt', ...args]);
    return { stdout, code: 0 };
  } catch (err) {
    const e = err as { stdout: string; stderr: string; code: number };
    return { stdout: e.stdout + e.stderr, code: e.code };
  }
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'adopt-'));
  // DN42 wiki BIRD 2 example: bird.conf includes peers/*, each peer a protocol from template dnpeers
  await put(
    join(root, 'bird/bird.conf'),
    `router id 172.20.0.1;\n/* wiki layout */\ntemplate bgp dnpeers {\n  local as 4242420000;\n  path metric 1;\n  ipv4 { import all; export all; extended next hop on; };\n  ipv6 { import all; export all; };\n}\ninclude "/peers/*";\n`.replace(
      '/peers/*',
      join(root, 'bird/peers/*'),
    ),
  );
  for (let i = 1; i <= 3; i++) {
    const asn = 4242420100 + i;
    await put(
      join(root, `wg/wg_${i}.conf`),
      `[Interface]\nPrivateKey = ${KEY(100 + i)}\nListenPort = ${31000 + i}\nPostUp = ip addr add fe80::1/64 dev %i\nTable = off\nMTU = 1420\n\n[Peer]\nPublicKey = ${KEY(i)}\n${i === 3 ? '' : `Endpoint = peer${i}.example.net:2${i}000\n`}AllowedIPs = 0.0.0.0/0, ::/0\n`,
    );
    await put(
      join(root, `bird/peers/as${asn}.conf`),
      `protocol bgp dn42_${i} from dnpeers {\n  neighbor fe80::${i}%wg_${i} as ${asn};\n}\n`,
    );
  }
  // IPv4 tunnel addresses, a protocol per family, no MP-BGP
  await put(
    join(root, 'wg/wg_v4.conf'),
    `[Interface]\nListenPort = 31010\nAddress = 172.20.1.1/32, fe80::1/64\n[Peer]\nPublicKey = ${KEY(10)}\nEndpoint = 192.0.2.10:31010\n`,
  );
  await put(
    join(root, 'bird/peers/v4.conf'),
    `protocol bgp v4peer_v4 { local as 4242420000; neighbor 172.20.1.2 as 4242420110; interface "wg_v4"; ipv4 { import all; }; }\nprotocol bgp v4peer_v6 { local as 4242420000; neighbor fe80::10%wg_v4 as 4242420110; ipv6 { import all; }; }\n`,
  );
  // cannot adopt: port outside range, a protocol without tunnel, GRE over networkd
  await put(
    join(root, 'wg/wg_low.conf'),
    `[Interface]\nListenPort = 51820\n[Peer]\nPublicKey = ${KEY(20)}\n`,
  );
  await put(
    join(root, 'bird/peers/low.conf'),
    `protocol bgp low from dnpeers { neighbor fe80::20%wg_low as 4242420120; }\n`,
  );
  await put(
    join(root, 'bird/peers/gone.conf'),
    `protocol bgp gone from dnpeers { neighbor fe80::30%wg_gone as 4242420130; }\n`,
  );
  await put(join(root, 'networkd/30-gre1.netdev'), `[NetDev]\nName = gre1\nKind = gre\n`);
  await put(
    join(root, 'networkd/30-gre1.network'),
    `[Match]\nName = gre1\n[Network]\nAddress = fe80::1/64\n`,
  );
  await put(
    join(root, 'bird/peers/gre.conf'),
    `protocol bgp grepeer from dnpeers { neighbor fe80::40%gre1 as 4242420140; }\n`,
  );
  // systemd-networkd WireGuard pair
  await put(
    join(root, 'networkd/40-wg_nd.netdev'),
    `[NetDev]\nName = wg_nd\nKind = wireguard\nMTUBytes = 1400\n[WireGuard]\nListenPort = 31050\nPrivateKeyFile = /etc/wg.key\n[WireGuardPeer]\nPublicKey = ${KEY(50)}\nEndpoint = [2001:db8::50]:31050\n`,
  );
  await put(
    join(root, 'networkd/40-wg_nd.network'),
    `[Match]\nName = wg_nd\n[Network]\nAddress = fe80::1/64\n`,
  );
  await put(
    join(root, 'bird/peers/nd.conf'),
    `protocol bgp nd from dnpeers { neighbor fe80::50%wg_nd as 4242420150; }\n`,
  );
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const paths = () => [
  '--router=fra1',
  `--wireguard-dir=${join(root, 'wg')}`,
  `--networkd-dir=${join(root, 'networkd')}`,
  `--bird-conf=${join(root, 'bird/bird.conf')}`,
  '--files-only',
];

describe('peerops adopt plan', () => {
  it('plans one session per peer with its names, and says why it leaves the rest', async () => {
    const { stdout, code } = await adopt(...paths(), '-o', 'json');
    expect(code).toBe(0);
    const plan = JSON.parse(stdout) as Plan;
    expect(plan.sessions.map((s) => s.asn)).toEqual([
      4242420101, 4242420102, 4242420103, 4242420110, 4242420150,
    ]);
    expect(plan.sessions[0]).toMatchObject({
      listenPort: 31001,
      publicKey: KEY(1),
      endpoint: 'peer1.example.net:21000',
      mtu: 1420,
      linkLocal: 'fe80::1',
      mpbgp: true,
      extendedNextHop: true,
      adopted: { interface: 'wg_1', protocols: ['dn42_1'] },
    });
    // behind NAT: no endpoint in its file, adopted without one
    expect(plan.sessions[2]!.endpoint).toBeUndefined();
    expect(plan.sessions[3]).toMatchObject({
      ipv4: '172.20.1.2',
      linkLocal: 'fe80::10',
      mpbgp: false,
      // the link-local one first, as the agent reads them (docs/agent.md)
      adopted: { interface: 'wg_v4', protocols: ['v4peer_v6', 'v4peer_v4'] },
    });
    expect(plan.sessions[4]).toMatchObject({
      endpoint: '[2001:db8::50]:31050',
      mtu: 1400,
      listenPort: 31050,
    });
    expect(plan.notAdopted.map((n) => n.text).sort()).toEqual([
      'protocol gone: neighbor fe80::30 is on no tunnel this router has',
      `tunnel gre1 (${join(root, 'networkd/30-gre1.netdev')}): tunnel kind gre is not WireGuard; peerops runs WireGuard tunnels only`,
      `tunnel wg_low (${join(root, 'wg/wg_low.conf')}): listen port 51820 is outside the router port range 30000-32767`,
    ]);
  });

  it('prints a table and writes manifests with --out', async () => {
    const out = join(root, 'out');
    const { stdout } = await adopt(...paths(), `--out=${out}`);
    expect(stdout).toMatch(/^ASN\s+INTERFACE\s+PORT/);
    expect(stdout).toContain('5 sessions to adopt');
    expect(stdout).toContain('not adopted (3):');
    const manifest = load(await readFile(join(out, 'sessions/fra1/as4242420101.yaml'), 'utf8')) as {
      kind: string;
      spec: Record<string, unknown>;
    };
    expect(manifest.kind).toBe('PeeringSession');
    // the adopted block the agent takes the session over by; who and when are the controller's to set
    expect(manifest.spec).toMatchObject({
      listenPort: 31001,
      adopted: {
        interface: 'wg_1',
        protocols: ['dn42_1'],
        files: [join(root, 'wg/wg_1.conf'), join(root, 'bird/peers/as4242420101.conf')],
      },
    });
    expect(manifest.spec.adopted).not.toHaveProperty('by');
  });

  it('refuses bad flags with the flag named', async () => {
    expect(await adopt('-o', 'yaml')).toMatchObject({ code: 2, stdout: expect.stringContaining('--router') });
    expect(await adopt(...paths(), '--port-min=5', '--port-max=1')).toMatchObject({
      code: 2,
      stdout: expect.stringContaining('--port-min'),
    });
  });
});
