/**
 * How the git store writes: one write at a time (a queue), each after catching up with the repository,
 * redone when a push moved the branch underneath; spec and status commits of one write published as one
 * step through the journal (recovery.ts); a failing disk answered STORE_UNAVAILABLE and reported to
 * /health until a write succeeds again.
 */
import { join } from 'node:path';
import type pino from 'pino';
import { atomicWriteFile, diskErrorCode } from '../../../common/atomic-write.ts';
import type { DomainError } from '../../../common/errors.ts';
import type { Actor, WriteState } from '../store.ts';
import type { Branch, FileWrite, PreparedCommit } from './branch.ts';
import { writeObjects, type GitContext } from '../gitdb/objects.ts';
import type { Journal, RefUpdate } from '../gitdb/recovery.ts';
import { lockRef, RefMovedError, type HeldRef } from '../gitdb/refs.ts';
import { syncWrittenDirs } from '../../git-fs.ts';
import { fault } from '../../../common/messages.ts';

/** Attempts of a write whose ref moved or was locked (a push in progress); about 2 s in all. */
const MAX_ATTEMPTS = 12;

function backoff(attempt: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 30 * attempt));
}

function unavailable(err: RefMovedError): DomainError {
  return fault('store.busy', { reason: err.message });
}

/**
 * What a write does around its attempt, given by the store with each write (it owns what both touch):
 * Commits holds no reference up.
 */
export interface WriteRound {
  /** Catch up with both refs (and finish an interrupted write) before an attempt is prepared. */
  catchUp(): Promise<void>;
  /** After a write: what else it makes valid (rejected manifests), and the forge to push to. */
  afterWrite(): Promise<void>;
}

export class Commits {
  private queue: Promise<unknown> = Promise.resolve();
  /** A journal may be on disk: a write to finish before the next one (recovery.ts). */
  private journalPending = true;
  /** Why writes fail now (a full or read-only disk); undefined while they succeed. */
  private diskProblem: string | undefined;
  /**
   * Why this process may not write at all (a read-only data directory at start: no instance lock,
   * recovery.ts); every write is refused before it touches the disk, until the store takes the lock.
   */
  private readOnlyReason: string | undefined;
  /** When writes last started or stopped succeeding. */
  private stateSince = new Date().toISOString();
  private closed = false;

  private readonly ctx: GitContext;
  private readonly journal: Journal;
  private readonly spec: Branch;
  private readonly status: Branch;
  private readonly log: pino.Logger;

  constructor(parts: { ctx: GitContext; journal: Journal; spec: Branch; status: Branch; log: pino.Logger }) {
    this.ctx = parts.ctx;
    this.journal = parts.journal;
    this.spec = parts.spec;
    this.status = parts.status;
    this.log = parts.log;
  }

  /** Refuse every write from now on (the store is closing). */
  close(): void {
    this.closed = true;
  }

  writeState(): WriteState {
    const since = this.stateSince;
    if (this.readOnlyReason !== undefined)
      return { problem: { reason: 'ReadOnlyDataDirectory', message: this.readOnlyReason }, since };
    if (this.diskProblem !== undefined)
      return { problem: { reason: 'DiskRefusesWrites', message: this.diskProblem }, since };
    return { since };
  }

  /** Refuse every write, for `reason`, until `writable` (docs/store.md, "A read-only data directory"). */
  readOnly(reason: string): void {
    if (this.readOnlyReason === undefined) this.stateSince = new Date().toISOString();
    this.readOnlyReason = reason;
  }

  /** The store holds the instance lock now: writes are tried again. */
  writable(): void {
    this.readOnlyReason = undefined;
    this.diskProblem = undefined;
    this.stateSince = new Date().toISOString();
  }

  private refuseWhileReadOnly(): void {
    if (this.readOnlyReason !== undefined) throw fault('store.readOnly', { reason: this.readOnlyReason });
  }

