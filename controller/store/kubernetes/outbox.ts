/**
 * Where the Kubernetes store keeps the notification events waiting for delivery (docs/kubernetes.md,
 * "The outbox"), and which of them the core's Outbox holds:
 * - a session's events ride on its object, in the annotation `peerops.dev/outbox`, written by the same
 *   call as the change that caused them (the create, or the one replace of spec and status);
 * - events with no session object to ride on (a deletion's: the session's waiting events and
 *   session.deleted; router.agent_offline) are a record of their own, a ConfigMap labelled
 *   `peerops.dev/outbox`. A deletion's record is created before the delete and names the session's uid
 *   and the resourceVersion the delete is sent at: it counts only once no session with that uid exists,
 *   so a delete refused or never sent leaves it hidden (and the next delete of the session removes it).
 * Holders are fed by the informers and by each write's answer; the core's Outbox is told which events
 * appeared and which are gone from every holder.
 */
import type { V1ConfigMap } from '@kubernetes/client-node';
import type { Outbox, OutboxEntry } from '../core/outbox.ts';

export const ANNOTATION_OUTBOX = 'peerops.dev/outbox';
export const LABEL_OUTBOX = 'peerops.dev/outbox';
/**
 * Events one session object holds at most (annotations are limited to 256 KiB in all): more only wait
 * when no replica leads for a long time; the oldest of the session's go first (logged by the writer).
 */
export const SESSION_OUTBOX_LIMIT = 100;

/** An outbox record: a ConfigMap's entries, and for a deletion's, the session it waits on. */
export interface OutboxRecord {
  name: string;
  rv: number;
  entries: OutboxEntry[];
  /** A deletion's record: the session's uid and the resourceVersion its delete was sent at. */
  session?: { uid: string; rv: number };
}

function isEntry(value: unknown): value is OutboxEntry {
  if (typeof value !== 'object' || value === null) return false;
  const e = value as Partial<OutboxEntry>;
  return (
    typeof e.seq === 'number' &&
    typeof e.recordedAt === 'string' &&
    typeof e.event?.id === 'string' &&
    typeof e.event.type === 'string'
  );
}

/** The entries an annotation or a record's data holds; malformed ones are left out. */
export function parseEntries(text: string | undefined): OutboxEntry[] {
  if (text === undefined) return [];
  try {
    const value: unknown = JSON.parse(text);
    return Array.isArray(value) ? value.filter(isEntry) : [];
  } catch {
    return [];
  }
}

/** `current` without the entries of `remove`, with `add`, the session's newest SESSION_OUTBOX_LIMIT. */
export function nextEntries(
  current: readonly OutboxEntry[],
  add: readonly OutboxEntry[],
  remove: ReadonlySet<string>,
): { entries: OutboxEntry[]; over: number } {
  const kept = current.filter((e) => !remove.has(e.event.id));
  const ids = new Set(kept.map((e) => e.event.id));
  const all = [...kept, ...add.filter((e) => !ids.has(e.event.id))];
  const over = Math.max(0, all.length - SESSION_OUTBOX_LIMIT);
  return { entries: all.slice(over), over };
}

/** The annotations with the outbox set to `entries` (none: the annotation goes). */
export function withOutbox(
  annotations: Record<string, string> | undefined,
  entries: readonly OutboxEntry[],
): Record<string, string> {
  const { [ANNOTATION_OUTBOX]: _previous, ...rest } = annotations ?? {};
  return entries.length > 0 ? { ...rest, [ANNOTATION_OUTBOX]: JSON.stringify(entries) } : rest;
}

/** A record ConfigMap as the store reads it; undefined when it is none of the store's. */
export function recordOf(map: V1ConfigMap): OutboxRecord | undefined {
  const name = map.metadata?.name;
  if (!name || map.metadata?.labels?.[LABEL_OUTBOX] === undefined) return undefined;
  const data = map.data ?? {};
  const uid = data['sessionUid'];
  const sessionRv = Number(data['sessionResourceVersion']);
  return {
    name,
    rv: Number(map.metadata.resourceVersion ?? 0),
    entries: parseEntries(data['entries']),
    ...(uid !== undefined && Number.isFinite(sessionRv) ? { session: { uid, rv: sessionRv } } : {}),
  };
}

type Holder = `session/${string}` | `record/${string}`;

export class OutboxHolders {
  private readonly outbox: Outbox;
  /** Every holder's entries, counted or hidden. */
  private readonly held = new Map<Holder, OutboxEntry[]>();
  /** The ids each holder that counts holds, and how many such holders hold each id. */
  private readonly counted = new Map<Holder, Set<string>>();
  private readonly holders = new Map<string, number>();
  /** Session name → uid of the sessions that exist; and the uids. */
  private readonly sessionUids = new Map<string, string>();
  private readonly liveUids = new Set<string>();
  private readonly records = new Map<string, OutboxRecord>();
  /** Deletion records by their session's uid: every session put looks its own up. */
  private readonly deletions = new Map<string, Set<string>>();

