/**
 * `npm run build:release -- --version X.Y.Z [--out DIR] [--signing-key KEY] [--no-images]` writes every
 * asset of a release into one directory (default dist/release-X.Y.Z), the layout the agent's updater
 * fetches from `autoUpdate.releaseRepo` and docs/release.md describes:
 *   peerops.mjs            one esbuild bundle of bin/peerops.ts with the version baked in
 *                          (process.env.PEEROPS_BUILD_VERSION) and the checkout's revision
 *                          (PEEROPS_BUILD_REVISION, common/version.ts); `node peerops.mjs --version` prints the version
 *   peerops                a launcher that runs the bundle beside it (PEEROPS_NODE or `node`, >= 20.12) and
 *                          rolls back a self-update that never completes a pass (agent/update/probation.ts)
 *   peerops-X.Y.Z.tgz      the npm package (`npm pack` of package.json's `files` at version X.Y.Z)
 *   peerops-common_X.Y.Z_all.deb  the program's Debian package, the launcher and bundle (scripts/build-deb.ts)
 *   peerops-agent_X.Y.Z_all.deb   the agent's Debian package (scripts/build-deb.ts)
 *   peerops_X.Y.Z_all.deb         the controller's Debian package (scripts/build-deb-controller.ts)
 *   peerops-wireguard_X.Y.Z_<arch>.deb   every userspace tunnel in one process, for the build host's
 *                          architecture (scripts/build-deb-wireguard.ts)
 *   peerops-<image>-X.Y.Z.{oci,docker}.tar   the container images, by scripts/build-image.ts when the
 *                          checkout has it (--no-images: left out)
 *   SHA256SUMS             sha256sum lines for all of them
 *   SHA256SUMS.sig         `ssh-keygen -Y sign -n peerops-release` of SHA256SUMS with --signing-key (or
 *                          PEEROPS_RELEASE_SIGNING_KEY); agents install only releases signed by a key of
 *                          autoUpdate.publicKeys (agent/update/signature.ts)
 * With --apt-signing-key (or PEEROPS_APT_SIGNING_KEY, an OpenPGP key of gpg's keyring) it also adds the
 * .debs to the signed APT repository in --apt-repo DIR (default: `apt` beside the release directory,
 * dist/apt), kept across releases (scripts/apt-repo.ts); not an asset of the release.
 * It prints each file's size and how long it took.
 *
 * With --npm it builds the npm package's executable instead (package.json `bin`, `npm run build`, run by
 * `npm pack` through prepack): dist/peerops.js and its dist/chunks/, the same code for Node >= 20.12 with
 * the #! line, every dependency inside it (the package installs nothing else).
 *
 * The version defaults to PEEROPS_RELEASE_VERSION, else package.json's. bin/peerops.ts loads each
 * command with `import(command.module)`, which a bundler cannot follow; a plugin rewrites that call into
 * a switch of literal imports over the module paths listed in its command table.
 */
import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import {
  chmod,
  copyFile,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rename,
  rm,
  stat,
  writeFile,
} from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { build, type BuildOptions, type Plugin } from 'esbuild';
import semver from 'semver';
import { AGENT_NODE_ARGS, AGENT_NODE_ARGS_ENV } from '../agent/node-args.ts';
import { ARTIFACT_NAME, CHECKSUMS_NAME, previousPath } from '../agent/update/install.ts';
import { PROBATION_NAME, PROBATION_STARTS, REJECTED_NAME } from '../agent/update/probation.ts';
import { RELEASE_NAMESPACE, SIGNATURE_NAME } from '../agent/update/signature.ts';
import { parseSshSignature } from '../common/sshsig.ts';
import { codeRevision } from '../common/version.ts';
import { buildCommonDeb, buildDeb } from './build-deb.ts';
import { buildControllerDeb } from './build-deb-controller.ts';
import { buildWireguardDeb } from './build-deb-wireguard.ts';
import { buildAptRepository } from './apt-repo.ts';
import { buildPortal } from '../controller/portal/build.ts';
import { REDOC_BUNDLE } from '../controller/api/reference.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const ENTRY = path.join(ROOT, 'bin', 'peerops.ts');
const ARTIFACT = ARTIFACT_NAME;
const LAUNCHER = 'peerops';
const CHECKSUMS = CHECKSUMS_NAME;
const BUILD_IMAGE = path.join(ROOT, 'scripts', 'build-image.ts');
const run = promisify(execFile);
const PREVIOUS = path.basename(previousPath(ARTIFACT));

