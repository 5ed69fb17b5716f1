/**
 * The whole product in network namespaces, told as one story that `npm run lab` (scripts/lab.ts) and the
 * end-to-end test (lab.test.ts) both run:
 *
 *   ctl ── bridge ──┬── rA  router A: `peerops agent`, BIRD, wireguard-go   ┐ mesh between rA and rB
 *   (peerops serve) ├── rB  router B: `peerops agent`, BIRD, wireguard-go   ┘ (WireGuard, Babel, iBGP)
 *                   ├── u1  user network 1: its own BIRD and WireGuard, peers with rA
 *                   └── u2  user network 2: its own BIRD and WireGuard, peers with rB
 *
 * Every actor uses the product as a person would: the operator and the users run the `peerops` CLI inside
 * their namespace; the routers run the real `peerops agent` executable; the user networks are plain BIRD
 * and WireGuard configured by the lab, as a peer's router would be. Each step is printed with its timing.
 * Everything the lab made (namespaces, processes, temp dirs) is removed by `cleanup()`, which the caller
 * runs in a finally block and on SIGINT/SIGTERM.
 *
 * Over 500 lines: one story, step by step, that reads top to bottom as the lab's printed log does.
 */
import { randomInt } from 'node:crypto';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { PEER_BIRD_TIMERS } from '../../common/peer-config/index.ts';
import { birdTimeApartMs } from '../support/bird-time.ts';
import { exec, NetnsLab, waitFor, type BirdInstance, type Namespace } from '../support/netns.ts';
import {
  agentPasses,
  BGP_DEBUG,
  BIRD_LOG_OPTIONS,
  phaseMedians,
  setupTimeline,
  type Phase,
  type SetupTimeline,
} from './setup-timeline.ts';

const REPO = join(import.meta.dirname, '..', '..');
const BIN = join(REPO, 'bin', 'peerops.ts');
/** The lab's shared segment (a bridge in the controller's namespace); nothing leaves the namespaces. */
const NET = 'fd00:4c::';
const CONTROLLER_ADDR = `${NET}1`;
const CONTROLLER_PORT = 8080;
const URL_BASE = `http://[${CONTROLLER_ADDR}]:${CONTROLLER_PORT}`;
const ROUTER_LINK_LOCAL = 'fe80::1';

export interface StepTiming {
  name: string;
  ms: number;
  detail: string;
}

export interface StoryResult {
  /** The prefix of every namespace, interface and temp dir the lab made. */
  labId: string;
  steps: StepTiming[];
  /** Approval → BGP Established at the user's BIRD, per user network, milliseconds. */
  approvalToEstablishedMs: number[];
  /** Where each of those went (setup-timeline.ts), in the same order. */
  timelines: SetupTimeline[];
  p50Ms: number;
  wallMs: number;
  /** Parts of the product the story could not use, with the error seen (empty when all were there). */
  missing: string[];
}

interface RouterNode {
  name: string;
  nodeId: number;
  ns: Namespace;
  addr: string;
  root: string;
  publicKey: string;
  loopback: { ipv4: string; ipv6: string };
  bird?: BirdInstance;
  agentOutput: string[];
}

interface UserNet {
  label: string;
  asn: number;
  ns: Namespace;
  addr: string;
  iface: string;
  wgPort: number;
  linkLocal: string;
  prefix: string;
  /** A peer without multiprotocol BGP: IPv4 in a session of its own, over these tunnel addresses. */
  ipv4?: { address: string; prefix: string };
  home: string;
  publicKey: string;
  router: RouterNode;
  bird?: BirdInstance;
  /** The user BIRD's config without the session, and the session's protocols, added at create. */
  birdConfig?: { base: string; session: string };
  uuid?: string;
  listenPort?: number;
}

/** The address of a host in the user's prefix (also the session's `ipv6`). */
function hostAddress(u: UserNet): string {
  return u.prefix.replace('::/48', '::1');
}

interface SessionView {
  uuid: string;
  status: number;
  statusName: string;
  listenPort: number;
  interface: string;
  mtu: number;
  lastError: { code: string; message: string } | null;
  metrics: { rtt?: number | null; rxBytes?: number; txBytes?: number; routesImported?: number } | null;
}

export interface LabStoryOptions {
  /** Where each line of the story goes (default: console.log). */
  log?: (line: string) => void;
  /** Namespace/interface prefix: 1-4 lowercase letters (default `lab`). */
  prefix?: string;
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** The user's `peerops` BGP protocol in `birdc show protocols` output: its since time, and whether it is up. */
function peeropsProtocol(out: string): { since: string | undefined; established: boolean } {
  const line = out.split('\n').find((l) => l.startsWith('peerops'));
  return {
    since: /\d{2}:\d{2}:\d{2}(?:\.\d+)?/.exec(line ?? '')?.[0],
    established: line?.includes('Established') ?? false,
  };
}

export class LabStory {
  private readonly lab: NetnsLab;
  private readonly log: (line: string) => void;
  private readonly started = performance.now();
  private readonly steps: StepTiming[] = [];
  private readonly missing: string[] = [];
  private readonly controllerOutput: string[] = [];
  private cleaned: Promise<void> | undefined;
  /** Settles when run() does; cleanup() waits for it (bounded) before its second sweep. */
  private running: Promise<unknown> | undefined;
  private readonly abort = new AbortController();
  private ctl!: Namespace;
  private dataDir!: string;
  private operatorHome!: string;
  private networkAsn = 0;
  private routers: RouterNode[] = [];
  private users: UserNet[] = [];
  private readonly timelines: SetupTimeline[] = [];

