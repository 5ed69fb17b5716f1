/**
 * The images of `npm run build:image`, run for real under runc (crun fails on this host's cgroups) as the
 * chart runs them:
 *   - the controller as the chart's uid with a read-only root and no capabilities answers /health and
 *     serves the API, its git store on the data volume;
 *   - the agent, in a network namespace standing for the router node (the DaemonSet's hostNetwork) with the
 *     chart's capabilities, BIRD's socket and config dirs mounted, brings a real session (peerops-wireguard,
 *     BIRD in a peer namespace) to BGP Established, its tunnel carried by the host the WireGuard keeper
 *     container runs;
 *   - the agent container killed and started again (a rollout) with the sessions up: no BGP flap, the
 *     tunnel's link never re-created. Without the keeper the same restart drops the tunnel.
 * The image is built by the script with its cache of the Debian root file systems (~70 s warm, a few
 * minutes cold); the phases' times are printed.
 */
import { createServer, connect, type Server } from 'node:net';
import { generateKeyPairSync } from 'node:crypto';
import { chmod, chown, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BirdControl } from '../../agent/bird/control.ts';
import { AGENT_NODE_ARGS } from '../../agent/node-args.ts';
import { TokenIssuer } from '../../controller/auth/jwt.ts';
import { buildImages, CONTROLLER_UID, type BuiltImage } from '../../scripts/build-image.ts';
import { routerFields } from '../api/helpers.ts';
import { freePort } from '../support/ports.ts';
import { birdTimeApartMs } from '../support/bird-time.ts';
import { waitFor } from '../support/netns.ts';
import { startAgentLab, type AgentLab, type Peer } from '../agent/lab.ts';
import { RuncContainer, unpackImage } from './runc.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const VERSION = (JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { version: string })
  .version;

let work: string;
let images: Record<string, BuiltImage>;
const containers: RuncContainer[] = [];
const runId = `${process.pid.toString(36)}${Math.random().toString(36).slice(2, 6)}`;

async function chartText(file: string): Promise<string> {
  return readFile(join(ROOT, 'charts', 'peerops', 'templates', file), 'utf8');
}

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'peerops-image-test-'));
  const started = performance.now();
  const { images: built, phases } = await buildImages({
    version: VERSION,
    outDir: join(work, 'out'),
    useCache: true,
  });
  console.log(
    `image build ${((performance.now() - started) / 1000).toFixed(1)} s: ${phases.map((p) => `${p.phase} ${p.seconds.toFixed(1)} s`).join(', ')}`,
  );
  images = Object.fromEntries(built.map((i) => [i.name, i]));
}, 900_000);

