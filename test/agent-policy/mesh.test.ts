/**
 * Three routers in network namespaces build the mesh through the real agent code: mesh keys (key.ts),
 * WireGuard specs from GET /mesh bodies (spec.ts) applied through the agent's WireGuard port with real wireguard-go,
 * the loopback link, and real BIRD running the rendered main config and iBGP files. Shows: Babel carries
 * the loopbacks, iBGP is Established between every pair, a route learned from an eBGP peer of r1 reaches
 * r3 (and a ROA-invalid one does not), and the mesh status report sees every peer.
 * The controller is not needed for this: the mesh and policy bodies are fixtures of the wire format.
 */
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderIbgpConfigs } from '../../agent/bird/ibgp.ts';
import { localConfDir, renderMainConfig } from '../../agent/bird/main-config.ts';
import { BIRD_NAMES, sessionProtocolName } from '../../agent/bird/names.ts';
import { parseConfig } from '../../agent/config.ts';
import { ensureMeshKey } from '../../agent/mesh/key.ts';
import { MeshStep, type MeshSource } from '../../agent/reconcile/mesh-step.ts';
import { systemWireGuard } from '../../agent/wireguard/interface.ts';
import type { BirdConfigResponse, MeshResponse, MeshStatusBody } from '../../common/agent-api.ts';
import { meshListenPort } from '../../common/naming.ts';
import { exec, NetnsLab, waitFor, type BirdInstance, type Namespace } from '../support/netns.ts';

const ASN = 4242420101;
const EXT_ASN = 4242420200;
const IDS = [1, 2, 3] as const;

interface Router {
  id: number;
  name: string;
  ns: Namespace;
  dir: string;
  publicKey: string;
  privateKeyPath: string;
  linkLocal: string;
  loopback: { ipv4: string; ipv6: string };
  bird?: BirdInstance;
  mesh?: MeshStep;
  /** The controller's side, answered from the fixture bodies; null while it is "unreachable". */
  posted: MeshStatusBody[];
  reachable: boolean;
}

/** Stands in for the controller's agent endpoints (not under test here): fixture bodies of the wire format. */
function fixtureClient(r: Router): MeshSource & { meshStatus(body: MeshStatusBody): Promise<void> } {
  const up = () => {
    if (!r.reachable) throw new Error('connect ECONNREFUSED');
  };
  return {
    mesh: async () => (up(), meshOf(r)),
    meshStatus: async (body) => {
      up();
      r.posted.push(body);
    },
  };
}

const silentLog = pino({ level: 'silent' });

const lab = new NetnsLab('apm');
const routers: Router[] = [];
/** Underlay address of router `a` on its veth towards router `b`. */
const underlay = new Map<string, string>();
let ext: BirdInstance;
let savedPath: string | undefined;

/**
 * The agent runs every command through `ip netns exec` when PEEROPS_AGENT_NETNS is set (system/exec.ts).
 * Three routers in one test process: their calls are made one router at a time, never interleaved.
 */
async function inRouter<T>(r: Router, fn: () => Promise<T>): Promise<T> {
  process.env.PEEROPS_AGENT_NETNS = r.ns.name;
  try {
    return await fn();
  } finally {
    delete process.env.PEEROPS_AGENT_NETNS;
  }
}

/**
 * wireguard-go and wg keep their UAPI sockets in the one /var/run/wireguard of the host, and every router
 * of a full mesh has a `wgm_<id>` that another router has too. These wrappers give each namespace its own
 * socket directory (a private mount namespace with a bind mount) and then run the real binaries.
 */
async function writeWireGuardWrappers(dir: string, socketRoot: string): Promise<void> {
  for (const [name, real] of [
    ['wireguard-go', '/usr/bin/wireguard-go'],
    ['wg', '/usr/bin/wg'],
  ] as const) {
    const file = path.join(dir, name);
    await writeFile(
      file,
      `#!/bin/bash
set -e
ns=$(ip netns identify $$)
dir="${socketRoot}/\${ns:-host}"
mkdir -p "$dir" /var/run/wireguard
exec unshare -m --propagation private /bin/sh -c 'mount --bind "$0" /var/run/wireguard && exec "$@"' "$dir" ${real} "$@"
`,
    );
    await chmod(file, 0o755);
  }
}

function policyOf(r: Router): BirdConfigResponse {
  return {
    dn42Asn: ASN,
    // an address inside the router's own namespace: nothing answers, nothing leaves the namespace
    rpkiServers: [{ host: '127.0.0.1', port: 8282 }],
    ownPrefixes: { ipv4: ['172.20.10.0/27'], ipv6: ['fd42:10::/48'] },
    importLimit: { ipv4: 1000, ipv6: 1000, action: 'block' },
    communities: { enabled: true, bandwidth: 24, crypto: 34, region: 41 },
    routerId: r.loopback.ipv4,
    loopback: r.loopback,
    ibgpPeers: routers
      .filter((o) => o !== r)
      .map((o) => ({ router: o.name, nodeId: o.id, loopback: o.loopback })),
  };
}

