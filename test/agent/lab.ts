/**
 * The agent's integration lab: the REAL controller (buildApp on the real git store, listening on
 * loopback), a node namespace that stands for the router (its own BIRD, the agent's WireGuard
 * interfaces) and a peer namespace that stands for the user's router (its own BIRD and WireGuard),
 * joined by a veth that carries the tunnel. The agent runs with PEEROPS_AGENT_NETNS = the node namespace.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import pino from 'pino';
import { expect } from 'vitest';
import type { BirdConfigResponse } from '../../common/agent-api.ts';
import { Agent } from '../../agent/agent.ts';
import { renderMainConfig } from '../../agent/bird/main-config.ts';
import { parseConfig, type AgentConfig } from '../../agent/config.ts';
import { ControlPlaneClient } from '../../agent/sync/client.ts';
import type { MeshSource } from '../../agent/reconcile/mesh-step.ts';
import { expectOk, startHarness, type Harness } from '../api/helpers.ts';
import type { BirdControl } from '../../agent/bird/control.ts';
import { birdTimeApartMs } from '../support/bird-time.ts';
import { exec, NetnsLab, waitFor, type BirdInstance, type Namespace } from '../support/netns.ts';

export const ROUTER_ASN = 4242420001;
const REPO = join(import.meta.dirname, '..', '..');

export async function wgKeyPair(): Promise<{ privateKey: string; publicKey: string }> {
  const privateKey = (await exec('wg', ['genkey'])).stdout.trim();
  const publicKey = (await exec('wg', ['pubkey'], { input: `${privateKey}\n` })).stdout.trim();
  return { privateKey, publicKey };
}

/**
 * Asserts that a time BIRD printed is the one seen before: a BGP protocol's `since` (no flap), or the last
 * reconfiguration (no configure). BIRD converts its monotonic clock to wall time on every query, which can
 * move the last millisecond; a flap (down, reconnect, OPEN exchange) or a configure moves it by far more
 * than 100 ms.
 */
export function expectSameBirdTime(
  what: string,
  after: string | undefined,
  before: string | undefined,
): void {
  expect(birdTimeApartMs(after, before), `${what}: ${before} → ${after}`).toBeLessThan(100);
}

/**
 * Waits until BIRD's protocol list (name, since, BGP state) is the same across one second: a BGP session
 * that has just come up may still note a state change, and uptime comparisons need a settled start.
 */
export async function settledProtocols(bird: BirdControl): Promise<void> {
  const snapshot = async () =>
    // `since` to the second: its last millisecond may move between queries (see expectSameBirdTime).
    JSON.stringify((await bird.protocols()).map((p) => [p.name, p.since.replace(/\.\d+$/, ''), p.bgpState]));
  await waitFor(
    'BIRD protocols settled',
    async () => {
      const a = await snapshot();
      await new Promise((r) => setTimeout(r, 1000));
      return a === (await snapshot());
    },
    20_000,
    0,
  );
}

export interface Peer {
  ns: Namespace;
  iface: string;
  port: number;
  asn: number;
  keys: { privateKey: string; publicKey: string };
  bird: BirdInstance;
  /** Session fields for `POST /session` create. */
  createBody(router: string): Record<string, unknown>;
  userToken: string;
}

export interface AgentProcess {
  child: ChildProcess;
  /** Every line the agent printed so far (pino JSON). */
  output(): string;
  kill(signal: NodeJS.Signals): Promise<void>;
}

export interface AgentLab {
  lab: NetnsLab;
  h: Harness;
  url: string;
  router: string;
  agentToken: string;
  node: Namespace;
  root: string;
  nodeKeys: { privateKey: string; publicKey: string };
  bird: BirdInstance;
  config: AgentConfig;
  configFile: string;
  /** An agent on the lab's config (optionally with other routing settings), in this process. */
  agent(routing?: Partial<AgentConfig['routing']>, mesh?: MeshSource): Agent;
  /** A user router in its own namespace, with WireGuard towards the node and BIRD ready to peer. */
  addPeer(label: string, linkLocal: string): Promise<Peer>;
  /**
   * `peerops agent --config <file>` as a child process (the real executable, bin/peerops.ts unless
   * `entry` names another, e.g. the built dist/peerops.js), its log lines collected.
   */
  spawnAgent(overrides?: SpawnOverrides): AgentProcess;
  /** Creates and approves a session for `peer`; resolves with its uuid. */
  approvedSession(peer: Peer, extra?: Record<string, unknown>): Promise<string>;
  /** Configures the peer's tunnel towards the node once the session's port is known. */
  connectPeer(peer: Peer, listenPort: number): Promise<void>;
  close(): Promise<void>;
}

