/**
 * Builds the release artifact the agent's updater installs (agent/update/install.ts):
 *   dist/peerops.mjs   one esbuild bundle of bin/peerops.ts with the version baked in
 *                      (process.env.PEEROPS_BUILD_VERSION); `node peerops.mjs --version` prints it
 *   dist/peerops       a launcher that runs the bundle beside it with Node 24 (PEEROPS_NODE or `node`)
 *                      and rolls back a self-update that never completes a pass (agent/update/probation.ts)
 *   dist/SHA256SUMS    sha256sum lines for both
 *   dist/SHA256SUMS.sig  its Ed25519 signature (base64), with --signing-key (or PEEROPS_RELEASE_SIGNING_KEY),
 *                      a PEM file; agents install only releases signed by a key of autoUpdate.publicKeys
 *
 *   node scripts/build-release.ts [--version 1.2.3] [--out dist] [--signing-key key.pem]   (npm run build:release)
 *
 * With --npm it builds the npm package's executable instead (package.json `bin`, `npm run build`, run by
 * `npm pack` through prepack): dist/peerops.js and its dist/chunks/, the same code for Node >= 20.12 with
 * the #! line, every dependency inside it (the package installs nothing else).
 *
 * The version defaults to PEEROPS_RELEASE_VERSION, else package.json's. bin/peerops.ts loads each
 * command with `import(command.module)`, which a bundler cannot follow; a plugin rewrites that call into
 * a switch of literal imports over the module paths listed in its command table.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { build, type BuildOptions, type Plugin } from 'esbuild';
import semver from 'semver';
import { ARTIFACT_NAME, previousPath } from '../agent/update/install.ts';
import { PROBATION_NAME, PROBATION_STARTS, REJECTED_NAME } from '../agent/update/probation.ts';
import { SIGNATURE_NAME, signChecksums } from '../agent/update/signature.ts';
import { buildPortal } from '../controller/portal/build.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const ENTRY = path.join(ROOT, 'bin', 'peerops.ts');
const ARTIFACT = ARTIFACT_NAME;
const LAUNCHER = 'peerops';
const CHECKSUMS = 'SHA256SUMS';
const PREVIOUS = path.basename(previousPath(ARTIFACT));

const LAUNCHER_TEXT = `#!/bin/sh
# peerops launcher: runs the release bundle beside this file with Node 24 (PEEROPS_NODE, else node on PATH).
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
      __PEEROPS_PORTAL_FILES__: JSON.stringify(await buildPortal()),
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

export async function buildRelease(
  version: string,
  outDir: string,
  signingKeyPem?: string,
): Promise<{ artifact: string; sums: string; publicKey?: string }> {
  if (!semver.valid(version)) throw new Error(`--version '${version}' is not a semantic version`);
  await mkdir(outDir, { recursive: true });
  const artifact = path.join(outDir, ARTIFACT);
  const tmp = path.join(outDir, `.build-${process.pid}.mjs`);
  try {
    await build({ ...(await bundleOptions(version, 'node24')), entryPoints: [ENTRY], outfile: tmp });
    await chmod(tmp, 0o755);
    await checkVersion(tmp, version);
    await rename(tmp, artifact);
  } finally {
    await rm(tmp, { force: true });
  }
  const launcher = path.join(outDir, LAUNCHER);
  await writeFile(launcher, LAUNCHER_TEXT, { mode: 0o755 });
  const lines: string[] = [];
  for (const file of [ARTIFACT, LAUNCHER]) {
    const sum = createHash('sha256')
      .update(await readFile(path.join(outDir, file)))
      .digest('hex');
    lines.push(`${sum}  ${file}`);
  }
  const sums = path.join(outDir, CHECKSUMS);
  const text = Buffer.from(`${lines.join('\n')}\n`);
  await writeFile(sums, text);
  if (signingKeyPem === undefined) return { artifact, sums };
  const { signature, publicKey } = signChecksums(text, signingKeyPem);
  await writeFile(path.join(outDir, SIGNATURE_NAME), `${signature}\n`);
  return { artifact, sums, publicKey };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      version: { type: 'string' },
      out: { type: 'string', default: 'dist' },
      'signing-key': { type: 'string' },
      npm: { type: 'boolean' },
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
  const out = path.resolve(values.out ?? 'dist');
  const keyFile = values['signing-key'] ?? process.env.PEEROPS_RELEASE_SIGNING_KEY;
  const { artifact, sums, publicKey } = await buildRelease(
    version,
    out,
    keyFile ? await readFile(keyFile, 'utf8') : undefined,
  );
  console.log(`built ${artifact} (${version}) and ${sums}`);
  if (publicKey)
    console.log(`signed ${SIGNATURE_NAME}; agents trust it with autoUpdate.publicKeys ["${publicKey}"]`);
  else console.log(`not signed (no --signing-key): agents will not install this release`);
}

if (import.meta.main) await main();
