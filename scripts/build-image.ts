/**
 * Builds the container images of peerops without a Docker daemon (docs/kubernetes.md, "The images"):
 *
 *   peerops/controller  `peerops serve`: Debian minbase, git (the git store's gc), Node 24, the release
 *                       bundle; runs as uid 10001 (the chart's), works on a read-only root file system
 *   peerops/agent       `peerops agent`: the same plus iproute2, wireguard-tools, wireguard-go, bird2,
 *                       iputils-ping, procps, peerops-wireguard (wireguard-host/, built with Go) and the
 *                       WireGuard keeper (image/wireguard-keeper.ts) that runs the userspace tunnels for
 *                       hitless rollouts; runs as root (the DaemonSet drops capabilities)
 *
 *   node scripts/build-image.ts [--version X.Y.Z] [--out DIR] [--no-cache]   (npm run build:image)
 *
 * writes DIR/peerops-<name>-X.Y.Z.oci.tar (an OCI image layout, tarred) and
 * DIR/peerops-<name>-X.Y.Z.docker.tar (docker-archive, tagged peerops/<name>:X.Y.Z) for each image.
 *
 * Phases: the release bundle (scripts/build-release.ts); the Debian root file systems (mmdebstrap,
 * minbase, no docs, no apt lists or caches), cached in ~/.cache/peerops/image (PEEROPS_CACHE_DIR) under a
 * key of everything that goes into them, so only the first build downloads; the layers (root file system,
 * Node, peerops) put together with umoci into an OCI layout; skopeo's docker-archive of it. Timestamps are
 * SOURCE_DATE_EPOCH (default: the last commit's time), so the same root file system and sources give the
 * same image digests. The Debian package versions are printed and written beside the archives
 * (peerops-<name>-X.Y.Z.packages.txt): pin them with the Dockerfile's apt-get if you need the same bytes.
 */
import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import {
  chmod,
  copyFile,
  mkdir,
  mkdtemp,
  readFile,
  rename,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import semver from 'semver';
import { buildRelease } from './build-release.ts';
import { wireguardHostBinary } from './build-deb-wireguard.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const run = promisify(execFile);

export const DEBIAN_SUITE = 'bookworm';
const MIRRORS = [
  `deb http://deb.debian.org/debian ${DEBIAN_SUITE} main`,
  `deb http://deb.debian.org/debian ${DEBIAN_SUITE}-updates main`,
  `deb http://deb.debian.org/debian-security ${DEBIAN_SUITE}-security main`,
];

/** The controller's uid and gid: charts/peerops/templates/deployment.yaml runs it as this user. */
export const CONTROLLER_UID = 10001;

/** Debian packages of each image beyond minbase. The Dockerfile installs the same (test/image/packages.test.ts). */
export const PACKAGES = {
  // git: the git store runs `git gc --auto` (controller/store/gitdb/housekeeping.ts)
  controller: ['ca-certificates', 'git'],
  agent: [
    'ca-certificates',
    'iproute2',
    'wireguard-tools',
    'wireguard-go',
    'bird2',
    'iputils-ping',
    'procps',
  ],
} as const;

export type ImageName = keyof typeof PACKAGES;
export const IMAGE_NAMES = Object.keys(PACKAGES) as ImageName[];

/** Where the agent image's WireGuard keeper and the shim the agent runs as `wireguard-go` live. */
const KEEPER_PATH = '/opt/peerops/wireguard-keeper.ts';
const SHIM_PATH = '/usr/local/sbin/wireguard-go';
/** peerops-wireguard, whose host the keeper runs (image/wireguard-keeper.ts). */
const WIREGUARD_HOST_PATH = '/usr/local/bin/peerops-wireguard';
const AGENT_CONFIG = '/etc/peerops/agent/agent.json';

export interface ImageSpec {
  name: ImageName;
  /** `user[:group]` of the process. */
  user: string;
  cmd: string[];
}

export const IMAGE_SPECS: Record<ImageName, ImageSpec> = {
  controller: { name: 'controller', user: `${CONTROLLER_UID}:${CONTROLLER_UID}`, cmd: ['serve'] },
  // The bundle runs itself again with the agent's Node options (agent/node-args.ts): `node peerops.mjs
  // agent` here, as from the Dockerfile's ENTRYPOINT, runs the agent as the launcher and the unit do.
  agent: { name: 'agent', user: '0:0', cmd: ['agent', '--config', AGENT_CONFIG] },
};

export function archiveNames(
  name: ImageName,
  version: string,
): { oci: string; docker: string; packages: string } {
  const base = `peerops-${name}-${version}`;
  return { oci: `${base}.oci.tar`, docker: `${base}.docker.tar`, packages: `${base}.packages.txt` };
}

/** The image reference the docker-archive carries, and the chart's default: `peerops/<name>:<version>`. */
export function imageReference(name: ImageName, version: string): string {
  return `peerops/${name}:${version}`;
}

export interface BuiltImage {
  name: ImageName;
  reference: string;
  oci: string;
  docker: string;
  /** Bytes of each gzip'd layer, in order, with what it holds. */
  layers: { what: string; bytes: number }[];
  compressedBytes: number;
  packages: string[];
}

export interface BuildResult {
  images: BuiltImage[];
  phases: { phase: string; seconds: number }[];
}

function cacheRoot(): string {
  return process.env.PEEROPS_CACHE_DIR ?? path.join(homedir(), '.cache', 'peerops');
}

async function timed<T>(phases: BuildResult['phases'], phase: string, work: () => Promise<T>): Promise<T> {
  const started = performance.now();
  const value = await work();
  const seconds = (performance.now() - started) / 1000;
  phases.push({ phase, seconds });
  console.log(`  ${phase}: ${seconds.toFixed(1)} s`);
  return value;
}

/** Runs a command, its output kept for the error only (mmdebstrap is chatty). */
function runQuiet(cmd: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0
        ? resolve()
        : reject(new Error(`${cmd} ${args.join(' ')} failed (${code}):\n${out.slice(-4000)}`)),
    );
  });
}

