/**
 * Keeps the store's repository small with `git gc --auto`, the housekeeping git itself runs after its own
 * commands. The store writes every object loose, one file each (a disk block at least), as git does, but
 * git packs them only from its porcelain commands, which the store never runs: without this the repository
 * only grows (the first start with 10,000 sessions alone leaves 20,000 files, 89 MiB on disk).
 *
 * Why the `git` program and not isomorphic-git: isomorphic-git packs without deltas and has no gc; the
 * session trees the store rewrites at every commit (thousands of entries) shrink by deltas above all.
 * gc is safe beside the store's writes: it prunes only unreachable objects older than two weeks
 * (`gc.pruneExpire`) and packs refs under the same lock files the store takes (refs.ts reads packed-refs).
 * An operator tunes it with the repository's git config (`gc.auto`, `gc.autoPackLimit`).
 */
import { execFile } from 'node:child_process';

export type HousekeepingResult = { ran: true; ms: number } | { ran: false; reason: string };

/** Runs `git gc --auto` on the repository; `signal` stops it (git leaves nothing half-done behind). */
export function gcAuto(gitdir: string, signal: AbortSignal): Promise<HousekeepingResult> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    execFile(
      'git',
      // not detached (git's default for --auto): the store waits for it and stops it at close
      [`--git-dir=${gitdir}`, '-c', 'gc.autoDetach=false', 'gc', '--auto', '--quiet'],
      { signal, timeout: 30 * 60_000, maxBuffer: 1 << 20 },
      (err, _stdout, stderr) => {
        if (!err) return resolve({ ran: true, ms: performance.now() - started });
        if ((err as NodeJS.ErrnoException).code === 'ENOENT')
          return resolve({ ran: false, reason: 'the git program is not installed' });
        if (signal.aborted) return resolve({ ran: false, reason: 'stopped' });
        reject(new Error(`git gc --auto failed: ${stderr.trim() || err.message}`, { cause: err }));
      },
    );
  });
}