const LAUNCHER_TEXT = `#!/bin/sh
# peerops launcher: runs the release bundle beside this file with Node >= 20.12 (PEEROPS_NODE, else node on PATH).
# After a self-update the agent is on probation (agent/update/probation.ts): every agent start is counted
# here; a version that started ${PROBATION_STARTS} times without a good pass is rolled back to the previous bundle.
dir=$(dirname "$(readlink -f "$0")")
probation="$dir/${PROBATION_NAME}"
if [ "$1" = agent ] && [ -f "$probation" ]; then
  read -r version starts < "$probation"
  case "$starts" in '' | *[!0-9]*) starts=0 ;; esac
  if [ "$starts" -ge ${PROBATION_STARTS} ] && [ -f "$dir/${PREVIOUS}" ]; then
    echo "peerops: version $version started $starts times without a good pass; rolling back to the previous version" >&2
    mv -f "$dir/${PREVIOUS}" "$dir/${ARTIFACT}"
    echo "$version" >> "$dir/${REJECTED_NAME}"
    rm -f "$probation"
  else
    echo "$version $((starts + 1))" > "$probation.tmp" && mv -f "$probation.tmp" "$probation"
  fi
fi
if [ "$1" = agent ]; then
  # The agent's Node options (agent/node-args.ts; docs/agent.md, Memory), on node's command line since
  # Node refuses them in NODE_OPTIONS; PEEROPS_AGENT_NODE_ARGS replaces them (empty: none). Unquoted
  # below: one word per option.
  node_args=\${${AGENT_NODE_ARGS_ENV}-'${AGENT_NODE_ARGS.join(' ')}'}
  exec "\${PEEROPS_NODE:-node}" $node_args "$dir/${ARTIFACT}" "$@"
fi
exec "\${PEEROPS_NODE:-node}" "$dir/${ARTIFACT}" "$@"
`;

/** Rewrites bin/peerops.ts's `import(command.module)` into literal imports esbuild can bundle. */
const commandTable: Plugin = {
  name: 'peerops-command-table',
  setup(b) {
    b.onLoad({ filter: /[\\/]bin[\\/]peerops\.ts$/ }, async (args) => {
      const source = await readFile(args.path, 'utf8');
      const call = 'import(command.module)';
      if (!source.includes(call)) throw new Error(`${args.path}: expected '${call}' to rewrite`);
      const modules = [...source.matchAll(/module:\s*'(\.\.\/[^']+\.ts)'/g)].map((m) => m[1] as string);
      const cases = modules
        .filter((m) => existsSync(path.resolve(path.dirname(args.path), m)))
        .map((m) => `    case ${JSON.stringify(m)}: return import(${JSON.stringify(m)});`)
        .join('\n');
      const loader = `
function __peeropsLoad(module: string): Promise<unknown> {
  switch (module) {
${cases}
    default: throw new Error(\`this build of peerops has no \${module}\`);
  }
}
`;
      return { contents: source.replace(call, '__peeropsLoad(command.module)') + loader, loader: 'ts' };
    });
  },
};

/**
 * esbuild options both builds share: bin/peerops.ts with every dependency, the version baked in, and the
 * web portal's files (controller/portal/assets.ts), so that `peerops serve` of a release serves the portal.
 */
async function bundleOptions(version: string, target: string): Promise<BuildOptions> {
  return {
    bundle: true,
    platform: 'node',
    target,
    format: 'esm',
    minify: false,
    legalComments: 'none',
    logLevel: 'warning',
    define: {
      'process.env.PEEROPS_BUILD_VERSION': JSON.stringify(version),
      // the checkout's revision, so the release keeps the caches a checkout of the same code made
      'process.env.PEEROPS_BUILD_REVISION': JSON.stringify(codeRevision() ?? ''),
      // JSON text, parsed where used (controller/portal/assets.ts says why not an array)
      __PEEROPS_PORTAL_FILES__: JSON.stringify(JSON.stringify(await buildPortal())),
      // the API reference page's script (controller/api/reference.ts), else /docs would 404 when installed
      __PEEROPS_REDOC_BUNDLE__: JSON.stringify(
        await readFile(createRequire(import.meta.url).resolve(REDOC_BUNDLE), 'utf8'),
      ),
    },
    // CommonJS dependencies call require(); an ESM bundle needs one made for it. (The entry's #! line stays first.)
    banner: {
      js: "import { createRequire as __peeropsCreateRequire } from 'node:module';\nconst require = __peeropsCreateRequire(import.meta.url);",
    },
    plugins: [commandTable],
  };
}

