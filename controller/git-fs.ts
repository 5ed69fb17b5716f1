/**
 * The file system isomorphic-git works through: node's, except that every file it writes (loose objects,
 * fetched packs, config) lands atomically. isomorphic-git writes a loose object in place: a concurrent
 * reader (a user's push, git fsck) could see it empty, and a crash mid-write would leave a truncated object
 * that it never rewrites, since it skips objects that exist.
 *
 * The directories of those files are fsynced together by `syncWrittenDirs()`, which the git store calls
 * before a ref points at the new objects (docs/store.md, "Crash safety"): one fsync per directory per
 * commit instead of one per object.
 */
import * as fs from 'node:fs';
import { atomicWriteFileNoDirSync, fsyncDir, gitTempName } from '../common/atomic-write.ts';

type WriteFileOptions = { mode?: number } | string | undefined;

const unsyncedDirs = new Set<string>();

export const gitFs = {
  promises: {
    ...fs.promises,
    writeFile: async (path: string, data: string | Uint8Array, options?: WriteFileOptions) => {
      const dir = await atomicWriteFileNoDirSync(path, data, {
        ...(typeof options === 'object' && options.mode !== undefined ? { mode: options.mode } : {}),
        tempName: gitTempName,
      });
      unsyncedDirs.add(dir);
    },
  },
};

/** fsync every directory a file was written to since the last call. */
export async function syncWrittenDirs(): Promise<void> {
  const dirs = [...unsyncedDirs];
  unsyncedDirs.clear();
  try {
    // a directory removed since (a store closed and deleted) has nothing left to make durable
    await Promise.all(
      dirs.map((dir) =>
        fsyncDir(dir).catch((err: unknown) => {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
        }),
      ),
    );
  } catch (err) {
    for (const dir of dirs) unsyncedDirs.add(dir);
    throw err;
  }
}
