/**
 * The file system isomorphic-git works through: node's, except that every file it writes (loose objects,
 * fetched packs, config) lands atomically. isomorphic-git writes a loose object in place: a concurrent
 * reader (a user's push, git fsck) could see it empty, and a crash mid-write would leave a truncated object
 * that it never rewrites, since it skips objects that exist.
 */
import * as fs from 'node:fs';
import { atomicWriteFile, gitTempName } from '../common/atomic-write.ts';

type WriteFileOptions = { mode?: number } | string | undefined;

export const gitFs = {
  promises: {
    ...fs.promises,
    writeFile: (path: string, data: string | Uint8Array, options?: WriteFileOptions) =>
      atomicWriteFile(path, data, {
        ...(typeof options === 'object' && options.mode !== undefined ? { mode: options.mode } : {}),
        tempName: gitTempName,
      }),
  },
};
