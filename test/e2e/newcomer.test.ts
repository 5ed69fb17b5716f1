/**
 * The newcomer's path of docs/operator-guide.md, end to end, as a new operator and a new peer walk it:
 * `peerops serve`, the first admin token (`--save`), the policy with the network's ASN, `router add`, the
 * agent from the Debian package (`dpkg -i` in a Debian 13 root with Debian's bird2, debian-root.ts) with
 * the printed token in /etc/peerops/agent.json, a peer's session created with the CLI and approved, the
 * peer configured only from `peerops session config`'s wg-quick and BIRD files. Once BGP is Established
 * the router's BIRD is killed; the controller's real /metrics, scraped before and after, are the input of
 * a `promtool test rules` run of charts/peerops/files/alerts.yaml: PeeropsRouterBirdDown does not fire
 * before the kill and fires after its `for:` window (docs/operator-guide.md, "8. Monitoring").
 * The router (controller, agent, BIRD) and the peer are network namespaces of their own; each slow phase
 * prints its time.
 */
import { copyFile, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { load } from 'js-yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { ARTIFACT_NAME } from '../../agent/update/install.ts';
import { PRIVATE_KEY_PLACEHOLDER } from '../../common/peer-config/index.ts';
import { buildRelease } from '../../scripts/build-release.ts';
import { buildCommonDeb, buildDeb } from '../../scripts/build-deb.ts';
import { exec, NetnsLab, waitFor } from '../support/netns.ts';
import {
  bootScript,
  DEB_ROOT_PACKAGES,
  debianRootfs,
  execStartArgv,
  serviceSettings,
} from '../release/debian-root.ts';
import { scrapeTimeline, STEP_SECONDS } from './newcomer-series.ts';

const REPO = path.join(import.meta.dirname, '..', '..');
const NODE = path.join(REPO, 'node_modules', 'node', 'bin', 'node');
const VERSION = '0.99.1';
const NETWORK_ASN = 4242420000;
const PEER_ASN = 4242421234;
const ROUTER = 'fra1';
const CONTROLLER = 'http://127.0.0.1:8080';
/** The veth between the router and the peer (private addresses: the policy allows them, below). */
const ROUTER_ADDR = 'fd00:4e::1';
const PEER_ADDR = 'fd00:4e::2';

async function timed<T>(what: string, fn: () => Promise<T>): Promise<T> {
  const t0 = performance.now();
  const value = await fn();
  console.log(`${what}: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  return value;
}

async function must(p: Promise<{ code: number; stdout: string; stderr: string }>, what: string) {
  const r = await p;
  if (r.code !== 0) throw new Error(`${what} failed (${r.code}): ${(r.stderr || r.stdout).trim()}`);
  return r.stdout;
}

describe("docs/operator-guide.md's newcomer path, Debian package agent, a peer from the generated files", () => {
  const lab = new NetnsLab('nc');
  let agentOutput = '';
  let controllerOutput = '';

  afterAll(async () => {
    // wg-quick's wireguard-go and everything else in the namespaces; the chroot's mounts live in the
    // agent's own mount namespace and go with its last process
    await lab.cleanup();
  }, 60_000);

  it('reaches Established; BIRD killed: PeeropsRouterBirdDown fires on the scraped series, not before', async () => {
    const work = await lab.tempDir('work');
    const root = await lab.tempDir('root');
    const home = await lab.tempDir('home');
    const data = path.join(work, 'data');
    const router = await lab.namespace('router');
    const peer = await lab.namespace('peer');
    // BIRD takes its router ID from an IPv4 address until the agent renders its config
    const link = await lab.veth(router, peer, { a: `${ROUTER_ADDR}/64`, b: `${PEER_ADDR}/64` });
    await router.run('ip', ['addr', 'add', '192.0.2.1/24', 'dev', link.a]);

    // the release's agent packages (the program's from its bundle and launcher, the agent's) and the
    // Debian root, in parallel
    const release = path.join(work, 'release');
    const [debs, tar] = await Promise.all([
      timed('agent bundle and .debs', async () => {
        const { dir } = await buildRelease(VERSION, release);
        const launcher = path.join(dir, 'peerops');
        const bundle = path.join(dir, ARTIFACT_NAME);
        return [
          await buildCommonDeb({ version: VERSION, outDir: dir, bundle, launcher }),
          await buildDeb({ version: VERSION, outDir: dir }),
        ];
      }),
      timed('Debian root (mmdebstrap, cached)', () => debianRootfs(DEB_ROOT_PACKAGES, console.log)),
    ]);
    await timed('Debian root: unpack', () =>
      must(exec('tar', ['-xf', tar, '-C', root], { timeoutMs: 120_000 }), 'tar'),
    );

    // 1. the controller, on the router's loopback
    const env = {
      HOME: home,
      XDG_CONFIG_HOME: path.join(home, '.config'),
      PEEROPS_URL: CONTROLLER,
      PEEROPS_SERVICE_HOST: '127.0.0.1',
      AGENT_AUTOUPDATE: 'false',
    };
    const envArgs = Object.entries(env).map(([k, v]) => `${k}=${v}`);
    const controller = lab.spawn(router, 'env', [
      ...envArgs,
      NODE,
      path.join(REPO, 'bin', 'peerops.ts'),
      'serve',
      '--data',
      data,
    ]);
    controller.stdout?.on('data', (d: Buffer) => (controllerOutput += d.toString()));
    controller.stderr?.on('data', (d: Buffer) => (controllerOutput += d.toString()));
    const curl = (url: string) => router.exec('curl', ['-sS', '--max-time', '10', url]);
    await timed('peerops serve: /health ok', () =>
      waitFor(
        'the controller',
        async () => {
          if (controller.exitCode !== null) throw new Error(`serve exited:\n${controllerOutput}`);
          return (await curl(`${CONTROLLER}/health`)).stdout.includes('"ok"');
        },
        60_000,
      ),
    );
    /** `peerops …` as the guide types it, in the router namespace; PEEROPS_TOKEN for the peer's own. */
    const peerops = (args: string[], extra: Record<string, string> = {}) =>
      must(
        exec(
          'ip',
          [
            'netns',
            'exec',
            router.name,
            'env',
            ...envArgs,
            ...Object.entries(extra).map(([k, v]) => `${k}=${v}`),
            NODE,
            path.join(REPO, 'bin', 'peerops.ts'),
            ...args,
          ],
          { timeoutMs: 60_000 },
        ),
        `peerops ${args.slice(0, 3).join(' ')}`,
      );

    // 2. the first admin token, saved as the CLI's context
    await peerops(['admin', 'token', '--data', data, '--asn', String(NETWORK_ASN), '--admin', '--save']);
    // 3. the routing policy; RPKI at the router's loopback (nothing leaves the namespace) and the lab's
    // private endpoints allowed (docs/routing-policy.md, Private endpoints)
    await peerops([
      'admin',
      'policy',
      'set',
      '--dn42-asn',
      String(NETWORK_ASN),
      '--rpki',
      '127.0.0.1:8282',
      '--allow-private-endpoints',
    ]);

    // 5 (the key first). the router's tunnel key, as the guide makes it
    const chroot = (...args: string[]) => must(exec('chroot', [root, ...args]), args.join(' '));
    for (const deb of debs) await copyFile(deb, path.join(root, 'tmp', path.basename(deb)));
    await timed('dpkg -i', () => chroot('dpkg', '-i', ...debs.map((deb) => `/tmp/${path.basename(deb)}`)));
    await chroot(
      'sh',
      '-c',
      'install -d -m 700 /etc/wireguard && umask 077 && wg genkey | tee /etc/wireguard/private.key | wg pubkey > /etc/wireguard/public.key',
    );
    const routerKey = (await readFile(path.join(root, 'etc/wireguard/public.key'), 'utf8')).trim();

    // 4. register the router: it prints the agent token once
    const added = await peerops([
      'admin',
      'router',
      'add',
      ROUTER,
      '--display-name',
      'Frankfurt 1',
      '--node-id',
      '1',
      '--region',
      'eu-central',
      '--dn42-region',
      'eu',
      '--endpoint-host',
      ROUTER_ADDR,
      '--public-key',
      routerKey,
      '--link-local',
      'fe80::1',
      '--loopback-ipv4',
      '172.20.0.1',
      '--loopback-ipv6',
      'fd42:4242:0::1',
    ]);
    const agentToken = /agent token[^\n]*:\n(\S+)/.exec(added)?.[1] ?? '';
    expect(agentToken.length, added).toBeGreaterThan(16);

    // 5. /etc/peerops/agent.json: node.name, controlPlane.url and .token in the package's file
    const config = path.join(root, 'etc/peerops/agent.json');
    const shipped = JSON.parse(await readFile(config, 'utf8')) as Record<string, unknown>;
    await writeFile(
      config,
      `${JSON.stringify({ ...shipped, node: { name: ROUTER }, controlPlane: { url: CONTROLLER, token: agentToken } }, null, 2)}\n`,
    );
    // systemctl enable --now: BIRD as Debian's bird.service starts it, the agent as its unit says
    const unitDir = path.join(root, 'usr/lib/systemd/system');
    const settings = await serviceSettings([
      path.join(unitDir, 'peerops-agent.service'),
      path.join(unitDir, 'peerops-agent.service.d', 'debian.conf'),
    ]);
    const userGroups = (await chroot('id', '-nG', 'peerops')).trim().split(/\s+/);
    const birdPidFile = path.join(work, 'bird.pid');
    const agent = lab.spawn(router, 'unshare', [
      '--mount',
      '--propagation',
      'private',
      'sh',
      '-c',
      bootScript(root, birdPidFile, execStartArgv(settings, userGroups)),
    ]);
    agent.stdout?.on('data', (d: Buffer) => (agentOutput += d.toString()));
    agent.stderr?.on('data', (d: Buffer) => (agentOutput += d.toString()));
    const routerList = async () =>
      JSON.parse(await peerops(['admin', 'router', 'list', '-o', 'json'])) as unknown;
    const checkedIn = await timed('agent from the .deb: first heartbeat', () =>
      waitFor(
        'the first heartbeat',
        async () => {
          if (agent.exitCode !== null) throw new Error(`the agent exited:\n${agentOutput}`);
          const listed = JSON.stringify(await routerList());
          return listed.includes('lastHeartbeat') && listed;
        },
        120_000,
        500,
      ),
    );

    expect(checkedIn).toContain(`"agentVersion":"${VERSION}"`); // the package's agent, not the checkout's
    // the peer: a token of its own ASN (the guide's admin-minted one; login needs a registry), create
    const peerToken = (await peerops(['admin', 'token', '--data', data, '--asn', String(PEER_ASN)])).trim();
    const asPeer = { PEEROPS_TOKEN: peerToken };
    const keys = await must(exec('wg', ['genkey']), 'wg genkey');
    const privateKey = keys.trim();
    const publicKey = (await must(exec('wg', ['pubkey'], { input: `${privateKey}\n` }), 'wg pubkey')).trim();
    const created = await peerops(
      [
        'session',
        'create',
        '--router',
        ROUTER,
        '--ipv6',
        'fd42:1234::1',
        '--link-local',
        'fe80::1234',
        '--public-key',
        publicKey,
        '--endpoint',
        `[${PEER_ADDR}]:51820`,
      ],
      asPeer,
    );
    const uuid = /created session (\S+)/.exec(created)?.[1] ?? '';
    expect(uuid, created).toMatch(/^[0-9a-f-]{36}$/);
    // 6. the operator approves
    const approvedAt = performance.now();
    await peerops(['admin', 'session', 'approve', uuid]);

    // the peer's side, only from the generated files
    const peerDir = await lab.tempDir('peer');
    await peerops(['session', 'config', uuid, '--format', 'wg-quick', '--out', peerDir], asPeer);
    await peerops(['session', 'config', uuid, '--format', 'bird', '--out', peerDir], asPeer);
    const files = await readdir(peerDir);
    const wgFile = path.join(peerDir, files.find((f) => f.endsWith('.conf') && !f.includes('bird')) ?? '');
    const birdFile = path.join(peerDir, files.find((f) => f !== path.basename(wgFile)) ?? '');
    await writeFile(wgFile, (await readFile(wgFile, 'utf8')).replace(PRIVATE_KEY_PLACEHOLDER, privateKey), {
      mode: 0o600,
    });
    await must(
      exec('ip', [
        'netns',
        'exec',
        peer.name,
        'env',
        'WG_QUICK_USERSPACE_IMPLEMENTATION=wireguard-go',
        'wg-quick',
        'up',
        wgFile,
      ]),
      'wg-quick up',
    );
    const peerConf = path.join(peerDir, 'bird-main.conf');
    await writeFile(
      peerConf,
      [
        'router id 10.78.0.2;',
        'protocol device {}',
        'protocol static { ipv6; route fd42:1234::/48 unreachable; }',
        `include "${birdFile}";`,
        '',
      ].join('\n'),
    );
    await lab.startBird(peer, { configPath: peerConf });

    type Listed = { sessions: { uuid: string; bgpState?: string | null }[] };
    const bgpState = async () => {
      const listed = JSON.parse(await peerops(['session', 'list', '-o', 'json'], asPeer)) as Listed;
      return listed.sessions.find((s) => s.uuid === uuid)?.bgpState;
    };
    await waitFor('BGP Established', async () => (await bgpState()) === 'Established', 150_000, 1000);
    console.log(`approval → Established (API): ${((performance.now() - approvedAt) / 1000).toFixed(1)} s`);

    const scrape = () => must(curl(`${CONTROLLER}/metrics`), 'GET /metrics');
    const before: string[] = [];
    for (let i = 0; i < 3; i++) {
      before.push(await scrape());
      await new Promise((r) => setTimeout(r, 1000));
    }

    const ready = `peerops_router_ready{router="${ROUTER}",reason=`;
    expect(before.at(-1)).toMatch(new RegExp(`^${ready.replace(/[{}]/g, '\\$&')}"\\w+"\\} 1$`, 'm'));

    // kill the router's BIRD
    const birdPid = (await readFile(birdPidFile, 'utf8')).trim();
    const killedAt = performance.now();
    process.kill(Number(birdPid), 'SIGKILL');
    const after: string[] = [];
    await waitFor(
      'the controller to export BirdDown',
      async () => {
        const s = await scrape();
        after.push(s);
        return s.includes(`${ready}"BirdDown"} 0`);
      },
      60_000,
      1000,
    );
    console.log(
      `BIRD killed → /metrics says BirdDown: ${((performance.now() - killedAt) / 1000).toFixed(1)} s`,
    );
    for (let i = 0; i < 2; i++) {
      await new Promise((r) => setTimeout(r, 1000));
      after.push(await scrape());
    }

    // the scraped series, the pre-kill ones for 5 minutes then the post-kill ones, every 15 s
    const { series, eventAt: killAt } = scrapeTimeline(before, after);
    // the alert's own series is among them, as scraped (no name or label written by the test)
    expect(series.map((x) => x.series)).toContain(`${ready}"BirdDown"}`);
    console.log(`promtool input: ${series.length} series from ${before.length} + ${after.length} scrapes`);
    const rules = load(await readFile(path.join(REPO, 'charts/peerops/files/alerts.yaml'), 'utf8')) as {
      groups: { rules: { alert?: string; annotations?: Record<string, string> }[] }[];
    };
    const rule = rules.groups.flatMap((g) => g.rules).find((r) => r.alert === 'PeeropsRouterBirdDown');
    const annotations = Object.fromEntries(
      Object.entries(rule?.annotations ?? {}).map(([k, v]) => [
        k,
        v.replaceAll('{{ $labels.router }}', ROUTER),
      ]),
    );
    const at = (seconds: number) => `${seconds}s`; // promtool's durations
    const test = {
      rule_files: [path.join(REPO, 'charts/peerops/files/alerts.yaml')],
      evaluation_interval: `${STEP_SECONDS}s`,
      tests: [
        {
          interval: `${STEP_SECONDS}s`,
          input_series: series,
          alert_rule_test: [
            { eval_time: at(killAt - STEP_SECONDS), alertname: 'PeeropsRouterBirdDown', exp_alerts: [] },
            { eval_time: at(killAt + 45), alertname: 'PeeropsRouterBirdDown', exp_alerts: [] },
            {
              eval_time: at(killAt + 120),
              alertname: 'PeeropsRouterBirdDown',
              exp_alerts: [
                { exp_labels: { router: ROUTER, severity: 'critical' }, exp_annotations: annotations },
              ],
            },
          ],
        },
      ],
    };
    const file = path.join(work, 'newcomer.test.yaml');
    await writeFile(file, JSON.stringify(test, null, 1));
    const promtool = await exec('promtool', ['test', 'rules', file], { timeoutMs: 60_000 });
    expect(promtool.stdout + promtool.stderr).toContain('SUCCESS');
    expect(promtool.code).toBe(0);
  }, 600_000);
});