  constructor(opts: LabStoryOptions = {}) {
    this.lab = new NetnsLab(opts.prefix ?? 'lab');
    this.log = opts.log ?? ((line) => console.log(line));
  }

  /** Removes every namespace, process and temp dir of the lab; safe to call more than once. */
  cleanup(): Promise<void> {
    this.abort.abort();
    this.cleaned ??= (async () => {
      await this.lab.cleanup();
      // A step that was running when we were stopped may have made something after the first sweep.
      const settled = this.running?.then(
        () => undefined,
        () => undefined,
      );
      await Promise.race([settled, delay(10_000)]);
      await this.lab.cleanup();
    })();
    return this.cleaned;
  }

  run(): Promise<StoryResult> {
    const running = this.story();
    this.running = running;
    return running;
  }

  private async story(): Promise<StoryResult> {
    this.log(`peerops lab ${this.lab.id}: controller, 2 routers with agents and mesh, 2 user networks`);
    try {
      await this.buildNetwork();
      await this.startController();
      await this.operatorSetup();
      await this.startRouters();
      await this.startUserNetworks();
      await this.loginUsers();
      const times = await this.createApproveEstablish();
      await this.routesAcrossMesh();
      await this.metricsArrive();
      await this.modify();
      await this.restart();
      await this.deleteAll();
      const p50 = median(times);
      this.log(
        `approval → BGP Established: ${times.map((t) => seconds(t)).join(', ')}; p50 ${seconds(p50)} (target < 1 s)`,
      );
      this.log(formatPhases('breakdown, medians', phaseMedians(this.timelines, median)));
      const wallMs = performance.now() - this.started;
      this.log(`story complete in ${seconds(wallMs)}`);
      if (this.missing.length) this.log(`missing parts:\n  ${this.missing.join('\n  ')}`);
      return {
        labId: this.lab.id,
        steps: this.steps,
        approvalToEstablishedMs: times,
        timelines: this.timelines,
        p50Ms: p50,
        wallMs,
        missing: this.missing,
      };
    } catch (err) {
      if (!this.abort.signal.aborted) this.log(this.diagnostics());
      throw err;
    }
  }

  // ---- the steps ----

  private async buildNetwork(): Promise<void> {
    await this.step('network: namespaces, bridge, addresses', async () => {
      this.ctl = await this.lab.namespace('ctl');
      await this.ctl.run('ip', ['link', 'add', 'br0', 'type', 'bridge']);
      await this.ctl.run('ip', ['addr', 'add', `${CONTROLLER_ADDR}/64`, 'dev', 'br0', 'nodad']);
      await this.ctl.run('ip', ['link', 'set', 'br0', 'up']);
      this.networkAsn = 4242420000 + randomInt(1, 1000);
      // random node ids and ASNs: wireguard-go's UAPI sockets (wgm_<id>, wg_<port>) are host-wide
      const ids = new Set<number>();
      while (ids.size < 2) ids.add(randomInt(100, 4000));
      const [idA, idB] = [...ids] as [number, number];
      for (const [i, label, nodeId] of [
        [0, 'a', idA],
        [1, 'b', idB],
      ] as const) {
        const ns = await this.lab.namespace(`r${label}`);
        const addr = `${NET}2${i}`;
        await this.attach(ns, addr);
        const root = await this.lab.tempDir(`r${label}`);
        this.routers.push({
          name: `${this.lab.id}${label}`,
          nodeId,
          ns,
          addr,
          root,
          publicKey: '',
          loopback: { ipv4: `172.20.77.${i + 1}`, ipv6: `fd42:77::${i + 1}` },
          agentOutput: [],
        });
      }
      const asns = new Set<number>();
      while (asns.size < 2) asns.add(4242421000 + randomInt(0, 9000));
      let i = 0;
      for (const asn of asns) {
        const label = `u${i + 1}`;
        const ns = await this.lab.namespace(label);
        const addr = `${NET}3${i}`;
        await this.attach(ns, addr);
        this.users.push({
          label,
          asn,
          ns,
          addr,
          iface: `${this.lab.id}${label}`,
          wgPort: 41000 + i,
          linkLocal: `fe80::${(asn % 10000).toString(16)}`,
          prefix: `fd42:${(asn % 10000).toString(16)}::/48`,
          ...(i === 1 ? { ipv4: { address: '172.21.77.1', prefix: '172.21.77.0/27' } } : {}),
          home: await this.lab.tempDir(label),
          publicKey: '',
          router: this.routers[i]!,
        });
        i++;
      }
      return `5 namespaces on ${NET}/64`;
    });
  }

