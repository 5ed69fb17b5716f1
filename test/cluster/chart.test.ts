/**
 * The chart on a real single-node Kubernetes (scripts/cluster/node.sh: etcd, kube-apiserver, containerd
 * with runc, kubelet, kube-controller-manager, kube-scheduler and kube-proxy, all in a network namespace
 * standing for the node), as an operator installs it (docs/kubernetes.md, "Tested on a real node"):
 *   - `helm install` with the images of `npm run build:image` imported into containerd: the controller
 *     Deployment Ready on the Kubernetes store, the agent DaemonSet's pod and the WireGuard keeper Ready;
 *   - a router and a session created through the controller's API (its Service, through kube-proxy); a peer
 *     in a namespace of this test (BIRD 2, wireguard-go) reaches BGP Established with the node's BIRD, which
 *     the agent pod configures through the hostPath dirs the chart mounts;
 *   - `helm upgrade` to a rebuilt image (another version): the agent pod replaced, 0 BGP flaps;
 *   - `helm uninstall`: no pod, no object of the release, no tunnel link left on the node.
 * Run by `npm run test:cluster` (root; not part of `vitest run`: vitest.config.ts). Phase times are printed.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BirdConfigResponse } from '../../common/agent-api.ts';
import { renderMainConfig } from '../../agent/bird/main-config.ts';
import { parseConfig } from '../../agent/config.ts';
import { BirdControl } from '../../agent/bird/control.ts';
import { TokenIssuer } from '../../controller/auth/jwt.ts';
import { buildImages } from '../../scripts/build-image.ts';
import { birdTimeApartMs } from '../support/bird-time.ts';
import { exec, Namespace, NetnsLab, waitFor, type BirdInstance } from '../support/netns.ts';
import { wgKeyPair } from '../agent/lab.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
/** The rebuilt image `helm upgrade` rolls to: the same sources under another version, so another image. */
const NEXT_VERSION = `${VERSION}-rebuilt.1`;
const ADMIN_ASN = 4242420000;
const ROUTER_ASN = 4242420001;
const PEER_ASN = 4242421234;
const NODE = 'peerops-node';
const RELEASE = 'peerops';
const NS = 'peerops';
const ROUTER = 'cl1';

const phases: { phase: string; seconds: number; load: string }[] = [];
async function phase<T>(name: string, run: () => Promise<T>): Promise<T> {
  const started = performance.now();
  try {
    return await run();
  } finally {
    const seconds = (performance.now() - started) / 1000;
    const load = loadavg()
      .map((l) => l.toFixed(2))
      .join(' ');
    phases.push({ phase: name, seconds, load });
    console.log(`cluster test: phase ${name} ${seconds.toFixed(1)} s (load ${load})`);
  }
}

let work: string;
let images: { current: string; next: string };
let cluster: ChildProcess | undefined;
let clusterLog = '';
let node: Namespace;
let kubeconfig: string;
let containerdSocket: string;
let helmBin: string;
let kubectlBin: string;
let lab: NetnsLab;
let hostDirs: { birdConfig: string; birdSocket: string; wireguard: string; wireguardRun: string };
let pem: string;
let adminToken: string;
let serviceUrl: string;

/** kubectl in the node's namespace (the API server listens there); throws with its stderr on failure. */
async function kubectl(...args: string[]): Promise<string> {
  return node.run(kubectlBin, ['--kubeconfig', kubeconfig, ...args]);
}
async function helm(...args: string[]): Promise<string> {
  const r = await node.exec(helmBin, ['--kubeconfig', kubeconfig, ...args], { timeoutMs: 300_000 });
  if (r.code !== 0) throw new Error(`helm ${args.join(' ')}: ${r.stderr.trim()}`);
  return r.stdout;
}

