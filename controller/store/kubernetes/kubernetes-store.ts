/**
 * The Kubernetes store's back end, held by the store core (../core/backend.ts): routers, sessions and
 * policies are peerops.dev/v1alpha1 custom resources in one namespace. Informers (list + watch) feed the
 * objects (objects.ts) into the core's index, which answers every read and judges every write with every
 * rule; writes go to the API server with the resourceVersion read, and a 409 re-reads the object and runs
 * the write's attempt again, rules first (write). Several controller replicas may write at once:
 * - one session per (ASN, router): the object name is `as<asn>-<router>`, so AlreadyExists is SESSION_EXISTS;
 * - one session per listen port and router: a port is claimed with a ConfigMap named
 *   `peerops-port-<router>-<port>` before the session is created. Creating a named object is atomic in the API
 *   server, so two replicas can never both claim a port; the claim names its session, so a claim left by a
 *   crash between claim and create is recognised (no such session after a grace period) and taken over with
 *   a resourceVersion-checked replace. A single per-router allocation object would serialise every create
 *   on one router through 409 retries; per-port claims only collide when two creates want the same port
 *   (port-claims.ts);
 * - one router per nodeId and per uuid: reserved in one ConfigMap before the Router is written (router-ids.ts).
 * - the admission limits of a create (maxSessions, maxPendingPerAsn): judged by the core against the index
 *   and this replica's creates in flight, then counted again from the API server once created, and the
 *   create taken back if another replica's pushed it over (session-writes.ts, docs/kubernetes.md).
 * A session's spec, status and waiting events are one object written in one call (no status subresource:
 * docs/kubernetes.md, "One write per change"); a deletion's events are a record of their own (outbox.ts).
 * Routers' and policies' status goes through the status subresource; heartbeats and metrics are kept in
 * memory and merged onto status in batches (observation-flush.ts). Agent token hashes live in Secrets, and
 * so do the revoked user and admin tokens (one Secret, replaced at the resourceVersion read, watched by
 * every replica).
 */
import {
  type Informer,
  type KubeConfig,
  type KubernetesObject,
  type V1ConfigMap,
  type V1Secret,
} from '@kubernetes/client-node';
import pino from 'pino';
import { fault } from '../../../common/messages.ts';
import type { Kind, RouterSpec, RouterStatus } from '../../../common/schema.ts';
import type {
  Attempt,
  CoreState,
  Judged,
  NewRouter,
  PolicyPut,
  PreparedChange,
  PreparedSession,
  RevocationsPut,
  RouterUpdate,
  StoreBackend,
  TokenHash,
} from '../core/backend.ts';
import type { OutboxChange } from '../core/outbox.ts';
import type { RevocationList } from '../core/revocations.ts';
import type { StoreIndex } from '../core/store-index.ts';
import type { Actor, Policy, Router, Session, SkippedManifest } from '../store.ts';
import { KubeApi, LABEL_REVOCATIONS, LABEL_TOKEN, httpCode, storeError } from './api.ts';
import { AuditEvents } from './audit.ts';
import { makePagedInformer, startInformer } from './informers.ts';
import { KubeObjects, StaleObject, rvOf } from './objects.ts';
import { ObservationFlush } from './observation-flush.ts';
import { LABEL_OUTBOX } from './outbox.ts';
import { MAX_ATTEMPTS, OutboxWrites } from './outbox-writes.ts';
import { PortClaims } from './port-claims.ts';
import { ResourceWrites } from './resource-writes.ts';
import { RouterIds } from './router-ids.ts';
import { SessionWrites } from './session-writes.ts';

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

export class KubernetesBackend implements StoreBackend {
  readonly kind = 'kubernetes' as const;

  private readonly api: KubeApi;
  private readonly kubeConfig: KubeConfig;
  private readonly log: pino.Logger;
  private readonly index: StoreIndex;
  private readonly flushIntervalMs: number;
  private readonly routerIds: RouterIds;
  private readonly objects: KubeObjects;
  private readonly events: AuditEvents;
  private readonly outbox: OutboxWrites;
  private readonly sessionWrites: SessionWrites;
  private readonly resourceWrites: ResourceWrites;
  private readonly observations: ObservationFlush;