  private async attach(ns: Namespace, addr: string): Promise<void> {
    const names = await this.lab.veth(this.ctl, ns, { b: `${addr}/64` });
    await this.ctl.run('ip', ['link', 'set', names.a, 'master', 'br0']);
  }

  private async startController(): Promise<void> {
    await this.step('controller: peerops serve', async () => {
      this.dataDir = await this.lab.tempDir('data');
      this.operatorHome = await this.lab.tempDir('operator');
      const registry = await this.lab.tempDir('registry');
      await this.writeRegistry(registry);
      const child = this.lab.spawn(
        this.ctl,
        process.execPath,
        [BIN, 'serve', '--listen', `[::]:${CONTROLLER_PORT}`, '--data', this.dataDir],
        {
          PEEROPS_REGISTRY: registry,
          PEEROPS_SERVICE_HOST: CONTROLLER_ADDR,
          AGENT_AUTOUPDATE: 'false',
        },
      );
      collect(child.stdout, this.controllerOutput);
      collect(child.stderr, this.controllerOutput);
      await this.wait(
        'the controller to answer /health',
        async () => {
          if (child.exitCode !== null) throw new Error(`peerops serve exited (${child.exitCode})`);
          const r = await this.ctl.exec('curl', ['-sf', '-m', '2', `${URL_BASE}/health`]);
          return r.code === 0 && r.stdout.includes('ok');
        },
        30_000,
        100,
      );
      return `${URL_BASE}, git store in the data dir, registry fixture with 2 ssh-ed25519 maintainers`;
    });
  }

  /**
   * A DN42-format registry: one aut-num and one mntner (with a fresh ssh-ed25519 key) per user ASN, and
   * the route6 (and route) object of each user's prefix, which a session's addresses must lie in.
   */
  private async writeRegistry(root: string): Promise<void> {
    const pad = (k: string) => `${k}:`.padEnd(20);
    for (const dir of ['aut-num', 'mntner', 'route6', 'route'])
      await mkdir(join(root, 'data', dir), { recursive: true });
    for (const u of this.users) {
      const mnt = `LAB-${u.label.toUpperCase()}-MNT`;
      const routes: ['route' | 'route6', string][] = [['route6', u.prefix]];
      if (u.ipv4) routes.push(['route', u.ipv4.prefix]);
      for (const [type, prefix] of routes)
        await writeFile(
          join(root, 'data', type, prefix.replace('/', '_')),
          [`${pad(type)}${prefix}`, `${pad('origin')}AS${u.asn}`, `${pad('mnt-by')}${mnt}`, ''].join('\n'),
        );
    }
    for (const u of this.users) {
      const key = join(u.home, 'id_ed25519');
      await exec('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', `lab-${u.label}`, '-f', key]);
      const pub = (await readFile(`${key}.pub`, 'utf8')).trim();
      const mnt = `LAB-${u.label.toUpperCase()}-MNT`;
      await writeFile(
        join(root, 'data', 'aut-num', `AS${u.asn}`),
        [`${pad('aut-num')}AS${u.asn}`, `${pad('as-name')}LAB-${u.label}`, `${pad('mnt-by')}${mnt}`, ''].join(
          '\n',
        ),
      );
      await writeFile(
        join(root, 'data', 'mntner', mnt),
        [`${pad('mntner')}${mnt}`, `${pad('auth')}${pub}`, `${pad('mnt-by')}${mnt}`, ''].join('\n'),
      );
    }
  }

  private async operatorSetup(): Promise<void> {
    await this.step('operator: first admin token (peerops admin token --data … --admin)', async () => {
      await this.cli(this.ctl, this.operatorHome, [
        'admin',
        'token',
        '--data',
        this.dataDir,
        '--asn',
        String(this.networkAsn),
        '--admin',
        '--save',
      ]);
      return `AS${this.networkAsn}, token saved (mode 0600) in the operator's config dir`;
    });
    await this.step('operator: routing policy (peerops admin policy set)', async () => {
      // RPKI at the router's own loopback: nothing answers, nothing leaves the namespace; ROA-unknown passes.
      // The users' endpoints are the lab's unique local addresses: only allowPrivateEndpoints takes them.
      await this.cli(this.ctl, this.operatorHome, [
        'admin',
        'policy',
        'set',
        '--dn42-asn',
        String(this.networkAsn),
        '--rpki',
        '127.0.0.1:8282',
        '--allow-private-endpoints',
      ]);
      return `dn42Asn ${this.networkAsn}`;
    });
    for (const r of this.routers) {
      await this.step(`operator: register router ${r.name} (peerops admin router add)`, async () => {
        const keyDir = join(r.root, 'wireguard');
        await mkdir(keyDir, { recursive: true });
        const priv = (await exec('wg', ['genkey'])).stdout.trim();
        r.publicKey = (await exec('wg', ['pubkey'], { input: `${priv}\n` })).stdout.trim();
        await writeFile(join(keyDir, 'private.key'), `${priv}\n`, { mode: 0o600 });
        await chmod(join(keyDir, 'private.key'), 0o600);
        await writeFile(join(keyDir, 'public.key'), `${r.publicKey}\n`);
        const out = await this.cli(this.ctl, this.operatorHome, [
          'admin',
          'router',
          'add',
          r.name,
          '--display-name',
          `Lab router ${r.name.slice(-1).toUpperCase()}`,
          '--node-id',
          String(r.nodeId),
          '--region',
          'eu-central',
          '--endpoint-host',
          r.addr,
          '--public-key',
          r.publicKey,
          '--link-local',
          ROUTER_LINK_LOCAL,
          '--loopback-ipv4',
          r.loopback.ipv4,
          '--loopback-ipv6',
          r.loopback.ipv6,
          '--json',
        ]);
        const { agentToken } = JSON.parse(out) as { agentToken: string };
        await this.writeAgentConfig(r, agentToken);
        return `node ${r.nodeId}, endpoint ${r.addr}; agent token shown once, written to agent.json (0600)`;
      });
    }
  }