function mmdebstrapArgs(name: ImageName): string[] {
  const hooks: string[] = [
    // logs and dpkg's backups of the build; apt's lists and caches mmdebstrap removes itself
    'rm -rf "$1"/var/log/* "$1"/var/cache/debconf/*-old "$1"/var/lib/dpkg/*-old',
  ];
  if (name === 'controller') {
    hooks.push(
      `echo 'peerops:x:${CONTROLLER_UID}:${CONTROLLER_UID}:peerops:/var/lib/peerops:/usr/sbin/nologin' >> "$1"/etc/passwd`,
      `echo 'peerops:x:${CONTROLLER_UID}:' >> "$1"/etc/group`,
      `mkdir -p "$1"/var/lib/peerops && chown ${CONTROLLER_UID}:${CONTROLLER_UID} "$1"/var/lib/peerops`,
    );
  } else {
    hooks.push('mkdir -p "$1"/etc/peerops/agent "$1"/var/run/wireguard');
  }
  return [
    '--variant=minbase',
    `--include=${PACKAGES[name].join(',')}`,
    '--aptopt=APT::Install-Recommends "false"',
    '--skip=output/dev',
    // /usr merged by mmdebstrap itself: otherwise bookworm's init-system-helpers pulls in usrmerge and Perl
    '--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr',
    ...['/usr/share/doc/*', '/usr/share/man/*', '/usr/share/info/*', '/usr/share/locale/*'].map(
      (p) => `--dpkgopt=path-exclude=${p}`,
    ),
    // the licences stay
    '--dpkgopt=path-include=/usr/share/doc/*/copyright',
    ...hooks.map((h) => `--customize-hook=${h}`),
    DEBIAN_SUITE,
  ];
}

/**
 * The Debian root file system of an image as a tarball, from the cache when one was built with the same
 * mmdebstrap arguments; resolves with it and the installed packages (`name=version`).
 */
