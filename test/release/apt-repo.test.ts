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
 * - an InRelease changed on the way is refused by apt.
 * systemd cannot run in a chroot: a recording `systemctl` stands in for it, so that the maintainer
 * scripts' calls (through Debian's own deb-systemd-invoke) are seen. Prints each phase's time.
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
import { debianRootfs, execStartArgv, serviceSettings, SUITE } from './debian-root.ts';

const run = promisify(execFile);
const REPO = path.join(import.meta.dirname, '..', '..');
const GUIDE = path.join(REPO, 'docs', 'operator-guide.md');
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

/** The operator guide's ```sh block that contains `marker`, the repository's address made ours. */
async function guideBlock(marker: string): Promise<string> {
  const blocks = [...(await readFile(GUIDE, 'utf8')).matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map(
    (m) => m[1] as string,
  );
  const block = blocks.find((b) => b.includes(marker));
  if (!block) throw new Error(`docs/operator-guide.md has no sh block with '${marker}'`);
  return block.replaceAll(GUIDE_URL, url);
}

/** A shell script run as root in the Debian root; rejects with its output on a non-zero exit. */
async function inRoot(script: string): Promise<{ stdout: string; stderr: string }> {
  return run('chroot', [root, 'sh', '-ec', script], { env: ROOT_ENV, maxBuffer: 64 * 1024 * 1024 });
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

  const tar = await timed(`Debian ${SUITE} root (mmdebstrap minbase + curl, cached)`, () =>
    debianRootfs(CLEAN_ROOT_PACKAGES, console.log),
  );
  root = path.join(work, 'rootfs');
  await mkdir(root);
  await run('tar', ['-xf', tar, '-C', root]);
  // the chroot shares this machine's network namespace: Debian's mirror by name, ours on 127.0.0.1
  await copyFile('/etc/resolv.conf', path.join(root, 'etc/resolv.conf'));
  // the operator's "Y" to apt's questions
  await writeFile(path.join(root, 'etc/apt/apt.conf.d/90assume-yes'), 'APT::Get::Assume-Yes "true";\n');
}, 600_000);

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

  it('a newer release published: apt-get upgrade takes it, the agent restarts, its BGP session stays up', async () => {
    // the operator filled in the config and enabled the unit (`systemctl enable` makes this link)
    await inRoot(
      [
        "sed -i 's/CHANGE-ME[^\"]*/filled-in/' /etc/peerops/agent.json",
        'mkdir -p /etc/systemd/system/multi-user.target.wants',
        'ln -s /usr/lib/systemd/system/peerops-agent.service /etc/systemd/system/multi-user.target.wants/',
      ].join(' && '),
    );
    // systemd as the maintainer scripts see it: its directory, and a systemctl that records each call
    // (is-enabled answers from the unit's link, is-active: running)
    await mkdir(path.join(root, 'run/systemd/system'), { recursive: true });
    await writeFile(
      path.join(root, 'usr/bin/systemctl'),
      [
        '#!/bin/sh',
        'echo "$*" >> /var/log/systemctl.calls',
        'case "$*" in',
        '  *is-enabled*) [ -e /etc/systemd/system/multi-user.target.wants/peerops-agent.service ] && echo enabled || echo disabled ;;',
        'esac',
        'exit 0',
        '',
      ].join('\n'),
      { mode: 0o755 },
    );
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
});
