/**
 * The Kubernetes store's observations (heartbeats, metrics: visible at once from the core's index) merged
 * onto status in batches: one patch per object, a few at a time (one after the other, 10,000 sessions'
 * metrics took 80 s). Router status every time; a session's metrics once metricsWriteIntervalMs has
 * passed since this replica last wrote them, or with `allMetrics` (at shutdown). Every status patch is an
 * etcd revision and a watch event to every replica: 10,000 sessions reporting every minute would
 * otherwise keep the API server busy with them. Each write is at the resourceVersion read, so an older
 * observation is never written over a newer one another replica wrote (docs/kubernetes.md, Observations);
 * a 409 reads the object again and writes once more at once (written).
 */
import type pino from 'pino';
import { atGeneration } from '../../../common/conditions.ts';
import { mapLimit } from '../../../common/concurrency.ts';
import type {
  Kind,
  RouterSpec,
  RouterStatus,
  SessionSpec,
  SessionStatusRecord,
} from '../../../common/schema.ts';
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
      const routers = this.index.unflushedRouters().map(([router]) => router);
      const now = Date.now();
      const writtenAt = this.objects.metricsWrittenAt;
      const sessions = this.index
        .unflushedMetrics()
        .filter(
          ([uuid]) => options.allMetrics || now - (writtenAt.get(uuid) ?? 0) >= this.metricsWriteIntervalMs,
        );
      await mapLimit(routers, BATCH_CONCURRENCY, (router) =>
        this.written('Router', router, () => this.writeRouter(router)),
      );
      await mapLimit(sessions, BATCH_CONCURRENCY, async ([uuid]) => {
        const name = this.index.getSession(uuid)?.name;
        if (name !== undefined)
          await this.written('PeeringSession', name, () => this.writeMetrics(uuid, name, now));
      });
    });
    return this.flushing;
  }

  /**
   * `write`, and after a 409 (another replica wrote the object since it was read) once more at once with
   * the object read again: the index then holds the newer of each observation (core/observation-order.ts)
   * and writes what is still this replica's. A second 409 leaves it for the next flush.
   */
  private async written(kind: Kind, name: string, write: () => Promise<void>): Promise<void> {
    try {
      try {
        await write();
      } catch (err) {
        if (!isConflict(err)) throw err;
        await this.objects.refresh(kind, name);
        await write();
      }
    } catch (err) {
      if (!isNotFound(err) && !isConflict(err))
        this.log.warn(
          { err, object: `${kind}/${name}` },
          'observations not written; kept for the next flush',
        );
    }
  }

  /** The router's status with its observations not yet written, at the resourceVersion read. */
  private async writeRouter(router: string): Promise<void> {
    const status = this.index.unflushedRouter(router);
    if (!status) return;
    const read = this.objects.router(router)?.metadata;
    const updated = await this.api.patchStatus<RouterSpec, RouterStatus>(
      'Router',
      router,
      atGeneration(status, read?.generation),
      read?.resourceVersion,
    );
    this.index.routerFlushed(router, status);
    this.objects.applyPut('Router', updated);
  }

  /** The session's metrics not yet written, at the resourceVersion read, as every session write (stampedStatus). */
  private async writeMetrics(uuid: string, name: string, now: number): Promise<void> {
    const value = this.index.unflushedMetricsOf(uuid);
    const current = this.objects.session(name);
    if (!value || !current) return;
    const updated = await this.api.replace<SessionSpec, Partial<SessionStatusRecord>>('PeeringSession', {
      ...current,
      status: stampedStatus(current, current.spec, { ...this.objects.statusOf(current), metrics: value }),
    });
    this.index.metricsFlushed(uuid, value);
    this.objects.metricsWrittenAt.set(uuid, now);
    this.objects.applyPut('PeeringSession', updated);
  }
}
