/**
 * The Kubernetes store's writes of the outbox (outbox.ts says where events are kept): events of no
 * session write (router.agent_offline) as a record, and delivered or dropped events taken off every
 * object holding them, each at the resourceVersion read.
 */
import type pino from 'pino';
import { mapLimit } from '../../../common/concurrency.ts';
import type { Outbox, OutboxChange } from '../core/outbox.ts';
import { isConflict, isNotFound, storeError, type KubeApi } from './api.ts';
import type { KubeObjects, SessionResource } from './objects.ts';
import { ANNOTATION_OUTBOX, parseEntries, recordOf, withOutbox } from './outbox.ts';

/** Attempts of a write refused at a stale resourceVersion. */
export const MAX_ATTEMPTS = 20;
/** Writes of one batch in flight at once (kube-apiserver's default max-requests-inflight is 400). */
export const BATCH_CONCURRENCY = 16;

export class OutboxWrites {
  private readonly api: KubeApi;
  private readonly objects: KubeObjects;
  private readonly eventOutbox: Outbox;
  private readonly log: pino.Logger;

  constructor(api: KubeApi, objects: KubeObjects, eventOutbox: Outbox, log: pino.Logger) {
    this.api = api;
    this.objects = objects;
    this.eventOutbox = eventOutbox;
    this.log = log;
  }

  /** Events of no session write as a record; confirmed ones removed where held. */
  async persist(change: OutboxChange): Promise<void> {
    if (change.add.length > 0) {
      try {
        this.objects.applyRecord(await this.api.createOutboxRecord(change.add));
      } catch (err) {
        throw storeError(err, 'record notification events');
      }
    }
    await this.removeEvents(change.remove.map((e) => e.event.id));
    this.eventOutbox.apply(change);
  }

  /**
   * Takes these events off every object holding them (confirmed, or dropped by the bound): a session's
   * annotation replaced at the resourceVersion read, a record replaced or deleted likewise. Resolves once
   * every removal is written.
   */
  private async removeEvents(ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    const { sessions, records } = this.objects.outboxHolders.locate(new Set(ids));
    await mapLimit([...sessions], BATCH_CONCURRENCY, ([name, held]) => this.removeSessionEvents(name, held));
    await mapLimit(records, BATCH_CONCURRENCY, (record) =>
      this.removeRecordEvents(record.name, new Set(ids)),
    );
  }

  private async removeSessionEvents(name: string, ids: ReadonlySet<string>): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const current =
        attempt === 0
          ? this.objects.session(name)
          : await this.objects.refresh<SessionResource>('PeeringSession', name);
      if (!current) return;
      const held = parseEntries(current.metadata.annotations?.[ANNOTATION_OUTBOX]);
      const kept = held.filter((e) => !ids.has(e.event.id));
      if (kept.length === held.length) return;
      try {
        const annotations = withOutbox(current.metadata.annotations, kept);
        this.objects.applyPut(
          'PeeringSession',
          await this.api.replace('PeeringSession', {
            ...current,
            metadata: { ...current.metadata, annotations },
          }),
        );
        return;
      } catch (err) {
        if (isConflict(err) && attempt < MAX_ATTEMPTS) continue;
        if (isNotFound(err)) return;
        throw storeError(err, `remove delivered events from session ${name}`);
      }
    }
  }

  private async removeRecordEvents(name: string, ids: ReadonlySet<string>): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        const map = await this.api.readOutboxRecord(name);
        const record = map && recordOf(map);
        if (!map || !record) {
          this.objects.outboxHolders.removeRecord(name);
          return;
        }
        const kept = record.entries.filter((e) => !ids.has(e.event.id));
        if (kept.length === record.entries.length) return;
        if (kept.length > 0) this.objects.applyRecord(await this.api.replaceOutboxRecord(map, kept));
        else {
          await this.api.deleteOutboxRecord(name, map.metadata?.resourceVersion);
          this.objects.outboxHolders.removeRecord(name);
        }
        return;
      } catch (err) {
        if (isConflict(err) && attempt < MAX_ATTEMPTS) continue;
        throw storeError(err, `remove delivered events from record ${name}`);
      }
    }
  }

  /** The events a write's bound dropped from other objects than its own: removed there, best effort. */
  dropElsewhere(change: OutboxChange): void {
    if (change.remove.length === 0) return;
    this.removeEvents(change.remove.map((e) => e.event.id)).catch((err: unknown) =>
      this.log.warn({ err }, 'outbox: events dropped by the bound not removed; delivered after all'),
    );
  }
}
