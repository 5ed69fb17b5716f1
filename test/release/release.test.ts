/**
 * The release as `npm run build:release` makes it (the real command, without images: test/image builds
 * those), then used as its three audiences do:
 * - an operator checks it with the commands of docs/release.md (`ssh-keygen -Y verify`, `sha256sum -c`);
 * - an agent's updater installs it from a local HTTP server (127.0.0.1) serving that directory as the
 *   assets of a release in the GitHub API form, and refuses a bad signature, a key it does not trust and
 *   a checksum mismatch with one clear line each;
 * - a Debian 13 router installs the .deb (`dpkg -i` in a chroot made by mmdebstrap with Debian's bird2,
 *   debian-root.ts), and its unit's ExecStart runs as the unit's user with the unit's capabilities, in a
 *   network namespace of its own with Debian's BIRD and a controller, until the agent heartbeats and its
 *   /health sees BIRD and the controller. systemd itself does not run in a chroot: what it would add
 *   (ProtectSystem, ReadWritePaths, restarts) is not tested here.
 * Prints how long each phase takes. One file (over 500 lines) so that the release is built once (about
 * 45 s here) for all three.
 *
 * Over 500 lines: three audiences of one build, which is made once (minutes) and shared.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AGENT_NODE_ARGS } from '../../agent/node-args.ts';
import { ARTIFACT_NAME, CHECKSUMS_NAME } from '../../agent/update/install.ts';
import type { Release } from '../../agent/update/releases.ts';
import { RELEASE_NAMESPACE, SIGNATURE_NAME } from '../../agent/update/signature.ts';
import { checkForUpdate, type UpdateOutcome } from '../../agent/update/updater.ts';
import { TokenIssuer, defaultKeyPath } from '../../controller/auth/jwt.ts';
import { buildRelease } from '../../scripts/build-release.ts';
import { commonDebFileName, debFileName } from '../../scripts/build-deb.ts';
import { controllerDebFileName } from '../../scripts/build-deb-controller.ts';
import { hostArchitecture, wireguardDebFileName } from '../../scripts/build-deb-wireguard.ts';
import { routerFields } from '../api/helpers.ts';
import { nodeArgsProbe } from '../support/node-args-probe.ts';
import { ControllerProcess } from '../support/controller-process.ts';
import { freePort } from '../support/ports.ts';
import {
  bootScript,
  DEB_ROOT_PACKAGES as ROOT_PACKAGES,
  debianRootfs,
  execStartArgv,
  serviceSettings,
  SUITE,
} from './debian-root.ts';

const run = promisify(execFile);
const REPO = path.join(import.meta.dirname, '..', '..');
const VERSION = '0.99.0';
const OLD_VERSION = '0.98.0';

let work: string;
let release: string;
let buildOutput: string;
let signingKey: string;
let publicKeyLine: string;
/** peerops-wireguard's .deb, for this machine's architecture */
let wireguardDeb: string;

