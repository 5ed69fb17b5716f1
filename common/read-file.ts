/**
 * Reading a file that may not exist. Only its absence (ENOENT) reads as undefined: a file the process may
 * not read (EACCES), a directory in its place or an I/O error is an error, not "no file", so a caller
 * never takes an unreadable config for a missing one and rewrites or deletes it.
 */
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';

export async function readTextIfExists(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/**
 * Many small files (the agent's BIRD files), `readTextIfExists` each: path → text (undefined: no such
 * file). Read synchronously, on purpose: through libuv's thread pool each file is four trips (open, stat,
 * read, close) and a thousand of them cost the agent 0.2 s of CPU a pass; read here, a few ms in all
 * (docs/benchmarks.md, the agent). The event loop waits that long, which the agent's /health can.
 */
export function readTextsIfExist(paths: readonly string[]): Map<string, string | undefined> {
  const out = new Map<string, string | undefined>();
  for (const path of paths) {
    try {
      out.set(path, readFileSync(path, 'utf8'));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      out.set(path, undefined);
    }
  }
  return out;
}
