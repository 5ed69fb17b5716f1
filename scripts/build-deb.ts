/**
 * The Debian packages of the program and the agent, built with dpkg-deb from the release bundle and
 * launcher (scripts/build-release.ts) and packaging/deb/ (docs/release.md says what they install and why):
 * `peerops-common_<version>_all.deb`, the program the agent and the controller (scripts/build-deb-controller.ts)
 * share:
 *   /usr/lib/peerops/{peerops,peerops.mjs}   the release launcher and bundle; /usr/bin/peerops links it
 *   /usr/share/doc/peerops-common/copyright
 * `peerops-agent_<version>_all.deb`:
 *   /usr/lib/systemd/system/peerops-agent.service (+ .d/debian.conf: user peerops, its capabilities)
 *   /etc/peerops/agent.json                  example config (conffile; postinst: root:peerops 0640)
 *   /usr/share/doc/peerops-agent/            copyright, agent.md
 * The program needs Debian's nodejs >= 20.12 (Debian 13 has 20.19): the bundle runs on Node >= 20.12, and
 * a Node of its own would make the package arch-specific, 121 MiB larger unpacked and patched only by us.
 */
import { chmod, mkdir, symlink } from 'node:fs/promises';
import path from 'node:path';
import { buildDebArchive, debianVersion, debName } from './deb-archive.ts';
import { WIREGUARD_DEB_PACKAGE } from './build-deb-wireguard.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const PACKAGING = path.join(ROOT, 'packaging', 'deb');
export const DEB_PACKAGE = 'peerops-agent';
export const COMMON_DEB_PACKAGE = 'peerops-common';
/**
 * Every program the agent runs, ping (RTT) and sysctl (procps: the forwarding check) too: routers
 * install it with --no-install-recommends, since wireguard-tools recommends a kernel
 * (docs/operator-guide.md, section 5).
 */
const DEPENDS = 'bird2, wireguard-tools, iproute2, iputils-ping, procps, adduser';

export function debFileName(version: string): string {
  return debName(DEB_PACKAGE, version, 'all');
}

export function commonDebFileName(version: string): string {
  return debName(COMMON_DEB_PACKAGE, version, 'all');
}

/** `peerops-common (= <version>)`: the program of the same release, for the agent's and controller's Depends. */
export function commonDependency(version: string): string {
  return `${COMMON_DEB_PACKAGE} (= ${debianVersion(version)})`;
}

/** Builds peerops-common into `outDir` from the release's bundle and launcher; answers its path. */
export async function buildCommonDeb(opts: {
  version: string;
  outDir: string;
  bundle: string;
  launcher: string;
}): Promise<string> {
  return buildDebArchive({
    package: COMMON_DEB_PACKAGE,
    version: opts.version,
    architecture: 'all',
    outDir: opts.outDir,
    async fill({ root, put }) {
      await put(opts.launcher, 'usr/lib/peerops/peerops', 0o755);
      await put(opts.bundle, 'usr/lib/peerops/peerops.mjs', 0o755);
      await mkdir(path.join(root, 'usr/bin'), { recursive: true });
      await symlink('../lib/peerops/peerops', path.join(root, 'usr/bin/peerops'));
      await put(path.join(PACKAGING, 'copyright'), `usr/share/doc/${COMMON_DEB_PACKAGE}/copyright`, 0o644);
    },
    fields: [
      // Node of Debian 13 and later: the bundle's floor (package.json engines)
      'Depends: nodejs (>= 20.12)',
      // the program was in peerops-agent before it had a package of its own
      `Replaces: ${DEB_PACKAGE} (<< ${debianVersion(opts.version)})`,
      `Breaks: ${DEB_PACKAGE} (<< ${debianVersion(opts.version)})`,
      'Section: net',
      'Priority: optional',
      'Description: peerops peering control plane: the program',
      " The peerops command (controller, router agent and command line) as one bundle for Debian's",
      ' Node.js. The packages peerops (the controller) and peerops-agent (the router agent) run it.',
    ],
  });
}

/** Builds the agent's .deb into `outDir`; answers its path. */
export async function buildDeb(opts: { version: string; outDir: string }): Promise<string> {
  return buildDebArchive({
    package: DEB_PACKAGE,
    version: opts.version,
    architecture: 'all',
    outDir: opts.outDir,
    async fill({ root, put }) {
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
      await chmod(path.join(root, 'etc/peerops'), 0o750);
      await put(path.join(PACKAGING, 'copyright'), `usr/share/doc/${DEB_PACKAGE}/copyright`, 0o644);
      await put(path.join(ROOT, 'docs', 'agent.md'), `usr/share/doc/${DEB_PACKAGE}/agent.md`, 0o644);
    },
    fields: [
      `Depends: ${commonDependency(opts.version)}, ${DEPENDS}`,
      // not Recommends: one process for every tunnel trades per-tunnel throughput for scale (docs/agent.md)
      `Suggests: ${WIREGUARD_DEB_PACKAGE}, wireguard-go`,
      'Section: net',
      'Priority: optional',
      'Description: router agent of the peerops peering control plane',
      ' The agent sets up the WireGuard tunnels and BIRD sessions that the peerops controller',
      ' assigns to this router and reports their state back. It runs as the system user peerops in group bird (systemd unit',
      ' peerops-agent), started once /etc/peerops/agent.json is filled in.',
    ],
    conffiles: ['/etc/peerops/agent.json'],
    scripts: ['postinst', 'prerm', 'postrm'].map((script) => path.join(PACKAGING, script)),
  });
}