async function timed<T>(what: string, fn: () => Promise<T>): Promise<T> {
  const t0 = performance.now();
  const value = await fn();
  console.log(`${what}: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  return value;
}

async function newKey(name: string): Promise<string> {
  const file = path.join(work, name);
  await run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', name, '-f', file]);
  return file;
}

beforeAll(async () => {
  work = await mkdtemp(path.join(tmpdir(), 'peerops-release-'));
  signingKey = await newKey('release-key');
  publicKeyLine = (await readFile(`${signingKey}.pub`, 'utf8')).trim().split(' ').slice(0, 2).join(' ');
  release = path.join(work, 'release');
  wireguardDeb = await wireguardDebFileName(VERSION);
  buildOutput = await timed(`npm run build:release -- --version ${VERSION} --no-images`, async () => {
    const r = await run(
      'npm',
      [
        'run',
        '--silent',
        'build:release',
        '--',
        '--version',
        VERSION,
        '--out',
        release,
        '--signing-key',
        signingKey,
        '--no-images',
      ],
      { cwd: REPO, maxBuffer: 16 * 1024 * 1024 },
    );
    return r.stdout;
  });
  console.log(buildOutput);
}, 300_000);

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

describe('npm run build:release', () => {
  it('writes every asset into one directory and prints each size and the time', async () => {
    expect((await readdir(release)).sort()).toEqual(
      [
        ARTIFACT_NAME,
        'peerops',
        `peerops-${VERSION}.tgz`,
        commonDebFileName(VERSION),
        debFileName(VERSION),
        controllerDebFileName(VERSION),
        wireguardDeb,
        CHECKSUMS_NAME,
        SIGNATURE_NAME,
      ].sort(),
    );
    expect(buildOutput).toMatch(
      new RegExp(`^Debian package: ${debFileName(VERSION)} [\\d.]+ KiB in [\\d.]+ s$`, 'm'),
    );
    expect(buildOutput).toMatch(
      new RegExp(`^Debian package: ${commonDebFileName(VERSION)} [\\d.]+ MiB in [\\d.]+ s$`, 'm'),
    );
    expect(buildOutput).toMatch(
      new RegExp(`^Debian package: ${controllerDebFileName(VERSION)} [\\d.]+ KiB in [\\d.]+ s$`, 'm'),
    );
    expect(buildOutput).toMatch(
      new RegExp(`^Debian package: ${wireguardDeb} [\\d.]+ MiB in [\\d.]+ s$`, 'm'),
    );
    expect(buildOutput).toMatch(/^images: left out \(--no-images\)$/m);
    expect(buildOutput).toMatch(
      new RegExp(`^release ${VERSION} in .*: 9 files, [\\d.]+ MiB, [\\d.]+ s$`, 'm'),
    );
    expect(buildOutput).toContain(`autoUpdate.publicKeys ["${publicKeyLine}"]`);
    // SHA256SUMS names every other asset
    const sums = await readFile(path.join(release, CHECKSUMS_NAME), 'utf8');
    expect(
      sums
        .trim()
        .split('\n')
        .map((l) => l.split('  ')[1])
        .sort(),
    ).toEqual(
      [
        ARTIFACT_NAME,
        'peerops',
        `peerops-${VERSION}.tgz`,
        commonDebFileName(VERSION),
        debFileName(VERSION),
        controllerDebFileName(VERSION),
        wireguardDeb,
      ].sort(),
    );
  });

  it('an operator verifies it with the commands of docs/release.md', async () => {
    const signers = path.join(work, 'allowed_signers');
    await writeFile(signers, `release@peerops namespaces="${RELEASE_NAMESPACE}" ${publicKeyLine}\n`);
    const verify = (dir: string) =>
      run(
        'sh',
        [
          '-c',
          `ssh-keygen -Y verify -f ${signers} -I release@peerops -n ${RELEASE_NAMESPACE} -s SHA256SUMS.sig < SHA256SUMS && sha256sum -c SHA256SUMS`,
        ],
        { cwd: dir },
      );
    const good = await verify(release);
    expect(good.stdout).toMatch(/^Good "peerops-release" signature for release@peerops with ED25519 key/m);
    expect(good.stdout).toContain(`${debFileName(VERSION)}: OK`);
    expect(good.stdout).toContain(`${wireguardDeb}: OK`);
    // a changed checksum list fails the signature check
    const tampered = path.join(work, 'tampered');
    await mkdir(tampered);
    for (const f of [CHECKSUMS_NAME, SIGNATURE_NAME])
      await copyFile(path.join(release, f), path.join(tampered, f));
    const sums = await readFile(path.join(tampered, CHECKSUMS_NAME), 'utf8');
    await writeFile(
      path.join(tampered, CHECKSUMS_NAME),
      sums.replace(/^[0-9a-f]/, (c) => (c === '0' ? '1' : '0')),
    );
    await expect(verify(tampered)).rejects.toMatchObject({ code: 255 });
  });

  it("the launcher runs `peerops agent` on node with the agent's options, other commands without", async () => {
    const launcher = path.join(release, 'peerops');
    const missing = path.join(work, 'no-such-agent.json');
    const seenBy = async (args: string[], extra: NodeJS.ProcessEnv = {}) => {
      const probe = await nodeArgsProbe(work);
      await run(launcher, args, { env: { ...process.env, ...probe.env, ...extra } }).catch(
        (err: { code?: number }) => expect(err.code).toBe(1), // the agent: no config to read
      );
      return (await probe.seen()).map((p) => p.execArgv);
    };
    // one process: the bundle sees the options and does not run itself again
    expect(await seenBy(['agent', '--config', missing])).toEqual([[...AGENT_NODE_ARGS]]);
    expect(await seenBy(['agent', '--config', missing], { PEEROPS_AGENT_NODE_ARGS: '' })).toEqual([[]]);
    expect(
      await seenBy(['agent', '--config', missing], { PEEROPS_AGENT_NODE_ARGS: '--max-semi-space-size=2' }),
    ).toEqual([['--max-semi-space-size=2']]);
    expect(await seenBy(['--version'])).toEqual([[]]);
  });

  it("a data directory keeps the store's parse cache between the checkout and its release", async () => {
    // built from this checkout, the bundle has its revision (common/version.ts, docs/store.md)
    const data = path.join(work, 'moved-data');
    const said = (c: ControllerProcess) => c.output.split('\n').find((l) => l.includes('store: parse cache'));
    const sources = new ControllerProcess(data, await freePort());
    await sources.start();
    expect(await sources.stop()).toBe(0);
    expect(said(sources)).toContain('absent');
    const bundle = new ControllerProcess(data, await freePort());
    bundle.program = path.join(release, 'peerops.mjs');
    await bundle.start();
    expect(await bundle.stop()).toBe(0);
    expect(said(bundle)).toContain('store: parse cache taken');
    await sources.start();
    expect(await sources.stop()).toBe(0);
    expect(said(sources)).toContain('store: parse cache taken');
  }, 60_000);

  it('the .deb: its control fields, conffile and modes', async () => {
    const deb = path.join(release, debFileName(VERSION));
    const control = (await run('dpkg-deb', ['-f', deb])).stdout;
    expect(control).toMatch(/^Package: peerops-agent$/m);
    expect(control).toMatch(new RegExp(`^Version: ${VERSION}$`, 'm'));
    expect(control).toMatch(/^Architecture: all$/m);
    expect(control).toMatch(
      new RegExp(
        `^Depends: peerops-common \\(= ${VERSION}\\), bird2, wireguard-tools, iproute2, iputils-ping, procps, adduser$`,
        'm',
      ),
    );
    // nothing recommended: routers install with --no-install-recommends (docs/operator-guide.md)
    expect(control).not.toMatch(/^Recommends:/m);
    // suggested, not recommended: it trades per-tunnel throughput for scale (docs/agent.md)
    expect(control).toMatch(/^Suggests: peerops-wireguard, wireguard-go$/m);
    expect(control).not.toMatch(/^Recommends: .*peerops-wireguard/m);
    const files = (await run('dpkg-deb', ['-c', deb])).stdout;
    expect(files).toMatch(/^-rw-r----- root\/root .* \.\/etc\/peerops\/agent\.json$/m);
    expect(files).not.toMatch(/\.\/usr\/lib\/peerops\//m);
    expect(files).toMatch(/\.\/usr\/lib\/systemd\/system\/peerops-agent\.service$/m);
    expect(files).toMatch(/\.\/usr\/lib\/systemd\/system\/peerops-agent\.service\.d\/debian\.conf$/m);
    const conffiles = (await run('dpkg-deb', ['-I', deb, 'conffiles'])).stdout;
    expect(conffiles.trim()).toBe('/etc/peerops/agent.json');
  });

  it("peerops-common: the launcher and bundle on Debian's Node, replacing them in older agent packages", async () => {
    const deb = path.join(release, commonDebFileName(VERSION));
    const control = (await run('dpkg-deb', ['-f', deb])).stdout;
    expect(control).toMatch(/^Package: peerops-common$/m);
    expect(control).toMatch(/^Depends: nodejs \(>= 20\.12\)$/m);
    expect(control).toMatch(new RegExp(`^Replaces: peerops-agent \\(<< ${VERSION}\\)$`, 'm'));
    expect(control).toMatch(new RegExp(`^Breaks: peerops-agent \\(<< ${VERSION}\\)$`, 'm'));
    const files = (await run('dpkg-deb', ['-c', deb])).stdout;
    expect(files).toMatch(/^-rwxr-xr-x root\/root .* \.\/usr\/lib\/peerops\/peerops$/m);
    expect(files).toMatch(/^-rwxr-xr-x root\/root .* \.\/usr\/lib\/peerops\/peerops\.mjs$/m);
    expect(files).toMatch(/^lrwxrwxrwx root\/root .* \.\/usr\/bin\/peerops -> \.\.\/lib\/peerops\/peerops$/m);
  });

  it('peerops (the controller): its hardened unit, settings and user', async () => {
    const deb = path.join(release, controllerDebFileName(VERSION));
    const control = (await run('dpkg-deb', ['-f', deb])).stdout;
    expect(control).toMatch(/^Package: peerops$/m);
    expect(control).toMatch(new RegExp(`^Depends: peerops-common \\(= ${VERSION}\\), git, adduser$`, 'm'));
    expect((await run('dpkg-deb', ['-I', deb, 'conffiles'])).stdout.trim()).toBe('/etc/default/peerops');
    const unpacked = path.join(work, 'peerops-deb');
    await run('dpkg-deb', ['-x', deb, unpacked]);
    const unit = await serviceSettings([path.join(unpacked, 'usr/lib/systemd/system/peerops.service')]);
    const last = (name: string) => unit.get(name)?.at(-1);
    expect(last('User')).toBe('peerops-controller');
    expect(last('ExecStart')).toBe('/usr/bin/peerops serve --data /var/lib/peerops');
    expect(last('StateDirectory')).toBe('peerops');
    expect(last('ProtectSystem')).toBe('strict');
    expect(last('NoNewPrivileges')).toBe('yes');
    expect(unit.get('CapabilityBoundingSet')).toEqual([]);
  });

  it("peerops-wireguard's .deb: for this machine's architecture, the binary and its licences", async () => {
    const arch = await hostArchitecture();
    expect(wireguardDeb).toBe(`peerops-wireguard_${VERSION}_${arch}.deb`);
    const deb = path.join(release, wireguardDeb);
    const control = (await run('dpkg-deb', ['-f', deb])).stdout;
    expect(control).toMatch(/^Package: peerops-wireguard$/m);
    expect(control).toMatch(new RegExp(`^Version: ${VERSION}$`, 'm'));
    expect(control).toMatch(new RegExp(`^Architecture: ${arch}$`, 'm'));
    expect(control).toMatch(
      /^Description: every userspace WireGuard tunnel of a peerops router in one process$/m,
    );
    expect(control).not.toMatch(/^(Pre-)?Depends:/m); // a static binary
    const files = (await run('dpkg-deb', ['-c', deb])).stdout
      .trim()
      .split('\n')
      .filter((line) => !line.startsWith('d'));
    expect(files).toHaveLength(2);
    expect(files[0]).toMatch(/^-rwxr-xr-x root\/root .* \.\/usr\/bin\/peerops-wireguard$/);
    expect(files[1]).toMatch(/^-rw-r--r-- root\/root .* \.\/usr\/share\/doc\/peerops-wireguard\/copyright$/);
    // no maintainer scripts: the agent starts the host on demand
    expect((await run('dpkg-deb', ['-I', deb])).stdout).not.toMatch(/\b(pre|post)(inst|rm)\b/);
    // the licence of every Go module linked in (`go version -m` of the packaged binary)
    const unpacked = path.join(work, 'peerops-wireguard-deb');
    await run('dpkg-deb', ['-x', deb, unpacked]);
    const modules = [
      ...(
        await run('go', ['version', '-m', path.join(unpacked, 'usr/bin/peerops-wireguard')])
      ).stdout.matchAll(/^\s*dep\s+(\S+)\s/gm),
    ].map((m) => m[1] as string);
    expect(modules).toContain('golang.zx2c4.com/wireguard');
    const copyright = await readFile(
      path.join(unpacked, 'usr/share/doc/peerops-wireguard/copyright'),
      'utf8',
    );
    const licensed = copyright.match(/^Files: .*$/gm)?.join(' ') ?? '';
    for (const module of modules) expect(licensed, module).toContain(`${module}/*`);
  });
});

describe('self-update from the release directory served over HTTP', () => {
  let server: Server;
  let base: string;
  let installDir: string;
  /** URL path prefix → the files it serves; each variant changes one file of the release. */
  const variants = new Map<string, Map<string, Buffer>>();

  beforeAll(async () => {
    const asBuilt = new Map<string, Buffer>();
    for (const f of await readdir(release)) asBuilt.set(f, await readFile(path.join(release, f)));
    const otherKey = await newKey('other-key');
    const foreignSums = path.join(work, 'foreign', CHECKSUMS_NAME);
    await mkdir(path.dirname(foreignSums));
    await writeFile(foreignSums, asBuilt.get(CHECKSUMS_NAME) as Buffer);
    await run('ssh-keygen', ['-Y', 'sign', '-q', '-f', otherKey, '-n', RELEASE_NAMESPACE, foreignSums]);
    const bundle = asBuilt.get(ARTIFACT_NAME) as Buffer;
    variants.set('good', asBuilt);
    variants.set('bad-signature', new Map([...asBuilt, [SIGNATURE_NAME, Buffer.from('not a signature\n')]]));
    variants.set(
      'foreign-key',
      new Map([...asBuilt, [SIGNATURE_NAME, await readFile(`${foreignSums}.sig`)]]),
    );
    variants.set(
      'checksum-mismatch',
      new Map([
        ...asBuilt,
        [ARTIFACT_NAME, Buffer.concat([bundle, Buffer.from('\n// changed on the mirror\n')])],
      ]),
    );
    server = createServer((req, res) => {
      const [, variant = '', rest = ''] = /^\/([^/]+)\/(.*)$/.exec(req.url ?? '') ?? [];
      const files = variants.get(variant);
      if (files && rest === 'repos/acme/peerops/releases') {
        const listing: Release[] = [
          {
            tag_name: `v${VERSION}`,
            prerelease: false,
            draft: false,
            assets: [...files.keys()].map((name) => ({
              name,
              browser_download_url: `${base}/${variant}/download/${name}`,
            })),
          },
        ];
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify(listing));
        return;
      }
      const body = files?.get(rest.replace(/^download\//, ''));
      res.statusCode = body ? 200 : 404;
      res.end(body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    // the running agent: release OLD_VERSION's bundle and launcher
    installDir = path.join(work, 'old');
    await buildRelease(OLD_VERSION, installDir, { assets: 'agent' });
  }, 120_000);

  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
  });

  async function update(
    variant: string,
    publicKeys = [publicKeyLine],
  ): Promise<{ outcome?: UpdateOutcome; dir: string }> {
    const dir = await mkdtemp(path.join(work, `install-${variant}-`));
    await copyFile(path.join(installDir, ARTIFACT_NAME), path.join(dir, ARTIFACT_NAME));
    const outcome = await checkForUpdate({
      local: {
        enabled: true,
        checkInterval: 60,
        channel: 'stable',
        releaseRepo: `${base}/${variant}/acme/peerops`,
        publicKeys,
      },
      installPath: path.join(dir, ARTIFACT_NAME),
      currentVersion: OLD_VERSION,
      restart: () => undefined,
    });
    return { outcome, dir };
  }

  const installedVersion = async (dir: string) =>
    (await run(process.execPath, [path.join(dir, ARTIFACT_NAME), '--version'])).stdout.trim();

  it('a release signed by a trusted key installs', async () => {
    const { outcome, dir } = await update('good');
    expect(outcome).toEqual({ result: 'updated', from: OLD_VERSION, to: VERSION });
    expect(await installedVersion(dir)).toBe(VERSION);
  }, 60_000);

  for (const [variant, line] of [
    ['bad-signature', 'not an armored SSH signature (-----BEGIN SSH SIGNATURE-----)'],
    ['foreign-key', 'it is signed by a key that is not in autoUpdate.publicKeys'],
  ] as const)
    it(`${variant}: refused with one clear line, the running file untouched`, async () => {
      const attempt = update(variant);
      await expect(attempt).rejects.toThrow(
        `${SIGNATURE_NAME} of v${VERSION} does not show ${CHECKSUMS_NAME} signed by a key of autoUpdate.publicKeys (${line}): refused`,
      );
      const [dir = ''] = (await readdir(work)).filter((d) => d.startsWith(`install-${variant}-`));
      expect(await readdir(path.join(work, dir))).toEqual([ARTIFACT_NAME]);
      expect(await installedVersion(path.join(work, dir))).toBe(OLD_VERSION);
    }, 60_000);

  it('an agent that trusts another key refuses the publisher’s release', async () => {
    const other = (await readFile(path.join(work, 'other-key.pub'), 'utf8')).trim();
    await expect(update('good', [other])).rejects.toThrow(
      /\(it is signed by a key that is not in autoUpdate.publicKeys\): refused$/,
    );
  }, 60_000);

  it('a bundle whose SHA256 differs from the signed list is refused and deleted', async () => {
    await expect(update('checksum-mismatch')).rejects.toThrow(
      new RegExp(
        `^${ARTIFACT_NAME} of v${VERSION} has SHA256 [0-9a-f]{64}, SHA256SUMS says [0-9a-f]{64}: refused$`,
      ),
    );
    const dirs = (await readdir(work)).filter((d) => d.startsWith('install-checksum-mismatch-'));
    for (const d of dirs) {
      expect(await readdir(path.join(work, d))).toEqual([ARTIFACT_NAME]);
      expect(await installedVersion(path.join(work, d))).toBe(OLD_VERSION);
    }
  }, 60_000);
});

describe(`the .deb on Debian ${SUITE} with Debian's bird2`, () => {
  const ns = `peerops-deb-${randomBytes(3).toString('hex')}`;
  const CONTROLLER = 'http://127.0.0.1:8080';
  let root: string;
  let controller: ChildProcess | undefined;
  let agent: ChildProcess | undefined;
  let agentOutput = '';
  let controllerOutput = '';
  let installOutput = '';
  let adminToken = '';
  const chroot = (...args: string[]) => run('chroot', [root, ...args]);

  /** The controller's API from inside the namespace (the test process is outside it). */
  async function api(route: string, body: unknown): Promise<Record<string, unknown>> {
    const r = await run('ip', [
      'netns',
      'exec',
      ns,
      'curl',
      '-sS',
      '--max-time',
      '20',
      '-X',
      'POST',
      '-H',
      'content-type: application/json',
      '-H',
      `authorization: Bearer ${adminToken}`,
      '--data-binary',
      JSON.stringify(body),
      `${CONTROLLER}${route}`,
    ]);
    return JSON.parse(r.stdout) as Record<string, unknown>;
  }

  beforeAll(async () => {
    const tar = await timed('Debian root (mmdebstrap, cached)', () =>
      debianRootfs(ROOT_PACKAGES, console.log),
    );
    root = path.join(work, 'rootfs');
    await mkdir(root);
    await timed('Debian root: unpack', () => run('tar', ['-xf', tar, '-C', root]));
    const debs = [commonDebFileName(VERSION), debFileName(VERSION), wireguardDeb];
    for (const deb of debs) await copyFile(path.join(release, deb), path.join(root, 'tmp', deb));
    installOutput = await timed(
      'dpkg -i',
      async () => (await chroot('dpkg', '-i', ...debs.map((deb) => `/tmp/${deb}`))).stdout,
    );
    await run('ip', ['netns', 'add', ns]);
    await run('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    // a router has an IPv4 address BIRD takes its router ID from (Debian's bird.conf sets none)
    await run('ip', ['-n', ns, 'link', 'add', 'uplink0', 'type', 'veth', 'peer', 'name', 'uplink1']);
    await run('ip', ['-n', ns, 'addr', 'add', '192.0.2.1/24', 'dev', 'uplink0']);
    await run('ip', ['-n', ns, 'link', 'set', 'uplink0', 'up']);
  }, 600_000);

  afterAll(async () => {
    for (const child of [agent, controller]) child?.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 500));
    for (const child of [agent, controller]) child?.kill('SIGKILL');
    const birdPid = await readFile(path.join(work, 'bird.pid'), 'utf8').catch(() => '');
    if (birdPid.trim()) await run('kill', ['-KILL', birdPid.trim()]).catch(() => undefined);
    await run('ip', ['netns', 'del', ns]).catch(() => undefined);
  });

  it('installs: user and group, config owner and mode, the unit; not started while unconfigured', async () => {
    expect(installOutput).toContain(`Setting up peerops-agent (${VERSION})`);
    expect(installOutput).toContain('peerops-agent: not started: fill in /etc/peerops/agent.json');
    expect((await chroot('getent', 'passwd', 'peerops')).stdout).toMatch(
      /^peerops:x:\d{1,3}:\d+::\/nonexistent:\/usr\/sbin\/nologin$/m,
    );
    expect((await chroot('id', '-nG', 'peerops')).stdout.trim().split(' ').sort()).toEqual([
      'bird',
      'peerops',
    ]);
    const stats = (await chroot('stat', '-c', '%U:%G %a %n', '/etc/peerops', '/etc/peerops/agent.json'))
      .stdout;
    expect(stats).toBe('root:peerops 750 /etc/peerops\nroot:peerops 640 /etc/peerops/agent.json\n');
    await stat(path.join(root, 'usr/lib/systemd/system/peerops-agent.service'));
    expect(await readdir(path.join(root, 'etc/systemd/system/multi-user.target.wants'))).not.toContain(
      'peerops-agent.service',
    );
    // the installed command runs on Debian's own Node
    expect((await chroot('peerops', '--version')).stdout.trim()).toBe(VERSION);
    expect((await chroot('node', '--version')).stdout).toMatch(/^v(2[0-9])\./);
  });

  it('installs peerops-wireguard on PATH, where the agent looks for it', async () => {
    expect(installOutput).toContain(`Setting up peerops-wireguard (${VERSION})`);
    expect((await chroot('sh', '-c', 'command -v peerops-wireguard')).stdout.trim()).toBe(
      '/usr/bin/peerops-wireguard',
    );
    expect((await chroot('peerops-wireguard', '--version')).stdout).toMatch(
      /^peerops-wireguard \(wireguard-go library v\S+\)$/m,
    );
  });

  it("the unit's ExecStart, as its user, passes the preflight and heartbeats to the controller", async () => {
    // the controller, in the namespace
    const data = path.join(work, 'controller');
    controller = spawn(
      'ip',
      [
        'netns',
        'exec',
        ns,
        path.join(REPO, 'node_modules', 'node', 'bin', 'node'),
        path.join(REPO, 'bin', 'peerops.ts'),
        'serve',
        '--listen',
        '127.0.0.1:8080',
        '--data',
        data,
      ],
      { env: { ...process.env, PEEROPS_STORE: 'git' }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    controller.stdout?.on('data', (d: Buffer) => (controllerOutput += d.toString()));
    controller.stderr?.on('data', (d: Buffer) => (controllerOutput += d.toString()));
    for (let i = 0; ; i++) {
      const health = await run('ip', ['netns', 'exec', ns, 'curl', '-s', `${CONTROLLER}/health`]).catch(
        () => undefined,
      );
      if (health?.stdout.includes('"ok"')) break;
      if (i > 300) throw new Error(`the controller did not start:\n${controllerOutput}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    adminToken = (await TokenIssuer.fromFile(defaultKeyPath(data))).issueToken(4242420000, 'admin').token;
    await api('/admin/policy', { action: 'set', spec: { dn42Asn: 4242420000 } });

    // the operator's steps of docs/operator-guide.md: a tunnel key, the router, the config
    await chroot(
      'sh',
      '-c',
      'install -d -m 700 /etc/wireguard && umask 077 && wg genkey | tee /etc/wireguard/private.key | wg pubkey > /etc/wireguard/public.key',
    );
    const publicKey = (await readFile(path.join(root, 'etc/wireguard/public.key'), 'utf8')).trim();
    const added = await api('/admin/router', { action: 'add', ...routerFields('deb1', { publicKey }) });
    const token = String(added.agentToken);
    expect(token.length, JSON.stringify(added)).toBeGreaterThan(16);
    const config = path.join(root, 'etc/peerops/agent.json');
    const example = JSON.parse(await readFile(config, 'utf8')) as Record<string, unknown>;
    await writeFile(
      config,
      `${JSON.stringify({ ...example, node: { name: 'deb1' }, controlPlane: { url: CONTROLLER, token } }, null, 2)}\n`,
    );

    // BIRD as Debian's bird.service starts it; then the agent as the unit says
    const unitDir = path.join(root, 'usr/lib/systemd/system');
    const settings = await serviceSettings([
      path.join(unitDir, 'peerops-agent.service'),
      path.join(unitDir, 'peerops-agent.service.d', 'debian.conf'),
    ]);
    const userGroups = (await chroot('id', '-nG', 'peerops')).stdout.trim().split(/\s+/);
    const argv = execStartArgv(settings, userGroups);
    const script = bootScript(root, path.join(work, 'bird.pid'), argv);
    agent = spawn(
      'ip',
      ['netns', 'exec', ns, 'unshare', '--mount', '--propagation', 'private', 'sh', '-c', script],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    agent.stdout?.on('data', (d: Buffer) => (agentOutput += d.toString()));
    agent.stderr?.on('data', (d: Buffer) => (agentOutput += d.toString()));
    const exited = new Promise<number | null>((resolve) => agent?.once('exit', (code) => resolve(code)));

    const t0 = performance.now();
    let router: { status?: { lastHeartbeat?: string; agentVersion?: string } } | undefined;
    for (;;) {
      const listed = (await api('/admin/router', { action: 'list' })) as { routers?: { name: string }[] };
      router = listed.routers?.find((r) => r.name === 'deb1') as typeof router;
      if (router?.status?.lastHeartbeat) break;
      const code = await Promise.race([exited, new Promise((r) => setTimeout(() => r('running'), 500))]);
      if (code !== 'running') throw new Error(`the agent exited (${String(code)}):\n${agentOutput}`);
      if (performance.now() - t0 > 120_000) throw new Error(`no heartbeat in 120 s:\n${agentOutput}`);
    }
    console.log(
      `agent from the .deb: first heartbeat after ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
    expect(router?.status?.agentVersion).toBe(VERSION);
    expect(agentOutput).not.toMatch(/^peerops agent: .*(not found|cannot|no CAP_)/m);
    // it runs as the unit's user, with exactly the unit's capabilities
    const pid = (
      await run('pgrep', ['-f', '-n', 'peerops.mjs agent --config /etc/peerops/agent.json'])
    ).stdout.trim();
    // the launcher runs node with the agent's options (agent/node-args.ts)
    const cmdline = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0');
    expect(cmdline.slice(1, 1 + AGENT_NODE_ARGS.length)).toEqual([...AGENT_NODE_ARGS]);
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    const uid = (await chroot('id', '-u', 'peerops')).stdout.trim();
    expect(status).toMatch(new RegExp(`^Uid:\\s+${uid}\\s+${uid}\\s+${uid}\\s+${uid}$`, 'm'));
    expect(status).toMatch(/^CapEff:\s+0000000000003002$/m); // CAP_DAC_OVERRIDE (1), CAP_NET_ADMIN (12), CAP_NET_RAW (13)
    // /health: BIRD (Debian's, through its group's socket) and the controller answer
    let health = '';
    for (let i = 0; i < 120; i++) {
      health = (await run('ip', ['netns', 'exec', ns, 'curl', '-s', 'http://127.0.0.1:24368/health'])).stdout;
      if (/"bird":true/.test(health) && /"controller":true/.test(health)) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    expect(JSON.parse(health), agentOutput.slice(-4000)).toMatchObject({
      status: 'ok',
      bird: true,
      controller: true,
    });
    // with both userspace programs installed and no kernel WireGuard it takes peerops-wireguard
    const kernel = await run('ip', [
      'netns',
      'exec',
      ns,
      'sh',
      '-c',
      'ip link add wgkprobe type wireguard 2>/dev/null && ip link del wgkprobe && echo yes || echo no',
    ]);
    const backendLine = agentOutput.split('\n').find((l) => l.includes('WireGuard backend'));
    expect(backendLine, agentOutput.slice(-4000)).toContain(
      kernel.stdout.trim() === 'yes' ? 'kernel' : 'peerops-wireguard',
    );
    // it made BIRD's include directories itself, in BIRD's group
    const dirs = (
      await chroot('stat', '-c', '%G %a %n', '/etc/bird/peers', '/etc/bird/ibgp.d', '/etc/bird/local.d')
    ).stdout;
    expect(dirs).toBe('bird 750 /etc/bird/peers\nbird 750 /etc/bird/ibgp.d\nbird 750 /etc/bird/local.d\n');
  }, 300_000);

  it('purge removes the program, the unit and the config, and keeps the user', async () => {
    await chroot('dpkg', '--purge', 'peerops-agent', 'peerops-common');
    for (const gone of [
      'usr/bin/peerops',
      'usr/lib/peerops',
      'usr/lib/systemd/system/peerops-agent.service',
      'etc/peerops',
    ])
      expect(await stat(path.join(root, gone)).catch(() => 'gone'), gone).toBe('gone');
    expect((await chroot('id', '-nG', 'peerops')).stdout.trim()).toMatch(/\bbird\b/);
  });
});