  /** The journal was handled at take-over (recovery.ts): nothing to finish before the first write. */
  recovered(): void {
    this.journalPending = false;
  }

  /** Run fn after every earlier write; one at a time. */
  serialised<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => {});
    return run;
  }

  /** Wait for queued writes. */
  async drain(): Promise<void> {
    await this.queue.catch(() => {});
  }

  /** A write: catch up with outside changes first; when the branch moves underneath, catch up and redo. */
  write<T>(fn: () => Promise<T>, round: WriteRound): Promise<T> {
    if (this.closed) return Promise.reject(fault('store.closed'));
    return this.serialised(async () => {
      this.refuseWhileReadOnly();
      try {
        const result = await this.attempt(fn, round);
        this.diskRecovered();
        return result;
      } catch (err) {
        throw this.diskFailure(err) ?? err;
      }
    });
  }

  private async attempt<T>(fn: () => Promise<T>, round: WriteRound): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      await round.catchUp();
      try {
        const result = await fn();
        await round.afterWrite();
        return result;
      } catch (err) {
        if (!(err instanceof RefMovedError)) throw err;
        if (attempt >= MAX_ATTEMPTS) throw unavailable(err);
        await backoff(attempt);
      }
    }
  }

  /**
   * A write that failed on the disk (full, read-only, I/O error) as STORE_UNAVAILABLE: nothing of it was
   * applied or answered, /health says why until a write succeeds again, and the poll tries the disk.
   */
  private diskFailure(err: unknown): DomainError | undefined {
    const code = diskErrorCode(err);
    if (code === undefined) return undefined;
    if (this.diskProblem === undefined) {
      this.log.error(
        { code, err: String(err) },
        'store: the disk refuses writes; answering 503 until it accepts them',
      );
      this.stateSince = new Date().toISOString();
    }
    this.diskProblem = `the store's disk refuses writes (${code})`;
    return fault('store.readOnly', { reason: this.diskProblem });
  }

  /** While writes fail on the disk: does it take a small write again? Then /health is ok again. */
  async probeDisk(): Promise<void> {
    if (this.diskProblem === undefined) return;
    try {
      await atomicWriteFile(join(this.ctx.gitdir, 'peerops', 'probe'), `${Date.now()}\n`);
      this.diskRecovered();
    } catch {
      // still refused: the next poll tries again
    }
  }

  private diskRecovered(): void {
    if (this.diskProblem === undefined) return;
    this.diskProblem = undefined;
    this.stateSince = new Date().toISOString();
    this.log.info('store: the disk accepts writes again');
  }

  /** A write of spec files alone (routers, policies): one commit on the spec branch. */
  async commitSpec(writes: FileWrite[], actor: Actor, message: string): Promise<void> {
    await this.publish([this.spec.encode(writes, actor, message)]);
  }

  /**
   * A session's spec and status files as one step (either may be empty): both commits are written, then
   * both refs move through the journal, spec first (publish). The caller tells the follower what the
   * status ref now holds.
   */
  async commitSession(
    specWrites: FileWrite[],
    statusWrites: FileWrite[],
    actor: Actor,
    message: string,
  ): Promise<void> {
    await this.publish([
      specWrites.length > 0 ? this.spec.encode(specWrites, actor, message) : undefined,
      statusWrites.length > 0 ? this.status.encode(statusWrites, actor, message) : undefined,
    ]);
  }

  /** Commit status writes outside a write (completing manifests, mesh keys), retrying when the ref moved. */
  async commitStatus(writes: FileWrite[], actor: Actor, message: string): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.publish([this.status.encode(writes, actor, message)]);
        return;
      } catch (err) {
        if (!(err instanceof RefMovedError)) throw err;
        if (attempt >= MAX_ATTEMPTS) throw unavailable(err);
        await this.status.sync();
        await backoff(attempt);
      }
    }
  }

  /**
   * Write prepared commits and move their refs as one step (recovery.ts): the journal names every update
   * before the first ref moves, the refs move in order, then the mirrors follow. RefMovedError when the
   * first ref had moved (nothing happened: the caller catches up and tries again). A failure after the
   * first ref moved leaves the journal for the next sync to finish, and is STORE_UNAVAILABLE, not
   * retried: the write is done once recovery completes it.
   */
  private async publish(commits: (PreparedCommit | undefined)[]): Promise<void> {
    const parts = commits.filter((c): c is PreparedCommit => c !== undefined);
    if (parts.length === 0) return;
    this.refuseWhileReadOnly();
    const objects = writeObjects(
      this.ctx.gitdir,
      parts.flatMap((p) => p.objects),
    ).then(syncWrittenDirs);
    await this.moveRefs(
      parts.map((p) => p.update),
      objects,
    );
    for (const p of parts) p.branch.advance(p);
  }

  /**
   * The journaled ref moves of `publish`, also for a fast-forward to fetched commits. Each step waits
   * only for what it needs, so their fsyncs overlap: the objects (`objects`, written by the caller),
   * the journal and the status ref's lock side by side; the spec branch's lock once the journal names
   * it (a crash would leave that lock to a push's expiry, the status ref's is removed at take-over);
   * then, once every lock is held, the refs move one after the other, in the journal's order, each
   * durable before the next, and none before the objects are (recovery.ts).
   */
  async moveRefs(updates: RefUpdate[], objects: Promise<void> = Promise.resolve()): Promise<void> {
    this.refuseWhileReadOnly();
    const locks = new Map<RefUpdate, Promise<HeldRef>>();
    const lock = (u: RefUpdate) => {
      const held = lockRef(this.ctx.gitdir, u.ref, u.from, u.to, this.onStaleLock);
      // a refusal is answered below, in the journal's order; not an unhandled rejection meanwhile
      held.catch(() => {});
      locks.set(u, held);
    };
    const releaseAll = () =>
      Promise.all([...locks.values()].map((l) => l.then((held) => held.release()).catch(() => {})));
    objects.catch(() => {});
    for (const u of updates) if (u.ref === this.status.ref) lock(u);
    try {
      await this.journal.begin(updates);
    } catch (err) {
      await objects.catch(() => {});
      await releaseAll();
      throw err;
    }
    this.journalPending = true;
    for (const u of updates) if (!locks.has(u)) lock(u);
    let moved = 0;
    try {
      await objects;
      // Every lock held before the first ref moves: one refused (a push, `git gc` packing the refs) leaves
      // the write undone and retried, not half-way.
      const held = await Promise.all(updates.map((u) => locks.get(u) as Promise<HeldRef>));
      for (const ref of held) {
        await ref.publish();
        moved++;
      }
    } catch (err) {
      await releaseAll();
      if (moved === 0) {
        await this.journal.end().then(
          () => (this.journalPending = false),
          () => {},
        );
        throw err;
      }
      this.log.error({ err: String(err) }, 'store: a write stopped half-way; the next sync completes it');
      throw fault('store.writeUnfinished', { reason: String(err) });
    }
    await this.journal.end().then(
      () => (this.journalPending = false),
      (err: unknown) => this.log.warn({ err: String(err) }, 'store: journal left; the next sync removes it'),
    );
  }

  private readonly onStaleLock = (lock: string, ageMs: number): void =>
    this.log.warn({ lock, ageMs: Math.round(ageMs) }, 'store: removed a stale ref lock (a crashed writer)');

  /** Finish a write that a crash or a failed ref update interrupted (recovery.ts), before anything else. */
  async recoverJournal(removeLocks: boolean): Promise<void> {
    // read-only: the journal left needs no ref moved (recovery.ts, takeOver) and is handled at take-over
    if (!this.journalPending || this.readOnlyReason !== undefined) return;
    await this.journal.recover(this.log, { removeLocks });
    this.journalPending = false;
  }
}