function meshOf(r: Router): MeshResponse {
  return {
    peers: routers
      .filter((o) => o !== r)
      .map((o) => ({
        router: o.name,
        nodeId: o.id,
        endpoint: `[${underlay.get(`${o.id}-${r.id}`)}]:${meshListenPort(r.id)}`,
        publicKey: o.publicKey,
        linkLocal: o.linkLocal,
        loopback: o.loopback,
        listenPort: meshListenPort(o.id),
      })),
  };
}

beforeAll(async () => {
  const wrappers = await lab.tempDir('bin');
  await writeWireGuardWrappers(wrappers, await lab.tempDir('wgsock'));
  savedPath = process.env.PATH;
  process.env.PATH = `${wrappers}:${process.env.PATH ?? ''}`;

  for (const id of IDS) {
    const dir = await lab.tempDir(`r${id}`);
    const key = await ensureMeshKey(path.join(dir, 'wireguard'));
    routers.push({
      id,
      name: `r${id}`,
      ns: await lab.namespace(`r${id}`),
      dir,
      ...key,
      linkLocal: 'fe80::101', // one session link-local for every router, as networks often have
      loopback: { ipv4: `172.20.10.${id}`, ipv6: `fd42:10::${id}` },
      posted: [],
      reachable: true,
    });
  }
  for (const [a, b] of [
    [0, 1],
    [0, 2],
    [1, 2],
  ] as const) {
    const ra = routers[a]!;
    const rb = routers[b]!;
    const net = `fd99:${ra.id}${rb.id}`;
    await lab.veth(ra.ns, rb.ns, { a: `${net}::${ra.id}/64`, b: `${net}::${rb.id}/64` });
    underlay.set(`${ra.id}-${rb.id}`, `${net}::${ra.id}`);
    underlay.set(`${rb.id}-${ra.id}`, `${net}::${rb.id}`);
  }

  // r1's eBGP neighbour: a separate network announcing one good and one ROA-invalid prefix of each family
  const extNs = await lab.namespace('ext');
  const r1 = routers[0]!;
  await lab.veth(r1.ns, extNs, { a: 'fd99:e1::1/64', b: 'fd99:e1::2/64' });
  ext = await lab.startBird(
    extNs,
    `router id 172.22.5.1;
protocol device {}
protocol static { ipv4; route 172.22.5.0/24 unreachable; route 172.22.6.0/24 unreachable; }
protocol static { ipv6; route fd42:5::/48 unreachable; route fd42:6::/48 unreachable; }
protocol bgp r1 {
  local as ${EXT_ASN};
  neighbor fd99:e1::1 as ${ASN};
  ipv4 { extended next hop on; import none; export all; };
  ipv6 { import none; export all; };
}
`,
  );

  for (const r of routers) {
    await inRouter(r, async () => {
      const paths = {
        peerConfDir: path.join(r.dir, 'bird', 'peers'),
        ibgpConfDir: path.join(r.dir, 'bird', 'ibgp.d'),
      };
      const config = parseConfig(
        {
          node: { name: r.name, id: r.id },
          controlPlane: { url: 'http://127.0.0.1:9', token: 'test-token-0123456789' },
          routing: paths,
          tunnel: { configDir: path.join(r.dir, 'wireguard'), persistentKeepaliveInterval: 10 },
          metric: { pingTimeout: 2 },
        },
        `${r.name}.json`,
      );
      // what the agent's reconcile pass does in its mesh step: mesh tunnels first, then the BIRD tree
      r.mesh = new MeshStep({ config, wireguard: systemWireGuard, source: fixtureClient(r), log: silentLog });
      const meshed = await r.mesh.run(policyOf(r));
      expect(meshed.tunnels).toEqual(routers.filter((o) => o !== r).map((o) => `wgm_${o.id}`));
      const meshInterfaces = [...meshed.interfaces];
      for (const d of [...Object.values(paths), localConfDir(paths)]) await mkdir(d, { recursive: true });
      for (const [name, text] of renderIbgpConfigs(policyOf(r))) {
        await writeFile(path.join(paths.ibgpConfDir, name), text);
      }
      if (r.id === 1) {
        // the eBGP session, in the shape of a per-session file, and an operator ROA in local.d
        await writeFile(
          path.join(paths.peerConfDir, 'ext.conf'),
          `protocol bgp ${sessionProtocolName(20200)} from ${BIRD_NAMES.ebgpTemplate} {
  neighbor fd99:e1::2 as ${EXT_ASN};
  ipv4 {
    extended next hop on;
    import where ${BIRD_NAMES.importFilter}(1, 24, 34);
    export where ${BIRD_NAMES.exportFilter}(1, 24, 34);
  };
  ipv6 {
    import where ${BIRD_NAMES.importFilter}(1, 24, 34);
    export where ${BIRD_NAMES.exportFilter}(1, 24, 34);
  };
}
`,
        );
        await writeFile(
          path.join(localConfDir(paths), 'roa.conf'),
          `protocol static operator_roa4 { roa4 { table dn42_roa4; }; route 172.22.6.0/24 max 24 as 4242420999; }
protocol static operator_roa6 { roa6 { table dn42_roa6; }; route fd42:6::/48 max 48 as 4242420999; }
`,
        );
      }
      const configPath = path.join(r.dir, 'bird', 'bird.conf');
      await writeFile(configPath, renderMainConfig(policyOf(r), paths, { meshInterfaces }));
      r.bird = await lab.startBird(r.ns, { configPath });
    });
  }
}, 120_000);

