/**
 * The Debian package of the controller, `peerops_<version>_all.deb`, built with dpkg-deb from
 * packaging/deb/peerops/ (docs/release.md, "The controller's package"):
 *   /usr/lib/systemd/system/peerops.service   `peerops serve` as the system user peerops-controller,
 *                                             state in /var/lib/peerops (StateDirectory), hardened
 *   /etc/default/peerops                      its settings (conffile): the service host, the registry
 *   /usr/share/doc/peerops/                   copyright, operator-guide.md
 * The program itself is peerops-common's (scripts/build-deb.ts), of the same version.
 */
import path from 'node:path';
import { commonDependency } from './build-deb.ts';
import { buildDebArchive, debName } from './deb-archive.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const PACKAGING = path.join(ROOT, 'packaging', 'deb');
export const CONTROLLER_DEB_PACKAGE = 'peerops';

export function controllerDebFileName(version: string): string {
  return debName(CONTROLLER_DEB_PACKAGE, version, 'all');
}

/** Builds the controller's .deb into `outDir`; answers its path. */
export async function buildControllerDeb(opts: { version: string; outDir: string }): Promise<string> {
  const own = path.join(PACKAGING, CONTROLLER_DEB_PACKAGE);
  const doc = `usr/share/doc/${CONTROLLER_DEB_PACKAGE}`;
  return buildDebArchive({
    package: CONTROLLER_DEB_PACKAGE,
    version: opts.version,
    architecture: 'all',
    outDir: opts.outDir,
    async fill({ put }) {
      await put(path.join(own, 'peerops.service'), 'usr/lib/systemd/system/peerops.service', 0o644);
      await put(path.join(own, 'default'), 'etc/default/peerops', 0o644);
      await put(path.join(PACKAGING, 'copyright'), `${doc}/copyright`, 0o644);
      await put(path.join(ROOT, 'docs', 'operator-guide.md'), `${doc}/operator-guide.md`, 0o644);
    },
    fields: [
      // git: the store packs its repository with `git gc` and logins read a registry by git
      // (docs/operator-guide.md, section 1)
      `Depends: ${commonDependency(opts.version)}, git, adduser`,
      'Section: net',
      'Priority: optional',
      'Description: controller of the peerops peering control plane',
      ' The REST API, web portal and session store of a DN42-style peering network: other networks',
      ' request BGP sessions over WireGuard with your routers, and the agents on the routers set them',
      ' up. It runs as the system user peerops-controller (systemd unit peerops), its state in',
      ' /var/lib/peerops, started once /etc/default/peerops names the service host.',
    ],
    conffiles: ['/etc/default/peerops'],
    scripts: ['postinst', 'prerm', 'postrm'].map((script) => path.join(own, script)),
  });
}
