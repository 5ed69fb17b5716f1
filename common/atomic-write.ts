/**
 * The one way peerops replaces a file: a temp file in the same directory, created exclusively with its
 * final mode (a secret is never readable by others, even briefly), fsynced, then renamed into place. A
 * reader, or the file system after a crash, sees the old content or the new, never part of it.
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

export async function atomicWriteFile(
  path: string,
  data: string | Uint8Array,
  { mode = 0o644, tempName = (name) => `${name}.${randomSuffix()}.tmp` }: AtomicWriteOptions = {},
): Promise<void> {
  const tmp = join(dirname(path), tempName(basename(path)));
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
}

/** A temp name git itself uses for objects: git fsck does not call it garbage, git prune removes leftovers. */
export const gitTempName = (): string => `tmp_obj_${randomSuffix()}`;