  private async writeAgentConfig(r: RouterNode, token: string): Promise<void> {
    const bird = join(r.root, 'bird');
    for (const d of ['peers', 'ibgp.d', 'local.d']) await mkdir(join(bird, d), { recursive: true });
    // the operator's own addition: BIRD's log with millisecond times, read for the setup breakdown
    await writeFile(join(bird, 'local.d', 'lab-log.conf'), BIRD_LOG_OPTIONS(join(bird, 'bird.log')));
    const config = {
      server: { listen: '127.0.0.1:0' },
      node: { name: r.name, id: r.nodeId, region: 'eu-central' },
      controlPlane: {
        url: URL_BASE,
        token,
        syncInterval: 5,
        heartbeatInterval: 2,
        metricInterval: 3,
        retryInitialDelay: 200,
        requestTimeout: 10,
      },
      routing: {
        controlSocket: join(bird, 'bird.ctl'),
        peerConfDir: join(bird, 'peers'),
        ibgpConfDir: join(bird, 'ibgp.d'),
      },
      tunnel: {
        configDir: join(r.root, 'wireguard'),
        dn42Ipv6LinkLocal: ROUTER_LINK_LOCAL,
        // the router's IPv4 on every session tunnel: a peer without MP-BGP peers with it over IPv4
        dn42Ipv4: r.loopback.ipv4,
        persistentKeepaliveInterval: 10,
      },
      metric: { pingCount: 1, pingTimeout: 1, pingWorkers: 4 },
      autoUpdate: { enabled: false },
    };
    await writeFile(join(r.root, 'agent.json'), JSON.stringify(config, null, 2), { mode: 0o600 });
  }

  private async startRouters(): Promise<void> {
    for (const r of this.routers) {
      await this.step(`router ${r.name}: BIRD and peerops agent`, async () => {
        const bird = join(r.root, 'bird');
        // a router forwards: what an operator sets once with sysctl (docs/operator-guide.md)
        await r.ns.run('sysctl', ['-q', '-w', 'net.ipv6.conf.all.forwarding=1', 'net.ipv4.ip_forward=1']);
        // BIRD starts empty, as on a fresh router; the agent renders the whole config from the policy.
        await writeFile(join(bird, 'bird.conf'), `router id ${r.loopback.ipv4};\nprotocol device {}\n`);
        r.bird = await this.lab.startBird(r.ns, {
          configPath: join(bird, 'bird.conf'),
          socket: join(bird, 'bird.ctl'),
        });
        const child = this.lab.spawn(r.ns, process.execPath, [
          BIN,
          'agent',
          '--config',
          join(r.root, 'agent.json'),
        ]);
        collect(child.stdout, r.agentOutput);
        collect(child.stderr, r.agentOutput);
        await this.wait(
          `the agent of ${r.name} to check in`,
          async () => {
            if (child.exitCode !== null) throw new Error(`peerops agent exited (${child.exitCode})`);
            const routers = await this.adminRouters();
            return routers.find((x) => x.name === r.name)?.status.lastHeartbeat;
          },
          30_000,
          500,
        );
        return 'heartbeat received by the controller';
      });
    }
    await this.step('mesh: WireGuard wgm_*, Babel, iBGP between the routers', async () => {
      for (const r of this.routers) {
        await this.wait(
          `iBGP Established on ${r.name}`,
          async () => {
            const out = await r.bird!.birdc('show protocols');
            const ibgp = out.split('\n').filter((l) => l.startsWith('ibgp_'));
            return ibgp.length > 0 && ibgp.every((l) => l.includes('Established'));
          },
          120_000,
          250,
        );
      }
      const [a] = this.routers;
      const lines = (await a!.bird!.birdc('show protocols')).split('\n').filter((l) => l.startsWith('ibgp_'));
      return `${lines.length} iBGP session(s) Established on each router`;
    });
  }