afterAll(async () => {
  if (savedPath !== undefined) process.env.PATH = savedPath;
  await lab.cleanup();
});

describe('three-router mesh', () => {
  it('Babel carries every loopback to every router', async () => {
    for (const r of routers) {
      const others = routers.filter((o) => o !== r);
      const carried = async () => {
        const out = await r.bird!.birdc('show route protocol mesh_babel');
        return others.every(
          (o) => out.includes(`${o.loopback.ipv6}/128`) && out.includes(`${o.loopback.ipv4}/32`),
        );
      };
      await waitFor(`babel routes on ${r.name}`, carried, 120_000).catch(async (err: Error) => {
        // what Babel and WireGuard saw on every router, for the failure message
        let dump = '';
        for (const o of routers) {
          const wg = await o.ns.exec('wg', ['show']);
          const babel = await exec('birdc', ['-s', o.bird!.socket, 'show', 'babel', 'neighbors']);
          const addrs = await o.ns.exec('ip', ['-br', 'addr']);
          dump += `== ${o.name}\n${babel.stdout}\n${wg.stdout}\n${addrs.stdout}\n`;
        }
        throw new Error(`${err.message}\n${dump}`);
      });
      const kernel = await r.ns.run('ip', ['-6', 'route', 'show', 'proto', 'bird']);
      for (const o of others) expect(kernel).toContain(o.loopback.ipv6);
    }
  }, 200_000);

  it('iBGP is Established between every pair', async () => {
    for (const r of routers) {
      await waitFor(
        `iBGP on ${r.name}`,
        async () => {
          const out = await r.bird!.birdc('show protocols');
          const ibgp = out.split('\n').filter((l) => l.startsWith('ibgp_'));
          return ibgp.length === 4 && ibgp.every((l) => l.includes('Established'));
        },
        120_000,
      );
    }
  }, 200_000);

  it('a route learned from an eBGP peer of r1 is present on r3; a ROA-invalid one is not', async () => {
    const [r1, , r3] = routers;
    for (const prefix of ['172.22.5.0/24', 'fd42:5::/48']) {
      await waitFor(
        `${prefix} on r3`,
        async () => (await r3!.bird!.birdc(`show route ${prefix}`)).includes(prefix),
        60_000,
      );
    }
    const all = await r3!.bird!.birdc('show route all fd42:5::/48');
    expect(all).toContain('BGP.community: (64511,1) (64511,24) (64511,34)');
    expect(await ext.birdc('show protocols')).toContain('Established');
    // the operator's ROA (local.d) makes these invalid: r1 drops them on import, so r3 never sees them
    for (const prefix of ['172.22.6.0/24', 'fd42:6::/48']) {
      for (const r of [r1!, r3!]) {
        const out = await exec('birdc', ['-s', r.bird!.socket, 'show', 'route', prefix]);
        expect(out.stdout).toContain('Network not found');
      }
    }
    const roa = await exec('birdc', ['-s', r1!.bird!.socket, 'show', 'route', 'table', 'dn42_roa4']);
    expect(roa.stdout).toContain('172.22.6.0/24-24 AS4242420999');
  }, 90_000);

  it('reports mesh status with handshake, rtt, bytes and reachability', async () => {
    const r1 = routers[0]!;
    // what the agent's mesh status report does (agent.ts reportMeshOnce)
    await inRouter(r1, async () => fixtureClient(r1).meshStatus((await r1.mesh!.status())!));
    expect(r1.posted).toHaveLength(1);
    const status = r1.posted[0]!;
    expect(status.peers.map((p) => p.router)).toEqual(['r2', 'r3']);
    for (const p of status.peers) {
      expect(p.reachable).toBe(true);
      expect(typeof p.rtt).toBe('number');
      expect(p.lastHandshake).toMatch(/^\d{4}-\d\d-\d\dT/);
      expect(p.rxBytes).toBeGreaterThan(0);
      expect(p.txBytes).toBeGreaterThan(0);
    }
  }, 30_000);

  it('keeps the mesh as it is while the controller cannot be reached', async () => {
    const r2 = routers[1]!;
    r2.reachable = false;
    try {
      const meshed = await inRouter(r2, () => r2.mesh!.run(policyOf(r2)));
      expect(meshed.tunnels).toEqual(['wgm_1', 'wgm_3']);
      expect(meshed.interfaces).toEqual(['wgm_1', 'wgm_3']);
      const links = await r2.ns.run('ip', ['-br', 'link', 'show']);
      expect(links).toMatch(/wgm_1/);
      expect(links).toMatch(/wgm_3/);
    } finally {
      r2.reachable = true;
    }
  }, 30_000);
});
