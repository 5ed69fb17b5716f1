/**
 * peerops-wireguard (wireguard-host/, docs/agent.md "One process for every userspace tunnel"), the real
 * binary built by scripts/build-wireguard-host.sh, driven through the agent's ensureInterface in network
 * namespaces of this test: tunnels to spec, a handshake and a ping between two namespaces each with its
 * own host, link deletion, clear errors, a host that outlives its starter, and recovery after a crash.
 */
import { execFile, spawn } from 'node:child_process';
import { access, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WgInterfaceSpec } from '../../agent/wireguard/types.ts';
import {
  detectBackend,
  ensureInterface,
  readInterface,
  removeInterface,
} from '../../agent/wireguard/interface.ts';
import { NetnsLab, waitFor, type Namespace } from '../support/netns.ts';

const exec = promisify(execFile);
const ROOT = join(import.meta.dirname, '..', '..');
const MODULE = join(ROOT, 'agent', 'wireguard', 'interface.ts');
// the project's Node 24 (type stripping) for the child processes, whatever Node runs vitest
const NODE = join(ROOT, 'node_modules', '.bin', 'node');
const lab = new NetnsLab('agwh');
let binDir: string;
let a: Namespace;
let b: Namespace;
const tunnel = { a: {} as WgInterfaceSpec, b: {} as WgInterfaceSpec };

async function keyPair(dir: string, label: string): Promise<{ path: string; publicKey: string }> {
  const { stdout: priv } = await exec('wg', ['genkey']);
  const path = join(dir, `${label}.key`);
  await writeFile(path, priv, { mode: 0o600 });
  const pub = await new Promise<string>((resolve, reject) => {
    const child = execFile('wg', ['pubkey'], (err, out) =>
      err ? reject(err as Error) : resolve(out.trim()),
    );
    child.stdin?.end(priv);
  });
  return { path, publicKey: pub };
}

/** Runs the agent's WireGuard code against namespace `ns` (commands go through `ip netns exec`). */
async function inNamespace<T>(ns: Namespace, fn: () => Promise<T>): Promise<T> {
  process.env.PEEROPS_AGENT_NETNS = ns.name;
  try {
    return await fn();
  } finally {
    delete process.env.PEEROPS_AGENT_NETNS;
  }
}

/** The pids of the hosts (`peerops-wireguard --host`) running in `ns`. */
async function hostPids(ns: Namespace): Promise<number[]> {
  const { stdout } = await exec('ip', ['netns', 'pids', ns.name]);
  const pids: number[] = [];
  for (const pid of stdout.split(/\s+/).filter(Boolean)) {
    const { stdout: cmd } = await exec('cat', [`/proc/${pid}/cmdline`]).catch(() => ({ stdout: '' }));
    if (cmd.split('\0').join(' ').includes('peerops-wireguard --host')) pids.push(Number(pid));
  }
  return pids;
}

const exists = (path: string) =>
  access(path).then(
    () => true,
    () => false,
  );

beforeAll(async () => {
  const { stdout } = await exec('bash', [join(ROOT, 'scripts', 'build-wireguard-host.sh')], {
    timeout: 600_000,
  });
  binDir = stdout.trim().split('\n').at(-1) ?? '';
  process.env.PATH = `${binDir}:${process.env.PATH ?? ''}`;
  // the host even where the kernel has WireGuard
  process.env.PEEROPS_WIREGUARD = 'peerops-wireguard';
  a = await lab.namespace('a');
  b = await lab.namespace('b');
  await lab.veth(a, b, { a: '10.77.0.1/24', b: '10.77.0.2/24' });
  const dir = await lab.tempDir('keys');
  const [ka, kb] = await Promise.all([keyPair(dir, 'a'), keyPair(dir, 'b')]);
  const port = lab.uniquePort();
  const base = { mtu: 1420, peerRoutes: [], generation: 0 };
  tunnel.a = {
    ...base,
    name: `wg_${port}`,
    listenPort: port,
    privateKeyPath: ka.path,
    addresses: ['172.31.77.1 peer 172.31.77.2/32'],
    peer: {
      publicKey: kb.publicKey,
      endpoint: `10.77.0.2:${port + 1}`,
      allowedIps: ['172.31.77.2/32'],
      persistentKeepalive: 5,
    },
  };
  tunnel.b = {
    ...base,
    name: `wg_${port + 1}`,
    listenPort: port + 1,
    privateKeyPath: kb.path,
    addresses: ['172.31.77.2 peer 172.31.77.1/32'],
    peer: {
      publicKey: ka.publicKey,
      endpoint: `10.77.0.1:${port}`,
      allowedIps: ['172.31.77.1/32'],
      persistentKeepalive: 5,
    },
  };
}, 660_000);

