/**
 * The git store's outbox (docs/store.md, "The outbox"): each waiting notification event is a file on the
 * status ref, `outbox/<id[0..2]>/<id>.json`, written in the same commit as the status change that caused
 * it and removed by the commit that confirms its delivery. Spread over 256 directories so that a full
 * outbox (10,000 events) costs a write one small tree, not one of 10,000 entries.
 */
import type { NotificationEvent } from '../core/events.ts';
import type { OutboxChange, OutboxEntry } from '../core/outbox.ts';
import type { FileWrite } from './branch.ts';

const OUTBOX_FILE = /^outbox\/[0-9a-f]{2}\/([0-9a-f]{32})\.json$/;

export function outboxPath(id: string): string {
  return `outbox/${id.slice(0, 2)}/${id}.json`;
}

/** The event id an outbox file holds, from its path; undefined for any other file. */
export function outboxId(path: string): string | undefined {
  return OUTBOX_FILE.exec(path)?.[1];
}

/**
 * The status-ref files a change writes (added events, with the entry for the parse cache) and deletes
 * (confirmed or dropped ones).
 */
export function outboxWrites(change: OutboxChange): FileWrite[] {
  return [
    ...change.add.map((e) => ({ path: outboxPath(e.event.id), text: `${JSON.stringify(e)}\n`, parsed: e })),
    ...change.remove.map((e) => ({ path: outboxPath(e.event.id), text: undefined })),
  ];
}

/** An outbox file's entry; undefined when it is not one of the store's (its id not its path's). */
export function parseOutboxEntry(path: string, text: string): OutboxEntry | undefined {
  const id = outboxId(path);
  try {
    const value = JSON.parse(text) as Partial<OutboxEntry> | null;
    const event = value?.event as Partial<NotificationEvent> | undefined;
    if (
      id === undefined ||
      event?.id !== id ||
      typeof event.type !== 'string' ||
      typeof value?.seq !== 'number' ||
      typeof value.recordedAt !== 'string'
    )
      return undefined;
    return value as OutboxEntry;
  } catch {
    return undefined;
  }
}

/** The commit message of an outbox change made on its own. */
export function outboxMessage(change: OutboxChange): string {
  return change.add.length > 0
    ? `record ${change.add.length} notification event(s)`
    : `remove ${change.remove.length} delivered notification event(s)`;
}
