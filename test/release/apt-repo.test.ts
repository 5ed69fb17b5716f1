/**
 * The signed APT repository that `npm run build:release` makes (scripts/apt-repo.ts), used as a router
 * uses it: served over HTTP on 127.0.0.1 by a small server here, in a clean Debian 13 root made by
 * mmdebstrap (minbase with curl, debian-root.ts; Debian's own packages come from its mirror):
 * - the operator guide's install block, word for word but for the repository's address, installs
 *   peerops-agent without a kernel (the size of what it pulls printed);
 * - the controller's package installs, and its unit's ExecStart, as its user, serves the API on Debian's
 *   Node;
 * - a newer release added to the same repository is taken by the guide's `apt-get upgrade`, and its
 *   maintainer scripts restart the enabled agent (restart, never stop); the installed package's agent,
 *   with a BGP session up to a peer in a network namespace, is restarted on the new version as systemd
 *   would, and the session keeps its uptime (0 flaps);
 * - an InRelease changed on the way is refused by apt;
 * - the guide's other router blocks (docs/operator-guide.md section 5) as written: the tunnel key, the
 *   config and the start, and forwarding, in the same root; the npm path (Debian's node and npm, the
 *   release's tarball, the unit, the key, forwarding, the start) in a second root from the same cached
 *   tarball. test/docs/operator-guide-blocks.test.ts runs the guide's other blocks.
 * systemd cannot run in a chroot: a recording `systemctl` stands in for it (its `enable` makes the
 * unit's link, as systemd's does), so that the guide's and the maintainer scripts' calls (through
 * Debian's own deb-systemd-invoke) are seen; a `journalctl` that says it stands in, and an `editor`
 * that types what the operator types. Forwarding's `sysctl --system` runs in a network namespace of its
 * own, the rest of /proc/sys read-only. Prints each phase's time.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BirdControl } from '../../agent/bird/control.ts';
import { APT_KEYRING, APT_SUITE } from '../../scripts/apt-repo.ts';
import { expectSameBirdTime, settledProtocols, startAgentLab } from '../agent/lab.ts';
import { waitFor } from '../support/netns.ts';
import { blockName, NEW_ROUTER_SECTION, shellBlocks, where } from '../docs/shell-blocks.ts';
import { debianRootfs, execStartArgv, serviceSettings, SUITE } from './debian-root.ts';

const run = promisify(execFile);
const REPO = path.join(import.meta.dirname, '..', '..');
const GUIDE = 'docs/operator-guide.md';
/** The address the guide's blocks name for the repository. */
const GUIDE_URL = 'https://apt.example.net/peerops';
const FIRST = '0.99.0';
const NEXT = '0.99.1';
/** A minimal Debian with what the guide's block runs (curl) and nothing of the agent's. */
const CLEAN_ROOT_PACKAGES = ['ca-certificates', 'curl'];
/** The chroot's environment: a root shell's, apt never asking. */
const ROOT_ENV = {
  PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
  HOME: '/root',
  LANG: 'C.UTF-8',
  DEBIAN_FRONTEND: 'noninteractive',
};

let work: string;
let gnupg: string;
let fingerprint: string;
let aptRepo: string;
let server: Server;
let url: string;
/** URL path → what a hostile mirror serves instead of the repository's file, while `tamper`. */
const forged = new Map<string, Buffer>();
let tamper = false;
let root: string;
/** The cached Debian root's tarball, for the npm path's second root. */
let rootTar: string;
/** The lines of the guide's router blocks this file has run. */
const ranBlocks = new Set<number>();

