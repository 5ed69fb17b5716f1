/**
 * The Debian package of the agent, `peerops-agent_<version>_all.deb`, built with dpkg-deb from the
 * release bundle and launcher (scripts/build-release.ts) and packaging/deb/ (docs/release.md says
 * what it installs and why):
 *   /usr/lib/peerops/{peerops,peerops.mjs}   the release launcher and bundle; /usr/bin/peerops links it
 *   /usr/lib/systemd/system/peerops-agent.service (+ .d/debian.conf: user peerops, its capabilities)
 *   /etc/peerops/agent.json                  example config (conffile; postinst: root:peerops 0640)
 *   /usr/share/doc/peerops-agent/            copyright, agent.md
 * The package needs Debian's nodejs >= 20.12 (Debian 13 has 20.19): the bundle runs on Node >= 20.12, and
 * a Node of its own would make the package arch-specific, 121 MiB larger unpacked and patched only by us.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmod,
  copyFile,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '..');
const PACKAGING = path.join(ROOT, 'packaging', 'deb');
export const DEB_PACKAGE = 'peerops-agent';
/** Node of Debian 13 and later; the bundle's floor (package.json engines). */
const DEPENDS = 'nodejs (>= 20.12), bird2, wireguard-tools, iproute2, adduser';

/** A semantic version as a Debian version: `1.2.0-rc.1` sorts before `1.2.0` only as `1.2.0~rc.1`. */
export function debianVersion(version: string): string {
  const [main = '', build] = version.split('+', 2);
  const dash = main.indexOf('-');
  const upstream = dash < 0 ? main : `${main.slice(0, dash)}~${main.slice(dash + 1).replaceAll('-', '.')}`;
  return build === undefined ? upstream : `${upstream}+${build}`;
}

export function debFileName(version: string): string {
  return `${DEB_PACKAGE}_${debianVersion(version)}_all.deb`;
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

/** Builds the .deb into `outDir` from the release's bundle and launcher; answers its path. */
export async function buildDeb(opts: {
  version: string;
  outDir: string;
  bundle: string;
  launcher: string;
}): Promise<string> {
  const stage = await mkdtemp(path.join(tmpdir(), 'peerops-deb-'));
  try {
    await chmod(stage, 0o755); // the archive's ./
    const put = async (from: string, to: string, mode: number) => {
      const dest = path.join(stage, to);
      await mkdir(path.dirname(dest), { recursive: true, mode: 0o755 });
      await copyFile(from, dest);
      await chmod(dest, mode);
    };
    await put(opts.launcher, 'usr/lib/peerops/peerops', 0o755);
    await put(opts.bundle, 'usr/lib/peerops/peerops.mjs', 0o755);
    await mkdir(path.join(stage, 'usr/bin'), { recursive: true });
    await symlink('../lib/peerops/peerops', path.join(stage, 'usr/bin/peerops'));
    const units = 'usr/lib/systemd/system';
    await put(path.join(ROOT, 'agent', 'peerops-agent.service'), `${units}/peerops-agent.service`, 0o644);
    await put(
      path.join(PACKAGING, 'peerops-agent.service.d', 'debian.conf'),
      `${units}/peerops-agent.service.d/debian.conf`,
      0o644,
    );
    // 0640 root:root in the archive, so the token it will hold is never world-readable; postinst gives
    // it to group peerops
    await put(path.join(PACKAGING, 'agent.json'), 'etc/peerops/agent.json', 0o640);
    await chmod(path.join(stage, 'etc/peerops'), 0o750);
    await put(path.join(PACKAGING, 'copyright'), `usr/share/doc/${DEB_PACKAGE}/copyright`, 0o644);
    await put(path.join(ROOT, 'docs', 'agent.md'), `usr/share/doc/${DEB_PACKAGE}/agent.md`, 0o644);

    const payload = await filesUnder(stage);
    let bytes = 0;
    const md5: string[] = [];
    for (const f of payload) {
      const data = await readFile(path.join(stage, f));
      bytes += data.length;
      md5.push(`${createHash('md5').update(data).digest('hex')}  ${f}`);
    }
    const control = path.join(stage, 'DEBIAN');
    await mkdir(control, { mode: 0o755 });
    await writeFile(
      path.join(control, 'control'),
      [
        `Package: ${DEB_PACKAGE}`,
        `Version: ${debianVersion(opts.version)}`,
        'Architecture: all',
        'Maintainer: peerops maintainers <maintainers@peerops.dev>',
        `Installed-Size: ${Math.ceil(bytes / 1024) + payload.length}`,
        `Depends: ${DEPENDS}`,
        'Recommends: iputils-ping, procps',
        'Suggests: wireguard-go',
        'Section: net',
        'Priority: optional',
        'Description: router agent of the peerops peering control plane',
        ' The agent sets up the WireGuard tunnels and BIRD sessions that the peerops controller',
        ' assigns to this router and reports their state back. The package also installs the peerops',
        ' command line. It runs as the system user peerops in group bird (systemd unit',
        ' peerops-agent), started once /etc/peerops/agent.json is filled in.',
        '',
      ].join('\n'),
    );
    await writeFile(path.join(control, 'conffiles'), '/etc/peerops/agent.json\n');
    await writeFile(path.join(control, 'md5sums'), `${md5.join('\n')}\n`);
    for (const script of ['postinst', 'prerm', 'postrm'])
      await put(path.join(PACKAGING, script), `DEBIAN/${script}`, 0o755);

    await mkdir(opts.outDir, { recursive: true });
    const deb = path.join(opts.outDir, debFileName(opts.version));
    await run('dpkg-deb', ['--root-owner-group', '-Zxz', '--build', stage, deb], {
      env: { ...process.env, SOURCE_DATE_EPOCH: await sourceDateEpoch() },
    });
    await stat(deb);
    return deb;
  } finally {
    await rm(stage, { recursive: true, force: true });
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
