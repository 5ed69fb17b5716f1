/**
 * The journaled ref move (recovery.ts, docs/store.md "Crash safety"): the refs of one write move as one
 * step. The journal names every update before the first ref moves; every lock is held before the first
 * moves; the refs then move in the journal's order, each durable before the next, none before its
 * objects are. A crash or failure half-way leaves the journal for `recover` to finish.
 */
import type pino from 'pino';
import type { Journal, RefUpdate } from './recovery.ts';
import { lockRef, type HeldRef } from './refs.ts';

/** A move that stopped after its first ref moved: done once `recover` completes it, not to be retried. */
export class RefsHalfMovedError extends Error {
  constructor(cause: unknown) {
    super(String(cause), { cause });
    this.name = 'RefsHalfMovedError';
  }
}

export class JournaledRefs {
  /** A journal may be on disk: a move to finish before the next one. */
  private journalPending = true;

  private readonly gitdir: string;
  private readonly journal: Journal;
  private readonly log: pino.Logger;
  /** Refs whose lock is taken beside the journal's write, not after it (see `move`). */
  private readonly lockEarly: ReadonlySet<string>;

  constructor(parts: { gitdir: string; journal: Journal; log: pino.Logger; lockEarly: readonly string[] }) {
    this.gitdir = parts.gitdir;
    this.journal = parts.journal;
    this.log = parts.log;
    this.lockEarly = new Set(parts.lockEarly);
  }

  /** The journal was handled at take-over (recovery.ts): nothing to finish before the first move. */
  recovered(): void {
    this.journalPending = false;
  }

  /** Finish a move that a crash or a failed ref update interrupted, before anything else. */
  async recover(removeLocks: boolean): Promise<void> {
    if (!this.journalPending) return;
    await this.journal.recover(this.log, { removeLocks });
    this.journalPending = false;
  }

  /**
   * Move the refs as one step. Each step waits only for what it needs, so their fsyncs overlap: the
   * objects (`objects`, written by the caller), the journal and the early refs' locks side by side; the
   * other locks once the journal names them (a crash would leave those to a push's expiry, the early
   * ones are removed at take-over). RefMovedError (refs.ts) when a lock was refused before any ref moved
   * (nothing happened); RefsHalfMovedError after.
   */
  async move(updates: RefUpdate[], objects: Promise<void> = Promise.resolve()): Promise<void> {
    const locks = new Map<RefUpdate, Promise<HeldRef>>();
    const lock = (u: RefUpdate) => {
      const held = lockRef(this.gitdir, u.ref, u.from, u.to, this.onStaleLock);
      // a refusal is answered below, in the journal's order; not an unhandled rejection meanwhile
      held.catch(() => {});
      locks.set(u, held);
    };
    const releaseAll = () =>
      Promise.all([...locks.values()].map((l) => l.then((held) => held.release()).catch(() => {})));
    objects.catch(() => {});
    for (const u of updates) if (this.lockEarly.has(u.ref)) lock(u);
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
      throw new RefsHalfMovedError(err);
    }
    await this.journal.end().then(
      () => (this.journalPending = false),
      (err: unknown) => this.log.warn({ err: String(err) }, 'store: journal left; the next sync removes it'),
    );
  }

  private readonly onStaleLock = (lock: string, ageMs: number): void =>
    this.log.warn({ lock, ageMs: Math.round(ageMs) }, 'store: removed a stale ref lock (a crashed writer)');
}
