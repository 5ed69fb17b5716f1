/**
 * Crash safety of the git store (docs/store.md, "Crash safety"): what lets a controller killed at any
 * instant start again with every acknowledged write and nothing half-written.
 *
 * - The instance lock (`peerops/controller.lock`) says which process owns the repository. While a live
 *   controller holds it no second one starts; once its holder is gone, every leftover of the store's own
 *   (ref locks it named in its journal, its temp objects and files) is known to be a crashed writer's.
 * - The journal (`peerops/journal.json`) names the ref updates of one write before any ref moves. A write
 *   that touches both refs (a session's spec and its status) is one step this way: after a crash the next
 *   start finishes it when its first ref moved, and drops it when not.
 */
import { readFileSync } from 'node:fs';
import { mkdir, open, readFile, readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import git from 'isomorphic-git';
import type pino from 'pino';
import { GIT_TEMP_PREFIX, atomicWriteFile, diskErrorCode } from '../../../common/atomic-write.ts';
import { gitFs } from '../../git-fs.ts';
import { readRef, updateRef } from './refs.ts';

export interface RefUpdate {
  ref: string;
  /** The value the ref had when the write began (undefined: it did not exist). */
  from: string | undefined;
  to: string;
}

/** The start time of a process in clock ticks since boot (Linux), to tell a live holder from a reused pid. */
function processStart(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // the fields after the command name (which may hold spaces and parentheses); starttime is field 22
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The owner of a store repository: one controller process at a time. */
export class InstanceLock {
  private readonly path: string;

  private constructor(path: string) {
    this.path = path;
  }

  /**
   * Take the lock; STORE_IN_USE-style Error when a live controller holds it. A lock whose holder is gone
   * (killed, crashed, or a pid reused since) is taken over, and `stale` says so.
   */
  static async acquire(gitdir: string): Promise<{ lock: InstanceLock; stale?: { pid: number } }> {
    const dir = join(gitdir, 'peerops');
    await mkdir(dir, { recursive: true });
    const path = join(dir, 'controller.lock');
    const me = JSON.stringify({ pid: process.pid, start: processStart(process.pid) ?? null });
    let stale: { pid: number } | undefined;
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        const handle = await open(path, 'wx', 0o600);
        try {
          await handle.writeFile(`${me}\n`);
          await handle.sync();
        } finally {
          await handle.close();
        }
        return { lock: new InstanceLock(path), ...(stale ? { stale } : {}) };
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      const holder = await readHolder(path);
      if (holder && holder.pid !== process.pid && alive(holder.pid)) {
        const start = processStart(holder.pid);
        if (holder.start === null || start === undefined || start === holder.start)
          throw new Error(
            `the store ${gitdir} is in use by another controller (pid ${holder.pid}); stop it first`,
          );
      }
      stale = { pid: holder?.pid ?? 0 };
      await rm(path, { force: true });
    }
    throw new Error(`could not take the lock ${path}`);
  }

  /**
   * Remove the lock. One a failing disk will not remove is left: its holder is gone by the next start,
   * which takes it over with a warning.
   */
  async release(): Promise<void> {
    await rm(this.path, { force: true }).catch((err: unknown) => {
      if (diskErrorCode(err) === undefined) throw err;
    });
  }
}

async function readHolder(path: string): Promise<{ pid: number; start: string | null } | undefined> {
  try {
    const doc = JSON.parse(await readFile(path, 'utf8')) as { pid?: unknown; start?: unknown };
    if (typeof doc.pid === 'number')
      return { pid: doc.pid, start: typeof doc.start === 'string' ? doc.start : null };
  } catch {
    // unreadable: a lock file cut short by the crash it outlived
  }
  return undefined;
}

/** The write-ahead record of one write's ref updates. */
export class Journal {
  readonly path: string;
  private readonly gitdir: string;

  constructor(gitdir: string) {
    this.gitdir = gitdir;
    this.path = join(gitdir, 'peerops', 'journal.json');
  }

  /** Durably record the updates about to be made, before any ref moves. */
  async begin(updates: RefUpdate[]): Promise<void> {
    await atomicWriteFile(this.path, JSON.stringify({ updates }), { mode: 0o600 });
  }

  /** The write is whole (or never happened): forget it. */
  async end(): Promise<void> {
    await rm(this.path, { force: true });
  }

  async pending(): Promise<RefUpdate[] | undefined> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
    try {
      const doc = JSON.parse(text) as { updates?: RefUpdate[] };
      return Array.isArray(doc.updates) ? doc.updates : [];
    } catch {
      // cut short before its rename: atomicWriteFile never leaves one, but an empty journal is no write
      return [];
    }
  }

  /**
   * What finishing or dropping an interrupted write takes. Its first ref decides: moved to the new commit
   * (or past it, by a later push), the write happened and `moves` are the other refs still to move; still
   * at the old value, it never happened and nothing else moved either (refs move in the journal's order).
   * Undefined: no journal.
   */
  async plan(): Promise<
    { outcome: 'completed' | 'dropped'; updates: RefUpdate[]; moves: RefUpdate[] } | undefined
  > {
    const updates = await this.pending();
    if (updates === undefined) return undefined;
    const [first, ...rest] = updates;
    if (!first || !(await this.landed(first))) return { outcome: 'dropped', updates, moves: [] };
    const moves: RefUpdate[] = [];
    for (const u of rest) if ((await readRef(this.gitdir, u.ref)) === u.from) moves.push(u);
    return { outcome: 'completed', updates, moves };
  }

  /**
   * Finish or drop an interrupted write (`plan`). At start, with the instance lock held, each lock of a
   * ref named here is the crashed write's own and is removed (`removeLocks`); while running, a lock on
   * the spec branch may be a live push's and is left alone.
   */
  async recover(
    log: pino.Logger,
    { removeLocks }: { removeLocks: boolean },
  ): Promise<'none' | 'completed' | 'dropped'> {
    const plan = await this.plan();
    if (plan === undefined) return 'none';
    const { outcome, updates, moves } = plan;
    for (const u of removeLocks ? updates : []) {
      const lock = join(this.gitdir, `${u.ref}.lock`);
      if (await exists(lock)) {
        await rm(lock, { force: true });
        log.warn({ lock: `${u.ref}.lock` }, 'store: removed the ref lock of an interrupted write');
      }
    }
    if (outcome === 'completed')
      for (const u of updates.slice(1)) {
        if (moves.includes(u)) {
          await updateRef(this.gitdir, u.ref, u.from, u.to);
          continue;
        }
        const current = await readRef(this.gitdir, u.ref);
        if (current !== u.to && !(await this.descends(current, u.to)))
          log.error({ ref: u.ref, current, expected: u.to }, 'store: a journaled ref moved unexpectedly');
      }
    await this.end();
    log.warn(
      { refs: updates.map((u) => u.ref), outcome },
      outcome === 'completed'
        ? 'store: completed a write interrupted by a crash'
        : 'store: dropped a write interrupted by a crash before it took effect (never acknowledged)',
    );
    return outcome;
  }

  private async landed(u: RefUpdate): Promise<boolean> {
    const current = await readRef(this.gitdir, u.ref);
    if (current === u.to) return true;
    if (current === u.from) return false;
    return this.descends(current, u.to);
  }

  private async descends(oid: string | undefined, ancestor: string): Promise<boolean> {
    if (oid === undefined) return false;
    try {
      return await git.isDescendent({ fs: gitFs, gitdir: this.gitdir, oid, ancestor });
    } catch {
      return false;
    }
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * Remove what a crashed writer of this store left: its temp objects (`tmp_obj_peerops_*`, never a
 * `git push`'s) and the temp files of its atomic writes in `peerops/`. Returns how many were removed.
 */
export async function removeTempLeftovers(gitdir: string): Promise<number> {
  let removed = 0;
  const objects = join(gitdir, 'objects');
  const dirs = await readdir(objects).catch(() => [] as string[]);
  for (const dir of dirs.filter((d) => /^[0-9a-f]{2}$/.test(d))) {
    const names = await readdir(join(objects, dir)).catch(() => [] as string[]);
    for (const name of names.filter((n) => n.startsWith(GIT_TEMP_PREFIX))) {
      await rm(join(objects, dir, name), { force: true });
      removed++;
    }
  }
  const own = join(gitdir, 'peerops');
  for (const name of await readdir(own).catch(() => [] as string[])) {
    if (/\.[0-9a-f]{12}\.tmp$/.test(name)) {
      await rm(join(own, name), { force: true });
      removed++;
    }
  }
  return removed;
}

/** Errno codes of a data directory this process may not write: mounted read-only, or not its to write. */
const READ_ONLY_CODES = new Set(['EROFS', 'EACCES', 'EPERM']);

/**
 * Become the repository's one writer: take the instance lock, then clean up after a crashed predecessor:
 * finish or drop its interrupted write, remove its ref locks and temp files, and log each thing cleaned.
 * `statusRef` is written by the controller alone, under the lock: a lock file there is a leftover.
 *
 * A data directory that refuses the lock file itself (read-only, docs/store.md "A read-only data
 * directory") gives `readOnly` instead: nothing is cleaned, and the store serves reads without the lock.
 * That is safe because no process can write there either. A journal that needs a ref moved to leave the
 * repository whole (a crash between a write's two refs) cannot be finished there, and is refused with
 * its path rather than served half-done; any other journal leaves the refs as they are to be read.
 */
export async function takeOver(
  dir: string,
  journal: Journal,
  statusRef: string,
  log: pino.Logger,
): Promise<{ lock: InstanceLock } | { readOnly: string }> {
  let taken: Awaited<ReturnType<typeof InstanceLock.acquire>>;
  try {
    taken = await InstanceLock.acquire(dir);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === undefined || !READ_ONLY_CODES.has(code)) throw err;
    const unfinished = (await journal.plan())?.moves ?? [];
    if (unfinished.length > 0)
      throw new Error(
        `${journal.path}: a write interrupted by a crash must be finished (${unfinished.map((u) => u.ref).join(', ')} to move) before the store is served, and the data directory is read-only (${code}); make it writable and start again`,
        { cause: err },
      );
    return { readOnly: code };
  }
  const { lock, stale } = taken;
  if (stale) log.warn({ pid: stale.pid }, 'store: took over from a controller that did not stop cleanly');
  await journal.recover(log, { removeLocks: true });
  if (
    await rm(join(dir, `${statusRef}.lock`)).then(
      () => true,
      () => false,
    )
  )
    log.warn({ lock: `${statusRef}.lock` }, 'store: removed a stale ref lock (a crashed write)');
  const removed = await removeTempLeftovers(dir);
  if (removed > 0) log.warn({ files: removed }, 'store: removed temp files of an interrupted write');
  return { lock };
}