afterAll(async () => {
  delete process.env.PEEROPS_WIREGUARD;
  // SIGTERM to every process in the namespaces: each host closes its tunnels and removes their sockets
  await lab.cleanup();
});

describe('peerops-wireguard: every userspace tunnel in one process', () => {
  it('is preferred to wireguard-go when both are on PATH; PEEROPS_WIREGUARD names another', async () => {
    const backendWith = async (env: NodeJS.ProcessEnv) => {
      const code = `const { detectBackend } = await import(${JSON.stringify(MODULE)}); console.log(await detectBackend().catch((e) => e.message));`;
      const { stdout } = await exec(NODE, ['--input-type=module', '-e', code], {
        env: { PATH: process.env.PATH, ...env },
      });
      return stdout.trim();
    };
    const { stdout: kernel } = await exec('sh', [
      '-c',
      'ip link add wgkprobe type wireguard 2>/dev/null && ip link del wgkprobe && echo yes || echo no',
    ]);
    expect(await backendWith({})).toBe(kernel.trim() === 'yes' ? 'kernel' : 'peerops-wireguard');
    expect(await backendWith({ PEEROPS_WIREGUARD: 'wireguard-go' })).toBe('wireguard-go');
    expect(await backendWith({ PEEROPS_WIREGUARD: 'boringtun' })).toBe(
      'PEEROPS_WIREGUARD=boringtun: not a WireGuard backend; use kernel, peerops-wireguard or wireguard-go',
    );
    expect(await detectBackend()).toBe('peerops-wireguard');
  });

  it('creates tunnels to spec in two namespaces, one host in each', async () => {
    for (const [ns, spec] of [
      [a, tunnel.a],
      [b, tunnel.b],
    ] as const) {
      const result = await inNamespace(ns, () => ensureInterface(spec));
      expect(result.created).toBe(true);
      // keys, port and peer travel with the request that creates the link: no `wg set` for them
      expect(result.changes[0]).toBe('created with its keys, port and peer');
      expect(result.changes.filter((c) => c.startsWith('wg set'))).toEqual([
        `wg set peer ${spec.peer.publicKey} persistent-keepalive ${spec.peer.persistentKeepalive}`,
      ]);
      const state = await inNamespace(ns, () => readInterface(spec.name));
      expect(state?.wg?.listenPort).toBe(spec.listenPort);
      expect(state?.wg?.peers.map((p) => p.publicKey)).toEqual([spec.peer.publicKey]);
      expect(state?.mtu).toBe(1420);
      expect(state?.up).toBe(true);
      // nothing differs the second time
      expect(await inNamespace(ns, () => ensureInterface(spec))).toEqual({ created: false, changes: [] });
      expect(await ns.run('peerops-wireguard', ['--list'])).toBe(`${spec.name}\n`);
    }
    const [hostsA, hostsB] = await Promise.all([hostPids(a), hostPids(b)]);
    expect(hostsA).toHaveLength(1);
    expect(hostsB).toHaveLength(1);
    expect(hostsA[0]).not.toBe(hostsB[0]);
  });

  it('carries traffic: a handshake, then a ping through the tunnel', async () => {
    await waitFor(
      'a ping through the tunnel',
      async () => (await a.exec('ping', ['-c', '1', '-W', '2', '172.31.77.2'])).code === 0,
      30_000,
      500,
    );
    const dump = await a.run('wg', ['show', tunnel.a.name, 'latest-handshakes']);
    const [, when] = dump.trim().split('\t');
    expect(Number(when)).toBeGreaterThan(0);
  });

  it('dumps every tunnel as `wg show all dump` does, its private key hidden, from one request', async () => {
    // handshake time and byte counts move between the two reads: every other column must match. wg
    // lists every socket in /var/run/wireguard, b's too (a directory all namespaces share), the host only
    // the tunnels of its own namespace.
    const steady = (dump: string) =>
      dump
        .trim()
        .split('\n')
        .filter((line) => line.startsWith(`${tunnel.a.name}\t`))
        .map((line) => line.split('\t'))
        .map((f) => (f.length === 9 ? [...f.slice(0, 5), f[8]] : [f[0], f[2], f[3], f[4]]));
    const [ours, wgs] = [
      await a.run('peerops-wireguard', ['--dump']),
      await a.run('wg', ['show', 'all', 'dump']),
    ];
    expect(steady(ours)).toEqual(steady(wgs));
    expect(steady(ours)).toHaveLength(2); // the interface and its peer
    const [iface, peer] = ours
      .trim()
      .split('\n')
      .map((l) => l.split('\t'));
    expect(iface?.[1]).toBe('(hidden)');
    expect(Number(peer?.[5])).toBeGreaterThan(0);
    expect(ours).not.toContain(wgs.split('\t')[1]); // the private key
  });

  it('gives a clear error for an interface it carries, an existing link and a bad name', async () => {
    const again = await a.exec('peerops-wireguard', [tunnel.a.name]);
    expect(again.code).toBe(1);
    expect(again.stderr.trim()).toBe(
      `peerops-wireguard: ${tunnel.a.name}: this host already carries that interface`,
    );
    const taken = await a.exec('peerops-wireguard', ['lo']);
    expect(taken.code).toBe(1);
    expect(taken.stderr.trim()).toBe('peerops-wireguard: lo: a link with that name already exists');
    const bad = await a.exec('peerops-wireguard', ['../etc']);
    expect(bad.code).toBe(1);
    expect(bad.stderr.trim()).toMatch(/^peerops-wireguard: "\.\.\/etc" is not a valid interface name/);
    // settings the device refuses: an error naming them, and no link left behind
    const refused = await a.exec('peerops-wireguard', ['--configured', 'wg_refused'], {
      input: 'listen_port=not-a-port\n',
    });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^peerops-wireguard: wg_refused: applying the settings: .*listen_port/);
    expect((await a.exec('ip', ['link', 'show', 'wg_refused'])).code).not.toBe(0);
  });

  it('outlives the process that started it (an agent that exits)', async () => {
    const c = await lab.namespace('c');
    const spec = { ...tunnel.a, name: `wg_${tunnel.a.listenPort + 2}` };
    // a separate "agent" process creates the first tunnel of namespace c, then exits
    const code = `const { ensureInterface } = await import(${JSON.stringify(MODULE)}); await ensureInterface(${JSON.stringify(spec)});`;
    await exec(NODE, ['--input-type=module', '-e', code], {
      env: { ...process.env, PEEROPS_AGENT_NETNS: c.name },
    });
    const [host] = await hostPids(c);
    expect(host).toBeGreaterThan(0);
    // its own session: the agent's process group and terminal signals do not reach it
    const stat = await exec('cat', [`/proc/${host}/stat`]);
    expect(Number(stat.stdout.split(') ')[1]?.split(' ')[3])).toBe(host);
    expect((await inNamespace(c, () => readInterface(spec.name)))?.wg?.listenPort).toBe(spec.listenPort);

    // a crash takes its tunnels down (the kernel closes the TUN); the next ensure (the agent's next
    // pass) starts a new host and re-creates the tunnel over the stale socket file
    process.kill(host!, 'SIGKILL');
    await waitFor('the crashed host gone', async () => (await hostPids(c)).length === 0, 10_000);
    await waitFor(
      'the link gone with the crashed host',
      async () => (await inNamespace(c, () => readInterface(spec.name))) === undefined,
      10_000,
    );
    expect((await inNamespace(c, () => ensureInterface(spec))).created).toBe(true);
    const [second] = await hostPids(c);
    expect(second).not.toBe(host);
    expect(await c.run('peerops-wireguard', ['--list'])).toBe(`${spec.name}\n`);
  });

  it("beside the image's keeper: a command waits for the keeper's host (--serve) instead of starting one", async () => {
    const d = await lab.namespace('d');
    const name = `wg_${lab.uniquePort()}`;
    const env = { ...process.env, PEEROPS_WIREGUARD_KEEPER: '1' };
    // the agent's command comes first (pods start in any order)
    const added = exec('ip', ['netns', 'exec', d.name, 'peerops-wireguard', name], { env });
    await new Promise((r) => setTimeout(r, 1000));
    expect(await hostPids(d)).toEqual([]);
    const keeperHost = spawn('ip', ['netns', 'exec', d.name, 'peerops-wireguard', '--serve'], {
      stdio: 'ignore',
    });
    await added;
    expect(await d.run('peerops-wireguard', ['--list'])).toBe(`${name}\n`);
    // the tunnel is the keeper's host's: no host of the command's own was started
    expect(await hostPids(d)).toEqual([]);
    expect(keeperHost.exitCode).toBeNull();
    // a second --serve in the namespace refuses rather than stand by
    const second = await exec('ip', ['netns', 'exec', d.name, 'peerops-wireguard', '--serve']).then(
      () => 0,
      (err: { code?: number }) => err.code,
    );
    expect(second).toBe(1);
    await d.run('ip', ['link', 'del', name]);
    await waitFor(
      'the tunnel forgotten',
      async () => (await d.run('peerops-wireguard', ['--list'])) === '',
      10_000,
    );
    // without tunnels it stays (a supervisor runs it): still there to answer
    expect(keeperHost.exitCode).toBeNull();
    keeperHost.kill('SIGTERM');
  });

  it('beside the keeper, with no keeper host: a clear error after 15 s, no host and no link made', async () => {
    const e = await lab.namespace('e');
    const name = `wg_${lab.uniquePort()}`;
    const env = { ...process.env, PEEROPS_WIREGUARD_KEEPER: '1' };
    const failed = await exec('ip', ['netns', 'exec', e.name, 'peerops-wireguard', name], { env }).then(
      () => undefined,
      (err: { code?: number; stderr?: string }) => err,
    );
    expect(failed?.code).toBe(1);
    expect(failed?.stderr).toMatch(/no host answered within 15s.*peerops-wireguard pod running on this node/);
    expect(await hostPids(e)).toEqual([]);
    expect(await e.run('ip', ['-o', 'link', 'show'])).not.toContain(name);
  }, 30_000);

  it('forgets a tunnel whose link is deleted, and removes its socket', async () => {
    expect(await inNamespace(a, () => removeInterface(tunnel.a.name))).toBe(true);
    expect(await exists(`/var/run/wireguard/${tunnel.a.name}.sock`)).toBe(false);
    expect(await a.run('peerops-wireguard', ['--list'])).toBe('');
    // the host stays for the next tunnel (it exits after a minute without one)
    expect(await hostPids(a)).toHaveLength(1);
    expect((await inNamespace(a, () => ensureInterface(tunnel.a))).created).toBe(true);
  });

  it('closes every tunnel it carries on SIGTERM', async () => {
    const [host] = await hostPids(b);
    process.kill(host!, 'SIGTERM');
    await waitFor('the host gone after SIGTERM', async () => (await hostPids(b)).length === 0, 10_000);
    expect(await inNamespace(b, () => readInterface(tunnel.b.name))).toBeUndefined();
    expect(await exists(`/var/run/wireguard/${tunnel.b.name}.sock`)).toBe(false);
    // no host, no tunnel: an empty dump, not an error
    expect(await b.run('peerops-wireguard', ['--dump'])).toBe('');
  });
});
