/**
 * The Kubernetes store: routers, sessions and policies are peerops.dev/v1alpha1 custom resources in one
 * namespace. Informers (list + watch) feed the shared core's index (../core), which answers every read and
 * prepares every write with every rule; writes go to the API server with the resourceVersion read, and a
 * 409 Conflict re-runs the pure mutate function on the fresh object.
 *
 * Over 500 lines: this is one back end's persistence of three kinds and of the outbox, each write in its
 * own optimistic-concurrency loop against the API server (on the objects the index holds, so here), and
 * the cross-replica re-check of a create's limits. What stands alone has a module of its own (api.ts,
 * port-claims.ts, router-ids.ts, informers.ts, connections.ts, outbox.ts, generation.ts); no rule and no
 * read is defined here. Several
 * controller replicas may write at once:
 * - one session per (ASN, router): the object name is `as<asn>-<router>`, so AlreadyExists is SESSION_EXISTS;
 * - one session per listen port and router: a port is claimed with a ConfigMap named
 *   `peerops-port-<router>-<port>` before the session is created. Creating a named object is atomic in the API
 *   server, so two replicas can never both claim a port; the claim names its session, so a claim left by a
 *   crash between claim and create is recognised (no such session after a grace period) and taken over with
 *   a resourceVersion-checked replace. A single per-router allocation object would serialise every create
 *   on one router through 409 retries; per-port claims only collide when two creates want the same port;
 * - one router per nodeId and per uuid: reserved in one ConfigMap before the Router is written (router-ids.ts).
 * - the admission limits of a create (maxSessions, maxPendingPerAsn): checked against the index and this
 *   replica's creates in flight, then counted again from the API server once created, and the create taken
 *   back if another replica's pushed it over (recheckAdmission, docs/kubernetes.md).
 * A session's spec, status and waiting events are one object written in one call (no status subresource:
 * docs/kubernetes.md, "One write per change"); a deletion's events are a record of their own (outbox.ts).
 * Routers' and policies' status goes through the status subresource; heartbeats and metrics are kept in
 * memory and merged onto status in batches. Agent token hashes live in Secrets, and so do the revoked user and admin tokens (one
 * Secret, replaced at the resourceVersion read, watched by every replica).
 */
import {
  type Informer,
  type KubeConfig,
  type KubernetesObject,
  type V1ConfigMap,
  type V1Secret,
} from '@kubernetes/client-node';
import pino from 'pino';
import { isoNow } from '../../../common/clock.ts';
import { acceptedConditions, atGeneration, withSessionConditions } from '../../../common/conditions.ts';
import { DomainError } from '../../../common/errors.ts';
import {
  GROUP_VERSION,
  KINDS,
  PolicySpec as PolicySpecSchema,
  RouterSpec as RouterSpecSchema,
  SessionSpec as SessionSpecSchema,
  type Kind,
  type PolicySpec,
  type PolicyStatus,
  type RouterSpec,
  type RouterStatus,
  type SessionSpec,
  type SessionStatusRecord,
  upgradeRouterSpec,
} from '../../../common/schema.ts';
import { mapLimit } from '../../../common/concurrency.ts';
import { checkOrThrow, withoutDefaults } from '../../../common/validate.ts';
import {
  assertAdmission,
  mergedPolicy,
  mergedSessionStatus,
  sessionExistsError,
  type AdmissionSession,
} from '../../../common/rules/index.ts';
import {
  policyNotFound,
  routerExists,
  routerNotFound,
  sessionNotFound,
  StoreCore,
  type InFlightSession,
  type PreparedSession,
} from '../core/store-core.ts';
import type { OutboxChange } from '../core/outbox.ts';
import { stampedStatus } from './generation.ts';
import {
  ANNOTATION_OUTBOX,
  OutboxHolders,
  nextEntries,
  parseEntries,
  recordOf,
  withOutbox,
  LABEL_OUTBOX,
} from './outbox.ts';
import { makePagedInformer, startInformer } from './informers.ts';
import { PortClaims } from './port-claims.ts';
import { RouterIds } from './router-ids.ts';
import type { Actor, NewSession, Policy, Router, Session, SessionChange, SkippedManifest } from '../store.ts';
import { SkipReport } from '../core/skipped.ts';
import { readRevocationList, type Revocation, type RevocationList } from '../core/revocations.ts';
import {
  ANNOTATION_ACTOR,
  ANNOTATION_INITIAL_STATUS,
  ANNOTATION_MESSAGE,
  KubeApi,
  LABEL_ASN,
  LABEL_ROUTER,
  LABEL_REVOCATIONS,
  LABEL_TOKEN,
  REVOCATIONS,
  httpCode,
  isAlreadyExists,
  isConflict,
  isNotFound,
  revocationsOf,
  storeError,
  tokenHashOf,
  type Resource,
} from './api.ts';
import { fault, fieldError } from '../../../common/messages.ts';

export interface KubernetesStoreOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  logger?: pino.Logger;
  /** How often batched observations (heartbeats, metrics) are written to status; default 2000 ms. */
  flushIntervalMs?: number;
  /**
   * A session's metrics are written to its status at most this often (default 300,000 ms; they arrive
   * every minute): in between, the replica that got them serves the newest, the others the last written.
   */
  metricsWriteIntervalMs?: number;
  /**
   * A port claim older than this whose session does not exist is taken over, and so is a router-identity
   * entry whose router does not have it; default 60 s.
   */
  staleClaimSeconds?: number;
}

type RouterResource = Resource<RouterSpec, RouterStatus>;
type SessionResource = Resource<SessionSpec, Partial<SessionStatusRecord>>;
type PolicyResource = Resource<PolicySpec, PolicyStatus>;

const MAX_ATTEMPTS = 20;
const MAX_TOMBSTONES = 10_000;
/** Status patches of one flush in flight at once (kube-apiserver's default max-requests-inflight is 400). */
const FLUSH_CONCURRENCY = 16;

const rvOf = (obj: KubernetesObject | undefined): number => Number(obj?.metadata?.resourceVersion ?? 0);