/** A request to the controller through its Service (kube-proxy's rules live in the node's namespace). */
async function api(
  method: string,
  path: string,
  token: string,
  body?: unknown,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const r = await node.exec(
    'curl',
    [
      '-sS',
      '--max-time',
      '20',
      '-X',
      method,
      '-H',
      `authorization: Bearer ${token}`,
      ...(body === undefined ? [] : ['-H', 'content-type: application/json', '--data-binary', '@-']),
      '-w',
      '\n%{http_code}',
      `${serviceUrl}${path}`,
    ],
    { input: body === undefined ? undefined : JSON.stringify(body), timeoutMs: 30_000 },
  );
  if (r.code !== 0) throw new Error(`curl ${method} ${path}: ${r.stderr.trim()}`);
  const cut = r.stdout.lastIndexOf('\n');
  const text = r.stdout.slice(0, cut);
  return {
    status: Number(r.stdout.slice(cut + 1)),
    json: text ? (JSON.parse(text) as Record<string, unknown>) : {},
  };
}
async function apiOk(method: string, path: string, token: string, body?: unknown) {
  const res = await api(method, path, token, body);
  if (res.status !== 200) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.json)}`);
  return res.json;
}

interface PodInfo {
  metadata: { name: string; uid: string; labels?: Record<string, string> };
  spec: { containers: { image: string }[] };
  status: { phase?: string; conditions?: { type: string; status: string }[] };
}
async function pods(selector: string): Promise<PodInfo[]> {
  return (
    JSON.parse(await kubectl('-n', NS, 'get', 'pods', '-l', selector, '-o', 'json')) as { items: PodInfo[] }
  ).items;
}
const ready = (p: PodInfo) => p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');

/** What went wrong in the cluster, for a failed wait: pods, recent events and the containers' last lines. */
async function clusterState(): Promise<string> {
  const parts = [
    (await node.exec(kubectlBin, ['--kubeconfig', kubeconfig, 'get', 'pods', '-A', '-o', 'wide'])).stdout,
    (
      await node.exec(kubectlBin, [
        '--kubeconfig',
        kubeconfig,
        'get',
        'events',
        '-A',
        '--sort-by=.lastTimestamp',
      ])
    ).stdout
      .split('\n')
      .slice(-12)
      .join('\n'),
  ];
  const logs = /kubeconfig=(\S+)/.exec(clusterLog)?.[1]?.replace(/admin\.kubeconfig$/, 'pod-logs');
  if (logs) {
    for (const dir of await readdir(logs).catch(() => [])) {
      if (!dir.startsWith(`${NS}_`)) continue;
      for (const container of await readdir(join(logs, dir)).catch(() => [])) {
        for (const file of await readdir(join(logs, dir, container)).catch(() => [])) {
          const text = await readFile(join(logs, dir, container, file), 'utf8').catch(() => '');
          parts.push(`${dir}/${container}/${file}:\n${text.split('\n').slice(-8).join('\n')}`);
        }
      }
    }
  }
  return parts.join('\n');
}
async function waitInCluster<T>(
  what: string,
  check: () => Promise<T | undefined | false>,
  timeoutMs: number,
) {
  return waitFor(what, check, timeoutMs, 1000).catch(async (err: Error) => {
    throw new Error(`${err.message}\n${await clusterState()}`);
  });
}

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'peerops-cluster-test-'));
  await chmod(work, 0o755);
  images = await phase('images', async () => {
    const current = join(work, 'images-current');
    const next = join(work, 'images-next');
    await buildImages({ version: VERSION, outDir: current, useCache: true });
    await buildImages({ version: NEXT_VERSION, outDir: next, useCache: true });
    return { current, next };
  });

  await phase('node up', async () => {
    // detached: its own process group, so that a stop reaches node.sh and nothing else
    cluster = spawn('bash', [join(ROOT, 'scripts', 'cluster', 'node.sh'), '--keep'], {
      env: { ...process.env, PEEROPS_CLUSTER_IMAGES: images.current },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    cluster.stdout?.on('data', (d: Buffer) => (clusterLog += d.toString()));
    cluster.stderr?.on('data', (d: Buffer) => {
      clusterLog += d.toString();
      for (const line of d.toString().split('\n')) if (/phase .* (ok|FAILED)/.test(line)) console.log(line);
    });
    const exited = new Promise<never>((_, reject) =>
      cluster!.once('exit', (code) =>
        reject(new Error(`node.sh exited (${code}):\n${clusterLog.slice(-3000)}`)),
      ),
    );
    exited.catch(() => undefined);
    const line = await Promise.race([
      waitFor('node.sh ready', () => /cluster: ready (.*)/.exec(clusterLog)?.[1], 1_500_000, 500),
      exited,
    ]);
    const fields = Object.fromEntries(line.split(' ').map((f) => f.split('=') as [string, string]));
    node = new Namespace(fields.netns!);
    kubeconfig = fields.kubeconfig!;
    containerdSocket = fields.containerd!;
    const bin = (await exec('bash', [join(ROOT, 'scripts', 'k8s-tools.sh')])).stdout
      .trim()
      .split('\n')
      .at(-1)!;
    helmBin = join(bin, 'helm');
    kubectlBin = join(bin, 'kubectl');
  });

  await phase('image import', async () => {
    for (const dir of [images.current, images.next]) {
      for (const file of (await readdir(dir)).filter((f) => f.endsWith('.docker.tar'))) {
        const r = await exec(
          'ctr',
          ['--address', containerdSocket, '-n', 'k8s.io', 'images', 'import', join(dir, file)],
          {
            timeoutMs: 300_000,
          },
        );
        if (r.code !== 0) throw new Error(`ctr images import ${file}: ${r.stderr}`);
      }
    }
  });

  // The router node's side, as an operator prepares it: BIRD running (here in the node's namespace, its
  // files in a directory of this test instead of /etc/bird and /run/bird), the WireGuard key in place.
  lab = new NetnsLab('clu');
  const dirs = await lab.tempDir('node');
  hostDirs = {
    birdConfig: join(dirs, 'etc-bird'),
    birdSocket: join(dirs, 'run-bird'),
    wireguard: join(dirs, 'etc-wireguard'),
    wireguardRun: join(dirs, 'run-wireguard'),
  };
  for (const d of Object.values(hostDirs)) await mkdir(d, { recursive: true, mode: 0o755 });
  for (const d of ['peers', 'ibgp.d', 'local.d']) await mkdir(join(hostDirs.birdConfig, d));
  pem = generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
  adminToken = new TokenIssuer(pem).issueToken(ADMIN_ASN, 'admin').token;
}, 1_800_000);

afterAll(async () => {
  await lab?.cleanup();
  if (cluster && cluster.exitCode === null) {
    const stopped = new Promise((resolve) => cluster!.once('exit', resolve));
    process.kill(cluster.pid!, 'SIGTERM');
    const timer = setTimeout(() => process.kill(-cluster!.pid!, 'SIGKILL'), 120_000);
    await stopped;
    clearTimeout(timer);
  }
  if (work) await rm(work, { recursive: true, force: true });
  console.log(
    `cluster test phases: ${phases.map((p) => `${p.phase} ${p.seconds.toFixed(1)} s`).join(', ')}; load ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
}, 180_000);