export interface SpawnOverrides {
  url?: string;
  listen?: string;
  token?: string;
  /** The executable script node runs (default bin/peerops.ts). */
  entry?: string;
  /** Node options before the script (e.g. heap flags). */
  nodeArgs?: string[];
  /** Loop intervals in seconds (controlPlane.metricInterval, …) over the lab's. */
  intervals?: { syncInterval?: number; heartbeatInterval?: number; metricInterval?: number };
  /** controlPlane's retry settings over the lab's (short ones, for quick tests). */
  retries?: { maxRetries?: number; retryInitialDelay?: number; retryMaxDelay?: number };
  /**
   * Run the agent itself inside the node's namespace, as an agent on a router runs, instead of running
   * each of its commands there (PEEROPS_AGENT_NETNS); `url` and `listen` must then be reachable in it.
   */
  inNamespace?: boolean;
}

let vethIndex = 0;

/**
 * `login`: the controller's `/login` (the portal's browser tests log in through it). `tunnelIpv4`: the
 * router's DN42 IPv4 on its session tunnels (the agent's `tunnel.dn42Ipv4`); none by default.
 */
export async function startAgentLab(
  prefix: string,
  login?: Parameters<typeof startHarness>[1],
  tunnelIpv4?: string,
): Promise<AgentLab> {
  const lab = new NetnsLab(prefix);
  const h = await startHarness({}, login);
  try {
    return await build(prefix, lab, h, tunnelIpv4);
  } catch (err) {
    delete process.env.PEEROPS_AGENT_NETNS;
    await lab.cleanup();
    await h.close();
    throw err;
  }
}