async function debianRootfs(
  name: ImageName,
  epoch: number,
  useCache: boolean,
): Promise<{ tar: string; packages: string[]; cached: boolean }> {
  const args = mmdebstrapArgs(name);
  const key = createHash('sha256')
    .update(JSON.stringify([args, MIRRORS]))
    .digest('hex')
    .slice(0, 16);
  const dir = path.join(cacheRoot(), 'image');
  const tar = path.join(dir, `rootfs-${name}-${key}.tar`);
  const list = path.join(dir, `rootfs-${name}-${key}.packages.txt`);
  if (useCache && existsSync(tar) && existsSync(list))
    return { tar, packages: (await readFile(list, 'utf8')).trim().split('\n'), cached: true };
  await mkdir(dir, { recursive: true });
  // mmdebstrap picks its output format by the name's extension: .tar
  const tmpTar = `${tar.slice(0, -'.tar'.length)}.${process.pid}.tmp.tar`;
  const tmpList = `${list}.${process.pid}.tmp`;
  try {
    await runQuiet(
      'mmdebstrap',
      [
        ...args.slice(0, -1),
        `--customize-hook=chroot "$1" dpkg-query -W -f='\${Package}=\${Version}\\n' > ${tmpList}`,
        args[args.length - 1] as string,
        tmpTar,
        ...MIRRORS,
      ],
      { SOURCE_DATE_EPOCH: String(epoch) },
    );
    await rename(tmpList, list);
    await rename(tmpTar, tar);
  } finally {
    await rm(tmpTar, { force: true });
    await rm(tmpList, { force: true });
  }
  return { tar, packages: (await readFile(list, 'utf8')).trim().split('\n'), cached: false };
}

/** A tarball of `dir` that depends only on its contents: sorted, root-owned, every mtime `epoch`. */
async function deterministicTar(dir: string, out: string, epoch: number): Promise<void> {
  await run('tar', [
    '--sort=name',
    `--mtime=@${epoch}`,
    '--owner=0',
    '--group=0',
    '--numeric-owner',
    '--format=posix',
    '--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime',
    '-C',
    dir,
    '-cf',
    out,
    '.',
  ]);
}

/** The Node 24 binary of the `node` npm package (package.json devDependencies). */
async function nodeBinary(): Promise<string> {
  const file = path.join(ROOT, 'node_modules', 'node', 'bin', 'node');
  const { stdout } = await run(file, ['--version']);
  if (!stdout.startsWith('v24.')) throw new Error(`${file} is Node ${stdout.trim()}, expected 24`);
  return file;
}

async function layerTars(
  work: string,
  bundleDir: string,
  epoch: number,
): Promise<{ node: string; app: string; agentExtras: string }> {
  const nodeDir = path.join(work, 'layer-node');
  await mkdir(path.join(nodeDir, 'usr', 'local', 'bin'), { recursive: true });
  await copyFile(await nodeBinary(), path.join(nodeDir, 'usr', 'local', 'bin', 'node'));
  await chmod(path.join(nodeDir, 'usr', 'local', 'bin', 'node'), 0o755);

  const appDir = path.join(work, 'layer-app');
  await mkdir(path.join(appDir, 'opt', 'peerops'), { recursive: true });
  await mkdir(path.join(appDir, 'usr', 'local', 'bin'), { recursive: true });
  for (const file of ['peerops.mjs', 'peerops', 'SHA256SUMS'])
    await copyFile(path.join(bundleDir, file), path.join(appDir, 'opt', 'peerops', file));
  await chmod(path.join(appDir, 'opt', 'peerops', 'peerops'), 0o755);
  await symlink('/opt/peerops/peerops', path.join(appDir, 'usr', 'local', 'bin', 'peerops'));

  const extrasDir = path.join(work, 'layer-agent');
  await mkdir(path.join(extrasDir, 'opt', 'peerops'), { recursive: true });
  await mkdir(path.join(extrasDir, 'usr', 'local', 'sbin'), { recursive: true });
  await copyFile(path.join(ROOT, 'image', 'wireguard-keeper.ts'), path.join(extrasDir, KEEPER_PATH));
  await copyFile(path.join(ROOT, 'image', 'wireguard-go-shim.sh'), path.join(extrasDir, SHIM_PATH));
  await chmod(path.join(extrasDir, SHIM_PATH), 0o755);
  await mkdir(path.join(extrasDir, 'usr', 'local', 'bin'), { recursive: true });
  await copyFile(await wireguardHostBinary(), path.join(extrasDir, WIREGUARD_HOST_PATH));
  await chmod(path.join(extrasDir, WIREGUARD_HOST_PATH), 0o755);

  const tars = {
    node: path.join(work, 'node.tar'),
    app: path.join(work, 'app.tar'),
    agentExtras: path.join(work, 'agent.tar'),
  };
  await deterministicTar(nodeDir, tars.node, epoch);
  await deterministicTar(appDir, tars.app, epoch);
  await deterministicTar(extrasDir, tars.agentExtras, epoch);
  return tars;
}

