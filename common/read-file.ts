/**
 * Reading a file that may not exist. Only its absence (ENOENT) reads as undefined: a file the process may
 * not read (EACCES), a directory in its place or an I/O error is an error, not "no file", so a caller
 * never takes an unreadable config for a missing one and rewrites or deletes it.
 */
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

/** undefined for "no such file"; any other failure is thrown on. */
function absent(err: unknown): undefined {
  if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
  throw err;
}

export function readTextIfExists(path: string): Promise<string | undefined> {
  return readFile(path, 'utf8').catch(absent);
}

/**
 * Many small files of one directory (the agent's BIRD files), by name: name → text (undefined: no such
 * file), with readTextIfExists's rule. Read synchronously, on purpose: through libuv's thread pool each
 * file is four trips (open, stat, read, close) and a thousand of them cost the agent 0.2 s of CPU a
 * pass; read here, a few ms in all (docs/benchmarks.md, the agent). The event loop waits that long,
 * which the agent's /health can.
 */
export function readTextsIfExist(dir: string, names: Iterable<string>): Map<string, string | undefined> {
  const out = new Map<string, string | undefined>();
  for (const name of names) {
    let text: string | undefined;
    try {
      text = readFileSync(join(dir, name), 'utf8');
    } catch (err) {
      text = absent(err);
    }
    out.set(name, text);
  }
  return out;
}
