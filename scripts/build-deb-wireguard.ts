/**
 * The Debian package of peerops-wireguard (wireguard-host/: every userspace WireGuard tunnel of a
 * router in one process; docs/agent.md), `peerops-wireguard_<version>_<arch>.deb` for the build host's
 * architecture (`dpkg --print-architecture`), built with dpkg-deb:
 *   /usr/bin/peerops-wireguard                 static Go binary (scripts/build-wireguard-host.sh)
 *   /usr/share/doc/peerops-wireguard/copyright ours and the linked Go modules' licences
 * No maintainer scripts: the agent starts the host on demand. The agent's package only suggests it, since
 * one process for every tunnel trades per-tunnel throughput for scale (docs/agent.md).
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { buildDebArchive, debName } from './deb-archive.ts';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '..');
export const WIREGUARD_DEB_PACKAGE = 'peerops-wireguard';
const BINARY = 'peerops-wireguard';

/** Debian's architecture names as Go's GOARCH calls them. */
const GOARCH: Record<string, string> = {
  amd64: 'amd64',
  arm64: 'arm64',
  armhf: 'arm',
  i386: '386',
  ppc64el: 'ppc64le',
  riscv64: 'riscv64',
  s390x: 's390x',
};

/** The build host's Debian architecture: the package's, since Go builds for the host. */
export async function hostArchitecture(): Promise<string> {
  return (await run('dpkg', ['--print-architecture'])).stdout.trim();
}

export async function wireguardDebFileName(version: string): Promise<string> {
  return debName(WIREGUARD_DEB_PACKAGE, version, await hostArchitecture());
}

/** peerops-wireguard built by scripts/build-wireguard-host.sh (cached), checked to be for `goarch`. */
async function buildBinary(goarch: string): Promise<string> {
  const script = path.join(ROOT, 'scripts', 'build-wireguard-host.sh');
  const out = (await run(script, [], { timeout: 900_000 })).stdout.trim().split('\n');
  const binary = path.join(out.at(-1) ?? '', BINARY);
  const built = /^\s*build\s+GOARCH=(\S+)$/m.exec((await run('go', ['version', '-m', binary])).stdout)?.[1];
  if (built !== goarch)
    throw new Error(`${binary} is built for GOARCH ${built ?? '?'}, the package is for ${goarch}`);
  const version = (await run(binary, ['--version'])).stdout;
  if (!version.startsWith(`${BINARY} `)) throw new Error(`${binary} --version printed '${version.trim()}'`);
  return binary;
}

/** peerops-wireguard for the build host's architecture (the .deb's, the agent image's), built if need be. */
export async function wireguardHostBinary(architecture?: string): Promise<string> {
  const arch = architecture ?? (await hostArchitecture());
  const goarch = GOARCH[arch];
  if (!goarch) throw new Error(`no Go architecture known for Debian's ${arch}`);
  return buildBinary(goarch);
}

/** Builds the .deb into `outDir`; answers its path. */
export async function buildWireguardDeb(opts: { version: string; outDir: string }): Promise<string> {
  const architecture = await hostArchitecture();
  const binary = await wireguardHostBinary(architecture);
  return buildDebArchive({
    package: WIREGUARD_DEB_PACKAGE,
    version: opts.version,
    architecture,
    outDir: opts.outDir,
    async fill({ put }) {
      await put(binary, `usr/bin/${BINARY}`, 0o755);
      await put(
        path.join(ROOT, 'packaging', 'deb', WIREGUARD_DEB_PACKAGE, 'copyright'),
        `usr/share/doc/${WIREGUARD_DEB_PACKAGE}/copyright`,
        0o644,
      );
    },
    fields: [
      'Section: net',
      'Priority: optional',
      'Description: every userspace WireGuard tunnel of a peerops router in one process',
      ' peerops-wireguard hosts the userspace WireGuard tunnels of a network namespace in one',
      ' long-running process, built on the wireguard-go library, instead of a wireguard-go daemon',
      ' per tunnel; it takes the same command line (peerops-wireguard <interface>), and wg(8) and',
      ' ip(8) manage its tunnels as usual. The peerops agent (package peerops-agent) uses it when the',
      ' kernel has no WireGuard and it is on PATH, or when PEEROPS_WIREGUARD=peerops-wireguard. It',
      ' needs far less memory and CPU per tunnel for hundreds of tunnels, but moves less bulk',
      ' traffic per tunnel than wireguard-go.',
    ],
  });
}
