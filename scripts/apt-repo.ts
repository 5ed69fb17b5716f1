/**
 * The signed APT repository of the release's Debian packages (docs/release.md, "The APT repository"),
 * made with Debian's apt-ftparchive (apt-utils) and signed with gpg:
 *   pool/main/<p>/<package>/<package>_<version>_<arch>.deb   every version ever added; kept across builds
 *   dists/stable/main/binary-<arch>/Packages{,.gz}            regenerated from the whole pool
 *   dists/stable/Release, InRelease, Release.gpg              the index of the suite, signed
 *   peerops-archive-keyring.asc                               the signing key's public certificate
 * The pool is the repository's only state: a release adds its .debs and every index is made again from
 * the pool, so a directory that holds the published repository becomes the next one (docs/decisions.md,
 * Releases).
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFile, mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { hostArchitecture } from './build-deb-wireguard.ts';

const run = promisify(execFile);
export const APT_SUITE = 'stable';
export const APT_COMPONENT = 'main';
/** The public key operators install as the source's Signed-By (docs/operator-guide.md). */
export const APT_KEYRING = 'peerops-archive-keyring.asc';

export interface AptRepositoryOptions {
  /** The repository's directory; made when missing, its pool kept. */
  repo: string;
  /** The .deb files to add. */
  debs: readonly string[];
  /** An OpenPGP key of gpg's keyring ($GNUPGHOME) that can sign: its fingerprint or user ID. */
  signingKey: string;
}

/** No MD5 or SHA-1 lines in the indexes: apt trusts neither. */
const STRONG_HASHES = ['-o', 'APT::FTPArchive::MD5=false', '-o', 'APT::FTPArchive::SHA1=false'];

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

async function controlField(deb: string, field: string): Promise<string> {
  return (await run('dpkg-deb', ['-f', deb, field])).stdout.trim();
}

/** Every .deb under `dir`, as paths relative to it. */
async function debsUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries
    .filter((e) => e.isFile() && e.name.endsWith('.deb'))
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)))
    .sort();
}

/**
 * Adds `debs` to the pool (a file already there must be the same bytes: a published version never
 * changes), makes the suite's indexes from the whole pool and signs them. Answers the files written.
 */
export async function buildAptRepository(opts: AptRepositoryOptions): Promise<string[]> {
  const repo = path.resolve(opts.repo);
  const gpg = (...args: string[]) =>
    run('gpg', ['--yes', '--quiet', '--local-user', opts.signingKey, ...args], {
      maxBuffer: 16 * 1024 * 1024,
    });
  // the key first: a wrong name fails before anything is written
  const certificate = (
    await run('gpg', ['--armor', '--export-options', 'export-minimal', '--export', opts.signingKey])
  ).stdout;
  if (!certificate.includes('BEGIN PGP PUBLIC KEY BLOCK'))
    throw new Error(`--apt-signing-key: no OpenPGP key '${opts.signingKey}' in gpg's keyring`);

  const pool = path.join(repo, 'pool', APT_COMPONENT);
  for (const deb of opts.debs) {
    const pkg = await controlField(deb, 'Package');
    const dest = path.join(pool, pkg.slice(0, 1), pkg, path.basename(deb));
    const bytes = await readFile(deb);
    const held = await readFile(dest).catch(() => undefined);
    if (held && sha256(held) !== sha256(bytes))
      throw new Error(
        `${path.relative(repo, dest)} is already in the APT repository with other content: a published version never changes; build a new version`,
      );
    await mkdir(path.dirname(dest), { recursive: true });
    if (!held) await copyFile(deb, dest);
  }

  // every architecture a package of the pool is built for (and the build machine's): `all` packages
  // are listed in each
  const architectures = new Set([await hostArchitecture()]);
  for (const deb of await debsUnder(pool)) {
    const arch = await controlField(path.join(pool, deb), 'Architecture');
    if (arch !== 'all') architectures.add(arch);
  }
  const dist = path.join(repo, 'dists', APT_SUITE);
  await rm(dist, { recursive: true, force: true });
  const written: string[] = [];
  for (const arch of [...architectures].sort()) {
    const dir = path.join(dist, APT_COMPONENT, `binary-${arch}`);
    await mkdir(dir, { recursive: true });
    // run in the repository so that each Filename is relative to its root, as apt wants
    const packages = (
      await run('apt-ftparchive', [...STRONG_HASHES, '--arch', arch, 'packages', path.relative(repo, pool)], {
        cwd: repo,
        maxBuffer: 64 * 1024 * 1024,
      })
    ).stdout;
    await writeFile(path.join(dir, 'Packages'), packages);
    await writeFile(path.join(dir, 'Packages.gz'), gzipSync(packages, { level: 9 }));
    written.push(path.join(dir, 'Packages'), path.join(dir, 'Packages.gz'));
  }

  const field = (name: string, value: string) => ['-o', `APT::FTPArchive::Release::${name}=${value}`];
  const release = (
    await run(
      'apt-ftparchive',
      [
        ...STRONG_HASHES,
        ...field('Origin', 'peerops'),
        ...field('Label', 'peerops'),
        ...field('Suite', APT_SUITE),
        ...field('Codename', APT_SUITE),
        ...field('Architectures', [...architectures].sort().join(' ')),
        ...field('Components', APT_COMPONENT),
        ...field('Description', 'peerops: controller, router agent and userspace WireGuard host'),
        'release',
        '.',
      ],
      { cwd: dist, maxBuffer: 16 * 1024 * 1024 },
    )
  ).stdout;
  const releaseFile = path.join(dist, 'Release');
  await writeFile(releaseFile, release);
  // SHA512 digests: apt (sqv in Debian 13) refuses SHA-1 signatures
  await gpg('--digest-algo', 'SHA512', '--clearsign', '--output', path.join(dist, 'InRelease'), releaseFile);
  await gpg(
    '--digest-algo',
    'SHA512',
    '--armor',
    '--detach-sign',
    '--output',
    path.join(dist, 'Release.gpg'),
    releaseFile,
  );
  written.push(releaseFile, path.join(dist, 'InRelease'), path.join(dist, 'Release.gpg'));

  const keyring = path.join(repo, APT_KEYRING);
  await writeFile(`${keyring}.tmp`, certificate);
  await rename(`${keyring}.tmp`, keyring);
  written.push(keyring);
  return written;
}
