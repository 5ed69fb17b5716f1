/**
 * Reading a file that may not exist. Only its absence (ENOENT) reads as undefined: a file the process may
 * not read (EACCES), a directory in its place or an I/O error is an error, not "no file", so a caller
 * never takes an unreadable config for a missing one and rewrites or deletes it.
 */
import { readFile } from 'node:fs/promises';

export async function readTextIfExists(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}
