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
import { build, type Plugin } from 'esbuild';
import semver from 'semver';
import { ARTIFACT_NAME, previousPath } from '../agent/update/install.ts';
import { PROBATION_NAME, PROBATION_STARTS, REJECTED_NAME } from '../agent/update/probation.ts';
import { SIGNATURE_NAME, signChecksums } from '../agent/update/signature.ts';

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
    await build({
      entryPoints: [ENTRY],
      outfile: tmp,
      bundle: true,
      platform: 'node',
      target: 'node24',
      format: 'esm',
      minify: false,
      legalComments: 'none',
      logLevel: 'warning',
      define: { 'process.env.PEEROPS_BUILD_VERSION': JSON.stringify(version) },
      // CommonJS dependencies call require(); an ESM bundle needs one made for it. (The entry's #! line stays first.)
      banner: {
        js: "import { createRequire as __peeropsCreateRequire } from 'node:module';\nconst require = __peeropsCreateRequire(import.meta.url);",
      },
      plugins: [commandTable],
    });
    await chmod(tmp, 0o755);
    const printed = (await promisify(execFile)(process.execPath, [tmp, '--version'])).stdout.trim();
    if (printed !== version)
      throw new Error(`the bundle prints '${printed}' for --version, expected ${version}`);
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

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      version: { type: 'string' },
      out: { type: 'string', default: 'dist' },
      'signing-key': { type: 'string' },
    },
  });
  const pkg = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
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
