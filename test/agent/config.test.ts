import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { AgentConfigError, loadConfig, mergeBootstrap, parseConfig } from '../../agent/config.ts';
import { main } from '../../agent/main.ts';

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});
async function file(content: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'agcfg-'));
  dirs.push(dir);
  const path = join(dir, 'agent.json');
  await writeFile(path, content);
  return path;
}

const bootstrap = {
  server: { listen: ':24368' },
  node: { name: 'fra1' },
  controlPlane: { url: 'https://peerops.example.net', token: 'a-very-secret-agent-token' },
};

describe('agent config file', () => {
  it('bootstrap mode: four keys, every default of docs/agent.md filled in', () => {
    const c = parseConfig(bootstrap, 'agent.json');
    expect(c.mode).toBe('bootstrap');
    expect(c.server).toEqual({ listen: ':24368', readTimeout: 30, writeTimeout: 30, idleTimeout: 120 });
    expect(c.controlPlane).toMatchObject({
      requestTimeout: 15,
      heartbeatInterval: 30,
      syncInterval: 60,
      metricInterval: 60,
      maxRetries: 3,
      retryInitialDelay: 1000,
      retryMaxDelay: 2000,
    });
    expect(c.routing).toEqual({
      controlSocket: '/run/bird/bird.ctl',
      poolSize: 5,
      poolSizeMax: 64,
      peerConfDir: '/etc/bird/peers',
      ibgpConfDir: '/etc/bird/ibgp.d',
    });
    expect(c.birdMainConfig).toBe('/etc/bird/bird.conf');
    expect(c.tunnel).toEqual({
      configDir: '/etc/wireguard',
      privateKeyPath: '/etc/wireguard/private.key',
      publicKeyPath: '/etc/wireguard/public.key',
      persistentKeepaliveInterval: 25,
      dn42Ipv4: '',
      dn42Ipv6: '',
      dn42Ipv6LinkLocal: 'fe80::1',
    });
    expect(c.metric).toEqual({ pingTimeout: 5, pingCount: 4, pingWorkers: 32 });
    expect(c.autoUpdate).toMatchObject({ enabled: true, checkInterval: 60, channel: 'stable' });
  });

  it('full mode, key paths derived from configDir', () => {
    const c = parseConfig(
      { ...bootstrap, node: { name: 'fra1', id: 3, region: 'eu' }, tunnel: { configDir: '/srv/wg' } },
      'agent.json',
    );
    expect(c.mode).toBe('full');
    expect(c.tunnel.privateKeyPath).toBe('/srv/wg/private.key');
  });

  it('refuses unknown keys and bad values, naming the file, the key and the reason', () => {
    const bad = {
      ...bootstrap,
      routing: { poolSize: 0, birdSocket: '/x' },
      autoUpdate: { channel: 'nightly' },
    };
    let err: unknown;
    try {
      parseConfig(bad, '/etc/peerops/agent.json');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(AgentConfigError);
    const e = err as AgentConfigError;
    expect(e.message).toContain('/etc/peerops/agent.json');
    const pointers = e.errors.map((x) => x.pointer);
    expect(pointers).toContain('/routing/birdSocket');
    expect(pointers).toContain('/routing/poolSize');
    expect(pointers).toContain('/autoUpdate/channel');
    expect(e.errors.find((x) => x.pointer === '/routing/birdSocket')?.message).toBe('is not a known field');
  });

  it('keeps the bird-lg-go proxy off unless set, and refuses an allowFrom that is no address', () => {
    expect(parseConfig(bootstrap, 'a.json').lookingGlass).toEqual({});
    const on = parseConfig(
      { ...bootstrap, lookingGlass: { birdLgProxy: { listen: '[fd42:4242:1::1]:8000' } } },
      'a.json',
    );
    expect(on.lookingGlass.birdLgProxy).toEqual({ listen: '[fd42:4242:1::1]:8000', allowFrom: [] });
    expect(() =>
      parseConfig(
        {
          ...bootstrap,
          lookingGlass: { birdLgProxy: { listen: '127.0.0.1:8000', allowFrom: ['fd00::/8', 'anyone'] } },
        },
        'a.json',
      ),
    ).toThrow(/\/lookingGlass\/birdLgProxy\/allowFrom\/1: must be an IP address or a prefix/);
  });

  it('refuses tunnel addresses that are not addresses of their family; empty is none', () => {
    expect(() => parseConfig({ ...bootstrap, tunnel: { dn42Ipv4: 'fd00::1' } }, 'a.json')).toThrow(
      /\/tunnel\/dn42Ipv4: must be an IPv4 address/,
    );
    expect(() => parseConfig({ ...bootstrap, tunnel: { dn42Ipv6: '172.20.0.1; rm' } }, 'a.json')).toThrow(
      /\/tunnel\/dn42Ipv6: must be an IPv6 address/,
    );
    const c = parseConfig({ ...bootstrap, tunnel: { dn42Ipv4: '172.20.0.1' } }, 'a.json');
    expect([c.tunnel.dn42Ipv4, c.tunnel.dn42Ipv6]).toEqual(['172.20.0.1', '']);
  });

  it('refuses a keepalive at or below the handshake retry interval (mesh handshakes would cross forever)', () => {
    for (const persistentKeepaliveInterval of [1, 5]) {
      expect(() => parseConfig({ ...bootstrap, tunnel: { persistentKeepaliveInterval } }, 'a.json')).toThrow(
        /\/tunnel\/persistentKeepaliveInterval: must be 0 \(off\) or above 5 s/,
      );
    }
    expect(
      parseConfig({ ...bootstrap, tunnel: { persistentKeepaliveInterval: 0 } }, 'a.json').tunnel,
    ).toMatchObject({ persistentKeepaliveInterval: 0 });
    expect(
      parseConfig({ ...bootstrap, tunnel: { persistentKeepaliveInterval: 6 } }, 'a.json').tunnel,
    ).toMatchObject({ persistentKeepaliveInterval: 6 });
  });

  it('requires the bootstrap keys', () => {
    expect(() => parseConfig({ node: { name: 'fra1' } }, 'a.json')).toThrow(/\/controlPlane: is required/);
  });

  it('merges the bootstrap answer, all but autoUpdate', () => {
    const c = mergeBootstrap(parseConfig(bootstrap, 'a.json'), {
      node: { name: 'fra1', id: 7, region: 'eu', location: 'Frankfurt', provider: 'lab' },
      asn: 4242420001,
      loopback: {},
      tunnel: { dn42Ipv4: '172.20.0.1', dn42Ipv6: 'fd00::1', dn42Ipv6LinkLocal: 'fe80::7' },
      controlPlane: { heartbeatInterval: 10, syncInterval: 20, metricInterval: 30 },
      metric: { pingTimeout: 2, pingCount: 3, pingWorkers: 8 },
      autoUpdate: { enabled: false, channel: 'beta' },
      meshPeers: [],
      ibgpPeers: [],
    });
    expect(c.node.id).toBe(7);
    expect(c.tunnel.dn42Ipv6LinkLocal).toBe('fe80::7');
    expect(c.controlPlane.syncInterval).toBe(20);
    expect(c.controlPlane.token).toBe(bootstrap.controlPlane.token);
    // the file's section (the updater asks the controller before each check)
    expect(c.autoUpdate).toEqual(parseConfig(bootstrap, 'a.json').autoUpdate);
  });

  it('the agent refuses to start on a bad file (exit 1), on JSON that does not parse too', async () => {
    expect(await main(['--config', await file('{"node":'.concat('}'))])).toBe(1);
    expect(await main(['--config', await file(JSON.stringify({ ...bootstrap, extra: 1 }))])).toBe(1);
    await expect(loadConfig('/nonexistent/agent.json')).rejects.toThrow(/cannot read/);
  });
});
