import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';

/** The release version: the release bundle defines PEEROPS_BUILD_VERSION at build time (esbuild define). */
export const VERSION: string = process.env.PEEROPS_BUILD_VERSION ?? '0.1.0-dev';

let revision: string | undefined | null = null;

/**
 * The code's revision: the commit the release bundle was built from (PEEROPS_BUILD_REVISION, an esbuild
 * define), or in a checkout the commit checked out. Tracked files that differ from it add `-dirty-` and a
 * hash of the difference, so two builds of the same code, and only those, share a revision. Caches of
 * what the code derived (the store's parse cache, docs/store.md) are kept while the revision is the same,
 * so a data directory moved between a checkout and its release keeps them. Undefined outside a git
 * checkout without the define (the caller falls back to VERSION).
 */
export function codeRevision(): string | undefined {
  if (revision !== null) return revision;
  const built = process.env.PEEROPS_BUILD_REVISION;
  revision = built === undefined ? checkoutRevision() : built || undefined;
  return revision;
}

function checkoutRevision(): string | undefined {
  const root = fileURLToPath(new URL('..', import.meta.url));
  const git = (...args: string[]) => spawnSync('git', ['-C', root, ...args], { encoding: 'buffer' });
  const head = git('rev-parse', '--verify', '-q', 'HEAD');
  if (head.status !== 0) return undefined;
  const commit = head.stdout.toString().trim();
  const diff = git('diff', 'HEAD', '--binary');
  if (diff.status !== 0) return undefined;
  if (diff.stdout.length === 0) return commit;
  return `${commit}-dirty-${createHash('sha256').update(diff.stdout).digest('hex').slice(0, 16)}`;
}