/** What applyPut checks a spec against: without defaults, so that the check never writes into the object. */
const SPEC_CHECKS = {
  Router: withoutDefaults(RouterSpecSchema),
  PeeringSession: withoutDefaults(SessionSpecSchema),
  RoutingPolicy: withoutDefaults(PolicySpecSchema),
} as const;

/** The index entry of one object: the value the store hands out and the resourceVersion it came from. */
interface Entry<T> {
  rv: number;
  value: T;
}

/**
 * The Kubernetes back end under the shared core (../core): the objects as the API server last gave them
 * (their resourceVersions, for writes and for ordering watch events), put into the core's index as
 * routers, sessions and policies; writes the core prepared, sent with the resourceVersion read.
 */
export class KubernetesStore extends StoreCore {
  readonly backend = 'kubernetes' as const;

  private readonly api: KubeApi;
  private readonly kubeConfig: KubeConfig;
  private readonly log: pino.Logger;
  private readonly flushIntervalMs: number;
  private readonly staleClaimMs: number;
  private readonly routerIds: RouterIds;

  private readonly routers = new Map<string, Entry<RouterResource>>();
  private readonly sessions = new Map<string, Entry<SessionResource>>();
  private readonly policies = new Map<string, Entry<PolicyResource>>();
  private readonly tokens = new Map<string, Entry<string>>();
  /** Deleted objects (`Kind/name`) with the last resourceVersion seen: older watch events cannot revive them. */
  private readonly tombstones = new Map<string, number>();
  /** Objects the index does not hold as the API server has them, by `<plural>/<name>` (applyPut). */
  private readonly skipped = new Map<string, SkippedManifest>();
  private readonly skipReport = new SkipReport();
  private readonly claims: PortClaims;
  /** Creates in flight in this process, by session name: a second one waits for the first. */
  private readonly creating = new Map<string, Promise<unknown>>();
  /** The specs and first statuses of those creates, until they are in the index: admission counts them. */
  private readonly creatingSpecs = new Map<string, InFlightSession>();

  /** When this replica last wrote each session's metrics (epoch ms, by uuid). */
  private readonly metricsWrittenAt = new Map<string, number>();
  private readonly metricsWriteIntervalMs: number;
  /** Which objects hold the outbox's events (outbox.ts); it keeps the core's outbox in step. */
  private readonly outboxHolders = new OutboxHolders(this.eventOutbox);

  private informers: Informer<KubernetesObject>[] = [];
  /** The revocations Secret the revocations in memory were read from. */
  private revocationsSecret: Entry<V1Secret> | undefined;
  private flushTimer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();
  /** Audit events being written; close() waits for them. */
  private readonly events = new Set<Promise<void>>();
  private closed = false;

  constructor(options: KubernetesStoreOptions) {
    super();
    this.kubeConfig = options.kubeConfig;
    this.api = new KubeApi(options.kubeConfig, options.namespace);
    this.log = (options.logger ?? pino({ level: 'silent' })).child({ store: 'kubernetes' });
    this.flushIntervalMs = options.flushIntervalMs ?? 2000;
    this.metricsWriteIntervalMs = options.metricsWriteIntervalMs ?? 300_000;
    this.staleClaimMs = (options.staleClaimSeconds ?? 60) * 1000;
    this.claims = new PortClaims(
      this.api,
      this.staleClaimMs,
      this.log,
      (name) => this.sessions.get(name)?.value.spec,
    );
    this.routerIds = new RouterIds(
      this.api,
      this.staleClaimMs,
      async (router) => (await this.api.get<RouterSpec, RouterStatus>('Router', router))?.spec,
      this.log,
    );
  }

  // ---------------------------------------------------------------- lifecycle

  async start(): Promise<void> {
    const started = performance.now();
    await this.assertCurrentCrds();
    // policies before sessions: a session applied without status takes its first from the default policy
    const kinds: Kind[] = ['Router', 'RoutingPolicy', 'PeeringSession'];
    try {
      for (const kind of kinds) {
        const informer = makePagedInformer<KubernetesObject>(
          this.kubeConfig,
          this.api.path(kind),
          (limit, next) => this.api.listPage(kind, limit, next),
        );
        this.follow(
          informer,
          (obj) => this.applyPut(kind, obj),
          (obj) => this.applyDelete(kind, obj),
        );
        await startInformer(informer);
        this.informers.push(informer);
      }
      const secrets = makePagedInformer<V1Secret>(
        this.kubeConfig,
        this.api.tokenSecretsPath(),
        (limit, next) => this.api.listTokenSecrets(limit, next),
        { labelSelector: LABEL_TOKEN },
      );
      this.follow(
        secrets,
        (s) => this.applyToken(s),
        (s) => this.applyTokenDelete(s),
      );
      await startInformer(secrets);
      this.informers.push(secrets);
      const revocations = makePagedInformer<V1Secret>(
        this.kubeConfig,
        this.api.tokenSecretsPath(),
        (limit, next) => this.api.listRevocationSecrets(limit, next),
        { labelSelector: LABEL_REVOCATIONS },
      );
      this.follow(
        revocations,
        (s) => this.applyRevocations(s),
        (s) => this.applyRevocations(s, true),
      );
      await startInformer(revocations);
      this.informers.push(revocations);
      // after the sessions: a deletion's record counts once its session is known to be gone
      const records = makePagedInformer<V1ConfigMap>(
        this.kubeConfig,
        this.api.configMapsPath(),
        (limit, next) => this.api.listOutboxRecords(limit, next),
        { labelSelector: LABEL_OUTBOX },
      );
      this.follow(
        records,
        (m) => this.applyRecord(m),
        (m) => this.outboxHolders.removeRecord(m.metadata?.name ?? '', rvOf(m)),
      );
      await startInformer(records);
      this.informers.push(records);
    } catch (err) {
      await this.stopInformers();
      throw storeError(err, `cannot list peerops resources in namespace ${this.api.namespace}`);
    }
    // Routers written before the identity map existed get their entries (idempotent on every start).
    await this.routerIds
      .backfill(this.listRouters())
      .catch((err: unknown) =>
        this.log.warn({ err }, 'router identities not recorded; nodeId uniqueness rests on this replica'),
      );
    this.flushTimer = setInterval(() => void this.flushObservations(), this.flushIntervalMs);
    this.flushTimer.unref();
    this.log.info(
      {
        namespace: this.api.namespace,
        routers: this.routers.size,
        sessions: this.sessions.size,
        ms: Math.round(performance.now() - started),
      },
      'kubernetes store started',
    );
  }

