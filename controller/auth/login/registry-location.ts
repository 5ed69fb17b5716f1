/**
 * The forms `PEEROPS_REGISTRY` takes (docs/login.md, A DN42 registry), told apart before anything is
 * opened, so that a form peerops does not read is refused by name at start-up rather than taken for a
 * file name.
 */
import { fileURLToPath } from 'node:url';

export type RegistryLocation =
  /** `http(s)://`: fetched in process with isomorphic-git. */
  | { kind: 'http'; url: string }
  /** `ssh://`, `git+ssh://`, `[user@]host:path` or `file://`: fetched with the git command (git-command.ts). */
  | { kind: 'git'; url: string; transport: 'ssh' | 'file' }
  /** A registry checkout directory or a users file. */
  | { kind: 'path'; path: string };

/** git's scp-like ssh form: no slash before the first colon, and not `scheme://`. */
const SCP_LIKE = /^(?:[A-Za-z0-9._-]+@)?(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):(?!\/\/)[^\s]+$/;
const SCHEME = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//;

export function isScpLike(source: string): boolean {
  return SCP_LIKE.test(source);
}

/** Which form `source` is; throws an Error naming it and the forms accepted when it is none of them. */
export function registryLocation(source: string): RegistryLocation {
  const scheme = SCHEME.exec(source)?.[1]?.toLowerCase();
  if (scheme === 'http' || scheme === 'https') return { kind: 'http', url: source };
  if (scheme === 'ssh' || scheme === 'git+ssh' || scheme === 'ssh+git')
    return { kind: 'git', url: source, transport: 'ssh' };
  if (scheme === 'file') {
    try {
      fileURLToPath(source);
    } catch (err) {
      throw new Error(`PEEROPS_REGISTRY ${source} is not a file URL: ${(err as Error).message}`, {
        cause: err,
      });
    }
    return { kind: 'git', url: source, transport: 'file' };
  }
  if (scheme !== undefined) {
    // git:// and the rest: unauthenticated or not a git transport; the shown URL has no credentials.
    throw new Error(
      `PEEROPS_REGISTRY: ${scheme}:// is not a registry source peerops reads; use an https://, ssh:// ` +
        'or user@host:path git URL, a file:// git URL, a registry checkout directory or a users file',
    );
  }
  if (isScpLike(source)) return { kind: 'git', url: source, transport: 'ssh' };
  return { kind: 'path', path: source };
}
