/**
 * The Kubernetes store's observations (heartbeats, metrics: visible at once from the core's index) merged
 * onto status in batches: one patch per object, a few at a time (one after the other, 10,000 sessions'
 * metrics took 80 s). Router status every time; a session's metrics once metricsWriteIntervalMs has
 * passed since this replica last wrote them, or with `allMetrics` (at shutdown). Every status patch is an
 * etcd revision and a watch event to every replica: 10,000 sessions reporting every minute would
 * otherwise keep the API server busy with them. Each write is at the resourceVersion read, so an older
 * observation is never written over a newer one another replica wrote (docs/kubernetes.md, Observations).
 */
import type pino from 'pino';
import { atGeneration } from '../../../common/conditions.ts';
import { mapLimit } from '../../../common/concurrency.ts';
import type { RouterSpec, RouterStatus, SessionSpec, SessionStatusRecord } from '../../../common/schema.ts';
import type { StoreIndex } from '../core/store-index.ts';
import { isConflict, isNotFound, type KubeApi } from './api.ts';
import { stampedStatus } from './generation.ts';
import type { KubeObjects } from './objects.ts';
import { BATCH_CONCURRENCY } from './outbox-writes.ts';

export class ObservationFlush {
  private readonly api: KubeApi;
  private readonly objects: KubeObjects;
  private readonly index: StoreIndex;
  private readonly log: pino.Logger;
  private readonly metricsWriteIntervalMs: number;
  private flushing: Promise<void> = Promise.resolve();

  constructor(parts: {
    api: KubeApi;
    objects: KubeObjects;
    index: StoreIndex;
    log: pino.Logger;
    metricsWriteIntervalMs: number;
  }) {
    this.api = parts.api;
    this.objects = parts.objects;
    this.index = parts.index;
    this.log = parts.log;
    this.metricsWriteIntervalMs = parts.metricsWriteIntervalMs;
  }

  /** One flush after the one running; resolves once it is written. */
  flush(options: { allMetrics?: boolean } = {}): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      const routers = this.index.unflushedRouters();
      const now = Date.now();
      const writtenAt = this.objects.metricsWrittenAt;
      const metrics = this.index
        .unflushedMetrics()
        .filter(
          ([uuid]) => options.allMetrics || now - (writtenAt.get(uuid) ?? 0) >= this.metricsWriteIntervalMs,
        );
      await mapLimit(routers, BATCH_CONCURRENCY, async ([router, status]) => {
        const read = this.objects.router(router)?.metadata;
        try {
          // at the resourceVersion read: a 409 (another replica's write came first) waits for the watch,
          // which keeps the newer of each observation (core/observation-order.ts), and the next flush
          const updated = await this.api.patchStatus<RouterSpec, RouterStatus>(
            'Router',
            router,
            atGeneration(status, read?.generation),
            read?.resourceVersion,
          );
          this.index.routerFlushed(router, status);
          this.objects.applyPut('Router', updated);
        } catch (err) {
          if (!isNotFound(err) && !isConflict(err))
            this.log.warn({ err, router }, 'router status not written; kept for the next flush');
        }
      });
      await mapLimit(metrics, BATCH_CONCURRENCY, async ([uuid, value]) => {
        const name = this.index.getSession(uuid)?.name;
        if (name === undefined) return;
        const current = this.objects.session(name);
        if (!current) return;
        try {
          // at the resourceVersion read, as every session write (stampedStatus): a conflict waits for the next flush
          const updated = await this.api.replace<SessionSpec, Partial<SessionStatusRecord>>(
            'PeeringSession',
            {
              ...current,
              status: stampedStatus(current, current.spec, {
                ...this.objects.statusOf(current),
                metrics: value,
              }),
            },
          );
          this.index.metricsFlushed(uuid, value);
          writtenAt.set(uuid, now);
          this.objects.applyPut('PeeringSession', updated);
        } catch (err) {
          // a 409: another write of the session came first; its metrics go with the next flush
          if (!isNotFound(err) && !isConflict(err))
            this.log.warn({ err, session: name }, 'session metrics not written; kept for the next flush');
        }
      });
    });
    return this.flushing;
  }
}
