/**
 * The Kubernetes store's objects as the API server last gave them (watch events and each write's answer),
 * with their resourceVersions, for writes and for ordering watch events; each put into the core's state
 * (index, revocations, the outbox's holders) once it passes the schema the API checks writes with
 * (docs/store.md, "What the store refuses"). After a 409 a write re-reads its object here (reread).
 */
import type { KubernetesObject, V1ConfigMap, V1Secret } from '@kubernetes/client-node';
import type pino from 'pino';
import { withSessionConditions } from '../../../common/conditions.ts';
import { DomainError } from '../../../common/errors.ts';
import { fault, fieldAtFault, fieldError } from '../../../common/messages.ts';
import { mergedSessionStatus, sessionIpv6Errors } from '../../../common/rules/index.ts';
import {
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
import { checkOrThrow, withoutDefaults } from '../../../common/validate.ts';
import type { CoreState } from '../core/backend.ts';
import { readRevocationList, type Revocations } from '../core/revocations.ts';
import { SkipReport } from '../core/skipped.ts';
import type { StoreIndex } from '../core/store-index.ts';
import { routerNotFound } from '../core/refusals.ts';
import type { Policy, Router, Session, SkippedManifest } from '../store.ts';
import {
  ANNOTATION_INITIAL_STATUS,
  REVOCATIONS,
  revocationsOf,
  storeError,
  tokenHashOf,
  type KubeApi,
  type Resource,
} from './api.ts';
import { ANNOTATION_OUTBOX, OutboxHolders, parseEntries, recordOf } from './outbox.ts';

export type RouterResource = Resource<RouterSpec, RouterStatus>;
export type SessionResource = Resource<SessionSpec, Partial<SessionStatusRecord>>;
export type PolicyResource = Resource<PolicySpec, PolicyStatus>;

const MAX_TOMBSTONES = 10_000;

export const rvOf = (obj: KubernetesObject | undefined): number =>
  Number(obj?.metadata?.resourceVersion ?? 0);

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
 * A write refused at the resourceVersion it read (409, or the object appeared or went meanwhile): the
 * write re-reads `target` (KubeObjects.reread) and runs its attempt again, rules first (backend.ts);
 * after the last attempt it fails with `exhausted`, once `release` gave back what the attempt held.
 */
export class StaleObject extends Error {
  readonly target: { kind: Kind; name: string } | 'revocations';
  readonly exhausted: Error;
  readonly release: (() => Promise<unknown>) | undefined;

  constructor(
    target: { kind: Kind; name: string } | 'revocations',
    exhausted: Error,
    release?: () => Promise<unknown>,
  ) {
    super(exhausted.message);
    this.target = target;
    this.exhausted = exhausted;
    this.release = release;
  }
}

export class KubeObjects {
  private readonly api: KubeApi;
  private readonly index: StoreIndex;
  private readonly revocations: Revocations;
  private readonly log: pino.Logger;
  private readonly routers = new Map<string, Entry<RouterResource>>();
  private readonly sessions = new Map<string, Entry<SessionResource>>();
  private readonly policies = new Map<string, Entry<PolicyResource>>();
  private readonly tokens = new Map<string, Entry<string>>();
  /** Deleted objects (`Kind/name`) with the last resourceVersion seen: older watch events cannot revive them. */
  private readonly tombstones = new Map<string, number>();
  /** Objects the index does not hold as the API server has them, by `<plural>/<name>` (applyPut). */
  private readonly skipped = new Map<string, SkippedManifest>();
  private readonly skipReport = new SkipReport();
  /** The revocations Secret the revocations in memory were read from. */
  private revocationsSecret: Entry<V1Secret> | undefined;
  /** When this replica last wrote each session's metrics (epoch ms, by uuid). */
  readonly metricsWrittenAt = new Map<string, number>();
  /** Which objects hold the outbox's events (outbox.ts); it keeps the core's outbox in step. */
  readonly outboxHolders: OutboxHolders;

  constructor(api: KubeApi, state: CoreState, log: pino.Logger) {
    this.api = api;
    this.index = state.index;
    this.revocations = state.revocations;
    this.outboxHolders = new OutboxHolders(state.outbox);
    this.log = log;
  }

  router(name: string): RouterResource | undefined {
    return this.routers.get(name)?.value;
  }

  session(name: string): SessionResource | undefined {
    return this.sessions.get(name)?.value;
  }

  policy(name: string): PolicyResource | undefined {
    return this.policies.get(name)?.value;
  }

  sessionResources(): IterableIterator<Entry<SessionResource>> {
    return this.sessions.values();
  }

  /** The revocations Secret as last read; undefined when there is none. */
  revocationsObject(): V1Secret | undefined {
    return this.revocationsSecret?.value;
  }

  counts(): { routers: number; sessions: number } {
    return { routers: this.routers.size, sessions: this.sessions.size };
  }

  /**
   * An object from the API server into the index, once its spec passes the schema the API checks writes
   * with (docs/store.md, "What the store refuses"): an object written while the admission webhook was off
   * or failing open may hold what the CRD's schema cannot say (a WireGuard key, a link-local address). One
   * that fails, or that the index cannot take (a damaged annotation), is skipped with its reason and the
   * previous version stays, as the git store skips a file: it never stops the controller.
   */
  applyPut(kind: Kind, obj: KubernetesObject): void {
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
      if (kind === 'PeeringSession') {
        const missing = sessionIpv6Errors(spec as SessionSpec);
        if (missing.length > 0) throw fault('request.fieldRefused', fieldAtFault(missing), missing);
      }
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

  private entriesOf(kind: Kind): Map<string, Entry<Resource<unknown, unknown>>> {
    return kind === 'Router' ? this.routers : kind === 'PeeringSession' ? this.sessions : this.policies;
  }

  /** Whether the index holds this object at `rv` or newer, or it was deleted at `rv` or later. */
  private isStale(kind: Kind, name: string, rv: number): boolean {
    if ((this.tombstones.get(`${kind}/${name}`) ?? -1) >= rv) return true;
    return (this.entriesOf(kind).get(name)?.rv ?? -1) >= rv;
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

  applyDelete(kind: Kind, obj: KubernetesObject): void {
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
    const entries = this.entriesOf(kind);
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

  applyToken(secret: V1Secret): void {
    const router = secret.metadata?.labels?.['peerops.dev/agent-token'];
    const hash = tokenHashOf(secret);
    if (!router || !hash) return;
    const rv = rvOf(secret);
    if ((this.tokens.get(router)?.rv ?? -1) >= rv) return;
    this.tokens.set(router, { rv, value: hash });
    this.reapplyRouter(router);
  }

  applyTokenDelete(secret: V1Secret): void {
    const router = secret.metadata?.labels?.['peerops.dev/agent-token'];
    if (router && (this.tokens.get(router)?.rv ?? -1) <= rvOf(secret)) {
      this.tokens.delete(router);
      this.reapplyRouter(router);
    }
  }

  /** A router this replica deleted: its token Secret is gone with it. */
  forgetToken(router: string): void {
    this.tokens.delete(router);
  }

  /** The revocations Secret, written or watched: its list is the one in memory when it is the newest. */
  applyRevocations(secret: V1Secret, deleted = false): void {
    if (secret.metadata?.name !== REVOCATIONS) return;
    const rv = rvOf(secret);
    if ((this.revocationsSecret?.rv ?? -1) > rv || (!deleted && this.revocationsSecret?.rv === rv)) return;
    this.revocationsSecret = deleted ? undefined : { rv, value: secret };
    const { list, skipped } = readRevocationList(deleted ? undefined : revocationsOf(secret));
    if (skipped > 0) this.log.warn({ secret: REVOCATIONS, skipped }, 'malformed token revocations left out');
    this.revocations.replace(list);
  }

  applyRecord(map: V1ConfigMap): void {
    const record = recordOf(map);
    if (record) this.outboxHolders.putRecord(record);
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

  statusOf(resource: SessionResource): SessionStatusRecord {
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
        resource.spec.adopted !== undefined,
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
  sessionNamed(name: string): Session {
    const session = this.index.byName(name);
    if (!session) throw fault('session.deletedMeanwhile', { name });
    return session;
  }

  policyNamed(name: string): Policy | undefined {
    return this.index.getPolicy(name);
  }

  routerNamed(name: string): Router {
    const router = this.index.getRouter(name);
    if (!router) throw routerNotFound(name);
    return router;
  }

  /**
   * What a write refused at a stale resourceVersion read reads again (StaleObject): the object, put into
   * the index (gone: taken out of it), or the revocations Secret.
   */
  async reread(target: StaleObject['target']): Promise<void> {
    if (target === 'revocations') {
      const fresh = await this.api.getRevocations();
      if (fresh) this.applyRevocations(fresh);
      else if (this.revocationsSecret) this.applyRevocations(this.revocationsSecret.value, true);
      return;
    }
    await this.refresh(target.kind, target.name);
  }

  /** Reads one object from the API server and brings the index up to date with it. */
  async refresh<T extends Resource<unknown, unknown>>(kind: Kind, name: string): Promise<T | undefined> {
    let fresh: Resource<unknown, unknown> | undefined;
    try {
      fresh = await this.api.get(kind, name);
    } catch (err) {
      throw storeError(err, `read ${kind} ${name}`);
    }
    if (fresh) this.applyPut(kind, fresh);
    else {
      const gone = this.entriesOf(kind).get(name)?.value;
      if (gone) this.applyDelete(kind, gone);
    }
    return fresh as T | undefined;
  }
}