  private async startUserNetworks(): Promise<void> {
    for (const u of this.users) {
      await this.step(`user network ${u.label} (AS${u.asn}): WireGuard and BIRD`, async () => {
        const key = join(u.home, 'wg.key');
        const priv = (await exec('wg', ['genkey'])).stdout.trim();
        u.publicKey = (await exec('wg', ['pubkey'], { input: `${priv}\n` })).stdout.trim();
        await writeFile(key, `${priv}\n`, { mode: 0o600 });
        await u.ns.run('wireguard-go', [u.iface]);
        await u.ns.run('wg', ['set', u.iface, 'listen-port', String(u.wgPort), 'private-key', key]);
        await u.ns.run('ip', ['link', 'set', u.iface, 'addrgenmode', 'none']);
        await u.ns.run('ip', ['addr', 'add', `${u.linkLocal}/64`, 'dev', u.iface, 'nodad']);
        await u.ns.run('ip', ['link', 'set', u.iface, 'mtu', '1420', 'up']);
        // a host of the user's network, in its own prefix: the data-plane check pings it from the other user
        await u.ns.run('ip', ['-6', 'addr', 'add', `${hostAddress(u)}/128`, 'dev', 'lo']);
        // exactly the timers of the BIRD config peers are given (common/peer-config), so the restart
        // step measures what a real peer sees (docs/routing-policy.md, "BGP timers")
        const timers = PEER_BIRD_TIMERS.join('\n  ');
        let ipv4Static = '';
        let ipv4 = '';
        if (u.ipv4) {
          const routerIpv4 = u.router.loopback.ipv4;
          await u.ns.run('ip', ['addr', 'add', u.ipv4.address, 'peer', `${routerIpv4}/32`, 'dev', u.iface]);
          ipv4Static = `protocol static { ipv4; route ${u.ipv4.prefix} unreachable; }\n`;
          ipv4 = `protocol bgp peerops_v4 {
  local ${u.ipv4.address} as ${u.asn};
  neighbor ${routerIpv4} as ${this.networkAsn};
  direct;
  ${timers}
  ${BGP_DEBUG}
  ipv4 { import all; export where source = RTS_STATIC; };
}
`;
        }
        // The session's protocols come with the session (create): a peer configures BIRD and WireGuard
        // from the same answer, so its BIRD starts connecting when its WireGuard has the router as a peer.
        const base = `${BIRD_LOG_OPTIONS(join(u.home, 'bird.log'))}router id 10.77.0.${u.label.slice(1)};
protocol device {}
protocol static { ipv6; route ${u.prefix} unreachable; }
protocol kernel { ipv6 { import none; export where source = RTS_BGP; }; }
${ipv4Static}`;
        u.birdConfig = {
          base,
          session: `protocol bgp peerops {
  local ${u.linkLocal} as ${u.asn};
  neighbor ${ROUTER_LINK_LOCAL} % '${u.iface}' as ${this.networkAsn};
  ${timers}
  ${BGP_DEBUG}
  ipv6 { import all; export where source = RTS_STATIC; };
}
${ipv4}`,
        };
        u.bird = await this.lab.startBird(u.ns, base);
        const v4 = u.ipv4 ? ` and, without MP-BGP, ${u.ipv4.prefix} from ${u.ipv4.address}` : '';
        return `announces ${u.prefix}${v4}; tunnel ${u.iface} listens on [${u.addr}]:${u.wgPort}`;
      });
    }
  }

  private async loginUsers(): Promise<void> {
    for (const u of this.users) {
      await this.step(`user ${u.label}: peerops login (ssh-keygen -Y sign of the challenge)`, async () => {
        const r = await this.cliResult(u.ns, u.home, [
          'login',
          '--asn',
          String(u.asn),
          '--ssh-key',
          join(u.home, 'id_ed25519'),
        ]);
        if (r.code === 0) return r.stdout.trim().split('\n')[0] ?? 'logged in';
        const why = (r.stderr || r.stdout).trim();
        // The login part may not be wired into `peerops serve` yet: report it, then carry on with a
        // token the operator mints, so the rest of the story still runs.
        this.missing.push(`login: peerops login against peerops serve failed (exit ${r.code}): ${why}`);
        await this.cli(this.ctl, u.home, [
          'admin',
          'token',
          '--data',
          this.dataDir,
          '--asn',
          String(u.asn),
          '--save',
        ]);
        return `LOGIN MISSING (${why.split('\n')[0]}); continuing with an operator-minted user token`;
      });
    }
  }

