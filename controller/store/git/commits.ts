/**
 * How the git store commits: one write at a time (gitdb/write-queue.ts), whose loop the store runs
 * (git-store.ts, `queued`: caught up first, redone after retryOrGiveUp when a push moved a ref); spec
 * and status commits of one write published as one step through the journal (gitdb/journaled-refs.ts);
 * a failing disk answered STORE_UNAVAILABLE and reported to /health until a write succeeds again.
 */
import { join } from 'node:path';
import type pino from 'pino';
import { atomicWriteFile, diskErrorCode } from '../../../common/atomic-write.ts';
import type { DomainError } from '../../../common/errors.ts';
import type { Actor, WriteState } from '../store.ts';
import type { Branch, FileWrite, PreparedCommit } from './branch.ts';
import { writeObjects, type GitContext } from '../gitdb/objects.ts';
import type { Journal, RefUpdate } from '../gitdb/recovery.ts';
import { JournaledRefs, RefsHalfMovedError } from '../gitdb/journaled-refs.ts';
import { RefMovedError } from '../gitdb/refs.ts';
import { WriteQueue } from '../gitdb/write-queue.ts';
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

export class Commits {
  private readonly queue = new WriteQueue();
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
  private readonly refs: JournaledRefs;
  private readonly spec: Branch;
  private readonly status: Branch;
  private readonly log: pino.Logger;

  constructor(parts: { ctx: GitContext; journal: Journal; spec: Branch; status: Branch; log: pino.Logger }) {
    this.ctx = parts.ctx;
    this.spec = parts.spec;
    this.status = parts.status;
    this.log = parts.log;
    // the status ref's lock beside the journal: a crash leaves it to take-over, which removes it
    this.refs = new JournaledRefs({
      gitdir: parts.ctx.gitdir,
      journal: parts.journal,
      log: parts.log,
      lockEarly: [parts.status.ref],
    });
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

  refuseWhileReadOnly(): void {
    if (this.readOnlyReason !== undefined) throw fault('store.readOnly', { reason: this.readOnlyReason });
  }

  /** The journal was handled at take-over (recovery.ts): nothing to finish before the first write. */
  recovered(): void {
    this.refs.recovered();
  }

  /** Run fn after every earlier write; one at a time. */
  serialised<T>(fn: () => Promise<T>): Promise<T> {
    return this.queue.run(fn);
  }

  /** Wait for queued writes. */
  async drain(): Promise<void> {
    await this.queue.drain();
  }

  /** Refuse a write asked for once the store is closing (before it is queued). */
  admit(): void {
    if (this.closed) throw fault('store.closed');
  }

  /**
   * After an attempt of a write failed: RefMovedError (the ref moved or was locked: a push) waits its
   * backoff before the next attempt, unless this was the last; anything else is thrown as it is.
   */
  async retryOrGiveUp(err: unknown, attempt: number): Promise<void> {
    if (!(err instanceof RefMovedError)) throw err;
    if (attempt >= MAX_ATTEMPTS) throw unavailable(err);
    await backoff(attempt);
  }

  /** A write succeeded: the disk takes writes (again). */
  writeSucceeded(): void {
    this.diskRecovered();
  }

  /** A write failed: what to answer (a disk failure as STORE_UNAVAILABLE, see diskFailure). */
  writeFailed(err: unknown): unknown {
    return this.diskFailure(err) ?? err;
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
        await this.retryOrGiveUp(err, attempt);
        await this.status.sync();
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

  /** The journaled ref moves of `publish`, also for a fast-forward to fetched commits (journaled-refs.ts). */
  async moveRefs(updates: RefUpdate[], objects: Promise<void> = Promise.resolve()): Promise<void> {
    this.refuseWhileReadOnly();
    try {
      await this.refs.move(updates, objects);
    } catch (err) {
      if (err instanceof RefsHalfMovedError) throw fault('store.writeUnfinished', { reason: err.message });
      throw err;
    }
  }

  /** Finish a write that a crash or a failed ref update interrupted (recovery.ts), before anything else. */
  async recoverJournal(removeLocks: boolean): Promise<void> {
    // read-only: the journal left needs no ref moved (recovery.ts, takeOver) and is handled at take-over
    if (this.readOnlyReason !== undefined) return;
    await this.refs.recover(removeLocks);
  }
}
