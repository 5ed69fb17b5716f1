/**
 * The agent's preflight (agent/system/preflight.ts; docs/agent.md, "What the agent needs") through the
 * real `peerops agent` process:
 *   - a PATH without one of the programs it runs: one line naming the Debian package and exit 78, or,
 *     for ping and sysctl, a warning and an agent that keeps running;
 *   - a Debian-like BIRD layout (config dir bird:bird 0750 with only bird.conf, BIRD running as user
 *     bird, its socket bird:bird 0660): under exactly the capabilities and group that
 *     agent/peerops-agent.service grants, the agent creates its include dirs (root:bird 0750) and its
 *     first pass sets a session up, BIRD reading the files as user bird; as root without them it names
 *     the fixes and exits 78; without CAP_NET_RAW it warns that no RTT is measured.
 * Runs as root (network namespaces, setpriv); the agent runs in a namespace, never in the host's.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmod, chown, mkdir, readFile, stat, symlink, writeFile } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PREFLIGHT_EXIT, PROGRAMS, onPath } from '../../agent/system/preflight.ts';
import { startHarness, expectOk, type Harness } from '../api/helpers.ts';
import { exec, NetnsLab, waitFor, type Namespace } from '../support/netns.ts';
import { ROUTER_ASN, wgKeyPair } from './lab.ts';

const REPO = join(import.meta.dirname, '..', '..');
const BIN = join(REPO, 'bin', 'peerops.ts');
const UNIT = join(REPO, 'agent', 'peerops-agent.service');

interface Started {
  child: ChildProcess;
  output(): string;
  stderr(): string;
  exited: Promise<number | null>;
  stop(): Promise<void>;
}

/** `[...prefix] node bin/peerops.ts agent --config <file>`, its output collected. */
function startAgent(config: string, env: NodeJS.ProcessEnv, prefix: string[] = []): Started {
  const argv = [...prefix, process.execPath, BIN, 'agent', '--config', config];
  const child = spawn(argv[0] as string, argv.slice(1), { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => {
    out += d.toString();
    err += d.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    output: () => out,
    stderr: () => err,
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** The environment without the lab's namespace variable, with `extra`. */
function envWith(extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const env = { ...process.env, ...extra };
  if (!('PEEROPS_AGENT_NETNS' in extra)) delete env.PEEROPS_AGENT_NETNS;
  return env;
}

/** Where PATH has `name`. */
async function which(name: string): Promise<string> {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (await onPath(name, dir)) return join(dir, name);
  }
  throw new Error(`${name} is not installed (scripts/test-prereqs.sh installs it)`);
}

/** `setpriv` arguments giving a root process what the systemd unit gives the agent, read from the unit. */
async function unitPrivileges(birdGid: number): Promise<string[]> {
  const unit = await readFile(UNIT, 'utf8');
  const value = (key: string) => new RegExp(`^${key}=(.*)$`, 'm').exec(unit)?.[1]?.trim() ?? '';
  const caps = value('CapabilityBoundingSet')
    .split(/\s+/)
    .map((c) => `+${c.replace(/^CAP_/, '').toLowerCase()}`);
  expect(value('SupplementaryGroups')).toBe('bird');
  expect(value('NoNewPrivileges')).toBe('yes');
  return [
    'setpriv',
    '--bounding-set',
    ['-all', ...caps].join(','),
    '--groups',
    String(birdGid),
    '--no-new-privs',
  ];
}

let lab: NetnsLab;
let ns: Namespace;
let root: string;

beforeAll(async () => {
  lab = new NetnsLab('apf');
  ns = await lab.namespace('node');
  root = await lab.tempDir('root');
  // BIRD runs as user bird below and must reach its files under this dir (mkdtemp makes it 0700).
  await chmod(root, 0o755);
});
afterAll(async () => {
  await lab?.cleanup();
});

describe('a program missing from PATH', () => {
  let config: string;
  let kernelWireGuard: boolean;

  beforeAll(async () => {
    await mkdir(join(root, 'missing', 'bird'), { recursive: true });
    config = join(root, 'missing', 'agent.json');
    await writeFile(
      config,
      JSON.stringify({
        node: { name: 'pf1' },
        // nothing listens on the discard port: the agent retries its bootstrap, which is all it does
        controlPlane: {
          url: 'http://127.0.0.1:9',
          token: 'preflight-test-token-0123456789',
          maxRetries: 0,
          retryInitialDelay: 100,
        },
        server: { listen: '127.0.0.1:0' },
        routing: {
          peerConfDir: join(root, 'missing', 'bird', 'peers'),
          ibgpConfDir: join(root, 'missing', 'bird', 'ibgp.d'),
          controlSocket: join(root, 'missing', 'bird', 'bird.ctl'),
        },
        autoUpdate: { enabled: false },
      }),
      { mode: 0o600 },
    );
    const probe = await ns.exec('ip', ['link', 'add', 'wgpfprobe', 'type', 'wireguard']);
    kernelWireGuard = probe.code === 0;
    if (kernelWireGuard) await ns.run('ip', ['link', 'del', 'wgpfprobe']);
  });

  /** A PATH of symlinks to every program the agent runs but `missing`. */
  async function pathWithout(missing: string): Promise<string> {
    const dir = join(root, `path-without-${missing}`);
    await mkdir(dir);
    for (const name of Object.keys(PROGRAMS))
      if (name !== missing) await symlink(await which(name), join(dir, name));
    return dir;
  }

  const fatal: [string, string][] = [
    ['ip', 'iproute2'],
    ['bird', 'bird2'],
    ['wg', 'wireguard-tools'],
  ];
  it.each(fatal)('without %s: one line naming %s, exit 78', async (program, pkg) => {
    const t0 = performance.now();
    const agent = startAgent(
      config,
      envWith({ PATH: await pathWithout(program), PEEROPS_AGENT_NETNS: ns.name }),
    );
    expect(await agent.exited).toBe(PREFLIGHT_EXIT);
    const lines = agent.stderr().trim().split('\n');
    expect(lines.filter((l) => !l.startsWith('peerops agent: warning: '))).toEqual([
      `peerops agent: ${program} not found on PATH: install ${pkg}`,
    ]);
    expect(agent.output()).not.toMatch(/^\s+at /m); // no stack trace
    console.log(`without ${program}: exit ${PREFLIGHT_EXIT} after ${Math.round(performance.now() - t0)} ms`);
  });

  it('without wireguard-go: exit 78 naming the package where the kernel has no WireGuard, else runs', async () => {
    const agent = startAgent(
      config,
      envWith({ PATH: await pathWithout('wireguard-go'), PEEROPS_AGENT_NETNS: ns.name }),
    );
    if (kernelWireGuard) {
      await waitFor('the bootstrap attempt', () => agent.output().includes('bootstrap failed'), 20_000);
      await agent.stop();
      expect(agent.output()).not.toContain('wireguard-go not found');
    } else {
      expect(await agent.exited).toBe(PREFLIGHT_EXIT);
      expect(agent.stderr()).toContain(
        'peerops agent: wireguard-go not found on PATH and the kernel has no WireGuard: install wireguard-go',
      );
      expect(agent.output()).not.toMatch(/^\s+at /m);
    }
  });

  const degraded: [string, string, string][] = [
    ['ping', 'iputils-ping', 'no RTT is measured'],
    ['sysctl', 'procps', 'IP forwarding is not checked'],
  ];
  it.each(degraded)('without %s: a warning naming %s, and the agent runs on', async (program, pkg, what) => {
    const agent = startAgent(
      config,
      envWith({ PATH: await pathWithout(program), PEEROPS_AGENT_NETNS: ns.name }),
    );
    // the bootstrap attempt comes after the preflight: the agent went on
    await waitFor('the bootstrap attempt', () => agent.output().includes('bootstrap failed'), 20_000);
    await agent.stop();
    const warning = agent
      .output()
      .split('\n')
      .filter((l) => l.includes(`${program} not found`))
      .map((l) => (JSON.parse(l) as { level: number; msg: string }) ?? {});
    expect(warning).toHaveLength(1);
    expect(warning[0]?.level).toBe(40);
    expect(warning[0]?.msg).toBe(`${program} not found on PATH: install ${pkg}; until then ${what}`);
    expect(agent.output()).not.toMatch(/^\s+at /m);
  });
});

describe('a Debian BIRD layout', () => {
  let h: Harness;
  let birdGid: number;
  let etc: string;
  let run: string;
  let socket: string;
  let router: string;
  let agentToken: string;
  let fileConfig: Record<string, unknown>;

  beforeAll(async () => {
    const group = await exec('getent', ['group', 'bird']);
    if (group.code !== 0) throw new Error('no group bird: install bird2 (scripts/test-prereqs.sh)');
    birdGid = Number(group.stdout.split(':')[2]);
    const birdUid = Number((await exec('id', ['-u', 'bird'])).stdout.trim());

    // As Debian's bird2 leaves it: /etc/bird bird:bird 0750 with bird.conf 0640, no include dirs;
    // /run/bird bird:bird with BIRD's socket bird:bird 0660, BIRD running as user bird.
    etc = join(root, 'etc-bird');
    run = join(root, 'run-bird');
    socket = join(run, 'bird.ctl');
    await mkdir(etc);
    await mkdir(run);
    await writeFile(join(etc, 'bird.conf'), 'router id 10.255.0.1;\nprotocol device { }\n');
    for (const p of [etc, run, join(etc, 'bird.conf')]) await chown(p, birdUid, birdGid);
    await chmod(etc, 0o750);
    await chmod(run, 0o750);
    await chmod(join(etc, 'bird.conf'), 0o640);
    const bird = lab.spawn(ns, 'bird', [
      '-f',
      ...['-u', 'bird', '-g', 'bird'],
      ...['-c', join(etc, 'bird.conf'), '-s', socket, '-P', join(run, 'bird.pid')],
    ]);
    let birdErr = '';
    bird.stderr?.on('data', (d: Buffer) => (birdErr += d.toString()));
    await waitFor(
      `BIRD up ${birdErr}`,
      async () => (await exec('birdc', ['-s', socket, 'show', 'status'])).stdout.includes('Daemon is up'),
      10_000,
      100,
    );

    // The controller, reached from the namespace through a forwarder to its unix socket.
    h = await startHarness();
    const controllerSocket = join(root, 'controller.sock');
    await h.app.listen({ path: controllerSocket });
    const forwarder = lab.spawn(ns, process.execPath, [
      '-e',
      `const net = require('node:net');
       net.createServer((c) => {
         const u = net.connect(process.argv[1]);
         c.pipe(u).pipe(c);
         c.on('error', () => u.destroy());
         u.on('error', () => c.destroy());
       }).listen(8080, '127.0.0.1', () => console.log('ready'));`,
      controllerSocket,
    ]);
    await new Promise<void>((resolve) => forwarder.stdout?.once('data', () => resolve()));

    router = lab.id;
    agentToken = await h.addRouter(router, { linkLocal: 'fe80::1', autoApprove: false });
    await expectOk(
      h.post('/admin/policy', h.admin, {
        action: 'set',
        // the peer's endpoint is a unique local address (fd00:99::2): allowed for this lab only
        spec: {
          dn42Asn: ROUTER_ASN,
          rpkiServers: [{ host: '127.0.0.1', port: 8282 }],
          allowPrivateEndpoints: true,
        },
      }),
    );
    const wg = join(root, 'wireguard');
    await mkdir(wg, { mode: 0o700 });
    const keys = await wgKeyPair();
    await writeFile(join(wg, 'private.key'), `${keys.privateKey}\n`, { mode: 0o600 });
    fileConfig = {
      server: { listen: '127.0.0.1:0' },
      node: { name: router, id: 1, region: 'eu-central' },
      controlPlane: {
        url: 'http://127.0.0.1:8080',
        token: agentToken,
        syncInterval: 2,
        heartbeatInterval: 5,
        metricInterval: 5,
        retryInitialDelay: 100,
        maxRetries: 1,
        requestTimeout: 5,
      },
      routing: {
        controlSocket: socket,
        peerConfDir: join(etc, 'peers'),
        ibgpConfDir: join(etc, 'ibgp.d'),
        poolSize: 2,
        poolSizeMax: 8,
      },
      tunnel: { configDir: wg, dn42Ipv6LinkLocal: 'fe80::1' },
      metric: { pingCount: 1, pingTimeout: 1, pingWorkers: 4 },
      autoUpdate: { enabled: false },
    };
  });
  afterAll(async () => {
    await h?.close();
  });

  async function writeConfig(name: string, extra: Record<string, unknown> = {}): Promise<string> {
    const file = join(root, name);
    await writeFile(file, JSON.stringify({ ...fileConfig, ...extra }), { mode: 0o600 });
    return file;
  }

  /** The agent inside the namespace (its commands run there), with these setpriv arguments. */
  const inNamespace = (privileges: string[]) => ['ip', 'netns', 'exec', ns.name, ...privileges, '--'];

  it('root without the group and CAP_DAC_OVERRIDE: one line each naming the fix, exit 78', async () => {
    const agent = startAgent(
      await writeConfig('agent-bare.json'),
      envWith({}),
      inNamespace([
        'setpriv',
        '--bounding-set',
        '-all,+net_admin,+net_raw',
        '--clear-groups',
        '--no-new-privs',
      ]),
    );
    expect(await agent.exited).toBe(PREFLIGHT_EXIT);
    const lines = agent.stderr().trim().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toBe(
      `peerops agent: cannot write in ${etc} (EACCES, bird:bird 0750): run the agent as root with CAP_DAC_OVERRIDE (the unit grants it), or make it group-writable (chmod g+w ${etc}) with the agent in its group (SupplementaryGroups=bird)`,
    );
    expect(lines[1]).toBe(
      `peerops agent: cannot connect to BIRD's control socket ${socket} (permission denied, in ${run} bird:bird 0750): run the agent in BIRD's group (SupplementaryGroups=bird)`,
    );
    await expect(stat(join(etc, 'peers'))).rejects.toThrow(/ENOENT/);
  });

  it('without CAP_NET_RAW: a warning that no RTT is measured, naming the fix (Debian ping: exec refused)', async () => {
    // its own BIRD root, and a controller that is not there: this agent changes nothing
    await mkdir(join(root, 'noraw'));
    const agent = startAgent(
      await writeConfig('agent-noraw.json', {
        controlPlane: { url: 'http://127.0.0.1:9', token: agentToken, maxRetries: 0 },
        routing: {
          ...(fileConfig.routing as object),
          peerConfDir: join(root, 'noraw', 'peers'),
          ibgpConfDir: join(root, 'noraw', 'ibgp.d'),
        },
      }),
      envWith({}),
      inNamespace([
        'setpriv',
        '--bounding-set',
        '-all,+net_admin,+dac_override',
        '--groups',
        String(birdGid),
        '--no-new-privs',
      ]),
    );
    await waitFor('the ping warning', () => agent.output().includes('no RTT is measured'), 20_000);
    await agent.stop();
    const line = agent
      .output()
      .split('\n')
      .find((l) => l.includes('no RTT'));
    expect((JSON.parse(line ?? '{}') as { msg: string }).msg).toMatch(
      /^ping is not permitted \(cannot execute ping: EPERM\): no RTT is measured; grant CAP_NET_RAW \(AmbientCapabilities=CAP_NET_RAW\)$/,
    );
  });

  it("with the unit's capabilities and group: creates the include dirs, the first pass sets a session up", async () => {
    const user = h.tokens.issueToken(4242421999, 'user').token;
    const routerUuid = h.store.getRouter(router)?.spec.uuid;
    const keys = await wgKeyPair();
    const created = await expectOk(
      h.post('/session', user, {
        action: 'create',
        router: routerUuid,
        ipv6: 'fd42:1999::1',
        linkLocal: 'fe80::1999',
        endpoint: '[fd00:99::2]:40999',
        publicKey: keys.publicKey,
        mtu: 1420,
      }),
    );
    const uuid = (created.json() as { uuid: string }).uuid;
    await expectOk(h.post('/admin/session', h.admin, { action: 'approve', uuid }));
    const port = h.store.getSession(uuid)?.spec.listenPort;

    const t0 = performance.now();
    const agent = startAgent(
      await writeConfig('agent.json'),
      envWith({}),
      inNamespace(await unitPrivileges(birdGid)),
    );
    try {
      // No peer answers here: the session is set up (tunnel, file, BIRD protocol) and stays 4 until BGP
      // is Established (docs/agent.md); a failed setup would be 6.
      await waitFor(
        `session set up (agent output: ${agent.output().slice(-2000)})`,
        async () =>
          (await exec('birdc', ['-s', socket, 'show', 'protocols'])).stdout.includes(`dn42_${port}`),
        45_000,
      );
      console.log(`Debian layout: session set up ${Math.round(performance.now() - t0)} ms after the start`);
      expect(h.store.getSession(uuid)?.status.code).toBe(4);
      expect(agent.output()).toContain('created BIRD include directories');
      expect(agent.output()).not.toContain('peerops agent: ');
      for (const dir of ['peers', 'ibgp.d', 'local.d']) {
        const s = await stat(join(etc, dir));
        expect({ dir, gid: s.gid, mode: (s.mode & 0o7777).toString(8) }).toEqual({
          dir,
          gid: birdGid,
          mode: '750',
        });
      }
      expect((await stat(join(etc, 'peers', `dn42_${port}.conf`))).isFile()).toBe(true);
      // BIRD, running as user bird, read the main config and the session's file through the new dirs
      const protocols = (await exec('birdc', ['-s', socket, 'show', 'protocols'])).stdout;
      expect(protocols).toContain(`dn42_${port}`);
    } finally {
      await agent.stop();
    }
  });
});