  /** create → (operator) approve → tunnel and BGP Established; the approval → Established time per user. */
  private async createApproveEstablish(): Promise<number[]> {
    const times: number[] = [];
    for (const u of this.users) {
      await this.step(`user ${u.label}: peerops session create --router ${u.router.name}`, async () => {
        const out = await this.cli(u.ns, u.home, [
          'session',
          'create',
          '--router',
          u.router.name,
          '--ipv6',
          hostAddress(u),
          '--link-local',
          u.linkLocal,
          '--public-key',
          u.publicKey,
          '--endpoint',
          `[${u.addr}]:${u.wgPort}`,
          '--mtu',
          '1420',
          ...(u.ipv4 ? ['--ipv4', u.ipv4.address, '--no-mpbgp', '--no-extended-next-hop'] : []),
          '--json',
        ]);
        const res = JSON.parse(out) as {
          uuid: string;
          statusName: string;
          serverEndpoint: string;
          serverPublicKey: string;
          serverLinkLocal: string;
          serverIpv4?: string;
        };
        u.uuid = res.uuid;
        if (u.ipv4 && res.serverIpv4 !== u.router.loopback.ipv4)
          throw new Error(
            `the answer names ${res.serverIpv4} as the router's IPv4, not ${u.router.loopback.ipv4}`,
          );
        u.listenPort = Number(res.serverEndpoint.slice(res.serverEndpoint.lastIndexOf(':') + 1));
        // the user's side of the tunnel, from the answer (what a user pastes into their config)
        await u.ns.run('wg', [
          'set',
          u.iface,
          'peer',
          res.serverPublicKey,
          'endpoint',
          res.serverEndpoint,
          'allowed-ips',
          '::/0,0.0.0.0/0',
          'persistent-keepalive',
          '5',
        ]);
        await writeFile(u.bird!.configPath, u.birdConfig!.base + u.birdConfig!.session);
        const configured = await u.bird!.birdc('configure');
        if (!/Reconfigured/.test(configured)) throw new Error(`the user's BIRD: ${configured.trim()}`);
        return `${res.uuid} ${res.statusName}; router side ${res.serverEndpoint} ${res.serverLinkLocal}`;
      });
      await this.step(`user ${u.label}: status before review`, async () => {
        const s = await this.session(u);
        if (s.status !== 3) throw new Error(`expected PENDING_REVIEW (3), got ${s.statusName}`);
        return `${s.statusName}: waiting for an admin`;
      });
      let ms = 0;
      await this.step(`operator: approve ${u.label}'s session → BGP Established`, async () => {
        const asked = performance.now();
        const askedAt = Date.now();
        await this.cli(this.ctl, this.operatorHome, ['admin', 'session', 'approve', u.uuid!]);
        // from the moment the approve command returns: the approval is then stored
        const approved = performance.now();
        const approvedAt = Date.now();
        // the router's side is "configured" once its BIRD has the session's protocol (agent pass done)
        let configured: number | undefined;
        const protocol = `dn42_${u.listenPort}`;
        await this.wait(
          `BGP Established at ${u.label}`,
          async () => {
            if (configured === undefined && (await u.router.bird!.birdc('show protocols')).includes(protocol))
              configured = performance.now();
            const established = async (p: string) =>
              /Established/.test(await u.bird!.birdc(`show protocols ${p}`));
            return (await established('peerops')) && (!u.ipv4 || (await established('peerops_v4')));
          },
          60_000,
          50,
        );
        ms = performance.now() - approved;
        times.push(ms);
        // the pass logs its steps when it ends, which may be after BGP came up (it judges and reports then)
        await waitFor(
          'the agent pass line',
          () => agentPasses(u.router.agentOutput).some((p) => p.answeredAt >= askedAt),
          10_000,
          50,
        ).catch(() => undefined);
        const timeline = setupTimeline({
          askedAt,
          approvedAt,
          agentOutput: u.router.agentOutput,
          routerBirdLog: await readFile(join(u.router.root, 'bird', 'bird.log'), 'utf8').catch(() => ''),
          userBirdLog: await readFile(join(u.home, 'bird.log'), 'utf8').catch(() => ''),
          protocols: u.ipv4 ? ['peerops', 'peerops_v4'] : ['peerops'],
        });
        this.timelines.push(timeline);
        this.log(
          formatPhases(`${u.label}: approval → Established ${seconds(ms)}`, timeline.phases, timeline.notes),
        );
        const applied = configured === undefined ? '?' : seconds(configured - approved);
        let v4 = '';
        if (u.ipv4) {
          const prefix = u.ipv4.prefix;
          await this.wait(
            `${prefix} at ${u.router.name} through ${protocol}_v4`,
            async () => (await u.router.bird!.birdc(`show route ${prefix}`)).includes(`${protocol}_v4`),
            30_000,
            100,
          );
          v4 = `; the IPv4 session ${protocol}_v4 too, ${prefix} learned through it`;
        }
        return `approval → Established ${seconds(ms)} (router configured after ${applied}; the approve command itself took ${seconds(approved - asked)})${v4}`;
      });
      await this.step(`user ${u.label}: status ACTIVE`, async () => {
        const s = await this.waitStatus(u, 1);
        return `${s.statusName} on ${s.interface}`;
      });
    }
    return times;
  }