  constructor(outbox: Outbox) {
    this.outbox = outbox;
  }

  /** A session object as written or watched: its events count; deletion records of its uid do not. */
  putSession(name: string, uid: string | undefined, entries: OutboxEntry[]): void {
    const previous = this.sessionUids.get(name);
    if (previous !== undefined && previous !== uid) {
      this.liveUids.delete(previous);
      this.reviewRecords(previous);
    }
    if (uid !== undefined) {
      this.sessionUids.set(name, uid);
      this.liveUids.add(uid);
      this.reviewRecords(uid);
    }
    this.set(`session/${name}`, entries, true);
  }

  /** A session gone: its deletion records count first, then its own entries go (an id never drops out between). */
  removeSession(name: string): void {
    const uid = this.sessionUids.get(name);
    this.sessionUids.delete(name);
    if (uid !== undefined) {
      this.liveUids.delete(uid);
      this.reviewRecords(uid);
    }
    this.set(`session/${name}`, [], false);
  }

  putRecord(record: OutboxRecord): void {
    const known = this.records.get(record.name);
    if (known && known.rv >= record.rv) return;
    this.records.set(record.name, record);
    const uid = record.session?.uid;
    if (uid !== undefined) this.deletions.set(uid, (this.deletions.get(uid) ?? new Set()).add(record.name));
    this.set(`record/${record.name}`, record.entries, this.counts(record));
  }

  removeRecord(name: string, rv = Number.MAX_SAFE_INTEGER): void {
    const known = this.records.get(name);
    if (!known || known.rv > rv) return;
    this.records.delete(name);
    const uid = known.session?.uid;
    const names = uid === undefined ? undefined : this.deletions.get(uid);
    names?.delete(name);
    if (uid !== undefined && names?.size === 0) this.deletions.delete(uid);
    this.set(`record/${name}`, [], false);
  }

  /** The entries a session object holds (counted or not). */
  sessionEntries(name: string): OutboxEntry[] {
    return this.held.get(`session/${name}`) ?? [];
  }

  /** Deletion records of a session (by uid). */
  recordsOf(uid: string): OutboxRecord[] {
    return [...(this.deletions.get(uid) ?? [])].flatMap((name) => this.records.get(name) ?? []);
  }

  /** Where these ids are held: session names and records, each with the ids of `ids` it holds. */
  locate(ids: ReadonlySet<string>): { sessions: Map<string, Set<string>>; records: OutboxRecord[] } {
    const sessions = new Map<string, Set<string>>();
    const records: OutboxRecord[] = [];
    for (const [holder, entries] of this.held) {
      const found = new Set(entries.filter((e) => ids.has(e.event.id)).map((e) => e.event.id));
      if (found.size === 0) continue;
      if (holder.startsWith('session/')) sessions.set(holder.slice('session/'.length), found);
      else {
        const record = this.records.get(holder.slice('record/'.length));
        if (record) records.push(record);
      }
    }
    return { sessions, records };
  }

  private counts(record: OutboxRecord): boolean {
    return record.session === undefined || !this.liveUids.has(record.session.uid);
  }

  private reviewRecords(uid: string): void {
    for (const record of this.recordsOf(uid))
      this.set(`record/${record.name}`, record.entries, this.counts(record));
  }

  /** A holder's entries now; the core's Outbox learns the ids no holder that counts held before, or holds now. */
  private set(holder: Holder, entries: OutboxEntry[], counts: boolean): void {
    if (entries.length > 0 || counts) this.held.set(holder, entries);
    else this.held.delete(holder);
    const before = this.counted.get(holder) ?? new Set<string>();
    const after = new Set(counts ? entries.map((e) => e.event.id) : []);
    const appeared: OutboxEntry[] = [];
    const gone: string[] = [];
    const seen = new Set<string>();
    for (const e of entries) {
      const id = e.event.id;
      if (!after.has(id) || before.has(id) || seen.has(id)) continue;
      seen.add(id);
      const n = (this.holders.get(id) ?? 0) + 1;
      this.holders.set(id, n);
      if (n === 1) appeared.push(e);
    }
    for (const id of before) {
      if (after.has(id)) continue;
      const n = (this.holders.get(id) ?? 1) - 1;
      if (n > 0) this.holders.set(id, n);
      else {
        this.holders.delete(id);
        gone.push(id);
      }
    }
    if (after.size > 0) this.counted.set(holder, after);
    else this.counted.delete(holder);
    this.outbox.load(appeared);
    this.outbox.forget(gone);
  }
}