async function timed<T>(what: string, fn: () => Promise<T>): Promise<T> {
  const t0 = performance.now();
  const value = await fn();
  console.log(`${what}: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  return value;
}

/** `npm run build:release` of `version` beside the others in `work`, adding to the APT repository there. */
async function buildRelease(version: string): Promise<string> {
  const r = await timed(`npm run build:release -- --version ${version} --apt-signing-key …`, () =>
    run(
      'npm',
      [
        'run',
        '--silent',
        'build:release',
        '--',
        '--version',
        version,
        '--out',
        path.join(work, `release-${version}`),
        '--no-images',
        '--apt-signing-key',
        fingerprint,
      ],
      { cwd: REPO, env: { ...process.env, GNUPGHOME: gnupg }, maxBuffer: 16 * 1024 * 1024 },
    ),
  );
  return r.stdout;
}

/** The guide's blocks for a new router (its section 5), all of them run here. */
const routerBlocks = async () =>
  (await shellBlocks(REPO, GUIDE)).filter(
    (b) => where(b) === 'router' && b.heading.startsWith(NEW_ROUTER_SECTION) && !b.notRun,
  );

/**
 * The operator guide's router block that contains `marker`, as written but for the repository's
 * address (ours) and the release's version (`X.Y.Z`).
 */
async function guideBlock(marker: string, version = FIRST): Promise<string> {
  const block = (await routerBlocks()).find((b) => b.script.includes(marker));
  if (!block) throw new Error(`docs/operator-guide.md has no router block with '${marker}'`);
  ranBlocks.add(block.line);
  console.log(`ran ${blockName(block)}`);
  return block.script.replaceAll(GUIDE_URL, url).replaceAll('X.Y.Z', version);
}

/** A shell script run as root in a Debian root; rejects with its output on a non-zero exit. */
async function inRoot(script: string, at = root): Promise<{ stdout: string; stderr: string }> {
  return run('chroot', [at, 'sh', '-ec', script], { env: ROOT_ENV, maxBuffer: 64 * 1024 * 1024 });
}

/**
 * `inRoot` in a network namespace of its own with /proc mounted, its /proc/sys read-only but for
 * net/: the guide's `sysctl --system` sets this namespace's forwarding, and cannot touch the machine's.
 */
async function inRootNetns(script: string, at = root): Promise<{ stdout: string; stderr: string }> {
  const proc = path.join(at, 'proc');
  const setup = [
    `mount -t proc proc ${proc}`,
    `mount --bind ${proc}/sys ${proc}/sys`,
    `mount --bind ${proc}/sys/net ${proc}/sys/net`,
    `mount -o remount,bind,ro ${proc}/sys`,
    `exec chroot ${at} sh -ec "$0"`,
  ].join('\n');
  return run('unshare', ['--net', '--mount', 'sh', '-ec', setup, script], { env: ROOT_ENV });
}

/**
 * systemd as the guide's blocks and the maintainer scripts see it in a chroot: its directories, a
 * `systemctl` that records each call (`enable` links the unit as systemd does; is-enabled answers from
 * that link, is-active: running), a `journalctl` that says it stands in; and the operator's `editor`,
 * which fills in /etc/peerops/agent.json as they would: the router's name, the controller, the token.
 */
async function standIns(at: string): Promise<void> {
  await mkdir(path.join(at, 'run/systemd/system'), { recursive: true });
  await mkdir(path.join(at, 'etc/systemd/system/multi-user.target.wants'), { recursive: true });
  const script = async (file: string, lines: string[]) =>
    writeFile(path.join(at, file), `${['#!/bin/sh', ...lines].join('\n')}\n`, { mode: 0o755 });
  await script('usr/bin/systemctl', [
    'echo "$*" >> /var/log/systemctl.calls',
    'wants=/etc/systemd/system/multi-user.target.wants',
    'case "$*" in',
    '  *is-enabled*) [ -e $wants/peerops-agent.service ] && echo enabled || echo disabled ;;',
    '  enable*) for u in "$@"; do case "$u" in enable|--*) ;; *)',
    '    unit=${u%.service}.service',
    '    for f in /etc/systemd/system/$unit /usr/lib/systemd/system/$unit; do',
    '      [ -e $f ] && ln -sf $f $wants/$unit && echo "Created symlink $wants/$unit → $f." && continue 2',
    '    done',
    '    echo "Failed to enable unit: Unit $unit does not exist" >&2; exit 1 ;;',
    '  esac; done ;;',
    'esac',
    'exit 0',
  ]);
  await script('usr/bin/journalctl', ['echo "journalctl $*: (a stand-in: no systemd in this chroot)"']);
  await script('usr/local/bin/editor', [
    `sed -i -e 's/"name": "CHANGE-ME"/"name": "fra1"/' -e 's|"url": "[^"]*"|"url": "https://peering.example.net"|' \\`,
    `  -e 's/"token": "CHANGE-ME[^"]*"/"token": "the-agent-token-router-add-printed"/' "$1"`,
  ]);
}

const installed = async (pkg: string) => (await inRoot(`dpkg-query -W -f '\${Version}' ${pkg}`)).stdout;

beforeAll(async () => {
  work = await mkdtemp(path.join(tmpdir(), 'peerops-apt-'));
  gnupg = path.join(work, 'gnupg');
  await mkdir(gnupg, { mode: 0o700 });
  const gpgEnv = { ...process.env, GNUPGHOME: gnupg };
  await run(
    'gpg',
    [
      '--batch',
      '--passphrase',
      '',
      '--quick-gen-key',
      'peerops test archive <apt@peerops.test>',
      'ed25519',
      'sign',
      'never',
    ],
    { env: gpgEnv },
  );
  fingerprint =
    /^fpr:+([0-9A-F]{40}):/m.exec(
      (await run('gpg', ['--list-keys', '--with-colons'], { env: gpgEnv })).stdout,
    )?.[1] ?? '';
  aptRepo = path.join(work, 'apt');
  console.log(await buildRelease(FIRST));

  server = createServer((req, res) => {
    const rel = path.normalize(decodeURIComponent((req.url ?? '/').split('?')[0] ?? '/'));
    const file = path.join(aptRepo, rel);
    if (!file.startsWith(`${aptRepo}${path.sep}`)) {
      res.statusCode = 404;
      res.end();
      return;
    }
    readFile(file).then(
      (body) => res.end((tamper && forged.get(rel)) || body),
      () => {
        res.statusCode = 404;
        res.end();
      },
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  rootTar = await timed(`Debian ${SUITE} root (mmdebstrap minbase + curl, cached)`, () =>
    debianRootfs(CLEAN_ROOT_PACKAGES, console.log),
  );
  root = await cleanRoot('rootfs');
}, 600_000);

/** A clean Debian root from the cached tarball, in `work`. */
async function cleanRoot(name: string): Promise<string> {
  const at = path.join(work, name);
  await mkdir(at);
  await run('tar', ['-xf', rootTar, '-C', at]);
  // the chroot shares this machine's network namespace: Debian's mirror by name, ours on 127.0.0.1
  await copyFile('/etc/resolv.conf', path.join(at, 'etc/resolv.conf'));
  // the operator's "Y" to apt's questions
  await writeFile(path.join(at, 'etc/apt/apt.conf.d/90assume-yes'), 'APT::Get::Assume-Yes "true";\n');
  return at;
}

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  if (gnupg) await run('gpgconf', ['--kill', 'gpg-agent'], { env: { ...process.env, GNUPGHOME: gnupg } });
  if (work) await rm(work, { recursive: true, force: true });
});

describe('the APT repository of the release build', () => {
  it('is a signed suite of both packages, with the key beside it', async () => {
    const dist = path.join(aptRepo, 'dists', APT_SUITE);
    expect((await readdir(dist)).sort()).toEqual(['InRelease', 'Release', 'Release.gpg', 'main']);
    const release = await readFile(path.join(dist, 'Release'), 'utf8');
    expect(release).toMatch(new RegExp(`^Suite: ${APT_SUITE}$`, 'm'));
    expect(release).toMatch(/^Components: main$/m);
    expect(release).not.toMatch(/^(MD5Sum|SHA1):/m);
    const packages = await readFile(path.join(dist, 'main', 'binary-amd64', 'Packages'), 'utf8');
    for (const pkg of ['peerops-common', 'peerops-agent', 'peerops', 'peerops-wireguard'])
      expect(packages).toMatch(new RegExp(`^Package: ${pkg}$`, 'm'));
    expect(packages).toContain(`Filename: pool/main/p/peerops-agent/peerops-agent_${FIRST}_all.deb`);
    // both signatures verify with the published key, made with gpg's own verifier
    const keyring = path.join(work, 'keyring.gpg');
    await run('gpg', ['--batch', '--yes', '--dearmor', '--output', keyring, path.join(aptRepo, APT_KEYRING)]);
    await run('gpgv', ['--keyring', keyring, path.join(dist, 'InRelease')]);
    await run('gpgv', ['--keyring', keyring, path.join(dist, 'Release.gpg'), path.join(dist, 'Release')]);
  });

  it('installs peerops-agent as the operator guide says, without a kernel', async () => {
    const block = await guideBlock('peerops.sources');
    const { stdout } = await timed('the guide: key, source, apt-get update, apt-get install', () =>
      inRoot(block),
    );
    const summary = [
      ...stdout.matchAll(
        /^(\d+ upgraded, \d+ newly installed.*|Need to get .*|After this operation, .*|\s*(Installing|Download size|Space needed):.*)$/gm,
      ),
    ].map((m) => m[1]?.trim());
    console.log(`apt-get install --no-install-recommends peerops-agent pulls:\n  ${summary.join('\n  ')}`);
    expect(summary.length, stdout.slice(-3000)).toBeGreaterThan(0);
    expect(await installed('peerops-agent')).toBe(FIRST);
    const all = (await inRoot("dpkg-query -W -f '${Package}\\n'")).stdout.split('\n');
    expect(all.filter((p) => p.startsWith('linux-image'))).toEqual([]);
    expect(all).toEqual(
      expect.arrayContaining(['bird2', 'wireguard-tools', 'nodejs', 'iputils-ping', 'procps']),
    );
    // the command runs on Debian's Node; peerops-wireguard comes from the same repository
    expect((await inRoot('peerops --version')).stdout.trim()).toBe(FIRST);
    console.log(`Debian's node: ${(await inRoot('node --version')).stdout.trim()}`);
    await inRoot('apt-get install --no-install-recommends peerops-wireguard');
    expect((await inRoot('peerops-wireguard --version')).stdout).toMatch(/^peerops-wireguard /);
  }, 600_000);

  it("the controller's package: its unit's ExecStart, as its user on Debian's Node, serves the API", async () => {
    const { stdout } = await timed('apt-get install --no-install-recommends peerops', () =>
      inRoot('apt-get install --no-install-recommends peerops'),
    );
    expect(stdout).toContain(
      'peerops: the controller is not started: set PEEROPS_SERVICE_HOST in /etc/default/peerops',
    );
    expect(await installed('peerops')).toBe(FIRST);
    expect((await inRoot('getent passwd peerops-controller')).stdout).toMatch(
      /^peerops-controller:x:\d{1,3}:\d+::\/nonexistent:\/usr\/sbin\/nologin$/m,
    );
    const unit = path.join(root, 'usr/lib/systemd/system/peerops.service');
    const argv = execStartArgv(await serviceSettings([unit]), ['peerops-controller']);
    const quote = (word: string) => `'${word.replaceAll("'", "'\\''")}'`;
    // systemd's part, done here: the StateDirectory, then ExecStart, in a network namespace of its own
    // (the controller's default 127.0.0.1:8080 is then its own); /etc/default/peerops is not read
    await inRoot('install -d -o peerops-controller -g peerops-controller -m 700 /var/lib/peerops');
    const script = [
      'ip link set lo up',
      `chroot ${quote(root)} ${argv.map(quote).join(' ')} > ${quote(path.join(work, 'controller.log'))} 2>&1 &`,
      'pid=$!',
      'ok=',
      'for i in $(seq 1 150); do',
      `  if body=$(chroot ${quote(root)} curl -sf http://127.0.0.1:8080/health); then ok=1; break; fi`,
      '  sleep 0.2',
      'done',
      'grep -E "^(Uid|CapEff):" /proc/$pid/status',
      'kill $pid; wait $pid || true',
      'echo "health: $body"',
      '[ -n "$ok" ]',
    ].join('\n');
    const started = await timed('the controller from the package: /health', () =>
      run('unshare', ['--net', 'sh', '-ec', script]).catch(async (err: Error) => {
        throw new Error(`${err.message}\n${await readFile(path.join(work, 'controller.log'), 'utf8')}`);
      }),
    );
    const uid = (await inRoot('id -u peerops-controller')).stdout.trim();
    expect(started.stdout).toMatch(new RegExp(`^Uid:\\s+${uid}\\s+${uid}\\s+${uid}\\s+${uid}$`, 'm'));
    expect(started.stdout).toMatch(/^CapEff:\s+0+$/m);
    expect(started.stdout).toContain('health: {"status":"ok"}');
    // its state, the unit's user's alone
    expect(
      (await inRoot('stat -c "%U %a %n" /var/lib/peerops /var/lib/peerops/jwt-ed25519.pem')).stdout,
    ).toBe(
      'peerops-controller 700 /var/lib/peerops\npeerops-controller 600 /var/lib/peerops/jwt-ed25519.pem\n',
    );
  }, 300_000);

  it("the guide's router blocks after the install, as written: the tunnel key, the config, the start, forwarding", async () => {
    await standIns(root);
    const { stdout } = await inRoot(await guideBlock('editor /etc/peerops/agent.json'));
    console.log(stdout.trim());
    expect((await inRoot('stat -c "%a %n" /etc/wireguard /etc/wireguard/private.key')).stdout).toBe(
      '700 /etc/wireguard\n600 /etc/wireguard/private.key\n',
    );
    const pub = (await inRoot('wg pubkey < /etc/wireguard/private.key')).stdout;
    expect(await readFile(path.join(root, 'etc/wireguard/public.key'), 'utf8')).toBe(pub);
    const config = JSON.parse(await readFile(path.join(root, 'etc/peerops/agent.json'), 'utf8')) as {
      node: { name: string };
      controlPlane: { url: string; token: string };
    };
    expect([config.node.name, config.controlPlane.url]).toEqual(['fra1', 'https://peering.example.net']);
    expect(config.controlPlane.token).not.toContain('CHANGE-ME');
    expect((await inRoot('systemctl is-enabled peerops-agent')).stdout.trim()).toBe('enabled');
    expect(await forwarding(root)).toEqual(['1', '1', '0']);
  }, 120_000);

  it('a newer release published: apt-get upgrade takes it, the agent restarts, its BGP session stays up', async () => {
    // the config filled in and the unit enabled by the guide's blocks (the test before)
    expect((await inRoot('systemctl is-enabled peerops-agent')).stdout.trim()).toBe('enabled');
    await writeFile(path.join(root, 'var/log/systemctl.calls'), ''); // from here: the upgrade's
    console.log(await buildRelease(NEXT));
    const packages = await readFile(
      path.join(aptRepo, 'dists', APT_SUITE, 'main', 'binary-amd64', 'Packages'),
      'utf8',
    );
    expect(
      [...packages.matchAll(/^Package: peerops-agent\nArchitecture: all\nVersion: (\S+)$/gm)]
        .map((m) => m[1])
        .sort(),
    ).toEqual([FIRST, NEXT]);

    // The installed package's agent with a BGP session up: the lab of test/agent (a controller, the
    // router's namespace with BIRD, a peer network with its own) running the package's bundle, as root
    // on this machine's Node rather than as the unit's user on Debian's (the chroot has no namespace of
    // its own; release.test.ts runs the unit's ExecStart as its user).
    const lab = await timed('agent lab: controller, router, peer', () => startAgentLab('apt'));
    const bird = new BirdControl(lab.config.routing.controlSocket, { poolSize: 1, poolSizeMax: 2 });
    try {
      const bundle = path.join(root, 'usr/lib/peerops/peerops.mjs');
      const peer = await lab.addPeer('p0', 'fe80::11');
      const port = lab.h.store.getSession(await lab.approvedSession(peer))?.spec.listenPort;
      await lab.connectPeer(peer, port ?? 0);
      let agent = lab.spawnAgent({ entry: bundle });
      const session = async () => (await bird.protocols(`dn42_${port}`))[0];
      await timed(`the agent of ${FIRST}: BGP Established`, () =>
        waitFor('BGP Established', async () => (await session())?.bgpState === 'Established', 60_000, 200),
      );
      await waitFor(
        `agentVersion ${FIRST}`,
        () => lab.h.store.getRouter(lab.router)?.status.agentVersion === FIRST,
        30_000,
        200,
      );
      await settledProtocols(bird);
      const before = await session();

      const block = await guideBlock('apt-get upgrade');
      const { stdout } = await timed('the guide: apt-get update && apt-get upgrade', () => inRoot(block));
      expect(stdout).toContain(`Unpacking peerops-agent (${NEXT}) over (${FIRST})`);
      expect(await installed('peerops-agent')).toBe(NEXT);
      for (const pkg of ['peerops-common', 'peerops', 'peerops-wireguard'])
        expect(await installed(pkg)).toBe(NEXT);
      expect((await inRoot('peerops --version')).stdout.trim()).toBe(NEXT);
      // Debian's deb-systemd-invoke restarted the agent once, and nothing stopped it
      const calls = (await readFile(path.join(root, 'var/log/systemctl.calls'), 'utf8')).trim().split('\n');
      console.log(`systemctl calls of the upgrade:\n  ${calls.join('\n  ')}`);
      const restarts = calls.filter((c) => /\brestart\b/.test(c));
      expect(restarts).toEqual(['--quiet --system restart peerops-agent.service']);
      expect(calls.filter((c) => /\bstop\b/.test(c))).toEqual([]);
      // each restart as systemd makes it with the unit's KillMode=process: SIGTERM to the agent alone
      // (tunnels and BIRD keep running), then ExecStart again, now the new version's bundle
      for (const _ of restarts) {
        await agent.kill('SIGTERM');
        agent = lab.spawnAgent({ entry: bundle });
      }
      await timed(`the agent of ${NEXT}: checked in`, () =>
        waitFor(
          `agentVersion ${NEXT}`,
          () => lab.h.store.getRouter(lab.router)?.status.agentVersion === NEXT,
          60_000,
          200,
        ),
      );
      await waitFor('a pass', () => agent.output().includes('"msg":"agent started"'), 30_000, 50);
      await new Promise((r) => setTimeout(r, 3000));
      const after = await session();
      expect(after?.bgpState).toBe('Established');
      // 0 flaps: the session's uptime is the one from before the upgrade
      expectSameBirdTime(`dn42_${port} across apt-get upgrade`, after?.since, before?.since);
      console.log(
        `BGP session dn42_${port}: Established since ${before?.since}, unchanged across the upgrade`,
      );
    } finally {
      bird.close();
      await lab.close();
    }
  }, 600_000);

  it('an InRelease changed on the way is refused, and nothing is taken from it', async () => {
    // a mirror offers version 9.9.9: its own Packages, and the signed InRelease with that file's
    // hashes and size written in (the signature left as it was)
    const dist = path.join(aptRepo, 'dists', APT_SUITE);
    const index = 'main/binary-amd64/Packages';
    const packages = (await readFile(path.join(dist, index), 'utf8')).replace(
      `Version: ${NEXT}`,
      'Version: 9.9.9',
    );
    let inRelease = await readFile(path.join(dist, 'InRelease'), 'utf8');
    for (const [name, body] of [
      [index, Buffer.from(packages)],
      [`${index}.gz`, gzipSync(packages)],
    ] as const) {
      forged.set(`/dists/${APT_SUITE}/${name}`, body);
      for (const algorithm of ['sha256', 'sha512']) {
        const digest = createHash(algorithm).update(body).digest('hex');
        inRelease = inRelease.replace(
          new RegExp(`^ [0-9a-f]{${digest.length}}\\s+\\d+ ${name.replaceAll('.', '\\.')}$`, 'm'),
          ` ${digest} ${body.length} ${name}`,
        );
      }
    }
    expect(inRelease).not.toBe(await readFile(path.join(dist, 'InRelease'), 'utf8'));
    forged.set(`/dists/${APT_SUITE}/InRelease`, Buffer.from(inRelease));
    tamper = true;
    try {
      // apt refuses the suite and keeps the index it verified before (exit 0: a warning, as for any
      // repository that fails to update; `--error-on=any` makes it an error)
      const { stderr } = await inRoot('apt-get update');
      console.log(`apt-get update from the forging mirror:\n${stderr}`);
      expect(stderr).toContain(
        `The repository is not updated and the previous index files will be used. OpenPGP signature verification failed: ${url} ${APT_SUITE} InRelease`,
      );
      expect(stderr).toContain('Message has been manipulated');
      await expect(inRoot('apt-get update --error-on=any')).rejects.toMatchObject({ code: 100 });
      expect((await inRoot('apt-cache policy peerops-agent')).stdout).toMatch(
        new RegExp(`^\\s+Candidate: ${NEXT.replaceAll('.', '\\.')}$`, 'm'),
      );
      await inRoot('apt-get upgrade');
      expect(await installed('peerops-agent')).toBe(NEXT);
    } finally {
      tamper = false;
    }
  }, 300_000);

  it("the guide's npm path on a clean Debian 13, as written: no kernel pulled, the unit, the key, the start", async () => {
    const npmRoot = await cleanRoot('rootfs-npm');
    await standIns(npmRoot);
    // the release's tarball where the block's `./peerops-X.Y.Z.tgz` finds it: root's home
    await copyFile(
      path.join(work, `release-${FIRST}`, `peerops-${FIRST}.tgz`),
      path.join(npmRoot, 'root', `peerops-${FIRST}.tgz`),
    );
    const block = await guideBlock('npm install -g ./peerops-X.Y.Z.tgz');
    const { stdout } = await timed('the guide: apt-get install … nodejs npm, npm install -g, the unit', () =>
      inRoot(`cd /root\n${block}`, npmRoot),
    );
    console.log(
      stdout
        .match(/^(\d+ upgraded, \d+ newly installed.*|Need to get .*|added \d+ package.*)$/gm)
        ?.join('\n'),
    );
    const all = (await inRoot("dpkg-query -W -f '${Package}\\n'", npmRoot)).stdout.split('\n');
    expect(all.filter((p) => p.startsWith('linux-image'))).toEqual([]);
    expect((await inRoot('peerops --version', npmRoot)).stdout.trim()).toBe(FIRST);
    expect(
      (
        await inRoot(
          'stat -c "%a %n" /etc/systemd/system/peerops-agent.service /etc/wireguard/private.key',
          npmRoot,
        )
      ).stdout,
    ).toBe('644 /etc/systemd/system/peerops-agent.service\n600 /etc/wireguard/private.key\n');
    expect(await forwarding(npmRoot)).toEqual(['1', '1', '0']);
    const start = await inRoot(await guideBlock('journalctl -u peerops-agent -f'), npmRoot);
    console.log(start.stdout.trim());
    expect((await inRoot('systemctl is-enabled peerops-agent', npmRoot)).stdout.trim()).toBe('enabled');
    // every router block of the guide has run, in this file
    expect([...ranBlocks].sort((a, b) => a - b)).toEqual((await routerBlocks()).map((b) => b.line));
  }, 300_000);
});

/** The guide's forwarding block run in `at` (its own network namespace): the three values it sets, read back. */
async function forwarding(at: string): Promise<string[]> {
  const block = await guideBlock('sysctl --system');
  const { stdout } = await inRootNetns(
    `${block}\nsysctl -n net.ipv4.ip_forward net.ipv6.conf.all.forwarding net.ipv4.conf.all.rp_filter`,
    at,
  );
  return stdout.trim().split('\n').slice(-3);
}
