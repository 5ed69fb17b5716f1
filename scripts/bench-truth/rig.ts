/**
 * The hosts of the time-to-truth benchmark (docs/benchmarks.md, "Time to truth"): `peerops serve` and
 * `peerops agent` as their own processes (so each can be killed and started again), the router's BIRD and
 * WireGuard in a router namespace, and a peer namespace configured only from the files of `POST /session`
 * action `config` (wg-quick with wireguard-go, the BIRD snippet included from a minimal bird.conf), as a
 * new peer would. The agent runs on the documented default intervals (docs/agent.md), as on a router
 * installed from the package; its commands run in the router namespace (PEEROPS_AGENT_NETNS), so that it
 * and the controller share this machine's loopback. Everything made is removed by `close()`.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { chmod, mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseConfig } from '../../agent/config.ts';
import { PRIVATE_KEY_PLACEHOLDER } from '../../common/peer-config/index.ts';
import { exec, NetnsLab, waitFor, type BirdInstance, type Namespace } from '../../test/support/netns.ts';
import { freePort } from '../../test/support/ports.ts';

const BIN = join(import.meta.dirname, '..', '..', 'bin', 'peerops.ts');
const NETWORK_ASN = 4242420077;
const PEER_ASN = 4242421077;
const PEER_PREFIX = 'fd42:1077::/48';
/** The veth between the router and the peer: the router's endpoint and the peer's. */
const ROUTER_ADDR = 'fd00:4e::1';
const PEER_ADDR = 'fd00:4e::2';
const PEER_WG_PORT = 51820;
/**
 * Admin tokens of this many ASNs, used in turn: the API counts 60 requests a minute per ASN (docs/api.md,
 * Rate limits) and the bench reads it up to 8 times a second.
 */
const POLL_TOKENS = 12;

export interface SessionRecord {
  uuid: string;
  status: number;
  statusName: string;
  listenPort: number;
  interface?: string;
  lastError: { code: string; message: string } | null;
  bgpState?: string | null;
  bgpSince?: string | null;
}

export interface RouterRecord {
  name: string;
  status: { lastHeartbeat?: string; conditions?: { type: string; status: string; reason: string }[] };
}

async function mustExec(cmd: string, args: string[], env: Record<string, string> = {}): Promise<string> {
  const r = await exec('env', [...Object.entries(env).map(([k, v]) => `${k}=${v}`), cmd, ...args], {
    timeoutMs: 60_000,
  });
  if (r.code !== 0) throw new Error(`${cmd} ${args.slice(0, 3).join(' ')}: ${(r.stderr || r.stdout).trim()}`);
  return r.stdout;
}

/** Stops a child: SIGTERM, SIGKILL after 3 s; `signal` SIGKILL for a crash. */
export function stop(child: ChildProcess | undefined, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill(signal);
  });
}

export class TruthRig {
  readonly lab = new NetnsLab('bt');
  readonly router = this.lab.id;
  readonly url: string;
  readonly agentHealth: string;
  private readonly ports: { api: number; agent: number };
  private dataDir = '';
  private root = '';
  private peerDir = '';
  private adminTokens: string[] = [];
  private nextToken = 0;
  private userToken = '';
  controller: ChildProcess | undefined;
  agent: ChildProcess | undefined;
  routerBird!: BirdInstance;
  peerBird!: BirdInstance;
  node!: Namespace;
  peer!: Namespace;
  uuid = '';
  listenPort = 0;
  /** The wg-quick file and the peer's BIRD config, as installed. */
  wgQuickPath = '';
  peerBirdConfig = '';
  /** The BGP protocol the generated BIRD snippet names. */
  peerProtocol = '';
  /** The agent's heartbeat interval in seconds, its default (read from the agent's config schema). */
  heartbeatInterval = 0;
  /** Set by close(): nothing is started after it (Ctrl-C while an event is under way). */
  private closed = false;

  private constructor(ports: { api: number; agent: number }) {
    this.ports = ports;
    this.url = `http://127.0.0.1:${ports.api}`;
    this.agentHealth = `http://127.0.0.1:${ports.agent}/health`;
  }

  static async create(): Promise<TruthRig> {
    return new TruthRig({ api: await freePort(), agent: await freePort() });
  }

  /** Controller, policy, router with BIRD and agent, peer namespace; the session created, not approved. */
  async setUp(): Promise<void> {
    this.dataDir = await this.lab.tempDir('data');
    this.root = await this.lab.tempDir('router');
    // the controller makes its signing key in the data dir on its first start: tokens come after
    await this.startController();
    const asns = Array.from({ length: POLL_TOKENS }, (_, i) => NETWORK_ASN + i);
    this.adminTokens = await Promise.all(asns.map((asn) => this.mintToken(asn, true)));
    this.userToken = await this.mintToken(PEER_ASN, false);
    await this.admin('/admin/policy', {
      action: 'set',
      spec: {
        dn42Asn: NETWORK_ASN,
        // RPKI at the router's own loopback: nothing leaves the namespace
        rpkiServers: [{ host: '127.0.0.1', port: 8282 }],
        allowPrivateEndpoints: true,
      },
    });
    this.node = await this.lab.namespace('router');
    this.peer = await this.lab.namespace('peer');
    await this.lab.veth(this.node, this.peer, { a: `${ROUTER_ADDR}/64`, b: `${PEER_ADDR}/64` });
    await this.startRouter();
    await this.createSession();
  }