interface OciIndex {
  manifests: { digest: string; annotations?: Record<string, string> }[];
}
interface OciManifest {
  layers: { digest: string; size: number }[];
}

async function readBlob<T>(layout: string, digest: string): Promise<T> {
  const [algo, hex] = digest.split(':') as [string, string];
  return JSON.parse(await readFile(path.join(layout, 'blobs', algo, hex), 'utf8')) as T;
}

async function ociImage(
  spec: ImageSpec,
  version: string,
  layout: string,
  layers: { what: string; tar: string }[],
  epoch: number,
): Promise<{ what: string; bytes: number }[]> {
  const created = new Date(epoch * 1000).toISOString();
  const image = `${layout}:${version}`;
  await rm(layout, { recursive: true, force: true });
  await run('umoci', ['init', '--layout', layout]);
  await run('umoci', ['new', '--image', image]);
  for (const layer of layers) {
    await run('umoci', [
      'raw',
      'add-layer',
      '--image',
      image,
      '--history.created',
      created,
      '--history.created_by',
      `scripts/build-image.ts: ${layer.what}`,
      layer.tar,
    ]);
  }
  const config = [
    '--config.user',
    spec.user,
    '--config.entrypoint',
    '/usr/local/bin/node',
    '--config.entrypoint',
    '/opt/peerops/peerops.mjs',
    ...spec.cmd.flatMap((c) => ['--config.cmd', c]),
    '--config.env',
    'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    '--config.env',
    'NODE_ENV=production',
    '--config.workingdir',
    spec.name === 'controller' ? '/var/lib/peerops' : '/',
    '--config.label',
    `org.opencontainers.image.title=peerops-${spec.name}`,
    '--config.label',
    `org.opencontainers.image.version=${version}`,
    '--config.label',
    'org.opencontainers.image.source=https://github.com/peerops/peerops',
    '--config.label',
    'org.opencontainers.image.licenses=MIT',
    '--created',
    created,
    '--architecture',
    'amd64',
    '--os',
    'linux',
    '--history.created',
    created,
    '--history.created_by',
    'scripts/build-image.ts: config',
  ];
  await run('umoci', ['config', '--image', image, ...config]);
  await run('umoci', ['gc', '--layout', layout]);
  const index = JSON.parse(await readFile(path.join(layout, 'index.json'), 'utf8')) as OciIndex;
  const entry = index.manifests.find((m) => m.annotations?.['org.opencontainers.image.ref.name'] === version);
  if (!entry) throw new Error(`${layout}: no manifest tagged ${version}`);
  const manifest = await readBlob<OciManifest>(layout, entry.digest);
  return manifest.layers.map((l, i) => ({ what: layers[i]?.what ?? '?', bytes: l.size }));
}

const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

