/**
 * Observations are what agents report over and over: a session's metrics, a router's heartbeat fields and
 * mesh peer states. The git store keeps the latest of each in `<gitdir>/peerops/observations.json`,
 * replaced atomically at every flush and read back at start, and not in git history: committed, the
 * metrics of 10,000 sessions added 10,000 loose objects (40 MiB on disk) to the repository at every
 * flush, every minute, without end. Their history is Prometheus' job (GET /metrics). What mesh peers need
 * across restarts, a router's `meshPublicKey`, stays a status file on the status ref.
 */
import { mkdir, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { atomicWriteFile } from '../../../common/atomic-write.ts';
import {
  RouterStatus as RouterStatusSchema,
  SessionMetrics as SessionMetricsSchema,
} from '../../../common/schema.ts';
import type { RouterStatus, SessionMetrics } from '../../../common/schema.ts';
import { validate } from '../../../common/validate.ts';
import type { StoreIndex } from '../core/store-index.ts';

const FORMAT = 1;

/** A router's status split in two: `meshPublicKey`, which mesh peers need, is committed to the status ref. */
export function routerState(status: RouterStatus): Pick<RouterStatus, 'meshPublicKey'> {
  return status.meshPublicKey === undefined ? {} : { meshPublicKey: status.meshPublicKey };
}

/** The rest of a router's status (heartbeat fields, mesh peer states) is observed. */
export function routerObservations(status: RouterStatus): RouterObservations {
  const { meshPublicKey: _committed, ...observed } = status;
  return observed;
}

type RouterObservations = Omit<RouterStatus, 'meshPublicKey'>;

export interface ObservationSnapshot {
  /** Metrics by session uuid: a session deleted and created again starts without them. */
  sessions: Map<string, SessionMetrics>;
  /** Observed status fields by router name. */
  routers: Map<string, RouterObservations>;
}

export class ObservationFile {
  readonly path: string;

  constructor(gitdir: string) {
    this.path = join(gitdir, 'peerops', 'observations.json');
  }

  /**
   * The snapshot of the last flush; empty when there is none. An entry that does not validate is left
   * out (its next report brings it back); `invalid` counts them.
   */
  async load(): Promise<ObservationSnapshot & { invalid: number }> {
    const snapshot: ObservationSnapshot & { invalid: number } = {
      sessions: new Map(),
      routers: new Map(),
      invalid: 0,
    };
    let doc: { format?: unknown; sessions?: unknown; routers?: unknown };
    try {
      doc = JSON.parse(await readFile(this.path, 'utf8')) as typeof doc;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return snapshot;
      throw new Error(`${this.path} is unreadable: ${String(err)}`, { cause: err });
    }
    if (doc.format !== FORMAT) return snapshot;
    for (const [uuid, metrics] of entries(doc.sessions)) {
      const checked = validate<SessionMetrics>(SessionMetricsSchema, metrics);
      if (checked.ok) snapshot.sessions.set(uuid, checked.value);
      else snapshot.invalid++;
    }
    for (const [name, observed] of entries(doc.routers)) {
      const checked = validate<RouterStatus>(RouterStatusSchema, observed);
      if (checked.ok) snapshot.routers.set(name, routerObservations(checked.value));
      else snapshot.invalid++;
    }
    return snapshot;
  }

  async save(snapshot: ObservationSnapshot): Promise<void> {
    await mkdir(dirname(this.path), { recursive: true });
    await atomicWriteFile(
      this.path,
      JSON.stringify({
        format: FORMAT,
        sessions: Object.fromEntries(snapshot.sessions),
        routers: Object.fromEntries(snapshot.routers),
      }),
      { mode: 0o600 },
    );
  }

  /** Writes every session's metrics and every router's observed fields the index holds. */
  async saveFrom(index: StoreIndex): Promise<void> {
    const snapshot: ObservationSnapshot = { sessions: new Map(), routers: new Map() };
    for (const session of index.observedSessions())
      if (session.status.metrics) snapshot.sessions.set(session.spec.uuid, session.status.metrics);
    for (const router of index.routerValues()) {
      const observed = routerObservations(router.status);
      if (Object.keys(observed).length > 0) snapshot.routers.set(router.name, observed);
    }
    await this.save(snapshot);
  }

  /** Puts the last flush's observations into the index; returns how many entries were invalid. */
  async restoreInto(index: StoreIndex): Promise<number> {
    const snapshot = await this.load();
    index.restoreObservations(snapshot.routers, snapshot.sessions);
    return snapshot.invalid;
  }
}

function entries(value: unknown): [string, unknown][] {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? Object.entries(value) : [];
}