  private async mintToken(asn: number, admin: boolean): Promise<string> {
    const args = [BIN, 'admin', 'token', '--data', this.dataDir, '--asn', String(asn)];
    return (await mustExec(process.execPath, admin ? [...args, '--admin'] : args)).trim();
  }

  async startController(): Promise<void> {
    this.refuseIfClosed();
    const child = spawn(
      process.execPath,
      [BIN, 'serve', '--listen', `127.0.0.1:${this.ports.api}`, '--data', this.dataDir],
      {
        stdio: 'ignore',
        env: { ...process.env, PEEROPS_SERVICE_HOST: '127.0.0.1', AGENT_AUTOUPDATE: 'false' },
      },
    );
    this.controller = child;
    await waitFor(
      'the controller to answer /health',
      async () => {
        if (child.exitCode !== null) throw new Error(`peerops serve exited (${child.exitCode})`);
        return (await fetch(`${this.url}/health`, { signal: AbortSignal.timeout(2000) })).ok;
      },
      60_000,
      100,
    );
  }

  private async startRouter(): Promise<void> {
    const bird = join(this.root, 'bird');
    for (const d of ['peers', 'ibgp.d', 'local.d']) await mkdir(join(bird, d), { recursive: true });
    const wg = join(this.root, 'wireguard');
    await mkdir(wg, { recursive: true });
    const priv = (await exec('wg', ['genkey'])).stdout.trim();
    const publicKey = (await exec('wg', ['pubkey'], { input: `${priv}\n` })).stdout.trim();
    await writeFile(join(wg, 'private.key'), `${priv}\n`, { mode: 0o600 });
    await chmod(join(wg, 'private.key'), 0o600);
    await writeFile(join(wg, 'public.key'), `${publicKey}\n`);
    const added = (await this.admin('/admin/router', {
      action: 'add',
      name: this.router,
      displayName: 'Bench router',
      nodeId: 1,
      region: 'eu-central',
      endpointHost: ROUTER_ADDR,
      publicKey,
      linkLocal: 'fe80::1',
      loopback: { ipv4: '172.20.78.1', ipv6: 'fd42:78::1' },
    })) as { agentToken: string };
    // Only what an operator must write: paths, the controller and the token; every interval the default.
    const config = {
      server: { listen: `127.0.0.1:${this.ports.agent}` },
      node: { name: this.router, id: 1, region: 'eu-central' },
      controlPlane: { url: this.url, token: added.agentToken },
      routing: {
        controlSocket: join(bird, 'bird.ctl'),
        peerConfDir: join(bird, 'peers'),
        ibgpConfDir: join(bird, 'ibgp.d'),
      },
      tunnel: { configDir: wg, dn42Ipv6LinkLocal: 'fe80::1' },
      autoUpdate: { enabled: false },
    };
    const file = join(this.root, 'agent.json');
    await writeFile(file, JSON.stringify(config, null, 2), { mode: 0o600 });
    this.heartbeatInterval = parseConfig(config, file).controlPlane.heartbeatInterval;
    // BIRD starts empty, as on a fresh router; the agent renders the whole config
    await writeFile(join(bird, 'bird.conf'), 'router id 172.20.78.1;\nprotocol device {}\n');
    await this.startRouterBird();
    this.startAgent();
    await waitFor(
      'the agent to check in',
      async () => (await this.routerRecord()).status.lastHeartbeat,
      60_000,
      250,
    );
  }

  async startRouterBird(): Promise<void> {
    this.refuseIfClosed();
    const bird = join(this.root, 'bird');
    this.routerBird = await this.lab.startBird(this.node, {
      configPath: join(bird, 'bird.conf'),
      socket: join(bird, 'bird.ctl'),
    });
  }

  startAgent(): void {
    this.refuseIfClosed();
    this.agent = spawn(process.execPath, [BIN, 'agent', '--config', join(this.root, 'agent.json')], {
      stdio: 'ignore',
      env: { ...process.env, PEEROPS_AGENT_NETNS: this.node.name },
    });
  }