/** Fails unless `file --version` prints `version`. */
async function checkVersion(file: string, version: string): Promise<void> {
  const printed = (await promisify(execFile)(process.execPath, [file, '--version'])).stdout.trim();
  if (printed !== version) throw new Error(`${file} prints '${printed}' for --version, expected ${version}`);
}

/**
 * The npm package's executable (package.json `bin`, e.g. dist/peerops.js) for Node >= 20 (bin/peerops.ts
 * says which Node a command needs), split into dist/chunks/ so that a command loads only its own code:
 * `peerops --version` reads 3 kB, not the controller's 11 MB.
 */
export async function buildPackage(outfile: string, version: string): Promise<void> {
  const outDir = path.dirname(outfile);
  const name = path.basename(outfile, '.js');
  const tmp = path.join(outDir, `.npm-build-${process.pid}`);
  await mkdir(outDir, { recursive: true });
  try {
    await build({
      ...(await bundleOptions(version, 'node20')),
      entryPoints: { [name]: ENTRY },
      outdir: tmp,
      splitting: true,
      chunkNames: 'chunks/[name]-[hash]',
    });
    await chmod(path.join(tmp, `${name}.js`), 0o755);
    await checkVersion(path.join(tmp, `${name}.js`), version);
    await rm(path.join(outDir, 'chunks'), { recursive: true, force: true });
    await rename(path.join(tmp, 'chunks'), path.join(outDir, 'chunks'));
    await rename(path.join(tmp, `${name}.js`), outfile);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

/**
 * `npm pack` of the package at `version`: package.json's `files` (as npm lists them), the bundle rebuilt
 * in a stage of its own, so that the checkout's dist/ is neither read nor written.
 */
export async function packNpm(version: string, outDir: string): Promise<string> {
  const stage = await mkdtemp(path.join(tmpdir(), 'peerops-npm-'));
  try {
    const listed = JSON.parse(
      (
        await run('npm', ['pack', '--dry-run', '--json', '--ignore-scripts', '--loglevel=error'], {
          cwd: ROOT,
        })
      ).stdout,
    ) as { files: { path: string }[] }[];
    for (const { path: file } of listed[0]?.files ?? []) {
      if (file.startsWith('dist/') || file === 'package.json') continue;
      await mkdir(path.dirname(path.join(stage, file)), { recursive: true });
      await copyFile(path.join(ROOT, file), path.join(stage, file));
    }
    const pkg = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as {
      bin: { peerops: string };
    };
    await writeFile(path.join(stage, 'package.json'), `${JSON.stringify({ ...pkg, version }, null, 2)}\n`);
    await buildPackage(path.join(stage, pkg.bin.peerops), version);
    const packed = JSON.parse(
      (
        await run(
          'npm',
          ['pack', '--json', '--ignore-scripts', '--loglevel=error', '--pack-destination', outDir],
          {
            cwd: stage,
          },
        )
      ).stdout,
    ) as { filename: string }[];
    return path.join(outDir, packed[0]?.filename ?? `peerops-${version}.tgz`);
  } finally {
    await rm(stage, { recursive: true, force: true });
  }
}

/** The agent bundle (ARTIFACT) and its launcher in `outDir`. */
async function buildAgentBundle(version: string, outDir: string): Promise<string[]> {
  const artifact = path.join(outDir, ARTIFACT);
  const tmp = path.join(outDir, `.build-${process.pid}.mjs`);
  try {
    await build({ ...(await bundleOptions(version, 'node20')), entryPoints: [ENTRY], outfile: tmp });
    await chmod(tmp, 0o755);
    await checkVersion(tmp, version);
    await rename(tmp, artifact);
  } finally {
    await rm(tmp, { force: true });
  }
  const launcher = path.join(outDir, LAUNCHER);
  await writeFile(launcher, LAUNCHER_TEXT, { mode: 0o755 });
  await chmod(launcher, 0o755);
  return [artifact, launcher];
}

/** The container image archives (contract with scripts/build-image.ts: `peerops-<name>-<version>.*.tar`). */
async function buildImages(version: string, outDir: string, log: (line: string) => void): Promise<string[]> {
  if (!existsSync(BUILD_IMAGE)) {
    log(`images: skipped: ${path.relative(ROOT, BUILD_IMAGE)} is not in this checkout`);
    return [];
  }
  const before = new Set(await readdir(outDir));
  const child = spawn(process.execPath, [BUILD_IMAGE, '--version', version, '--out', outDir], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', resolve);
  });
  if (code !== 0) throw new Error(`${path.relative(ROOT, BUILD_IMAGE)} failed (exit ${code})`);
  // the archives and what else it writes beside them (the images' package lists)
  return (await readdir(outDir))
    .filter((f) => !before.has(f) && !f.startsWith('.'))
    .map((f) => path.join(outDir, f));
}

/** `ssh-keygen -Y sign` of SHA256SUMS; answers the signer's public key line (for autoUpdate.publicKeys). */
async function signSums(sums: string, signingKey: string): Promise<string> {
  await rm(`${sums}.sig`, { force: true });
  await run('ssh-keygen', ['-Y', 'sign', '-q', '-f', signingKey, '-n', RELEASE_NAMESPACE, sums]);
  const sig = parseSshSignature(await readFile(path.join(path.dirname(sums), SIGNATURE_NAME), 'utf8'));
  const type = sig.publicKey.readUInt32BE(0);
  return `${sig.publicKey.subarray(4, 4 + type).toString()} ${sig.publicKey.toString('base64')}`;
}

export interface ReleaseOptions {
  /** An SSH key for `ssh-keygen -Y sign -f`: a private key, or a public key whose private key ssh-agent holds. */
  signingKey?: string;
  /**
   * `agent` (default): the bundle, the launcher and SHA256SUMS only (what self-update installs, what the
   * images copy); `all`: every asset (the command line's choice).
   */
  assets?: 'agent' | 'all';
  /** Build the container images when scripts/build-image.ts exists (default true). */
  images?: boolean;
  /**
   * With `assets: 'all'`: add the .debs to the APT repository `repo` (scripts/apt-repo.ts), signed with
   * the OpenPGP key `signingKey` of gpg's keyring. A prerelease is left out: the repository's one suite
   * is what every router's `apt upgrade` takes.
   */
  apt?: { repo: string; signingKey: string };
  log?: (line: string) => void;
}

export interface ReleaseResult {
  dir: string;
  /** Every asset, SHA256SUMS and its signature included, with its size and how long it took. */
  files: { name: string; bytes: number; seconds: number }[];
  /** The signer's SSH public key line, when signed. */
  publicKey?: string;
  /** The APT repository's directory, when the .debs were added to one. */
  aptRepo?: string;
}

/**
 * Every asset of release `version` in `outDir`, the layout of one release of `autoUpdate.releaseRepo`
 * (docs/release.md): the agent bundle and launcher, the npm tarball, the .debs, the image archives,
 * SHA256SUMS over all of them and its SSH signature.
 */
export async function buildRelease(
  version: string,
  outDir: string,
  opts: ReleaseOptions = {},
): Promise<ReleaseResult> {
  if (!semver.valid(version)) throw new Error(`--version '${version}' is not a semantic version`);
  const log = opts.log ?? (() => undefined);
  const dir = path.resolve(outDir);
  await mkdir(dir, { recursive: true });
  const files: ReleaseResult['files'] = [];
  const step = async (what: string, fn: () => Promise<string[]>) => {
    const t0 = performance.now();
    const made = await fn();
    const seconds = (performance.now() - t0) / 1000;
    for (const file of made) {
      const bytes = (await stat(file)).size;
      files.push({ name: path.basename(file), bytes, seconds });
      log(`${what}: ${path.basename(file)} ${mib(bytes)} in ${seconds.toFixed(1)} s`);
    }
  };
  let bundle = '';
  let launcher = '';
  const debs: string[] = [];
  await step(
    'agent bundle',
    async () => ([bundle = '', launcher = ''] = await buildAgentBundle(version, dir)),
  );
  if (opts.assets === 'all') {
    await step('npm package', async () => [await packNpm(version, dir)]);
    for (const buildOne of [
      () => buildCommonDeb({ version, outDir: dir, bundle, launcher }),
      () => buildDeb({ version, outDir: dir }),
      () => buildControllerDeb({ version, outDir: dir }),
      () => buildWireguardDeb({ version, outDir: dir }),
    ])
      await step('Debian package', async () => {
        debs.push(await buildOne());
        return debs.slice(-1);
      });
    if (opts.images ?? true) await step('images', () => buildImages(version, dir, log));
    else log('images: left out (--no-images)');
  }
  const lines: string[] = [];
  for (const { name } of files) {
    const sum = createHash('sha256')
      .update(await readFile(path.join(dir, name)))
      .digest('hex');
    lines.push(`${sum}  ${name}`);
  }
  const sums = path.join(dir, CHECKSUMS);
  await writeFile(sums, `${lines.join('\n')}\n`);
  files.push({ name: CHECKSUMS, bytes: (await stat(sums)).size, seconds: 0 });
  const aptRepo = await addToAptRepository(version, debs, opts.apt, log);
  if (opts.signingKey === undefined) return { dir, files, aptRepo };
  let publicKey = '';
  await step('signature', async () => {
    publicKey = await signSums(sums, opts.signingKey as string);
    return [path.join(dir, SIGNATURE_NAME)];
  });
  return { dir, files, publicKey, aptRepo };
}

/** The release's .debs added to the APT repository of `apt`, when asked and not a prerelease. */
async function addToAptRepository(
  version: string,
  debs: readonly string[],
  apt: ReleaseOptions['apt'],
  log: (line: string) => void,
): Promise<string | undefined> {
  if (!debs.length) return undefined;
  if (!apt) {
    log('APT repository: left out (no --apt-signing-key)');
    return undefined;
  }
  if (semver.prerelease(version)) {
    log(`APT repository: left out for the prerelease ${version}`);
    return undefined;
  }
  const t0 = performance.now();
  const written = await buildAptRepository({ repo: apt.repo, debs, signingKey: apt.signingKey });
  const seconds = ((performance.now() - t0) / 1000).toFixed(1);
  for (const file of written)
    log(`APT repository: ${path.relative(apt.repo, file)} ${mib((await stat(file)).size)}`);
  log(`APT repository: ${apt.repo} in ${seconds} s`);
  return apt.repo;
}

const mib = (bytes: number) =>
  bytes < 1024 * 1024 ? `${(bytes / 1024).toFixed(1)} KiB` : `${(bytes / 1024 / 1024).toFixed(2)} MiB`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      version: { type: 'string' },
      out: { type: 'string' },
      'signing-key': { type: 'string' },
      'no-images': { type: 'boolean' },
      npm: { type: 'boolean' },
      'apt-signing-key': { type: 'string' },
      'apt-repo': { type: 'string' },
    },
  });
  const pkg = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as {
    version: string;
    bin: { peerops: string };
  };
  if (values.npm) {
    // the package's version: `peerops --version` of an installed package says what npm installed
    const outfile = path.join(ROOT, pkg.bin.peerops);
    await buildPackage(outfile, values.version ?? pkg.version);
    console.log(`built ${path.relative(ROOT, outfile)} (${values.version ?? pkg.version})`);
    return;
  }
  const version = values.version ?? process.env.PEEROPS_RELEASE_VERSION ?? pkg.version;
  const out = path.resolve(values.out ?? path.join(ROOT, 'dist', `release-${version}`));
  const signingKey = values['signing-key'] ?? process.env.PEEROPS_RELEASE_SIGNING_KEY;
  const aptSigningKey = values['apt-signing-key'] ?? process.env.PEEROPS_APT_SIGNING_KEY;
  const aptRepo = path.resolve(values['apt-repo'] ?? path.join(path.dirname(out), 'apt'));
  const t0 = performance.now();
  const { files, publicKey } = await buildRelease(version, out, {
    signingKey,
    assets: 'all',
    images: !values['no-images'],
    apt: aptSigningKey ? { repo: aptRepo, signingKey: aptSigningKey } : undefined,
    log: (line) => console.log(line),
  });
  const total = files.reduce((n, f) => n + f.bytes, 0);
  console.log(
    `release ${version} in ${out}: ${files.length} files, ${mib(total)}, ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  );
  for (const f of files) console.log(`  ${f.name.padEnd(44)} ${mib(f.bytes).padStart(12)}`);
  if (publicKey) {
    console.log(`signed ${SIGNATURE_NAME} (namespace ${RELEASE_NAMESPACE}); agents trust it with`);
    console.log(`  autoUpdate.publicKeys ["${publicKey}"]`);
  } else console.log(`not signed (no --signing-key): agents will not install this release`);
}

if (import.meta.main) await main();
