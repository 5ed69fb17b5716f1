/**
 * The outbox (docs/notifications.md, "The outbox"): the notification events the store keeps, written
 * with the state change that caused them, until the leader's notifier confirms their delivery. The rules
 * are here, for both back ends: which events a write adds (an id already held is held once), which of the
 * oldest it drops to stay within the bound, and the order (oldest first). A back end persists the change
 * a rule prepared in the same write as the state change, then applies it here.
 */
import { counter } from '../../metrics.ts';
import { topics, type ChangeFeed } from '../change-feed.ts';
import type { NotificationEvent } from './events.ts';

/** At most this many events wait; a write that would hold more drops the oldest. */
export const OUTBOX_LIMIT = 10_000;
/** An event waiting this long (7 days) is dropped by the next write to the outbox. */
export const OUTBOX_MAX_AGE_MS = 7 * 24 * 3600 * 1000;

/** An event as the outbox holds it: `seq` orders the outbox, `recordedAt` ages it. */
export interface OutboxEntry {
  event: NotificationEvent;
  seq: number;
  recordedAt: string;
}

/** What one write does to the outbox: the entries it adds and those it removes (confirmed or dropped). */
export interface OutboxChange {
  add: OutboxEntry[];
  remove: OutboxEntry[];
  /** How many of `remove` are dropped by the bound (not delivered). */
  dropped: number;
}

const dropped = counter({
  name: 'peerops_outbox_events_dropped_total',
  help: 'Notification events dropped from the outbox undelivered: it held 10,000 events, or one waited 7 days',
});

export const NO_CHANGE: OutboxChange = { add: [], remove: [], dropped: 0 };

export class Outbox {
  private readonly entries = new Map<string, OutboxEntry>();
  /** The entries oldest first, and their events: made again after a change, when asked. */
  private ordered: { entries: OutboxEntry[]; events: readonly NotificationEvent[] } | undefined;
  private lastSeq = 0;
  private readonly feed: ChangeFeed;

  constructor(feed: ChangeFeed) {
    this.feed = feed;
  }

  /** The events held, oldest first. */
  list(): readonly NotificationEvent[] {
    return this.oldestFirst().events;
  }

  private oldestFirst(): { entries: OutboxEntry[]; events: readonly NotificationEvent[] } {
    if (!this.ordered) {
      const entries = [...this.entries.values()].sort((a, b) => a.seq - b.seq);
      this.ordered = { entries, events: entries.map((e) => e.event) };
    }
    return this.ordered;
  }

  get size(): number {
    return this.entries.size;
  }

  /**
   * The change a write recording `events` makes: the new ones, and the oldest the bound drops, the held
   * ones first, then the write's own (a first start of 10,000 sessions records more than the bound).
   */
  prepare(events: readonly NotificationEvent[], now = Date.now()): OutboxChange {
    const add: OutboxEntry[] = [];
    const seen = new Set<string>();
    const recordedAt = new Date(now).toISOString();
    for (const event of events) {
      if (this.entries.has(event.id) || seen.has(event.id)) continue;
      seen.add(event.id);
      // microseconds of the wall clock, or one more than the last: ordered across restarts too
      this.lastSeq = Math.max(this.lastSeq + 1, now * 1000);
      add.push({ event, seq: this.lastSeq, recordedAt });
    }
    if (add.length === 0) return NO_CHANGE;
    const overflow = Math.max(0, add.length - OUTBOX_LIMIT);
    const kept = add.slice(overflow);
    const oldestKept = new Date(now - OUTBOX_MAX_AGE_MS).toISOString();
    const byAge = this.oldestFirst().entries;
    const excess = Math.max(0, byAge.length + kept.length - OUTBOX_LIMIT);
    const remove = byAge.filter((e, i) => i < excess || e.recordedAt < oldestKept);
    return { add: kept, remove, dropped: remove.length + overflow };
  }

  /** The change a confirmation makes: the entries of `ids` held (none: nothing to write). */
  prepareRemoval(ids: readonly string[]): OutboxChange {
    const remove = ids.flatMap((id) => this.entries.get(id) ?? []);
    return remove.length === 0 ? NO_CHANGE : { add: [], remove, dropped: 0 };
  }

  /** A persisted change: held from now on (the dropped counted), and the leader woken. */
  apply(change: OutboxChange): void {
    if (change.add.length === 0 && change.remove.length === 0) return;
    for (const e of change.remove) this.entries.delete(e.event.id);
    this.put(change.add);
    if (change.dropped > 0) dropped.inc(change.dropped);
    this.changed();
  }

  /** Entries read from the back end's storage (a start, another writer). */
  load(entries: readonly OutboxEntry[]): void {
    if (entries.length === 0) return;
    this.put(entries);
    this.changed();
  }

  private put(entries: readonly OutboxEntry[]): void {
    for (const e of entries) {
      this.entries.set(e.event.id, e);
      this.lastSeq = Math.max(this.lastSeq, e.seq);
    }
  }

  /** Entries the back end's storage no longer holds (confirmed by another writer). */
  forget(ids: readonly string[]): void {
    let any = false;
    for (const id of ids) any = this.entries.delete(id) || any;
    if (any) this.changed();
  }

  private changed(): void {
    this.ordered = undefined;
    this.feed.publish(undefined, [topics.outbox]);
  }
}
