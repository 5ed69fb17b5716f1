/**
 * What every Debian package of a release shares (scripts/build-deb.ts: the agent,
 * scripts/build-deb-wireguard.ts: peerops-wireguard): a staging directory, the control file with
 * Installed-Size and md5sums computed from it, and a reproducible `dpkg-deb --build` (files root:root,
 * times of the last commit).
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, copyFile, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '..');
export const MAINTAINER = 'peerops maintainers <maintainers@peerops.dev>';

/** A semantic version as a Debian version: `1.2.0-rc.1` sorts before `1.2.0` only as `1.2.0~rc.1`. */
export function debianVersion(version: string): string {
  const [main = '', build] = version.split('+', 2);
  const dash = main.indexOf('-');
  const upstream = dash < 0 ? main : `${main.slice(0, dash)}~${main.slice(dash + 1).replaceAll('-', '.')}`;
  return build === undefined ? upstream : `${upstream}+${build}`;
}

/** `<package>_<debian version>_<architecture>.deb` */
export function debName(pkg: string, version: string, architecture: string): string {
  return `${pkg}_${debianVersion(version)}_${architecture}.deb`;
}

/** The package tree being staged: `put` copies a file in (parents 0755), `root` is its `./`. */
export interface Stage {
  root: string;
  put: (from: string, to: string, mode: number) => Promise<void>;
}

export interface DebSpec {
  package: string;
  version: string;
  architecture: string;
  outDir: string;
  /** Control fields after Package, Version, Architecture, Maintainer and Installed-Size, one line each. */
  fields: string[];
  /** Fills the package's files into the stage. */
  fill(stage: Stage): Promise<void>;
  conffiles?: string[];
  /** Maintainer scripts (postinst, prerm, ...): file paths, installed under their own names. */
  scripts?: string[];
}

/** Every regular file under `dir`, as paths relative to it. */
async function filesUnder(dir: string, rel = ''): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(path.join(dir, rel), { withFileTypes: true })) {
    const r = path.join(rel, entry.name);
    if (entry.isDirectory()) out.push(...(await filesUnder(dir, r)));
    else if (entry.isFile()) out.push(r);
  }
  return out.sort();
}

/** Builds the package into `spec.outDir`; answers its path. */
export async function buildDebArchive(spec: DebSpec): Promise<string> {
  const root = await mkdtemp(path.join(tmpdir(), `${spec.package}-deb-`));
  try {
    await chmod(root, 0o755); // the archive's ./
    const stage: Stage = {
      root,
      async put(from, to, mode) {
        const dest = path.join(root, to);
        await mkdir(path.dirname(dest), { recursive: true, mode: 0o755 });
        await copyFile(from, dest);
        await chmod(dest, mode);
      },
    };
    await spec.fill(stage);

    const payload = await filesUnder(root);
    let bytes = 0;
    const md5: string[] = [];
    for (const f of payload) {
      const data = await readFile(path.join(root, f));
      bytes += data.length;
      md5.push(`${createHash('md5').update(data).digest('hex')}  ${f}`);
    }
    const control = path.join(root, 'DEBIAN');
    await mkdir(control, { mode: 0o755 });
    await writeFile(
      path.join(control, 'control'),
      [
        `Package: ${spec.package}`,
        `Version: ${debianVersion(spec.version)}`,
        `Architecture: ${spec.architecture}`,
        `Maintainer: ${MAINTAINER}`,
        `Installed-Size: ${Math.ceil(bytes / 1024) + payload.length}`,
        ...spec.fields,
        '',
      ].join('\n'),
    );
    if (spec.conffiles?.length)
      await writeFile(path.join(control, 'conffiles'), `${spec.conffiles.join('\n')}\n`);
    await writeFile(path.join(control, 'md5sums'), `${md5.join('\n')}\n`);
    for (const script of spec.scripts ?? [])
      await stage.put(script, `DEBIAN/${path.basename(script)}`, 0o755);

    await mkdir(spec.outDir, { recursive: true });
    const deb = path.join(spec.outDir, debName(spec.package, spec.version, spec.architecture));
    await run('dpkg-deb', ['--root-owner-group', '-Zxz', '--build', root, deb], {
      env: { ...process.env, SOURCE_DATE_EPOCH: await sourceDateEpoch() },
    });
    await stat(deb);
    return deb;
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

/** The last commit's time (file times in the archive), so that one commit builds one .deb. */
async function sourceDateEpoch(): Promise<string> {
  if (process.env.SOURCE_DATE_EPOCH) return process.env.SOURCE_DATE_EPOCH;
  try {
    return (await run('git', ['-C', ROOT, 'log', '-1', '--format=%ct'])).stdout.trim();
  } catch {
    return String(Math.floor(Date.now() / 1000));
  }
}