describe('the chart on a real node', () => {
  let agentConfig: Record<string, unknown>;
  let peerBird: BirdInstance;
  let nodeControl: BirdControl;
  let listenPort: number;

  it('helm install: the controller Ready, a router added through its Service, the agent pod Ready', async () => {
    await phase('helm install', async () => {
      await kubectl('label', 'node', NODE, 'peerops.dev/router=true');
      const values = {
        image: { tag: VERSION, pullPolicy: 'Never' },
        // one replica: the machine is small; the API, leader election and the webhook are the same
        controller: { replicas: 1 },
        config: { adminAsns: [ADMIN_ASN], jwtKey: pem },
        agent: {
          enabled: true,
          configSecret: 'peerops-agents',
          nodes: [NODE],
          birdSocketDir: hostDirs.birdSocket,
          birdConfigDir: hostDirs.birdConfig,
          wireguardDir: hostDirs.wireguard,
          wireguardKeeper: { runDir: hostDirs.wireguardRun },
        },
      };
      await writeFile(join(work, 'values.json'), JSON.stringify(values));
      await helm(
        'install',
        RELEASE,
        join(ROOT, 'charts', 'peerops'),
        '--namespace',
        NS,
        '--create-namespace',
        '-f',
        join(work, 'values.json'),
      );
    });

    await phase('controller Ready', async () => {
      await waitInCluster(
        'the controller Deployment Ready',
        async () => {
          const d = JSON.parse(
            await kubectl('-n', NS, 'get', 'deployment', `${RELEASE}-controller`, '-o', 'json'),
          ) as {
            status: { readyReplicas?: number };
          };
          return d.status.readyReplicas === 1;
        },
        300_000,
      );
      const ip = (
        await kubectl('-n', NS, 'get', 'service', RELEASE, '-o', 'jsonpath={.spec.clusterIP}')
      ).trim();
      serviceUrl = `http://${ip}`;
      await waitInCluster(
        'the Service answering /health',
        async () => (await api('GET', '/health', '')).status === 200,
        60_000,
      );
    });

    const nodeKeys = await wgKeyPair();
    await writeFile(join(hostDirs.wireguard, 'private.key'), `${nodeKeys.privateKey}\n`, { mode: 0o600 });
    await writeFile(join(hostDirs.wireguard, 'public.key'), `${nodeKeys.publicKey}\n`);
    await apiOk('POST', '/admin/policy', adminToken, {
      action: 'set',
      // RPKI at the node's own loopback: nothing leaves the namespace. The peer's endpoint is a unique local
      // address, which only allowPrivateEndpoints lets through.
      spec: {
        dn42Asn: ROUTER_ASN,
        rpkiServers: [{ host: '127.0.0.1', port: 8282 }],
        allowPrivateEndpoints: true,
      },
    });
    const added = await apiOk('POST', '/admin/router', adminToken, {
      action: 'add',
      name: ROUTER,
      displayName: 'Router on the cluster node',
      nodeId: 1,
      region: 'eu-central',
      location: 'Frankfurt',
      provider: 'lab',
      endpointHost: 'cl1.example.net',
      publicKey: nodeKeys.publicKey,
      linkLocal: 'fe80::1',
      loopback: { ipv4: '172.20.0.1', ipv6: 'fd00::1' },
    });
    const agentToken = added.agentToken as string;

    // The agent's config in the Secret the chart names (agent.configSecret), in bootstrap form; the
    // controller by its Service's cluster IP: no cluster DNS runs on this node (docs/kubernetes.md).
    agentConfig = {
      node: { name: ROUTER },
      controlPlane: { url: serviceUrl, token: agentToken, syncInterval: 2, heartbeatInterval: 5 },
      server: { listen: ':24368' },
      routing: {
        controlSocket: join(hostDirs.birdSocket, 'bird.ctl'),
        peerConfDir: join(hostDirs.birdConfig, 'peers'),
        ibgpConfDir: join(hostDirs.birdConfig, 'ibgp.d'),
      },
      tunnel: { configDir: hostDirs.wireguard, dn42Ipv6LinkLocal: 'fe80::1' },
    };
    const parsed = parseConfig(agentConfig, 'agent.json');
    const policy = (await apiOk(
      'GET',
      `/agent/${ROUTER}/bird-config`,
      agentToken,
    )) as unknown as BirdConfigResponse;
    await writeFile(parsed.birdMainConfig, renderMainConfig(policy, parsed.routing));
    await lab.startBird(node, { configPath: parsed.birdMainConfig, socket: parsed.routing.controlSocket });
    nodeControl = new BirdControl(parsed.routing.controlSocket, { poolSize: 1, poolSizeMax: 2 });

    await phase('agent Ready', async () => {
      await writeFile(join(work, `${NODE}.json`), JSON.stringify(agentConfig), { mode: 0o600 });
      await kubectl(
        '-n',
        NS,
        'create',
        'secret',
        'generic',
        'peerops-agents',
        `--from-file=${join(work, `${NODE}.json`)}`,
      );
      await waitInCluster(
        'the agent pod and the WireGuard keeper Ready',
        async () => {
          const agents = await pods('app.kubernetes.io/component=agent');
          const keepers = await pods('app.kubernetes.io/component=wireguard-keeper');
          return agents.length === 1 && ready(agents[0]!) && keepers.length === 1 && ready(keepers[0]!);
        },
        300_000,
      );
    });
  }, 900_000);

  it('a session created through the API reaches BGP Established with a peer in its own namespace', async () => {
    await phase('BGP Established', async () => {
      const peerNs = await lab.namespace('peer');
      await lab.veth(node, peerNs, { a: 'fd00:77::1/64', b: 'fd00:77::2/64' });
      const keys = await wgKeyPair();
      const iface = `${lab.id}p`.slice(0, 15);
      await peerNs.run('wireguard-go', [iface]);
      await writeFile(join(work, 'peer.key'), `${keys.privateKey}\n`, { mode: 0o600 });
      await peerNs.run('wg', ['set', iface, 'listen-port', '40000', 'private-key', join(work, 'peer.key')]);
      await peerNs.run('ip', ['link', 'set', iface, 'addrgenmode', 'none']);
      await peerNs.run('ip', ['addr', 'add', 'fe80::21/64', 'dev', iface, 'nodad']);
      await peerNs.run('ip', ['link', 'set', iface, 'up']);
      peerBird = await lab.startBird(
        peerNs,
        `router id 10.9.0.2;
protocol device {}
protocol static { ipv6; route fd42:1234::/48 unreachable; }
protocol bgp node {
  local as ${PEER_ASN};
  neighbor fe80::1 % '${iface}' as ${ROUTER_ASN};
  hold time 9;
  keepalive time 3;
  connect retry time 3;
  ipv6 { import all; export where source = RTS_STATIC; };
}
`,
      );
      const userToken = new TokenIssuer(pem).issueToken(PEER_ASN, 'user').token;
      const created = await apiOk('POST', '/session', userToken, {
        action: 'create',
        router: ROUTER,
        ipv6: 'fd42:1234::1',
        linkLocal: 'fe80::21',
        endpoint: '[fd00:77::2]:40000',
        publicKey: keys.publicKey,
        mtu: 1420,
      });
      listenPort = created.listenPort as number;
      await apiOk('POST', '/admin/session', adminToken, { action: 'approve', uuid: created.uuid });
      await peerNs.run('wg', [
        'set',
        iface,
        'peer',
        created.serverPublicKey as string,
        'endpoint',
        `[fd00:77::1]:${listenPort}`,
        'allowed-ips',
        '::/0,0.0.0.0/0',
        'persistent-keepalive',
        '5',
      ]);
      await waitInCluster(
        'BGP Established on the peer',
        async () => /Established/.test(await peerBird.birdc('show protocols node')),
        180_000,
      );
      // and the agent's report through the Service: the session ACTIVE (1) with BGP Established
      await waitInCluster(
        'the session ACTIVE in the API',
        async () => {
          const { sessions } = (await apiOk('POST', '/session', userToken, { action: 'list' })) as {
            sessions?: { status: number; bgpState: string | null }[];
          };
          return sessions?.[0]?.status === 1 && sessions[0].bgpState === 'Established';
        },
        120_000,
      );
    });
  }, 300_000);

  it('helm upgrade to a rebuilt image replaces the agent pod with 0 BGP flaps', async () => {
    const before = (await pods('app.kubernetes.io/component=agent'))[0]!;
    const peerControl = new BirdControl(peerBird.socket, { poolSize: 1, poolSizeMax: 1 });
    const look = async () =>
      [(await nodeControl.protocols(`dn42_${listenPort}`))[0], (await peerControl.protocols('node'))[0]].map(
        (p) => ({
          up: p?.bgpState === 'Established',
          since: p?.since,
        }),
      );
    let last = await look();
    expect(last.every((s) => s.up)).toBe(true);
    let flaps = 0;
    let looks = 0;
    let watching = true;
    // BIRD on both ends every 200 ms: a flap is the session seen leaving Established, or its `since` moved
    // (down and up again between two looks); BIRD may move `since` by its last millisecond (lab.ts).
    const watcher = (async () => {
      while (watching) {
        await new Promise((r) => setTimeout(r, 200));
        const now = await look();
        looks++;
        for (const [i, side] of now.entries()) {
          const was = last[i]!;
          if (was.up && (!side.up || birdTimeApartMs(side.since, was.since) >= 100)) flaps++;
        }
        last = now;
      }
    })();
    try {
      await phase('helm upgrade', async () => {
        await helm(
          'upgrade',
          RELEASE,
          join(ROOT, 'charts', 'peerops'),
          '--namespace',
          NS,
          '--reuse-values',
          '--set',
          `image.tag=${NEXT_VERSION}`,
        );
        await waitInCluster(
          'the agent pod replaced by one on the rebuilt image, Ready',
          async () => {
            const now = await pods('app.kubernetes.io/component=agent');
            return (
              now.length === 1 &&
              now[0]!.metadata.uid !== before.metadata.uid &&
              now[0]!.spec.containers[0]!.image.endsWith(`:${NEXT_VERSION}`) &&
              ready(now[0]!)
            );
          },
          300_000,
        );
        await waitInCluster(
          'the controller on the rebuilt image, Ready',
          async () => {
            const now = await pods('app.kubernetes.io/component=controller');
            return (
              now.length === 1 &&
              now[0]!.spec.containers[0]!.image.endsWith(`:${NEXT_VERSION}`) &&
              ready(now[0]!)
            );
          },
          300_000,
        );
        // the new agent has run passes over the session it found in place
        await new Promise((r) => setTimeout(r, 15_000));
      });
    } finally {
      watching = false;
      await watcher;
      peerControl.close();
    }
    console.log(
      `BGP flaps across helm upgrade (agent pod replaced): ${flaps}, in ${looks} looks every 200 ms`,
    );
    expect(flaps).toBe(0);
    expect(last.every((s) => s.up)).toBe(true);
  }, 600_000);

  it('helm uninstall leaves no pod, no object of the release and no tunnel on the node', async () => {
    await phase('helm uninstall', async () => {
      await helm('uninstall', RELEASE, '--namespace', NS, '--wait', '--timeout', '180s');
      await waitInCluster(
        'no pod in the namespace',
        async () => (await pods('app.kubernetes.io/instance=peerops')).length === 0,
        180_000,
      );
    });
    const released = (
      await kubectl(
        'get',
        'all,secrets,configmaps,serviceaccounts,roles,rolebindings,leases,clusterroles,clusterrolebindings,validatingwebhookconfigurations',
        '-A',
        '-l',
        `app.kubernetes.io/instance=${RELEASE}`,
        '-o',
        'name',
      )
    ).trim();
    expect(released).toBe('');
    // What stays by design (docs/kubernetes.md, "Uninstall"): the store, as the git store's volume stays:
    // its custom resources and the Secrets and ConfigMaps the controller keeps beside them (agent tokens,
    // port claims, router ids), labelled managed-by=peerops. Besides: the operator's agent Secret and
    // Kubernetes' own kube-root-ca.crt and default ServiceAccount.
    const items = (
      JSON.parse(
        await kubectl(
          '-n',
          NS,
          'get',
          'all,secrets,configmaps,serviceaccounts,roles,rolebindings,leases,routers,peeringsessions,routingpolicies',
          '-o',
          'json',
        ),
      ) as {
        items: {
          kind: string;
          apiVersion: string;
          metadata: { name: string; labels?: Record<string, string> };
        }[];
      }
    ).items;
    const store = items.filter(
      (o) =>
        o.apiVersion.startsWith('peerops.dev/') ||
        o.metadata.labels?.['app.kubernetes.io/managed-by'] === 'peerops',
    );
    const others = items
      .filter((o) => !store.includes(o))
      .map((o) => `${o.kind}/${o.metadata.name}`)
      .sort();
    console.log(`left by design in ${NS}: ${store.map((o) => `${o.kind}/${o.metadata.name}`).join(', ')}`);
    expect(others).toEqual(['ConfigMap/kube-root-ca.crt', 'Secret/peerops-agents', 'ServiceAccount/default']);
    // and the removal the docs give for them, with the CRDs Helm never deletes
    await kubectl('delete', 'namespace', NS, '--timeout=120s');
    await kubectl('delete', '-f', join(ROOT, 'charts', 'peerops', 'crds'), '--timeout=120s');
    expect((await kubectl('get', 'namespaces', '-o', 'name')).split('\n')).not.toContain(`namespace/${NS}`);
    expect(await kubectl('get', 'crd', '-o', 'name')).not.toMatch(/peerops\.dev/);

    // On the node: what the agent wrote stays (BIRD's files, the keys the operator put there); the
    // tunnel's link and its UAPI socket went with the keeper's host, which the keeper stops on its way out.
    const files = await exec('find', [...Object.values(hostDirs), '-mindepth', '1']);
    console.log(`left on the node: ${files.stdout.trim().split('\n').join(', ')}`);
    expect(await readdir(hostDirs.wireguardRun)).toEqual([]);
    // the tunnel's link went with the keeper's process
    expect(await node.run('ip', ['-br', 'link', 'show', 'type', 'tun'])).not.toContain(`wg_${listenPort}`);
  }, 300_000);
});