  /**
   * A session's spec and status are written in one call only without the status subresource: under an
   * older CRD (Helm never upgrades CRDs) status would be dropped from every write, so the store refuses
   * to start and says what to do.
   */
  private async assertCurrentCrds(): Promise<void> {
    let older: boolean;
    try {
      older = await this.api.hasStatusSubresource('PeeringSession');
    } catch (err) {
      // API discovery is a cluster-wide path a namespaced Role cannot grant (a cluster without the
      // system:discovery binding refuses it): start, and say the check was not made.
      if (httpCode(err) !== 403) throw storeError(err, 'cannot read the peerops.dev API of the cluster');
      this.log.warn(
        'cannot check the PeeringSession CRD (API discovery forbidden): make sure the CRDs of this release are applied (docs/kubernetes.md)',
      );
      return;
    }
    if (older) throw fault('store.crdOutdated');
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.flushTimer);
    await this.flushObservations({ allMetrics: true });
    await Promise.all(this.events);
    await this.stopInformers();
  }

  private follow<T extends KubernetesObject>(
    informer: Informer<T>,
    put: (obj: T) => void,
    remove: (obj: T) => void,
  ): void {
    informer.on('add', put);
    informer.on('update', put);
    informer.on('delete', remove);
    informer.on('error', (err: unknown) => {
      // failures while starting are start()'s to report; afterwards the watch is restarted
      if (this.closed || !this.informers.includes(informer)) return;
      // the watch ended with an error: start over (re-list) after a pause, as long as the store is open
      this.log.warn({ err }, 'kubernetes watch failed; restarting in 2 s');
      setTimeout(() => {
        if (!this.closed)
          informer.start().catch((e: unknown) => this.log.warn({ err: e }, 'watch restart failed'));
      }, 2000).unref();
    });
  }

  private async stopInformers(): Promise<void> {
    const informers = this.informers;
    this.informers = [];
    await Promise.all(informers.map((i) => i.stop().catch(() => undefined)));
  }

  // ---------------------------------------------------------------- objects into the index

  /**
   * An object from the API server into the index, once its spec passes the schema the API checks writes
   * with (docs/store.md, "What the store refuses"): an object written while the admission webhook was off
   * or failing open may hold what the CRD's schema cannot say (a WireGuard key, a link-local address). One
   * that fails, or that the index cannot take (a damaged annotation), is skipped with its reason and the
   * previous version stays, as the git store skips a file: it never stops the controller.
   */
  private applyPut(kind: Kind, obj: KubernetesObject): void {
    const name = obj.metadata?.name;
    if (!name) return;
    const rv = rvOf(obj);
    if (this.isStale(kind, name, rv)) return;
    const path = `${KINDS[kind].plural}/${name}`;
    // a session's events count whatever its spec: they are the leader's to deliver
    if (kind === 'PeeringSession')
      this.outboxHolders.putSession(
        name,
        obj.metadata?.uid,
        parseEntries(obj.metadata?.annotations?.[ANNOTATION_OUTBOX]),
      );
    let skip: SkippedManifest | undefined;
    try {
      const spec: unknown = (obj as { spec?: unknown }).spec;
      checkOrThrow(SPEC_CHECKS[kind], kind === 'Router' ? upgradeRouterSpec(spec) : spec, `${kind} ${name}`);
      this.putObject(kind, name, obj, rv);
    } catch (err) {
      const schema = err instanceof DomainError && err.errors !== undefined;
      const errors = schema
        ? (err.errors ?? [])
        : [fieldError('/', 'field.unreadable', { reason: String(err) })];
      skip = { path, reason: schema ? 'schema' : 'unreadable', errors };
      this.log.error(
        { object: path, reason: skip.reason, errors: errors.map((e) => `${e.pointer}: ${e.message}`) },
        'store: invalid object skipped',
      );
    }
    this.setSkipped(path, skip);
  }

  private setSkipped(path: string, skip: SkippedManifest | undefined): void {
    if (skip !== undefined) this.skipped.set(path, skip);
    else if (!this.skipped.delete(path)) return;
    this.skipReport.update(this.skipped.values());
  }

  skippedManifests(): { manifests: SkippedManifest[]; since: string } {
    return this.skipReport.report([...this.skipped.values()]);
  }

  /** Whether the index holds this object at `rv` or newer, or it was deleted at `rv` or later. */
  private isStale(kind: Kind, name: string, rv: number): boolean {
    if ((this.tombstones.get(`${kind}/${name}`) ?? -1) >= rv) return true;
    const entries =
      kind === 'Router' ? this.routers : kind === 'PeeringSession' ? this.sessions : this.policies;
    return (entries.get(name)?.rv ?? -1) >= rv;
  }

  /** What can throw (a damaged annotation) runs before anything is kept: the object is in whole or not. */
  private putObject(kind: Kind, name: string, obj: KubernetesObject, rv: number): void {
    if (kind === 'Router') {
      const resource = obj as RouterResource;
      const spec = this.routerSpecOf(resource);
      this.routers.set(name, { rv, value: resource });
      this.index.putRouter(name, spec, resource.status ?? {});
    } else if (kind === 'PeeringSession') {
      const resource = obj as SessionResource;
      const status = this.statusOf(resource);
      this.sessions.set(name, { rv, value: resource });
      this.index.putSession(name, resource.spec, status);
    } else {
      const resource = obj as PolicyResource;
      this.policies.set(name, { rv, value: resource });
      this.index.putPolicy(name, resource.spec);
      if (name === 'default') this.reapplyUnwrittenStatuses();
    }
    this.tombstones.delete(`${kind}/${name}`);
  }

  private applyDelete(kind: Kind, obj: KubernetesObject): void {
    const name = obj.metadata?.name;
    if (!name) return;
    this.setSkipped(`${KINDS[kind].plural}/${name}`, undefined);
    const rv = rvOf(obj);
    const key = `${kind}/${name}`;
    const previous = this.tombstones.get(key) ?? 0;
    this.tombstones.delete(key);
    this.tombstones.set(key, Math.max(rv, previous));
    // only recent deletes can race with their own older watch events: keep the newest MAX_TOMBSTONES
    if (this.tombstones.size > MAX_TOMBSTONES) {
      const oldest = this.tombstones.keys().next().value;
      if (oldest !== undefined) this.tombstones.delete(oldest);
    }
    const entries =
      kind === 'Router' ? this.routers : kind === 'PeeringSession' ? this.sessions : this.policies;
    const current = entries.get(name);
    if (kind === 'PeeringSession' && (current?.rv ?? -1) <= rv) this.outboxHolders.removeSession(name);
    if (!current || current.rv > rv) return;
    entries.delete(name);
    if (kind === 'Router') this.index.removeRouter(name);
    else if (kind === 'PeeringSession') {
      this.metricsWrittenAt.delete((current.value as SessionResource).spec.uuid);
      this.index.removeSession(name);
    } else this.index.removePolicy(name);
  }

  private applyToken(secret: V1Secret): void {
    const router = secret.metadata?.labels?.['peerops.dev/agent-token'];
    const hash = tokenHashOf(secret);
    if (!router || !hash) return;
    const rv = rvOf(secret);
    if ((this.tokens.get(router)?.rv ?? -1) >= rv) return;
    this.tokens.set(router, { rv, value: hash });
    this.reapplyRouter(router);
  }

  private applyTokenDelete(secret: V1Secret): void {
    const router = secret.metadata?.labels?.['peerops.dev/agent-token'];
    if (router && (this.tokens.get(router)?.rv ?? -1) <= rvOf(secret)) {
      this.tokens.delete(router);
      this.reapplyRouter(router);
    }
  }

  /** The revocations Secret, written or watched: its list is the one in memory when it is the newest. */
  private applyRevocations(secret: V1Secret, deleted = false): void {
    if (secret.metadata?.name !== REVOCATIONS) return;
    const rv = rvOf(secret);
    if ((this.revocationsSecret?.rv ?? -1) > rv || (!deleted && this.revocationsSecret?.rv === rv)) return;
    this.revocationsSecret = deleted ? undefined : { rv, value: secret };
    const { list, skipped } = readRevocationList(deleted ? undefined : revocationsOf(secret));
    if (skipped > 0) this.log.warn({ secret: REVOCATIONS, skipped }, 'malformed token revocations left out');
    this.revocations.replace(list);
  }

  /** The router's spec again (its agent token changed), its status as it is. */
  private reapplyRouter(name: string): void {
    const resource = this.routers.get(name)?.value;
    if (resource) this.index.putRouter(name, this.routerSpecOf(resource));
  }

  /**
   * The spec readers see: the token hash lives in a Secret, not on the Router object, and is shown in the
   * spec as with git; a numeric dn42Region (Routers created before regions had names) reads as its name.
   */
  private routerSpecOf(resource: RouterResource): RouterSpec {
    const { agentTokenSha256: _stored, ...spec } = upgradeRouterSpec(resource.spec);
    const hash = this.tokens.get(resource.metadata.name)?.value;
    return hash === undefined ? spec : { ...spec, agentTokenSha256: hash };
  }

  private statusOf(resource: SessionResource): SessionStatusRecord {
    const status = resource.status as SessionStatusRecord | undefined;
    if (status?.code !== undefined) return status;
    // created, status subresource not written yet: the first status rides on an annotation
    const initial = resource.metadata.annotations?.[ANNOTATION_INITIAL_STATUS];
    return initial ? (JSON.parse(initial) as SessionStatusRecord) : this.appliedStatus(resource);
  }

  /**
   * A session applied without status (kubectl, Flux, Argo CD), since its creation. The first status
   * write (approval, agent report) stores it.
   */
  private appliedStatus(resource: SessionResource): SessionStatusRecord {
    const created = resource.metadata.creationTimestamp;
    return withSessionConditions(
      mergedSessionStatus(
        this.index.getPolicy('default')?.spec.mergeIsApproval ?? false,
        created ? new Date(created).toISOString() : undefined,
      ),
      undefined,
    );
  }

  /** The default policy changed: sessions applied without status take their first status from it. */
  private reapplyUnwrittenStatuses(): void {
    for (const { value } of this.sessions.values())
      if (value.status?.code === undefined && !value.metadata.annotations?.[ANNOTATION_INITIAL_STATUS])
        this.index.putSession(value.metadata.name, value.spec, this.appliedStatus(value));
  }

  /** The index's session `name`, after applyPut. */
  private sessionNamed(name: string): Session {
    const session = this.index.byName(name);
    if (!session) throw fault('session.deletedMeanwhile', { name });
    return session;
  }

  private routerNamed(name: string): Router {
    const router = this.index.getRouter(name);
    if (!router) throw routerNotFound(name);
    return router;
  }

  // ---------------------------------------------------------------- outbox

  /** Events of no session write (router.agent_offline) as a record; confirmed ones removed where held. */
  protected async persistOutbox(prepare: () => OutboxChange): Promise<void> {
    const change = prepare();
    if (change.add.length > 0) {
      try {
        this.applyRecord(await this.api.createOutboxRecord(change.add));
      } catch (err) {
        throw storeError(err, 'record notification events');
      }
    }
    await this.removeEvents(change.remove.map((e) => e.event.id));
    this.eventOutbox.apply(change);
  }

  private applyRecord(map: V1ConfigMap): void {
    const record = recordOf(map);
    if (record) this.outboxHolders.putRecord(record);
  }

  /**
   * Takes these events off every object holding them (confirmed, or dropped by the bound): a session's
   * annotation replaced at the resourceVersion read, a record replaced or deleted likewise. Resolves once
   * every removal is written.
   */
  private async removeEvents(ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    const { sessions, records } = this.outboxHolders.locate(new Set(ids));
    await mapLimit([...sessions], FLUSH_CONCURRENCY, ([name, held]) => this.removeSessionEvents(name, held));
    await mapLimit(records, FLUSH_CONCURRENCY, (record) =>
      this.removeRecordEvents(record.name, new Set(ids)),
    );
  }

  private async removeSessionEvents(name: string, ids: ReadonlySet<string>): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const current =
        attempt === 0
          ? this.sessions.get(name)?.value
          : await this.refresh<SessionResource>('PeeringSession', name);
      if (!current) return;
      const held = parseEntries(current.metadata.annotations?.[ANNOTATION_OUTBOX]);
      const kept = held.filter((e) => !ids.has(e.event.id));
      if (kept.length === held.length) return;
      try {
        const annotations = withOutbox(current.metadata.annotations, kept);
        this.applyPut(
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
          this.outboxHolders.removeRecord(name);
          return;
        }
        const kept = record.entries.filter((e) => !ids.has(e.event.id));
        if (kept.length === record.entries.length) return;
        if (kept.length > 0) this.applyRecord(await this.api.replaceOutboxRecord(map, kept));
        else {
          await this.api.deleteOutboxRecord(name, map.metadata?.resourceVersion);
          this.outboxHolders.removeRecord(name);
        }
        return;
      } catch (err) {
        if (isConflict(err) && attempt < MAX_ATTEMPTS) continue;
        throw storeError(err, `remove delivered events from record ${name}`);
      }
    }
  }

  /** The events a write's bound dropped from other objects than its own: removed there, best effort. */
  private dropElsewhere(change: OutboxChange): void {
    if (change.remove.length === 0) return;
    this.removeEvents(change.remove.map((e) => e.event.id)).catch((err: unknown) =>
      this.log.warn({ err }, 'outbox: events dropped by the bound not removed; delivered after all'),
    );
  }

  // ---------------------------------------------------------------- token revocations

  protected async persistRevocation(revocation: Revocation, actor: Actor): Promise<RevocationList> {
    const what =
      'asn' in revocation
        ? `revoke every token of AS${revocation.asn} issued until now`
        : `revoke token ${revocation.token}`;
    for (let attempt = 0; ; attempt++) {
      const current = attempt === 0 ? this.revocationsSecret?.value : await this.api.getRevocations();
      const list = this.prepareRevocation(revocation, readRevocationList(revocationsOf(current)).list);
      try {
        this.applyRevocations(
          await this.api.putRevocations(JSON.stringify(list), current, audit(actor, what)),
        );
        return list;
      } catch (err) {
        // another replica wrote first: its list, and this revocation on top
        if ((isConflict(err) || isAlreadyExists(err)) && attempt < MAX_ATTEMPTS) continue;
        throw storeError(err, 'store the token revocations');
      }
    }
  }

  // ---------------------------------------------------------------- router writes

  protected async persistNewRouter(name: string, spec: RouterSpec, actor: Actor): Promise<Router> {
    const value = this.prepareNewRouter(name, spec);
    await this.routerIds.reserve(name, value);
    const { agentTokenSha256: hash, ...stored } = value;
    let created: RouterResource;
    try {
      created = await this.api.create<RouterSpec, RouterStatus>('Router', {
        apiVersion: GROUP_VERSION,
        kind: 'Router',
        metadata: { name, annotations: audit(actor, `add router ${name}`) },
        spec: stored,
      });
    } catch (err) {
      // on AlreadyExists the entries are the existing router's (same name), so they stay
      if (isAlreadyExists(err)) throw routerExists(name);
      await this.routerIds.release(name, value).catch(() => undefined);
      throw storeError(err, `create router ${name}`);
    }
    this.applyPut('Router', created);
    if (hash !== undefined) {
      try {
        this.applyToken(await this.api.putTokenHash(name, hash));
      } catch (err) {
        // its agent could never authenticate, and the token was never shown: the add is taken back
        await this.api.delete('Router', name).catch(() => undefined);
        this.applyDelete('Router', created);
        await this.routerIds.release(name, value).catch(() => undefined);
        throw storeError(err, `store the agent token hash of router ${name}; the router was not added`);
      }
    }
    this.event(created, 'Created', actor, `add router ${name}`);
    return this.routerNamed(name);
  }

  protected async persistRouterUpdate(
    name: string,
    mutate: (spec: RouterSpec) => RouterSpec,
    actor: Actor,
    message: string,
  ): Promise<Router> {
    for (let attempt = 0; ; attempt++) {
      const current =
        attempt === 0 ? this.routers.get(name)?.value : await this.refresh<RouterResource>('Router', name);
      if (!current) throw routerNotFound(name);
      const {
        current: { spec: before },
        spec: value,
      } = this.prepareRouterUpdate(name, mutate);
      const newIdentity = value.nodeId !== before.nodeId || value.uuid !== before.uuid;
      if (newIdentity) await this.routerIds.reserve(name, value, before);
      const { agentTokenSha256: hash, ...stored } = value;
      try {
        const updated = await this.api.replace<RouterSpec, RouterStatus>('Router', {
          ...current,
          metadata: withAudit(current.metadata, actor, message),
          spec: stored,
        });
        this.applyPut('Router', updated);
        if (newIdentity) await this.routerIds.release(name, before).catch(() => undefined);
        if (hash !== undefined && hash !== before.agentTokenSha256)
          this.applyToken(await this.api.putTokenHash(name, hash));
        this.event(updated, 'Updated', actor, message);
        return this.routerNamed(name);
      } catch (err) {
        if (isConflict(err) && attempt < MAX_ATTEMPTS) continue;
        if (newIdentity) await this.routerIds.release(name, value).catch(() => undefined);
        if (isNotFound(err)) throw routerNotFound(name);
        throw storeError(err, `update router ${name}`);
      }
    }
  }

  protected async persistRouterRemoval(name: string, actor: Actor): Promise<void> {
    this.prepareRouterRemoval(name);
    const current = this.routers.get(name);
    if (!current) throw routerNotFound(name);
    try {
      await this.api.delete('Router', name);
      await this.api.deleteTokenHash(name);
    } catch (err) {
      if (!isNotFound(err)) throw storeError(err, `delete router ${name}`);
    }
    await this.routerIds
      .release(name, current.value.spec)
      .catch((err: unknown) => this.log.warn({ err, router: name }, 'router identity not released'));
    this.log.info({ router: name, actor: actor.name }, 'router deleted');
    this.event(current.value, 'Deleted', actor, `remove router ${name}`);
    this.tokens.delete(name);
    this.applyDelete('Router', current.value);
  }

  protected async persistTokenHash(router: string, sha256: string, actor: Actor): Promise<void> {
    this.prepareTokenHash(router, sha256);
    try {
      const secret = await this.api.putTokenHash(router, sha256);
      this.applyToken(secret);
    } catch (err) {
      throw storeError(err, `set the agent token of router ${router}`);
    }
    this.log.info({ router, actor: actor.name }, 'agent token set');
    const resource = this.routers.get(router)?.value;
    if (resource) this.event(resource, 'AgentTokenSet', actor, `set the agent token of router ${router}`);
  }

  // ---------------------------------------------------------------- session writes

  protected async persistNewSession(
    input: NewSession,
    status: SessionStatusRecord,
    actor: Actor,
    message: string,
  ): Promise<Session> {
    const name = `as${input.asn}-${input.router}`;
    for (let inFlight = this.creating.get(name); inFlight; inFlight = this.creating.get(name))
      await inFlight.catch(() => undefined);
    const created = this.createSessionNow(input, status, actor, message);
    this.creating.set(name, created);
    try {
      return await created;
    } finally {
      if (this.creating.get(name) === created) this.creating.delete(name);
    }
  }

  private async createSessionNow(
    input: NewSession,
    status: SessionStatusRecord,
    actor: Actor,
    message: string,
  ): Promise<Session> {
    // Every rule (the core's), checked and recorded before the first await (this replica's write queue):
    // of creates sent at once to this process only as many as the limits allow pass; a bad request claims
    // nothing. Other replicas' creates in flight are caught by recheckAdmission once stored
    // (docs/kubernetes.md).
    const prepared = this.prepareNewSession(input, status, [...this.creatingSpecs.values()]);
    const { name } = prepared;
    this.creatingSpecs.set(name, prepared);
    try {
      return await this.writeNewSession(prepared, actor, message);
    } finally {
      this.creatingSpecs.delete(name);
    }
  }

  /** Claims a port for the checked draft, then creates the object with its first status and events, one call. */
  private async writeNewSession(prepared: PreparedSession, actor: Actor, message: string): Promise<Session> {
    const { name, spec: draft, status: first } = prepared;
    const reserving = this.claims.reserving(draft.router);
    const { port, claimed } = await this.claims.claim(name, draft.router, (taken) =>
      this.allocatePort(prepared, taken),
    );
    try {
      const spec: SessionSpec = { ...draft, listenPort: port };
      let created: SessionResource;
      try {
        created = await this.api.create<SessionSpec, Partial<SessionStatusRecord>>('PeeringSession', {
          apiVersion: GROUP_VERSION,
          kind: 'PeeringSession',
          metadata: {
            name,
            labels: { [LABEL_ROUTER]: spec.router, [LABEL_ASN]: String(spec.asn) },
            annotations: withOutbox(audit(actor, message), prepared.outbox.add),
          },
          spec,
          status: atGeneration(first, 1),
        });
      } catch (err) {
        if (isAlreadyExists(err)) throw sessionExistsError(spec.asn, spec.router);
        if (claimed) await this.api.releaseClaim(spec.router, port, name).catch(() => undefined);
        throw storeError(err, `create session ${name}`);
      }
      this.applyPut('PeeringSession', created);
      await this.recheckAdmission(created);
      this.eventOutbox.apply(prepared.outbox);
      this.dropElsewhere(prepared.outbox);
      this.event(created, 'Created', actor, `${message} (status ${first.code} ${first.name})`);
      return this.sessionNamed(name);
    } finally {
      reserving.delete(port);
    }
  }

  /**
   * The count limits again, for a session just created, against what the API server holds now: replicas
   * do not see each other's creates in flight, so on a router with maxSessions or under a policy with
   * maxPendingPerAsn each could pass the check above at the same instant. The sessions of the router
   * (or ASN) are listed (a consistent read, by the labels every create sets; sessions without them, from
   * kubectl, are counted from the index) and the create is taken back if it went over. Of creates racing
   * on several replicas, the one that lists last sees every other one stored, so no more than the limit
   * are kept; a race may take back more than needed (each sees the other): refused, never over the
   * limit. For the moment between create and take-back, the extra session is visible (docs/kubernetes.md).
   */
  private async recheckAdmission(created: SessionResource): Promise<void> {
    const { spec } = created;
    const name = created.metadata.name;
    const capped = this.index.getRouter(spec.router)?.spec.maxSessions !== undefined;
    const pendingLimit = mergedPolicy(this.index, spec.router).maxPendingPerAsn !== undefined;
    if (!capped && !pendingLimit) return;
    const fresh = async (label: string, value: string, match: (s: SessionSpec) => boolean) => {
      const listed = await this.api.list<SessionSpec, Partial<SessionStatusRecord>>(
        'PeeringSession',
        `${label}=${value}`,
      );
      const out: AdmissionSession[] = [];
      for (const item of listed.items)
        if (item.metadata.name !== name && match(item.spec))
          out.push({ name: item.metadata.name, spec: item.spec, status: this.statusOf(item) });
      // unlabelled sessions (applied with kubectl) cannot be listed by label: the index has them
      for (const { value: indexed } of this.sessions.values())
        if (
          indexed.metadata.name !== name &&
          indexed.metadata.labels?.[label] !== value &&
          match(indexed.spec)
        )
          out.push({ name: indexed.metadata.name, spec: indexed.spec, status: this.statusOf(indexed) });
      return out;
    };
    let onRouter: AdmissionSession[] | undefined;
    let ofAsn: AdmissionSession[] | undefined;
    try {
      [onRouter, ofAsn] = await Promise.all([
        capped ? fresh(LABEL_ROUTER, spec.router, (s) => s.router === spec.router) : undefined,
        pendingLimit ? fresh(LABEL_ASN, String(spec.asn), (s) => s.asn === spec.asn) : undefined,
      ]);
    } catch (err) {
      await this.takeBack(created);
      throw storeError(err, `count the sessions beside ${name}`);
    }
    try {
      const view = this.admissionView(spec, [...this.creatingSpecs.values()], name);
      assertAdmission(
        {
          ...view,
          sessionsOn: (router) => onRouter ?? view.sessionsOn(router),
          sessionsOf: (asn) => ofAsn ?? view.sessionsOf(asn),
          // the addresses passed before the create; only the counts are asked again
          network: { routers: [], sessions: [] },
        },
        spec,
      );
    } catch (err) {
      this.log.info({ session: name, err }, 'create taken back: a limit was reached on another replica');
      await this.takeBack(created);
      throw err;
    }
  }

  /** Deletes a session this replica just created, and its port claim. */
  private async takeBack(created: SessionResource): Promise<void> {
    const name = created.metadata.name;
    try {
      await this.api.delete('PeeringSession', name);
    } catch (err) {
      if (!isNotFound(err)) throw storeError(err, `take back session ${name}`);
    }
    this.applyDelete('PeeringSession', created);
    await this.api
      .releaseClaim(created.spec.router, created.spec.listenPort, name)
      .catch((err: unknown) => this.log.warn({ err, session: name }, 'port claim not released'));
  }

  protected override sessionsInFlight(): readonly InFlightSession[] {
    return [...this.creatingSpecs.values()];
  }

  protected async persistSessionChange(
    uuid: string,
    mutate: (current: Session) => SessionChange,
    actor: Actor,
    message: string,
  ): Promise<Session | undefined> {
    const name = this.index.getSession(uuid)?.name;
    for (let attempt = 0; ; attempt++) {
      const current =
        name === undefined
          ? undefined
          : attempt === 0
            ? this.sessions.get(name)?.value
            : await this.refresh<SessionResource>('PeeringSession', name);
      if (!current || current.spec.uuid !== uuid) throw sessionNotFound(uuid);
      const change = this.prepareSessionChange(uuid, mutate);
      try {
        if (change.delete) {
          await this.deleteSession(current, change.outbox);
          await this.api
            .releaseClaim(current.spec.router, current.spec.listenPort, current.metadata.name)
            .catch((err: unknown) =>
              this.log.warn({ err, session: current.metadata.name }, 'port claim not released'),
            );
          this.event(current, 'Deleted', actor, message);
          return undefined;
        }
        const { spec, status, specChanged, statusChanged } = change;
        if (!specChanged && !statusChanged && change.outbox.add.length + change.outbox.remove.length === 0)
          return this.sessionNamed(current.metadata.name);
        const portMoves = specChanged && spec.listenPort !== current.spec.listenPort;
        if (portMoves)
          await this.claims.claimChanged(current.metadata.name, current.spec.router, spec.listenPort);
        // spec, status and their events in one call: no reader sees one without the others
        const removed = new Set(change.outbox.remove.map((e) => e.event.id));
        const held = parseEntries(current.metadata.annotations?.[ANNOTATION_OUTBOX]);
        const { entries, over } = nextEntries(held, change.outbox.add, removed);
        if (over > 0)
          this.log.warn(
            { session: current.metadata.name, dropped: over },
            'outbox: the session holds too many events; the oldest dropped',
          );
        const resource = await this.api.replace<SessionSpec, Partial<SessionStatusRecord>>('PeeringSession', {
          ...current,
          metadata: {
            ...current.metadata,
            annotations: withOutbox(withAudit(current.metadata, actor, message).annotations, entries),
          },
          spec,
          status: stampedStatus(current, spec, status),
        });
        this.applyPut('PeeringSession', resource);
        this.eventOutbox.apply(change.outbox);
        this.dropElsewhere(change.outbox);
        if (portMoves)
          await this.api
            .releaseClaim(spec.router, current.spec.listenPort, current.metadata.name)
            .catch(() => undefined);
        const what =
          statusChanged && status.code !== current.status?.code
            ? `${message} (status ${status.code} ${status.name})`
            : message;
        if (specChanged || statusChanged)
          this.event(resource, specChanged ? 'Updated' : 'StatusChanged', actor, what);
        return this.sessionNamed(current.metadata.name);
      } catch (err) {
        if (isConflict(err) && attempt < MAX_ATTEMPTS) continue;
        if (isNotFound(err)) throw sessionNotFound(uuid);
        throw storeError(err, `update session ${current.metadata.name}`);
      }
    }
  }

  /**
   * A delete: the session's waiting events and the deletion's go to a record first (the object takes its
   * annotation with it), then the object is deleted at the resourceVersion read. The record counts only
   * once the session is gone (outbox.ts); a refused delete's is removed here, and so are those of earlier
   * deletes of the session that can no longer succeed (sent at an older resourceVersion).
   */
  private async deleteSession(current: SessionResource, outbox: OutboxChange): Promise<void> {
    const name = current.metadata.name;
    const uid = current.metadata.uid ?? '';
    const resourceVersion = current.metadata.resourceVersion ?? '';
    const dropRecord = (record: string) =>
      this.api
        .deleteOutboxRecord(record)
        .then(() => this.outboxHolders.removeRecord(record))
        .catch((err: unknown) => this.log.warn({ err, record }, 'outbox: stale deletion record not removed'));
    for (const earlier of this.outboxHolders.recordsOf(uid))
      if ((earlier.session?.rv ?? 0) < rvOf(current)) await dropRecord(earlier.name);
    const removed = new Set(outbox.remove.map((e) => e.event.id));
    const held = parseEntries(current.metadata.annotations?.[ANNOTATION_OUTBOX]);
    const { entries } = nextEntries(held, outbox.add, removed);
    const record =
      entries.length > 0
        ? await this.api.createOutboxRecord(entries, { name, uid, resourceVersion })
        : undefined;
    if (record) this.applyRecord(record);
    try {
      await this.api.delete('PeeringSession', name, resourceVersion);
    } catch (err) {
      if (record?.metadata?.name) await dropRecord(record.metadata.name);
      throw err;
    }
    this.applyDelete('PeeringSession', current);
    this.eventOutbox.apply(outbox);
    this.dropElsewhere(outbox);
  }

  // ---------------------------------------------------------------- policy writes

  protected async persistPolicy(name: string, spec: PolicySpec, actor: Actor): Promise<Policy> {
    const value = this.preparePolicy(name, spec);
    for (let attempt = 0; ; attempt++) {
      const current =
        attempt === 0
          ? this.policies.get(name)?.value
          : await this.refresh<PolicyResource>('RoutingPolicy', name);
      try {
        const written = current
          ? await this.api.replace<PolicySpec, PolicyStatus>('RoutingPolicy', {
              ...current,
              metadata: withAudit(current.metadata, actor, `set policy ${name}`),
              spec: value,
            })
          : await this.api.create<PolicySpec, PolicyStatus>('RoutingPolicy', {
              apiVersion: GROUP_VERSION,
              kind: 'RoutingPolicy',
              metadata: { name, annotations: audit(actor, `set policy ${name}`) },
              spec: value,
            });
        this.applyPut('RoutingPolicy', written);
        await this.acceptPolicy(written);
        this.event(written, current ? 'Updated' : 'Created', actor, `set policy ${name}`);
        return this.index.getPolicy(name) ?? { name, spec: written.spec };
      } catch (err) {
        if ((isConflict(err) || isAlreadyExists(err) || isNotFound(err)) && attempt < MAX_ATTEMPTS) continue;
        throw storeError(err, `set policy ${name}`);
      }
    }
  }

  /**
   * A policy's status says the controller accepted its generation (Ready, docs/kubernetes.md). Best
   * effort: the policy is written either way, and a role without routingpolicies/status only loses this.
   */
  private async acceptPolicy(written: PolicyResource): Promise<void> {
    const status = atGeneration(
      { conditions: acceptedConditions(written.status?.conditions, isoNow()) },
      written.metadata.generation,
    );
    try {
      this.applyPut(
        'RoutingPolicy',
        await this.api.patchStatus<PolicySpec, PolicyStatus>('RoutingPolicy', written.metadata.name, status),
      );
    } catch (err) {
      this.log.warn({ err, policy: written.metadata.name }, 'policy status not written');
    }
  }

  protected async persistPolicyRemoval(name: string, actor: Actor): Promise<void> {
    this.preparePolicyRemoval(name);
    const current = this.policies.get(name)?.value;
    if (!current) throw policyNotFound(name);
    try {
      await this.api.delete('RoutingPolicy', name);
    } catch (err) {
      if (isNotFound(err)) throw policyNotFound(name);
      throw storeError(err, `delete policy ${name}`);
    }
    this.event(current, 'Deleted', actor, `remove policy ${name}`);
    this.applyDelete('RoutingPolicy', current);
  }

  // ---------------------------------------------------------------- observations

  /**
   * Merge the observations gathered since the last flush onto status: one patch per object, a few at a
   * time (one after the other, 10,000 sessions' metrics took 80 s). Router status every time; a session's
   * metrics once metricsWriteIntervalMs has passed since this replica last wrote them, or with
   * `allMetrics` (at shutdown). Every status patch is an etcd revision and a watch event to every
   * replica: 10,000 sessions reporting every minute would otherwise keep the API server busy with them.
   */
  flushObservations(options: { allMetrics?: boolean } = {}): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      const routers = this.index.unflushedRouters();
      const now = Date.now();
      const metrics = this.index
        .unflushedMetrics()
        .filter(
          ([uuid]) =>
            options.allMetrics || now - (this.metricsWrittenAt.get(uuid) ?? 0) >= this.metricsWriteIntervalMs,
        );
      await mapLimit(routers, FLUSH_CONCURRENCY, async ([router, status]) => {
        try {
          const generation = this.routers.get(router)?.value.metadata.generation;
          const updated = await this.api.patchStatus<RouterSpec, RouterStatus>(
            'Router',
            router,
            atGeneration(status, generation),
          );
          this.index.routerFlushed(router, status);
          this.applyPut('Router', updated);
        } catch (err) {
          if (!isNotFound(err))
            this.log.warn({ err, router }, 'router status not written; kept for the next flush');
        }
      });
      await mapLimit(metrics, FLUSH_CONCURRENCY, async ([uuid, value]) => {
        const name = this.index.getSession(uuid)?.name;
        if (name === undefined) return;
        const current = this.sessions.get(name)?.value;
        if (!current) return;
        try {
          // at the resourceVersion read, as every session write (stampedStatus): a conflict waits for the next flush
          const updated = await this.api.replace<SessionSpec, Partial<SessionStatusRecord>>(
            'PeeringSession',
            {
              ...current,
              status: stampedStatus(current, current.spec, { ...this.statusOf(current), metrics: value }),
            },
          );
          this.index.metricsFlushed(uuid, value);
          this.metricsWrittenAt.set(uuid, now);
          this.applyPut('PeeringSession', updated);
        } catch (err) {
          // a 409: another write of the session came first; its metrics go with the next flush
          if (!isNotFound(err) && !isConflict(err))
            this.log.warn({ err, session: name }, 'session metrics not written; kept for the next flush');
        }
      });
    });
    return this.flushing;
  }

  // ---------------------------------------------------------------- helpers

  /** Records who changed what as an Event on the object; best effort, never fails the write. */
  private event(object: Resource<unknown, unknown>, reason: string, actor: Actor, message: string): void {
    const written = this.api
      .recordEvent(object, reason, actor.name, message)
      .catch((err: unknown) =>
        this.log.debug({ err, object: object.metadata.name }, 'audit event not written'),
      )
      .finally(() => this.events.delete(written));
    this.events.add(written);
  }

  /** Reads one object from the API server (after a 409) and brings the index up to date with it. */
  private async refresh<T extends Resource<unknown, unknown>>(
    kind: Kind,
    name: string,
  ): Promise<T | undefined> {
    try {
      const fresh = await this.api.get(kind, name);
      if (fresh) this.applyPut(kind, fresh);
      return fresh as T | undefined;
    } catch (err) {
      throw storeError(err, `read ${kind} ${name}`);
    }
  }
}

/** Who made the last change and why, kept on the object (the API server's audit log has the full trail). */
function audit(actor: Actor, message: string): Record<string, string> {
  return { [ANNOTATION_ACTOR]: actor.name, [ANNOTATION_MESSAGE]: message.slice(0, 1024) };
}

function withAudit<M extends { annotations?: Record<string, string> }>(
  metadata: M,
  actor: Actor,
  message: string,
): M {
  return { ...metadata, annotations: { ...metadata.annotations, ...audit(actor, message) } };
}
