/**
 * The one way peerops replaces a file: a temp file in the same directory, created exclusively with its
 * final mode (a secret is never readable by others, even briefly), fsynced, renamed into place, and the
 * directory fsynced so the rename itself survives a power loss. A reader, or the file system after a
 * crash, sees the old content or the new, never part of it.
 */
import { randomBytes } from 'node:crypto';
import { open, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

export interface AtomicWriteOptions {
  /** File mode of the new file (default 0644). */
  mode?: number;
  /** Name of the temp file in the target's directory (default `<name>.<random>.tmp`). */
  tempName?: (name: string) => string;
}

const randomSuffix = () => randomBytes(6).toString('hex');

const DISK_ERRORS = new Set(['ENOSPC', 'EDQUOT', 'EROFS', 'EIO', 'EACCES', 'EPERM', 'EMFILE', 'ENFILE']);

/** The errno code of a file system failure that is the disk's (full, read-only, failing), not the caller's. */
export function diskErrorCode(err: unknown): string | undefined {
  for (let e = err; e instanceof Error; e = e.cause) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== undefined && DISK_ERRORS.has(code)) return code;
  }
  return undefined;
}

/** Whether `name` is a temp file of atomicWriteFile's default naming (`<name>.<12 hex>.tmp`). */
export const isTempName = (name: string): boolean => /^.+\.[0-9a-f]{12}\.tmp$/.test(name);

export async function atomicWriteFile(
  path: string,
  /** The content, or its pieces in order (written as they come: a large file never held whole). */
  data: string | Uint8Array | Iterable<string>,
  options: AtomicWriteOptions = {},
): Promise<void> {
  await fsyncDir(await atomicWriteFileNoDirSync(path, data, options));
}

/**
 * atomicWriteFile but for the directory's fsync, which the caller owns: it returns the directory, to
 * fsync (fsyncDir) before anything depends on the file. For a caller that writes many files and fsyncs
 * each directory once (git objects before a ref points at them, BIRD's files before a configure).
 */
export async function atomicWriteFileNoDirSync(
  path: string,
  data: string | Uint8Array | Iterable<string>,
  { mode = 0o644, tempName = (name) => `${name}.${randomSuffix()}.tmp` }: AtomicWriteOptions = {},
): Promise<string> {
  const dir = dirname(path);
  const tmp = join(dir, tempName(basename(path)));
  const handle = await open(tmp, 'wx', mode);
  try {
    try {
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  return dir;
}

/** Make a directory's entries (a rename, a new file) durable. */
export async function fsyncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * A temp name git itself uses for objects (git fsck does not call it garbage, git prune removes
 * leftovers), marked as peerops' own so the store can remove a crashed write's leftovers at start
 * without touching a temp file of a `git push` in progress.
 */
export const GIT_TEMP_PREFIX = 'tmp_obj_peerops_';
export const gitTempName = (): string => `${GIT_TEMP_PREFIX}${randomSuffix()}`;
