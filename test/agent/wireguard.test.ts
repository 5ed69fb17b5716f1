import { chmod, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WgInterfaceSpec } from '../../agent/wireguard/types.ts';
import {
  detectBackend,
  ensureInterface,
  listInterfaces,
  readAllInterfaces,
  readInterface,
  removeInterface,
  WireGuardError,
} from '../../agent/wireguard/interface.ts';
import { NetnsLab, type Namespace } from '../support/netns.ts';

const lab = new NetnsLab('agw');
let node: Namespace;
let keyPath: string;
let spec: WgInterfaceSpec;
const peerKey = 'xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=';

beforeAll(async () => {
  node = await lab.namespace('node');
  process.env.PEEROPS_AGENT_NETNS = node.name;
  const dir = await lab.tempDir('keys');
  keyPath = join(dir, 'private.key');
  await writeFile(keyPath, 'yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=\n', { mode: 0o600 });
  const port = lab.uniquePort();
  spec = {
    name: `wg_${port}`,
    listenPort: port,
    privateKeyPath: keyPath,
    mtu: 1420,
    addresses: ['fe80::1/64', '172.20.0.1 peer 172.20.9.9/32'],
    peerRoutes: ['fd42:9::9'],
    peer: {
      publicKey: peerKey,
      endpoint: '127.0.0.1:51820',
      allowedIps: ['::/0', '0.0.0.0/0'],
      persistentKeepalive: 25,
    },
    generation: 0,
  };
});
afterAll(async () => {
  delete process.env.PEEROPS_AGENT_NETNS;
  await lab.cleanup();
});

describe('wireguard interfaces (wireguard-go in a namespace)', () => {
  it('detects the userspace backend here', async () => {
    expect(await detectBackend()).toBe('wireguard-go');
  });

  it('creates the interface to spec, then finds nothing to change', async () => {
    const first = await ensureInterface(spec);
    expect(first.created).toBe(true);
    const state = await readInterface(spec.name);
    expect(state).toMatchObject({ mtu: 1420, up: true, addrGenModeNone: true, generation: 0 });
    expect(state?.addresses.sort()).toEqual(['172.20.0.1 peer 172.20.9.9/32', 'fe80::1/64']);
    expect(state?.routes).toContain('fd42:9::9');
    // the point-to-point address routes the peer's IPv4 through the tunnel
    expect(await node.run('ip', ['-4', 'route', 'get', '172.20.9.9'])).toContain(`dev ${spec.name}`);
    expect(state?.wg?.listenPort).toBe(spec.listenPort);
    expect(state?.wg?.peers).toMatchObject([
      { publicKey: peerKey, endpoint: '127.0.0.1:51820', persistentKeepalive: 25 },
    ]);
    expect(await ensureInterface(spec)).toEqual({ created: false, changes: [] });
    // The batched read of a pass sees exactly what the per-link read sees.
    const all = await readAllInterfaces(['wg_']);
    expect(all.get(spec.name)).toEqual(await readInterface(spec.name));
    expect(await ensureInterface(spec, all.get(spec.name) ?? null)).toEqual({ created: false, changes: [] });
    expect(await listInterfaces('wg_')).toEqual([spec.name]);
  });

  it('applies an endpoint and MTU change in place', async () => {
    const before = await node.run('ip', ['-j', 'link', 'show', spec.name]);
    spec = { ...spec, mtu: 1380, peer: { ...spec.peer, endpoint: '[::1]:51999' } };
    const result = await ensureInterface(spec);
    expect(result.created).toBe(false);
    expect(result.changes.length).toBe(2);
    const after = await node.run('ip', ['-j', 'link', 'show', spec.name]);
    expect(JSON.parse(after)[0].ifindex).toBe(JSON.parse(before)[0].ifindex);
    const state = await readInterface(spec.name);
    expect(state?.mtu).toBe(1380);
    expect(state?.wg?.peers[0]?.endpoint).toBe('[::1]:51999');
  });

  it("applies a modify's new key, IPv4 and IPv6 peer addresses in place, leaving others' routes", async () => {
    const index = async () => JSON.parse(await node.run('ip', ['-j', 'link', 'show', spec.name]))[0].ifindex;
    const before = await index();
    // a route BIRD put on the link: not the agent's to remove
    await node.run('ip', ['route', 'replace', 'fd42:77::/48', 'dev', spec.name, 'proto', 'bird']);
    const newKey = 'mHQAvg2DG5ndhWXJPCN6xvUbZGgs1jpT5vK82V9HZ3c=';
    spec = {
      ...spec,
      addresses: ['fe80::1/64', '172.20.0.1 peer 172.20.9.8/32'],
      peerRoutes: ['fd42:9::8'],
      peer: { ...spec.peer, publicKey: newKey },
    };
    const result = await ensureInterface(spec);
    expect(result.created).toBe(false);
    expect(await index()).toBe(before);
    const state = await readInterface(spec.name);
    // the old key's peer is gone, the new one has the endpoint and allowed IPs
    expect(state?.wg?.peers).toMatchObject([{ publicKey: newKey, endpoint: '[::1]:51999' }]);
    expect(state?.addresses.sort()).toEqual(['172.20.0.1 peer 172.20.9.8/32', 'fe80::1/64']);
    expect(state?.routes).toContain('fd42:9::8');
    expect(state?.routes).not.toContain('fd42:9::9');
    expect(state?.routes).toContain('fd42:77::/48');
    expect(state?.ownRoutes).toEqual(['fd42:9::8']);
    expect(await ensureInterface(spec)).toEqual({ created: false, changes: [] });
  });

  it('re-creates the interface for a new generation', async () => {
    const before = JSON.parse(await node.run('ip', ['-j', 'link', 'show', spec.name]))[0].ifindex;
    spec = { ...spec, generation: 1 };
    const result = await ensureInterface(spec);
    expect(result.created).toBe(true);
    const after = JSON.parse(await node.run('ip', ['-j', 'link', 'show', spec.name]))[0].ifindex;
    expect(after).not.toBe(before);
    expect((await readInterface(spec.name))?.generation).toBe(1);
  });

  it('refuses a private key readable by group or others', async () => {
    await chmod(keyPath, 0o644);
    await expect(ensureInterface(spec)).rejects.toThrow(WireGuardError);
    await expect(ensureInterface(spec)).rejects.toThrow(/mode 644/);
    await chmod(keyPath, 0o600);
  });

  it('names the ip change the kernel refuses; the batch runs none after it', async () => {
    const bad = { ...spec, mtu: 70000, addresses: [...spec.addresses, 'fd42:77::1/128'] };
    await expect(ensureInterface(bad)).rejects.toThrow(
      new RegExp(`^${spec.name}: mtu 70000 failed: .*mtu greater than device maximum`),
    );
    const state = await readInterface(spec.name);
    expect(state?.mtu).toBe(1380);
    expect(state?.addresses).not.toContain('fd42:77::1/128');
    expect(await ensureInterface(spec)).toEqual({ created: false, changes: [] });
  });

  it('removes the interface and its daemon', async () => {
    expect(await removeInterface(spec.name)).toBe(true);
    expect(await readInterface(spec.name)).toBeUndefined();
    expect(await removeInterface(spec.name)).toBe(false);
    expect((await node.exec('test', ['-e', `/var/run/wireguard/${spec.name}.sock`])).code).not.toBe(0);
  });
});