async function build(prefix: string, lab: NetnsLab, h: Harness, tunnelIpv4 = ''): Promise<AgentLab> {
  await h.app.listen({ host: '127.0.0.1', port: 0 });
  const address = h.app.server.address();
  const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  const router = `${prefix}${lab.id.slice(prefix.length)}`.toLowerCase();
  const agentToken = await h.addRouter(router, { linkLocal: 'fe80::1', autoApprove: false });
  await expectOk(
    h.post('/admin/policy', h.admin, {
      action: 'set',
      // RPKI at the node's own loopback: nothing leaves the namespace. The peers' endpoints are the
      // lab's unique local addresses (fd00:N::2), which only allowPrivateEndpoints lets through.
      spec: {
        dn42Asn: ROUTER_ASN,
        rpkiServers: [{ host: '127.0.0.1', port: 8282 }],
        allowPrivateEndpoints: true,
      },
    }),
  );
  const node = await lab.namespace('node');
  const root = await lab.tempDir('node');
  await mkdir(join(root, 'bird', 'peers'), { recursive: true });
  await mkdir(join(root, 'bird', 'ibgp.d'), { recursive: true });
  await mkdir(join(root, 'bird', 'local.d'), { recursive: true });
  await mkdir(join(root, 'wireguard'), { recursive: true });
  const nodeKeys = await wgKeyPair();
  await writeFile(join(root, 'wireguard', 'private.key'), `${nodeKeys.privateKey}\n`, { mode: 0o600 });
  await chmod(join(root, 'wireguard', 'private.key'), 0o600);
  await writeFile(join(root, 'wireguard', 'public.key'), `${nodeKeys.publicKey}\n`);

  const fileConfig = {
    server: { listen: '127.0.0.1:0' },
    node: { name: router, id: 1, region: 'eu-central' },
    controlPlane: {
      url,
      token: agentToken,
      syncInterval: 2,
      heartbeatInterval: 5,
      metricInterval: 5,
      retryInitialDelay: 100,
      maxRetries: 1,
      requestTimeout: 5,
    },
    routing: {
      controlSocket: join(root, 'bird', 'bird.ctl'),
      peerConfDir: join(root, 'bird', 'peers'),
      ibgpConfDir: join(root, 'bird', 'ibgp.d'),
      poolSize: 2,
      poolSizeMax: 8,
    },
    tunnel: {
      configDir: join(root, 'wireguard'),
      dn42Ipv6LinkLocal: 'fe80::1',
      ...(tunnelIpv4 && { dn42Ipv4: tunnelIpv4 }),
    },
    metric: { pingCount: 1, pingTimeout: 1, pingWorkers: 4 },
    autoUpdate: { enabled: false },
  };
  const configFile = join(root, 'agent.json');
  await writeFile(configFile, JSON.stringify(fileConfig, null, 2), { mode: 0o600 });
  const config = parseConfig(fileConfig, configFile);

  // BIRD on the node starts on the main config rendered from the controller's policy, no sessions yet.
  const policy = (await h.get(`/agent/${router}/bird-config`, agentToken)).json() as BirdConfigResponse;
  await writeFile(config.birdMainConfig, renderMainConfig(policy, config.routing));
  const bird = await lab.startBird(node, {
    configPath: config.birdMainConfig,
    socket: config.routing.controlSocket,
  });

  process.env.PEEROPS_AGENT_NETNS = node.name;
  const log = pino({ level: process.env.PEEROPS_TEST_LOG ?? 'silent' });

  const children: ChildProcess[] = [];
  const al: AgentLab = {
    lab,
    h,
    url,
    router,
    agentToken,
    node,
    root,
    nodeKeys,
    bird,
    config,
    configFile,
    agent: (routing = {}, mesh = undefined) =>
      new Agent(
        { ...config, routing: { ...config.routing, ...routing } },
        log,
        new ControlPlaneClient({ ...config.controlPlane, router }),
        mesh,
      ),
    async addPeer(label, linkLocal) {
      const ns = await lab.namespace(label);
      const n = vethIndex++;
      await lab.veth(node, ns, { a: `fd00:${n + 10}::1/64`, b: `fd00:${n + 10}::2/64` });
      const keys = await wgKeyPair();
      const port = 40000 + n;
      const iface = `${lab.id}p${n}`.slice(0, 15);
      await ns.run('wireguard-go', [iface]);
      await writeFile(join(root, `${label}.key`), `${keys.privateKey}\n`, { mode: 0o600 });
      await ns.run('wg', [
        'set',
        iface,
        'listen-port',
        String(port),
        'private-key',
        join(root, `${label}.key`),
      ]);
      await ns.run('ip', ['link', 'set', iface, 'addrgenmode', 'none']);
      await ns.run('ip', ['addr', 'add', `${linkLocal}/64`, 'dev', iface, 'nodad']);
      await ns.run('ip', ['link', 'set', iface, 'up']);
      const asn = 4242421000 + (Number.parseInt(lab.id.slice(-3), 16) % 900) + n;
      const userToken = h.tokens.issueToken(asn, 'user').token;
      const birdConf = `router id 10.9.${n}.2;
protocol device {}
protocol static { ipv6; route fd42:${(asn % 10000).toString(16)}::/48 unreachable; }
protocol bgp node {
  local as ${asn};
  neighbor fe80::1 % '${iface}' as ${ROUTER_ASN};
  # short timers so a re-created tunnel (session restart) is noticed in seconds rather than minutes
  hold time 9;
  keepalive time 3;
  connect retry time 3;
  ipv6 { import all; export where source = RTS_STATIC; };
}
`;
      const peerBird = await lab.startBird(ns, birdConf);
      return {
        ns,
        iface,
        port,
        asn,
        keys,
        bird: peerBird,
        userToken,
        createBody: (r: string) => ({
          action: 'create',
          router: r,
          ipv6: `fd42:${(asn % 10000).toString(16)}::1`,
          linkLocal,
          endpoint: `[fd00:${n + 10}::2]:${port}`,
          publicKey: keys.publicKey,
          mtu: 1420,
        }),
      };
    },
    spawnAgent(overrides = {}) {
      const file = join(root, `agent-${randomBytes(3).toString('hex')}.json`);
      const body = {
        ...fileConfig,
        server: { listen: overrides.listen ?? fileConfig.server.listen },
        controlPlane: {
          ...fileConfig.controlPlane,
          url: overrides.url ?? url,
          ...(overrides.token ? { token: overrides.token } : {}),
          ...overrides.intervals,
          ...overrides.retries,
        },
      };
      writeFileSync(file, JSON.stringify(body), { mode: 0o600 });
      const entry = overrides.entry ?? join(REPO, 'bin', 'peerops.ts');
      const argv = [...(overrides.nodeArgs ?? []), entry, 'agent', '--config', file];
      // `ip netns exec` runs node in place: the child's pid is the agent's
      const child = overrides.inNamespace
        ? spawn('ip', ['netns', 'exec', node.name, process.execPath, ...argv], {
            env: { ...process.env, PEEROPS_AGENT_NETNS: '' },
            stdio: ['ignore', 'pipe', 'pipe'],
          })
        : spawn(process.execPath, argv, {
            env: { ...process.env, PEEROPS_AGENT_NETNS: node.name },
            stdio: ['ignore', 'pipe', 'pipe'],
          });
      let out = '';
      child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
      children.push(child);
      return {
        child,
        output: () => out,
        kill: (signal) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once('exit', () => resolve());
            child.kill(signal);
          }),
      };
    },
    async approvedSession(peer, extra = {}) {
      const routerUuid = h.store.getRouter(router)?.spec.uuid;
      const res = await expectOk(
        h.post('/session', peer.userToken, { ...peer.createBody(routerUuid ?? router), ...extra }),
      );
      const uuid = (res.json() as { uuid: string }).uuid;
      await expectOk(h.post('/admin/session', h.admin, { action: 'approve', uuid }));
      return uuid;
    },
    async connectPeer(peer, listenPort) {
      const n = Number(peer.iface.slice(peer.iface.lastIndexOf('p') + 1));
      await peer.ns.run('wg', [
        'set',
        peer.iface,
        'peer',
        nodeKeys.publicKey,
        'endpoint',
        `[fd00:${n + 10}::1]:${listenPort}`,
        'allowed-ips',
        '::/0,0.0.0.0/0',
        'persistent-keepalive',
        '5',
      ]);
    },
    async close() {
      for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
      delete process.env.PEEROPS_AGENT_NETNS;
      await lab.cleanup();
      await h.close();
    },
  };
  return al;
}