  /** Create, then the peer's side from the generated wg-quick and BIRD files (before approval). */
  private async createSession(): Promise<void> {
    const keys = await exec('wg', ['genkey']).then(async (r) => {
      const privateKey = r.stdout.trim();
      return {
        privateKey,
        publicKey: (await exec('wg', ['pubkey'], { input: `${privateKey}\n` })).stdout.trim(),
      };
    });
    const created = (await this.user({
      action: 'create',
      router: this.router,
      ipv6: PEER_PREFIX.replace('::/48', '::1'),
      linkLocal: 'fe80::1077',
      endpoint: `[${PEER_ADDR}]:${PEER_WG_PORT}`,
      publicKey: keys.publicKey,
    })) as { uuid: string; listenPort: number };
    this.uuid = created.uuid;
    this.listenPort = created.listenPort;
    const file = async (format: string) => {
      const answer = (await this.user({ action: 'config', uuid: this.uuid, format })) as {
        files: { name: string; content: string }[];
      };
      const [f] = answer.files;
      if (!f) throw new Error(`config ${format}: no file`);
      return f;
    };
    const wgFile = await file('wg-quick');
    const birdFile = await file('bird');
    this.peerDir = await this.lab.tempDir('peer');
    await mkdir(join(this.peerDir, 'wireguard'), { mode: 0o700 });
    this.wgQuickPath = join(this.peerDir, 'wireguard', wgFile.name);
    await writeFile(this.wgQuickPath, wgFile.content.replace(PRIVATE_KEY_PLACEHOLDER, keys.privateKey), {
      mode: 0o600,
    });
    await this.wgQuick('up');
    const snippet = join(this.peerDir, birdFile.name);
    await writeFile(snippet, birdFile.content);
    this.peerProtocol = /^protocol bgp (\S+)/m.exec(birdFile.content)?.[1] ?? '';
    // the smallest bird.conf a peer has anyway, and the generated snippet
    this.peerBirdConfig = join(this.peerDir, 'bird.conf');
    await writeFile(
      this.peerBirdConfig,
      [
        'router id 10.78.0.2;',
        'protocol device {}',
        `protocol static { ipv6; route ${PEER_PREFIX} unreachable; }`,
        `include "${snippet}";`,
        '',
      ].join('\n'),
    );
    await this.startPeerBird();
  }

  async startPeerBird(): Promise<void> {
    this.refuseIfClosed();
    this.peerBird = await this.lab.startBird(this.peer, { configPath: this.peerBirdConfig });
  }

  /** wg-quick with wireguard-go, as on a machine without the kernel module. */
  async wgQuick(action: 'up' | 'down'): Promise<void> {
    await mustExec(
      'ip',
      ['netns', 'exec', this.peer.name, 'wg-quick', action, this.wgQuickPath],
      action === 'up' ? { WG_QUICK_USERSPACE_IMPLEMENTATION: 'wireguard-go' } : {},
    );
  }

  /** The router BIRD's BGP state of the session (the truth the API should show). */
  async routerBgpState(): Promise<string | undefined> {
    const r = await exec(
      'birdc',
      ['-s', this.routerBird.socket, 'show', 'protocols', `dn42_${this.listenPort}`],
      {
        timeoutMs: 2000,
      },
    );
    return /\b(Idle|Connect|Active|OpenSent|OpenConfirm|Established)\b/.exec(r.stdout)?.[1];
  }

  async routerMtu(): Promise<number | undefined> {
    const r = await this.node.exec('ip', ['-j', 'link', 'show', `wg_${this.listenPort}`]);
    if (r.code !== 0) return undefined;
    return (JSON.parse(r.stdout) as { mtu: number }[])[0]?.mtu;
  }

  async agentHealthy(): Promise<boolean> {
    try {
      return (await fetch(this.agentHealth, { signal: AbortSignal.timeout(1000) })).status === 200;
    } catch {
      return false;
    }
  }

  // ---- the API: the view the portal and the CLI have ----

  private async call(path: string, token: string, body: unknown): Promise<unknown> {
    const res = await fetch(`${this.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(5000),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`POST ${path} ${res.status}: ${text.slice(0, 300)}`);
    return JSON.parse(text) as unknown;
  }

  admin(path: string, body: unknown): Promise<unknown> {
    const token = this.adminTokens[this.nextToken++ % this.adminTokens.length]!;
    return this.call(path, token, body);
  }

  user(body: unknown): Promise<unknown> {
    return this.call('/session', this.userToken, body);
  }

  async session(): Promise<SessionRecord> {
    const { sessions } = (await this.admin('/admin/session', { action: 'list' })) as {
      sessions: SessionRecord[];
    };
    const s = sessions.find((x) => x.uuid === this.uuid);
    if (!s) throw new Error(`session ${this.uuid} not listed`);
    return s;
  }

  async routerRecord(): Promise<RouterRecord> {
    const { routers } = (await this.admin('/admin/router', { action: 'list' })) as {
      routers: RouterRecord[];
    };
    const r = routers.find((x) => x.name === this.router);
    if (!r) throw new Error(`router ${this.router} not listed`);
    return r;
  }

  private refuseIfClosed(): void {
    if (this.closed) throw new Error('the bench is being stopped');
  }

  async close(): Promise<void> {
    this.closed = true;
    await exec('ip', ['netns', 'exec', this.peer?.name ?? '', 'wg-quick', 'down', this.wgQuickPath]).catch(
      () => undefined,
    );
    await stop(this.agent);
    await stop(this.controller);
    await this.lab.cleanup();
    // the log the agent keeps beside wireguard-go's control socket, left when the tunnel is not deleted
    if (this.listenPort)
      await rm(`/var/run/wireguard/wg_${this.listenPort}.peerops.log`, { force: true }).catch(
        () => undefined,
      );
  }
}
