/**
 * Reading and updating refs of a bare repository with git's own lock protocol, so a `git push` (which
 * takes `<ref>.lock` the same way) and the store never overwrite each other's update.
 */
import { mkdir, open, readFile, rename, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fsyncDir } from '../../../common/atomic-write.ts';

/**
 * A ref lock older than this is a crashed writer's (a killed `git push`): git holds a ref lock only for
 * the moment of the update. Removed with a warning (docs/store.md, "Crash safety").
 */
export const STALE_REF_LOCK_MS = 30_000;

/** The commit a ref points at: the loose ref file, else packed-refs; undefined when the ref does not exist. */
export async function readRef(gitdir: string, ref: string): Promise<string | undefined> {
  try {
    const text = (await readFile(join(gitdir, ref), 'utf8')).trim();
    if (/^[0-9a-f]{40}$/.test(text)) return text;
    if (text.startsWith('ref: ')) return readRef(gitdir, text.slice(5).trim());
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT' && (err as NodeJS.ErrnoException).code !== 'EISDIR')
      throw err;
  }
  try {
    const packed = await readFile(join(gitdir, 'packed-refs'), 'utf8');
    for (const line of packed.split('\n')) {
      const [oid, name] = line.split(' ');
      if (name === ref && oid && /^[0-9a-f]{40}$/.test(oid)) return oid;
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  return undefined;
}

export class RefMovedError extends Error {
  constructor(ref: string, what: string) {
    super(`${ref} ${what}`);
    this.name = 'RefMovedError';
  }
}

/**
 * Point `ref` at `next` if it still points at `expected` (undefined: must not exist yet): lockRef, then
 * its publish.
 */
export async function updateRef(
  gitdir: string,
  ref: string,
  expected: string | undefined,
  next: string,
  onStaleLock?: (lock: string, ageMs: number) => void,
): Promise<void> {
  await (await lockRef(gitdir, ref, expected, next, onStaleLock)).publish();
}

/** A ref's lock held with its new value written and fsynced (lockRef): publish it, or release it. */
export interface HeldRef {
  /** Rename the lock into place and fsync the directory: the ref has moved. */
  publish(): Promise<void>;
  /** Give the lock up; the ref stays as it was. */
  release(): Promise<void>;
}

/**
 * The first half of a ref update, which several refs can take side by side: takes `<ref>.lock`
 * exclusively, checks the old value under the lock, writes the new one and fsyncs it. RefMovedError
 * when the ref moved or another writer holds the lock; a lock older than STALE_REF_LOCK_MS is removed
 * (`onStaleLock` is told) and the update goes on.
 */
export async function lockRef(
  gitdir: string,
  ref: string,
  expected: string | undefined,
  next: string,
  onStaleLock?: (lock: string, ageMs: number) => void,
): Promise<HeldRef> {
  const path = join(gitdir, ref);
  const lock = `${path}.lock`;
  await mkdir(dirname(path), { recursive: true });
  let handle;
  try {
    handle = await open(lock, 'wx', 0o644);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    const age = await lockAge(lock);
    if (age === undefined || age < STALE_REF_LOCK_MS)
      throw new RefMovedError(ref, 'is locked by another writer');
    onStaleLock?.(lock, age);
    await rm(lock, { force: true });
    return lockRef(gitdir, ref, expected, next);
  }
  try {
    const current = await readRef(gitdir, ref);
    if (current !== expected) throw new RefMovedError(ref, 'moved underneath (a concurrent push)');
    await handle.writeFile(`${next}\n`);
    await handle.sync();
  } catch (err) {
    await handle.close().catch(() => {});
    await rm(lock, { force: true });
    throw err;
  }
  let settled = false;
  return {
    publish: async () => {
      settled = true;
      let renamed = false;
      try {
        await handle.close();
        await rename(lock, path);
        renamed = true;
      } finally {
        if (!renamed) await rm(lock, { force: true });
      }
      await fsyncDir(dirname(path));
    },
    release: async () => {
      if (settled) return;
      settled = true;
      await handle.close().catch(() => {});
      await rm(lock, { force: true });
    },
  };
}

/** How long ago a lock file was last written; undefined when it is gone. */
async function lockAge(lock: string): Promise<number | undefined> {
  try {
    return Date.now() - (await stat(lock)).mtimeMs;
  } catch {
    return undefined;
  }
}