  private informers: Informer<KubernetesObject>[] = [];
  private flushTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(options: KubernetesStoreOptions, state: CoreState) {
    this.kubeConfig = options.kubeConfig;
    this.api = new KubeApi(options.kubeConfig, options.namespace);
    this.log = (options.logger ?? pino({ level: 'silent' })).child({ store: 'kubernetes' });
    this.index = state.index;
    this.flushIntervalMs = options.flushIntervalMs ?? 2000;
    const staleClaimMs = (options.staleClaimSeconds ?? 60) * 1000;
    const { api, log } = this;
    const objects = (this.objects = new KubeObjects(api, state, log));
    const claims = new PortClaims(api, staleClaimMs, log, (name) => objects.session(name)?.spec);
    this.routerIds = new RouterIds(
      api,
      staleClaimMs,
      async (router) => (await api.get<RouterSpec, RouterStatus>('Router', router))?.spec,
      log,
    );
    this.events = new AuditEvents(api, log);
    this.outbox = new OutboxWrites(api, objects, state.outbox, log);
    this.sessionWrites = new SessionWrites({
      api,
      objects,
      claims,
      outbox: this.outbox,
      eventOutbox: state.outbox,
      events: this.events,
      log,
    });
    this.resourceWrites = new ResourceWrites({
      api,
      objects,
      routerIds: this.routerIds,
      events: this.events,
      log,
    });
    this.observations = new ObservationFlush({
      api,
      objects,
      index: state.index,
      log,
      metricsWriteIntervalMs: options.metricsWriteIntervalMs ?? 300_000,
    });
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
          (obj) => this.objects.applyPut(kind, obj),
          (obj) => this.objects.applyDelete(kind, obj),
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
        (s) => this.objects.applyToken(s),
        (s) => this.objects.applyTokenDelete(s),
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
        (s) => this.objects.applyRevocations(s),
        (s) => this.objects.applyRevocations(s, true),
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
        (m) => this.objects.applyRecord(m),
        (m) => this.objects.outboxHolders.removeRecord(m.metadata?.name ?? '', rvOf(m)),
      );
      await startInformer(records);
      this.informers.push(records);
    } catch (err) {
      await this.stopInformers();
      throw storeError(err, `cannot list peerops resources in namespace ${this.api.namespace}`);
    }
    // Routers written before the identity map existed get their entries (idempotent on every start).
    await this.routerIds
      .backfill(this.index.listRouters())
      .catch((err: unknown) =>
        this.log.warn({ err }, 'router identities not recorded; nodeId uniqueness rests on this replica'),
      );
    this.flushTimer = setInterval(() => void this.flushObservations(), this.flushIntervalMs);
    this.flushTimer.unref();
    this.log.info(
      {
        namespace: this.api.namespace,
        ...this.objects.counts(),
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
    await this.events.settled();
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

  // ---------------------------------------------------------------- writes

  /**
   * A write's attempt, again after a 409 (StaleObject) once the object is read again: the core's rules
   * then judge it against what the API server holds now (backend.ts).
   */
  async write<T>(_actor: Actor, attempt: Attempt<T>): Promise<T> {
    for (let retry = 0; ; retry++) {
      try {
        return await attempt();
      } catch (err) {
        if (!(err instanceof StaleObject)) throw err;
        if (retry >= MAX_ATTEMPTS) {
          await err.release?.();
          throw err.exhausted;
        }
        await this.objects.reread(err.target);
      }
    }
  }

  persistNewRouter(router: Judged<NewRouter>, actor: Actor): Promise<Router> {
    return this.resourceWrites.newRouter(router, actor);
  }

  persistRouterUpdate(update: Judged<RouterUpdate>, actor: Actor, message: string): Promise<Router> {
    return this.resourceWrites.routerUpdate(update, actor, message);
  }

  persistRouterRemoval(router: Judged<Router>, actor: Actor): Promise<void> {
    return this.resourceWrites.routerRemoval(router, actor);
  }

  persistTokenHash(token: Judged<TokenHash>, actor: Actor): Promise<void> {
    return this.resourceWrites.tokenHash(token, actor);
  }

  persistNewSession(session: Judged<PreparedSession>, actor: Actor, message: string): Promise<Session> {
    return this.sessionWrites.create(session, actor, message);
  }

  persistSessionChange(
    change: Judged<PreparedChange>,
    actor: Actor,
    message: string,
  ): Promise<Session | undefined> {
    return this.sessionWrites.change(change, actor, message);
  }

  persistPolicy(policy: Judged<PolicyPut>, actor: Actor): Promise<Policy> {
    return this.resourceWrites.policy(policy, actor);
  }

  persistPolicyRemoval(policy: Judged<Policy>, actor: Actor): Promise<void> {
    return this.resourceWrites.policyRemoval(policy, actor);
  }

  persistRevocations(revocations: Judged<RevocationsPut>, actor: Actor): Promise<RevocationList> {
    return this.resourceWrites.revocations(revocations, actor);
  }

  persistOutbox(change: Judged<OutboxChange>): Promise<void> {
    return this.outbox.persist(change);
  }

  // ---------------------------------------------------------------- observations and skipped objects

  /** Observations onto status now (observation-flush.ts); `allMetrics` at shutdown. */
  flushObservations(options: { allMetrics?: boolean } = {}): Promise<void> {
    return this.observations.flush(options);
  }

  skippedManifests(): { manifests: SkippedManifest[]; since: string } {
    return this.objects.skippedManifests();
  }
}
