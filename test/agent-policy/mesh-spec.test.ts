/** Mesh pieces that need no network: tunnel specs from a GET /mesh body, the mesh key file. */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureMeshKey, meshPublicKey } from '../../agent/mesh/key.ts';
import { meshInterfaceSpecs, meshLinkLocal } from '../../agent/mesh/spec.ts';
import type { MeshResponse } from '../../common/agent-api.ts';

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

const KEY_A = 'YWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWE=';
const mesh: MeshResponse = {
  peers: [
    {
      router: 'sin1',
      nodeId: 12,
      endpoint: '[2001:db8::12]:33001',
      publicKey: KEY_A,
      linkLocal: 'fe80::101',
      loopback: { ipv6: 'fd42:10::c' },
      listenPort: 33012,
    },
    {
      router: 'ams1',
      nodeId: 2,
      endpoint: 'ams1.example.net:33001',
      publicKey: KEY_A,
      linkLocal: 'fe80::101',
      loopback: { ipv4: '172.20.10.2', ipv6: 'fd42:10::2' },
      listenPort: 33002,
    },
  ],
};

describe('meshInterfaceSpecs', () => {
  it('one wgm_<node id> tunnel per peer, keyed with the mesh key, node-id link-local, IPv4 next hop for Babel', () => {
    const specs = meshInterfaceSpecs(mesh, {
      privateKeyPath: '/etc/wireguard/mesh.key',
      nodeId: 1,
      loopback: { ipv4: '172.20.10.1', ipv6: 'fd42:10::1' },
      persistentKeepalive: 25,
    });
    expect(specs).toEqual([
      {
        name: 'wgm_2',
        listenPort: 33002,
        privateKeyPath: '/etc/wireguard/mesh.key',
        mtu: 1420,
        multicast: true,
        addresses: ['fe80::1:1/64', '172.20.10.1/32'],
        peerRoutes: ['172.20.10.2'],
        peer: {
          publicKey: KEY_A,
          endpoint: 'ams1.example.net:33001',
          allowedIps: ['0.0.0.0/0', '::/0'],
          persistentKeepalive: 25,
        },
        generation: 0,
      },
      expect.objectContaining({ name: 'wgm_12', listenPort: 33012, peerRoutes: [] }),
    ]);
    expect(meshLinkLocal(4095)).toBe('fe80::1:fff');
  });
});

describe('mesh key', () => {
  it('is created once, mode 0600, and its public half is what wg computes', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'apkey-'));
    dirs.push(dir);
    const configDir = path.join(dir, 'wireguard');
    const first = await ensureMeshKey(configDir);
    expect(first.privateKeyPath).toBe(path.join(configDir, 'mesh.key'));
    expect((await stat(first.privateKeyPath)).mode & 0o777).toBe(0o600);
    const again = await ensureMeshKey(configDir);
    expect(again.publicKey).toBe(first.publicKey);
    expect(await meshPublicKey(configDir)).toBe(first.publicKey);
    const wg = await new Promise<string>((resolve, reject) => {
      const child = execFile('wg', ['pubkey'], (err, stdout) =>
        err ? reject(err as Error) : resolve(stdout.trim()),
      );
      void readFile(first.privateKeyPath, 'utf8').then((k) => child.stdin?.end(k));
    });
    expect(first.publicKey).toBe(wg);
  });
});