export async function buildImages(options: {
  version: string;
  outDir: string;
  useCache?: boolean;
  epoch?: number;
}): Promise<BuildResult> {
  const { version } = options;
  if (!semver.valid(version)) throw new Error(`--version '${version}' is not a semantic version`);
  const outDir = path.resolve(options.outDir);
  const epoch = options.epoch ?? (await sourceDateEpoch());
  const phases: BuildResult['phases'] = [];
  await mkdir(outDir, { recursive: true });
  const work = await mkdtemp(path.join(tmpdir(), 'peerops-image-'));
  try {
    const bundle = path.join(work, 'bundle');
    await timed(phases, 'release bundle', () => buildRelease(version, bundle));
    // both at once: mostly downloads and dpkg's waits on the disk
    const built = await timed(phases, 'Debian root file systems', () =>
      Promise.all(IMAGE_NAMES.map((name) => debianRootfs(name, epoch, options.useCache ?? true))),
    );
    const rootfs = Object.fromEntries(IMAGE_NAMES.map((name, i) => [name, built[i]])) as Record<
      ImageName,
      Awaited<ReturnType<typeof debianRootfs>>
    >;
    for (const name of IMAGE_NAMES)
      console.log(`    ${name}: ${rootfs[name].cached ? 'from the cache' : 'built'}, ${rootfs[name].tar}`);
    const tars = await timed(phases, 'Node and peerops layers', () => layerTars(work, bundle, epoch));
    const images: BuiltImage[] = [];
    for (const name of IMAGE_NAMES) {
      const names = archiveNames(name, version);
      const layout = path.join(work, `oci-${name}`);
      const layers = [
        { what: `Debian ${DEBIAN_SUITE} minbase + ${PACKAGES[name].join(' ')}`, tar: rootfs[name].tar },
        { what: 'Node 24', tar: tars.node },
        { what: 'peerops release bundle', tar: tars.app },
        ...(name === 'agent'
          ? [{ what: 'peerops-wireguard, the WireGuard keeper and wireguard-go shim', tar: tars.agentExtras }]
          : []),
      ];
      const sizes = await timed(phases, `OCI layout (${name})`, () =>
        ociImage(IMAGE_SPECS[name], version, layout, layers, epoch),
      );
      const oci = path.join(outDir, names.oci);
      const docker = path.join(outDir, names.docker);
      const reference = imageReference(name, version);
      await timed(phases, `archives (${name})`, async () => {
        await rm(oci, { force: true });
        await run('tar', [
          '--sort=name',
          `--mtime=@${epoch}`,
          '--owner=0',
          '--group=0',
          '--numeric-owner',
          '-C',
          layout,
          '-cf',
          oci,
          '.',
        ]);
        await rm(docker, { force: true });
        await run('skopeo', [
          'copy',
          '--quiet',
          `oci:${layout}:${version}`,
          `docker-archive:${docker}:${reference}`,
        ]);
      });
      await writeFile(path.join(outDir, names.packages), `${rootfs[name].packages.join('\n')}\n`);
      images.push({
        name,
        reference,
        oci,
        docker,
        layers: sizes,
        compressedBytes: sizes.reduce((sum, l) => sum + l.bytes, 0),
        packages: rootfs[name].packages,
      });
    }
    return { images, phases };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** SOURCE_DATE_EPOCH, else the time of the last commit, else now. */
async function sourceDateEpoch(): Promise<number> {
  const env = process.env.SOURCE_DATE_EPOCH;
  if (env && /^\d+$/.test(env)) return Number(env);
  try {
    return Number((await run('git', ['-C', ROOT, 'log', '-1', '--format=%ct'])).stdout.trim());
  } catch {
    return Math.floor(Date.now() / 1000);
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      version: { type: 'string' },
      out: { type: 'string', default: 'dist' },
      'no-cache': { type: 'boolean' },
    },
  });
  const pkg = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
  const version = values.version ?? process.env.PEEROPS_RELEASE_VERSION ?? pkg.version;
  for (const tool of ['mmdebstrap', 'umoci', 'skopeo']) {
    try {
      await run('sh', ['-c', `command -v ${tool}`]);
    } catch {
      throw new Error(`${tool} is not installed: apt-get install mmdebstrap umoci skopeo`);
    }
  }
  console.log(`building the peerops images ${version}`);
  const started = performance.now();
  const { images } = await buildImages({
    version,
    outDir: values.out ?? 'dist',
    useCache: !values['no-cache'],
  });
  for (const image of images) {
    console.log(`\n${image.reference}: ${mib(image.compressedBytes)} compressed`);
    for (const layer of image.layers) console.log(`  ${mib(layer.bytes).padStart(10)}  ${layer.what}`);
    console.log(`  ${path.relative(process.cwd(), image.oci)} (${mib((await stat(image.oci)).size)})`);
    console.log(
      `  ${path.relative(process.cwd(), image.docker)} (${mib((await stat(image.docker)).size)}, uncompressed)`,
    );
    console.log(`  Debian packages (${image.packages.length}): ${image.packages.join(' ')}`);
  }
  console.log(`\ndone in ${((performance.now() - started) / 1000).toFixed(1)} s`);
}

if (import.meta.main) await main();