  private async routesAcrossMesh(): Promise<void> {
    await this.step('routes across the mesh: u1 ↔ rA ⇄ rB ↔ u2', async () => {
      const [u1, u2] = this.users as [UserNet, UserNet];
      for (const [from, to] of [
        [u1, u2],
        [u2, u1],
      ] as const) {
        await this.wait(
          `${from.prefix} at ${to.label}`,
          async () => (await to.bird!.birdc(`show route ${from.prefix}`)).includes(from.prefix),
          60_000,
          250,
        );
      }
      const seen = await u2.bird!.birdc(`show route all ${u1.prefix}`);
      const path = /BGP\.as_path: ([\d ]+)/.exec(seen)?.[1]?.trim();
      return `${u1.prefix} (u1, via ${u1.router.name}) visible at u2 via ${u2.router.name}, AS path ${path ?? '?'}; and back`;
    });
    await this.step('data plane: u1 pings u2 through both tunnels and the mesh', async () => {
      const [u1, u2] = this.users as [UserNet, UserNet];
      const ping = () =>
        u1.ns.exec('ping', ['-6', '-c', '3', '-i', '0.2', '-W', '2', '-I', hostAddress(u1), hostAddress(u2)]);
      const answered = await this.wait(
        `${hostAddress(u2)} answering ${hostAddress(u1)}`,
        async () => {
          const r = await ping();
          return r.code === 0 ? r.stdout : undefined;
        },
        30_000,
        500,
      );
      const rtt = /rtt min\/avg\/max\/mdev = [\d.]+\/([\d.]+)/.exec(answered)?.[1];
      return `${hostAddress(u1)} → ${hostAddress(u2)}: 3 of 3 answered, avg ${rtt ?? '?'} ms (u1 → ${u1.router.name} → mesh → ${u2.router.name} → u2)`;
    });
  }

  private async metricsArrive(): Promise<void> {
    await this.step('metrics: agent reports reach the session record and /metrics', async () => {
      const u = this.users[0]!;
      const s = await this.wait(
        'metrics in the session record',
        async () => {
          const v = await this.session(u);
          return v.metrics && typeof v.metrics.rtt === 'number' && (v.metrics.rxBytes ?? 0) > 0
            ? v
            : undefined;
        },
        60_000,
        1000,
      );
      const text = await this.wait(
        'per-session metrics on /metrics',
        async () => {
          const r = await this.ctl.exec('curl', ['-sf', '-m', '5', `${URL_BASE}/metrics`]);
          return r.stdout.includes('peerops_session_rtt_seconds') && r.stdout.includes(u.uuid!)
            ? r.stdout
            : undefined;
        },
        30_000,
        1000,
      );
      const heartbeats = text.split('\n').filter((l) => l.startsWith('agent_heartbeat_timestamp{')).length;
      const m = s.metrics!;
      return `rtt ${m.rtt} ms, rx ${m.rxBytes} B, tx ${m.txBytes} B, routes ${m.routesImported}; ${heartbeats} heartbeat series`;
    });
  }

  private async modify(): Promise<void> {
    const u = this.users[0]!;
    await this.step(`user ${u.label}: peerops session modify --mtu 1400`, async () => {
      await this.cli(u.ns, u.home, ['session', 'modify', u.uuid!, '--mtu', '1400']);
      const s = await this.waitStatus(u, 1);
      const link = JSON.parse(await u.router.ns.run('ip', ['-j', 'link', 'show', `wg_${u.listenPort}`])) as {
        mtu: number;
      }[];
      if (link[0]?.mtu !== 1400) throw new Error(`wg_${u.listenPort} has MTU ${link[0]?.mtu}, expected 1400`);
      await this.wait(
        'BGP Established after modify',
        async () => /Established/.test(await u.bird!.birdc('show protocols peerops')),
        30_000,
        100,
      );
      return `${s.statusName}; wg_${u.listenPort} on ${u.router.name} has MTU 1400; BGP Established`;
    });
  }

  private async restart(): Promise<void> {
    const u = this.users[0]!;
    await this.step(`user ${u.label}: peerops session restart`, async () => {
      const { since } = peeropsProtocol(await u.bird!.birdc('show protocols peerops'));
      await this.cli(u.ns, u.home, ['session', 'restart', u.uuid!]);
      await this.waitStatus(u, 1);
      await this.wait(
        'BGP re-established after restart',
        async () => {
          const now = peeropsProtocol(await u.bird!.birdc('show protocols peerops'));
          // a new `since`, not the same one printed a millisecond apart (see birdTimeApartMs)
          return now.established && birdTimeApartMs(now.since, since) >= 100;
        },
        60_000,
        100,
      );
      return 'router re-created the tunnel; BGP Established again';
    });
  }

  private async deleteAll(): Promise<void> {
    for (const u of this.users) {
      await this.step(`user ${u.label}: peerops session delete`, async () => {
        await this.cli(u.ns, u.home, ['session', 'delete', u.uuid!]);
        await this.wait(
          `${u.label}'s session removed`,
          async () => {
            const list = await this.sessions(u);
            return !list.some((s) => s.uuid === u.uuid);
          },
          30_000,
          1000,
        );
        const links = await u.router.ns.run('ip', ['-br', 'link', 'show']);
        if (links.includes(`wg_${u.listenPort}`))
          throw new Error(`wg_${u.listenPort} still on ${u.router.name}`);
        const protocols = await u.router.bird!.birdc('show protocols');
        if (protocols.includes(`dn42_${u.listenPort}`))
          throw new Error(`dn42_${u.listenPort} still in BIRD on ${u.router.name}`);
        return `gone from the controller; wg_${u.listenPort} and dn42_${u.listenPort} gone from ${u.router.name}`;
      });
    }
  }

  // ---- helpers ----