afterAll(async () => {
  for (const c of containers) await c.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

describe('controller image', () => {
  it("answers /health and serves the API as the chart's uid on a read-only root", async () => {
    const deployment = await chartText('deployment.yaml');
    const uid = Number(/runAsUser: (\d+)/.exec(deployment)?.[1]);
    expect(uid).toBe(CONTROLLER_UID);
    expect(deployment).toMatch(/readOnlyRootFilesystem: true/);
    expect(deployment).toMatch(/drop: \[ALL\]/);

    const image = await unpackImage(images.controller!.oci, VERSION, join(work, 'controller'));
    const data = join(work, 'controller-data');
    const jwt = join(work, 'controller-jwt');
    await mkdir(data, { mode: 0o700 });
    await mkdir(jwt, { mode: 0o700 });
    const pem = generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
    await writeFile(join(jwt, 'jwt.pem'), pem, { mode: 0o400 });
    // as the kubelet mounts them: the data volume the pod's fsGroup's, the Secret's file 0400
    for (const p of [data, jwt, join(jwt, 'jwt.pem')]) await chown(p, uid, uid);
    const port = await freePort();
    const c = await RuncContainer.start({
      id: `peerops-ctl-${runId}`,
      image,
      dir: join(work, 'controller-bundle'),
      args: ['serve'],
      user: { uid, gid: uid },
      capabilities: [],
      readOnlyRoot: true,
      env: {
        PEEROPS_STORE: 'git',
        PEEROPS_LISTEN: `127.0.0.1:${port}`,
        PEEROPS_DATA: '/var/lib/peerops',
        PEEROPS_JWT_KEY_FILE: '/etc/peerops/jwt/jwt.pem',
        PEEROPS_ADMIN_ASNS: '4242420000',
        PEEROPS_LOG_LEVEL: 'info',
      },
      binds: [
        { source: data, destination: '/var/lib/peerops' },
        { source: jwt, destination: '/etc/peerops/jwt', readOnly: true },
      ],
    });
    containers.push(c);
    const base = `http://127.0.0.1:${port}`;
    await waitFor(
      'the controller container answering /health',
      async () => (await fetch(`${base}/health`).catch(() => undefined))?.status === 200,
      60_000,
      200,
    ).catch((err: Error) => {
      throw new Error(`${err.message}\n${c.logs()}`);
    });

    // the API: an admin adds a router (the store writes on the data volume), anyone lists routers
    const admin = new TokenIssuer(pem).issueToken(4242420000, 'admin').token;
    const add = await fetch(`${base}/admin/router`, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({ action: 'add', ...routerFields('img1') }),
    });
    expect(add.status, await add.clone().text()).toBe(200);
    const { routers } = (await (await fetch(`${base}/routers`)).json()) as { routers: { name: string }[] };
    expect(routers.map((r) => r.name)).toContain('img1');

    // what it runs as: the chart's uid, no capabilities, and nothing on its root can be written
    const { pid } = await c.state();
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    expect(/^Uid:\s+(\d+)/m.exec(status)?.[1]).toBe(String(uid));
    expect(/^CapEff:\s+([0-9a-f]+)/m.exec(status)?.[1]).toMatch(/^0+$/);
    const write = await c.exec(['/bin/sh', '-c', 'touch /opt/peerops/x || touch /tmp/x']);
    expect(write.code).not.toBe(0);
    expect(write.stderr).toMatch(/Read-only file system/);
    expect(c.logs()).not.toMatch(/EROFS|EACCES/);
    // `peerops` on PATH, for kubectl exec
    expect((await c.exec(['peerops', '--version'])).stdout.trim()).toBe(VERSION);
  }, 180_000);
});

/**
 * A TCP port on the loopback of the node namespace that leads to the lab's controller on the host's
 * loopback (through a unix socket, which namespaces do not separate): the agent container reaches its
 * controller as the pod reaches the Service.
 */
async function controllerInNamespace(L: AgentLab, port: number): Promise<{ close(): void }> {
  const socket = join(work, `controller-${runId}.sock`);
  const target = new URL(L.url);
  const server: Server = createServer((conn) => {
    const upstream = connect(Number(target.port), target.hostname);
    conn.pipe(upstream).pipe(conn);
    conn.on('error', () => upstream.destroy());
    upstream.on('error', () => conn.destroy());
  });
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  const proxy = L.node.spawn(process.execPath, [
    '-e',
    `require('node:net').createServer((c) => { const u = require('node:net').connect(${JSON.stringify(socket)}); c.pipe(u).pipe(c); c.on('error', () => u.destroy()); u.on('error', () => c.destroy()); }).listen(${port}, '127.0.0.1')`,
  ]);
  await waitFor(
    'the proxy in the node namespace',
    async () =>
      (
        await L.node.exec(process.execPath, [
          '-e',
          `require('node:net').connect(${port}, '127.0.0.1').on('connect', () => process.exit(0)).on('error', () => process.exit(1))`,
        ])
      ).code === 0,
    20_000,
    100,
  );
  return {
    close() {
      proxy.kill('SIGKILL');
      server.close();
    },
  };
}

describe('agent image', () => {
  let L: AgentLab;
  let bird: BirdControl;
  let peer: Peer;
  let listenPort: number;
  let uuid: string;
  let agentImage: Awaited<ReturnType<typeof unpackImage>>;
  let proxy: { close(): void } | undefined;
  let agentConfig: string;
  let wgRun: string;
  let caps: string[];

  beforeAll(async () => {
    const daemonSet = await chartText('agent-daemonset.yaml');
    const added =
      /add: \[([A-Z_, ]+)/
        .exec(daemonSet)?.[1]
        ?.split(',')
        .map((c) => c.trim()) ?? [];
    // with agent.dacOverride (true by default) the chart adds DAC_OVERRIDE
    caps = [...added, ...(daemonSet.includes('DAC_OVERRIDE') ? ['DAC_OVERRIDE'] : [])];
    expect(caps).toEqual(expect.arrayContaining(['NET_ADMIN', 'NET_RAW']));

    agentImage = await unpackImage(images.agent!.oci, VERSION, join(work, 'agent'));
    L = await startAgentLab('aim');
    bird = new BirdControl(L.config.routing.controlSocket, { poolSize: 1, poolSizeMax: 2 });
    const port = await freePort();
    proxy = await controllerInNamespace(L, port);
    const config = JSON.parse(await readFile(L.configFile, 'utf8')) as {
      controlPlane: { url: string };
      server: { listen: string };
    };
    config.controlPlane.url = `http://127.0.0.1:${port}`;
    agentConfig = join(L.root, 'agent-container.json');
    await writeFile(agentConfig, JSON.stringify(config), { mode: 0o600 });
    // the node's /var/run/wireguard, shared by the agent's and the keeper's containers (a hostPath in the chart)
    wgRun = join(work, 'wireguard-run');
    await mkdir(wgRun, { recursive: true });
    await chmod(wgRun, 0o755);

    peer = await L.addPeer('p0', 'fe80::21');
    uuid = await L.approvedSession(peer);
    listenPort = L.h.store.getSession(uuid)!.spec.listenPort;
    await L.connectPeer(peer, listenPort);
  }, 120_000);

  afterAll(async () => {
    // the containers first: they run in the lab's node namespace
    for (const c of containers.filter((c) => !c.id.startsWith('peerops-ctl-'))) await c.stop();
    bird?.close();
    proxy?.close();
    await L?.close();
  });

  let agentRuns = 0;
  const startAgent = async (keeper: boolean) => {
    const c = await RuncContainer.start({
      id: `peerops-agent-${runId}-${agentRuns++}`,
      image: agentImage,
      dir: join(work, `agent-bundle-${agentRuns}`),
      args: ['agent', '--config', agentConfig],
      user: { uid: 0, gid: 0 },
      capabilities: caps,
      netns: L.node.name,
      tun: true,
      env: keeper ? { PEEROPS_WIREGUARD_KEEPER: '1' } : {},
      binds: [
        { source: L.root, destination: L.root },
        { source: wgRun, destination: '/var/run/wireguard' },
      ],
    });
    containers.push(c);
    return c;
  };
  const startKeeper = async () => {
    const c = await RuncContainer.start({
      id: `peerops-keeper-${runId}`,
      image: agentImage,
      dir: join(work, 'keeper-bundle'),
      command: ['/usr/local/bin/node', '/opt/peerops/wireguard-keeper.ts'],
      user: { uid: 0, gid: 0 },
      capabilities: ['NET_ADMIN'],
      readOnlyRoot: true,
      netns: L.node.name,
      tun: true,
      binds: [{ source: wgRun, destination: '/var/run/wireguard' }],
    });
    containers.push(c);
    return c;
  };
  const protocol = () => `dn42_${listenPort}`;
  const established = async () => (await bird.protocols(protocol()))[0]?.bgpState === 'Established';
  const linkIndex = async () =>
    (
      JSON.parse(await L.node.run('ip', ['-j', 'link', 'show', `wg_${listenPort}`])) as { ifindex: number }[]
    )[0]?.ifindex;

  /**
   * Counts BGP flaps while `during` runs and for `settleMs` after: BIRD on both ends looked at every 200 ms,
   * a flap is a session seen leaving Established, or its `since` moved between two looks (down and up
   * again in between).
   */
  async function countFlaps(during: () => Promise<void>, settleMs: number): Promise<number> {
    const peerBird = new BirdControl(peer.bird.socket, { poolSize: 1, poolSizeMax: 1 });
    const look = async () =>
      [(await bird.protocols(protocol()))[0], (await peerBird.protocols('node'))[0]].map((p) => ({
        up: p?.bgpState === 'Established',
        since: p?.since,
      }));
    let last = await look();
    let flaps = 0;
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        await new Promise((r) => setTimeout(r, 200));
        const now = await look();
        for (const [i, side] of now.entries()) {
          const before = last[i]!;
          // BIRD may move `since` by its last millisecond between queries (test/agent/lab.ts)
          if (before.up && (!side.up || birdTimeApartMs(side.since, before.since) >= 100)) flaps++;
        }
        last = now;
      }
    })();
    try {
      await during();
      await new Promise((r) => setTimeout(r, settleMs));
    } finally {
      watching = false;
      await watcher;
      peerBird.close();
    }
    return flaps;
  }

  it('brings a real session to BGP Established, its tunnel run by the WireGuard keeper', async () => {
    await startKeeper();
    const agent = await startAgent(true);
    await waitFor(
      'the session ACTIVE',
      () => L.h.store.getSession(uuid)?.status.code === 1,
      90_000,
      500,
    ).catch((err: Error) => {
      throw new Error(`${err.message}\n${agent.logs()}`);
    });
    await waitFor('BGP Established', established, 90_000, 500);
    expect(agent.logs()).not.toContain(L.agentToken);
    // the image has every program the agent's preflight looks for (agent/system/preflight.ts)
    expect(agent.logs()).not.toMatch(/not found on PATH/);
    // the bundle ran itself again (same pid) on node with the agent's options (agent/node-args.ts)
    const { pid } = await agent.state();
    const cmdline = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0');
    expect(cmdline.slice(1, 1 + AGENT_NODE_ARGS.length)).toEqual([...AGENT_NODE_ARGS]);
  }, 240_000);

  it('restarting the agent container with the session up: no BGP flap, the same link', async () => {
    const ifindex = await linkIndex();
    const flaps = await countFlaps(async () => {
      const old = containers.findLast((c) => c.id.startsWith('peerops-agent-'))!;
      await old.stop();
      const next = await startAgent(true);
      await waitFor(
        'the new agent started',
        () => next.logs().includes('"msg":"agent started"'),
        60_000,
        200,
      );
    }, 15_000);
    console.log(`BGP flaps across an agent container restart with the keeper: ${flaps}`);
    expect(flaps).toBe(0);
    expect(await linkIndex()).toBe(ifindex);
  }, 180_000);

  it('a session restart re-creates its tunnel in the keeper host, and BGP comes back', async () => {
    const ifindex = await linkIndex();
    const res = await L.h.post('/session', peer.userToken, { action: 'restart', uuid });
    expect(res.statusCode).toBe(200);
    await waitFor(
      'a new link, the session ACTIVE',
      async () =>
        L.h.store.getSession(uuid)?.status.code === 1 && (await linkIndex().catch(() => ifindex)) !== ifindex,
      90_000,
      500,
    );
    await waitFor('BGP Established again', established, 90_000, 500);
    // the tunnels' host is the keeper's (peerops-wireguard --serve): none runs in the agent's container,
    // and no wireguard-go daemon anywhere
    const agent = containers.findLast((c) => c.id.startsWith('peerops-agent-'))!;
    const agentProcesses = (await agent.exec(['ps', '-e', '-o', 'args='])).stdout;
    expect(agentProcesses).not.toMatch(/peerops-wireguard --(host|serve)|wireguard-go/);
    const keeper = containers.find((c) => c.id.startsWith('peerops-keeper-'))!;
    const keeperProcesses = (await keeper.exec(['ps', '-e', '-o', 'args='])).stdout;
    expect(keeperProcesses).toMatch(/peerops-wireguard --serve/);
    expect(keeperProcesses).not.toMatch(/wireguard-go/);
  }, 240_000);

  it('without the keeper the same restart drops the tunnel (its host dies with the container)', async () => {
    // the keeper goes: its tunnels with it; an agent that starts its own host sets the session up again
    await containers.findLast((c) => c.id.startsWith('peerops-agent-'))!.stop();
    await containers.find((c) => c.id.startsWith('peerops-keeper-'))!.stop();
    const own = await startAgent(false);
    await waitFor('BGP Established on its own host', established, 90_000, 500).catch((err: Error) => {
      throw new Error(`${err.message}\n${own.logs()}`);
    });
    const ifindex = await linkIndex();
    const flaps = await countFlaps(async () => {
      await own.stop();
      const next = await startAgent(false);
      await waitFor('BGP Established again', established, 90_000, 500);
      expect(next.logs()).toContain('"msg":"agent started"');
    }, 0);
    console.log(`BGP flaps across an agent container restart without the keeper: ${flaps}`);
    expect(flaps).toBeGreaterThan(0);
    expect(await linkIndex()).not.toBe(ifindex);
  }, 240_000);
});