  /** waitFor that gives up at once when the lab is being stopped (Ctrl-C). */
  private wait<T>(
    what: string,
    check: () => Promise<T | undefined | false>,
    timeoutMs: number,
    intervalMs: number,
  ): Promise<T> {
    const { signal } = this.abort;
    if (signal.aborted) return Promise.reject(new Error('the lab is being stopped'));
    let onAbort = () => {};
    const stopped = new Promise<never>((_, reject) => {
      onAbort = () => reject(new Error('the lab is being stopped'));
      signal.addEventListener('abort', onAbort, { once: true });
    });
    const waited = waitFor(what, () => (signal.aborted ? undefined : check()), timeoutMs, intervalMs);
    return Promise.race([waited, stopped]).finally(() => signal.removeEventListener('abort', onAbort));
  }

  private async step<T>(name: string, fn: () => Promise<string | T>): Promise<void> {
    if (this.abort.signal.aborted) throw new Error('the lab is being stopped');
    const t0 = performance.now();
    const at = seconds(t0 - this.started).padStart(8);
    try {
      const detail = String(await fn());
      const ms = performance.now() - t0;
      this.steps.push({ name, ms, detail });
      this.log(`[${at}] ✓ ${name} (${seconds(ms)})\n             ${detail}`);
    } catch (err) {
      this.log(
        `[${at}] ✗ ${name} (${seconds(performance.now() - t0)})\n             ${(err as Error).message}`,
      );
      throw err;
    }
  }

  private cliResult(ns: Namespace, home: string, args: string[]) {
    return ns.exec(
      'env',
      [`PEEROPS_CONFIG_DIR=${home}`, `PEEROPS_URL=${URL_BASE}`, process.execPath, BIN, ...args],
      { timeoutMs: 60_000 },
    );
  }

  /** `peerops …` inside `ns` as the person whose config dir is `home`; throws with the CLI's error. */
  private async cli(ns: Namespace, home: string, args: string[]): Promise<string> {
    const r = await this.cliResult(ns, home, args);
    if (r.code !== 0)
      throw new Error(
        `peerops ${args.slice(0, 3).join(' ')} failed (exit ${r.code}): ${(r.stderr || r.stdout).trim()}`,
      );
    return r.stdout;
  }

  private async adminRouters(): Promise<{ name: string; status: { lastHeartbeat?: string } }[]> {
    const out = await this.cli(this.ctl, this.operatorHome, ['admin', 'router', 'list', '--json']);
    const parsed = JSON.parse(out) as
      | { routers: { name: string; status: { lastHeartbeat?: string } }[] }
      | { name: string; status: { lastHeartbeat?: string } }[];
    return Array.isArray(parsed) ? parsed : parsed.routers;
  }

  private async sessions(u: UserNet): Promise<SessionView[]> {
    const out = await this.cli(u.ns, u.home, ['session', 'list', '--json']);
    return (JSON.parse(out) as { sessions: SessionView[] }).sessions;
  }

  private async session(u: UserNet): Promise<SessionView> {
    const s = (await this.sessions(u)).find((x) => x.uuid === u.uuid);
    if (!s) throw new Error(`session ${u.uuid} not in ${u.label}'s list`);
    return s;
  }

  private waitStatus(u: UserNet, code: number): Promise<SessionView> {
    return this.wait(
      `${u.label}'s session in status ${code}`,
      async () => {
        const s = await this.session(u);
        if (s.status === 6) throw new Error(`SETUP_FAILED: ${s.lastError?.message ?? ''}`);
        return s.status === code ? s : undefined;
      },
      60_000,
      // the user's requests count against their 60/min rate limit
      500,
    );
  }

  /** The last lines each process printed, for a failure message. */
  private diagnostics(): string {
    const tail = (lines: string[]) =>
      lines
        .join('')
        .split('\n')
        .filter(Boolean)
        .slice(-15)
        .map((l) => `    ${l.slice(0, 400)}`)
        .join('\n');
    const parts = [`controller (last lines):\n${tail(this.controllerOutput)}`];
    for (const r of this.routers) parts.push(`agent ${r.name} (last lines):\n${tail(r.agentOutput)}`);
    return parts.join('\n');
  }
}

/** A breakdown as printed lines: each phase, its share of the sum, then the notes. */
export function formatPhases(title: string, phases: readonly Phase[], notes: readonly string[] = []): string {
  const sum = phases.reduce((a, p) => a + (Number.isFinite(p.ms) ? p.ms : 0), 0);
  const lines = phases.map((p) => `    ${`${Math.round(p.ms)} ms`.padStart(8)}  ${p.name}`);
  return [
    `  ${title}; the parts (sum ${Math.round(sum)} ms):`,
    ...lines,
    ...notes.map((n) => `      ${n}`),
  ].join('\n');
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

function collect(stream: NodeJS.ReadableStream | null, into: string[]): void {
  stream?.on('data', (d: Buffer) => {
    into.push(d.toString());
    if (into.length > 2000) into.splice(0, into.length - 1000);
  });
}

/** Runs the story once and cleans up whatever happens. */
export async function runLabStory(opts: LabStoryOptions = {}): Promise<StoryResult> {
  const story = new LabStory(opts);
  try {
    return await story.run();
  } finally {
    await story.cleanup();
  }
}
