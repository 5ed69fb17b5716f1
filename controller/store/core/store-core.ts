/**
 * The store core both back ends extend (as headscale's state layer sits over its database): the index and
 * every read, the change feed, observations, and the preparation of every write with every rule
 * (common/rules). A back end only persists what the core prepared and puts what it reads from its
 * storage into the index; it defines no rule and no read of its own. Refusals are DomainErrors.
 */
import { randomUUID } from 'node:crypto';
import { isoNow } from '../../../common/clock.ts';
import { isTerminal } from '../../../common/status.ts';
import { reportingRouterConditions, withSessionConditions } from '../../../common/conditions.ts';
import type { DomainError } from '../../../common/errors.ts';
import { fault, fieldError } from '../../../common/messages.ts';
import { allocateListenPort, sessionName } from '../../../common/naming.ts';
import {
  assertAddressingChange,
  assertAdmission,
  assertNoRouterConflicts,
  assertRouterName,
  assertRouterUnused,
  checkedSessionSpec,
  mergedPolicy,
  sessionExistsError,
  type AdmissionSession,
  type AdmissionView,
} from '../../../common/rules/index.ts';
import {
  PolicySpec as PolicySpecSchema,
  RouterSpec as RouterSpecSchema,
  RouterStatus as RouterStatusSchema,
  SessionMetrics as SessionMetricsSchema,
  SessionSpec as SessionSpecSchema,
  SessionStatusSchema,
  type PolicySpec,
  type RouterSpec,
  type RouterStatus,
  type SessionMetrics,
  type SessionSpec,
  type SessionStatusRecord,
} from '../../../common/schema.ts';
import { checkOrThrow, validateOrThrow, type Checked } from '../../../common/validate.ts';
import type { HeartbeatBody } from '../../../common/agent-api.ts';
import {
  heartbeatStatus,
  type Actor,
  type NewSession,
  type Policy,
  type Router,
  type Session,
  type SessionChange,
  type Store,
  type StoreEvent,
} from '../store.ts';
import { storeLatency } from '../../metrics.ts';
import { StoreIndex } from './store-index.ts';
import { Revocations, withRevocation, type Revocation, type RevocationList } from './revocations.ts';
import type { Topic } from '../change-feed.ts';
import { changeEvents, type NotificationEvent } from './events.ts';
import { Outbox, type OutboxChange } from './outbox.ts';

/** A session create the core admitted: the back end stores `spec` (with a port it allocates) and `status`. */
export interface PreparedSession {
  name: string;
  /** Checked, with a placeholder listenPort until the back end allocates one (allocatePort). */
  spec: SessionSpec;
  status: SessionStatusRecord;
  router: RouterSpec;
  /** Its events (created, pending review), to persist with it. */
  outbox: OutboxChange;
}

/** A create a back end has let through and not yet put into the index (another replica cannot see it). */
export interface InFlightSession {
  name: string;
  spec: SessionSpec;
  status: SessionStatusRecord;
}

/**
 * A session update the core checked: delete it, or store `spec` and `status` (each changed or not); with
 * the events the change makes, to persist with it.
 */
export type PreparedChange =
  | { current: Session; delete: true; outbox: OutboxChange }
  | {
      current: Session;
      delete: false;
      outbox: OutboxChange;
      spec: SessionSpec;
      status: SessionStatusRecord;
      specChanged: boolean;
      statusChanged: boolean;
    };

// the catalogue's one wording of each (common/messages.ts), named for the store's call sites
export const routerNotFound = (name: string): DomainError => fault('router.notFound', { name });
export const sessionNotFound = (uuid: string): DomainError => fault('session.notFound', { uuid });
export const policyNotFound = (name: string): DomainError => fault('policy.notFound', { name });
export const routerExists = (name: string): DomainError => fault('router.exists', { name });

export abstract class StoreCore implements Store {
  abstract readonly backend: 'git' | 'kubernetes';
  protected readonly index = new StoreIndex();
  /** Revoked tokens, as the back end last stored or read them (revocations.ts). */
  protected readonly revocations = new Revocations();
  /** Notification events waiting for delivery, as the back end last stored or read them (outbox.ts). */
  protected readonly eventOutbox = new Outbox(this.index.feed);

  abstract start(): Promise<void>;
  abstract close(): Promise<void>;
  /**
   * The writes a back end persists, each called through the public write of the same job, which times
   * it (peerops_store_operation_duration_seconds): every back end's writes are measured alike.
   */
  protected abstract persistNewRouter(name: string, spec: RouterSpec, actor: Actor): Promise<Router>;
  protected abstract persistRouterUpdate(
    name: string,
    mutate: (spec: RouterSpec) => RouterSpec,
    actor: Actor,
    message: string,
  ): Promise<Router>;
  protected abstract persistRouterRemoval(name: string, actor: Actor): Promise<void>;
  protected abstract persistTokenHash(router: string, sha256: string, actor: Actor): Promise<void>;
  protected abstract persistNewSession(
    input: NewSession,
    status: SessionStatusRecord,
    actor: Actor,
    message: string,
  ): Promise<Session>;
  protected abstract persistSessionChange(
    uuid: string,
    mutate: (current: Session) => SessionChange,
    actor: Actor,
    message: string,
  ): Promise<Session | undefined>;
  protected abstract persistPolicy(name: string, spec: PolicySpec, actor: Actor): Promise<Policy>;
  protected abstract persistPolicyRemoval(name: string, actor: Actor): Promise<void>;
  protected abstract persistRevocation(revocation: Revocation, actor: Actor): Promise<RevocationList>;
  /**
   * Persist, in a write of its own, the outbox change `prepare` makes (appendEvents, confirmDelivered):
   * called inside the back end's write, so it is judged against the outbox as that write finds it.
   */
  protected abstract persistOutbox(prepare: () => OutboxChange): Promise<void>;

  // ---------------------------------------------------------------- writes (timed)

  createRouter(name: string, spec: RouterSpec, actor: Actor): Promise<Router> {
    return timed('createRouter', () => this.persistNewRouter(name, spec, actor));
  }

  updateRouter(
    name: string,
    mutate: (spec: RouterSpec) => RouterSpec,
    actor: Actor,
    message: string,
  ): Promise<Router> {
    return timed('updateRouter', () => this.persistRouterUpdate(name, mutate, actor, message));
  }

  deleteRouter(name: string, actor: Actor): Promise<void> {
    return timed('deleteRouter', async () => {
      // its REJECTED and PURGED records hold nothing on it and go with it (docs/api.md, Decisions)
      const sessions = this.index.listSessions({ router: name });
      if (sessions.every((s) => isTerminal(s.status.code)))
        for (const closed of sessions) await this.removeClosed(closed, actor, `router ${name} is removed`);
      return this.persistRouterRemoval(name, actor);
    });
  }

  /** Removes a REJECTED or PURGED record; SESSION_EXISTS if it became something else meanwhile. */
  private async removeClosed(closed: Session, actor: Actor, why: string): Promise<void> {
    await this.persistSessionChange(
      closed.spec.uuid,
      (s) => {
        if (!isTerminal(s.status.code)) throw sessionExistsError(s.spec.asn, s.spec.router);
        return { delete: true };
      },
      actor,
      `remove session ${closed.name} (${closed.status.name}): ${why}`,
    );
  }

  setAgentTokenHash(router: string, sha256: string, actor: Actor): Promise<void> {
    return timed('setAgentTokenHash', () => this.persistTokenHash(router, sha256, actor));
  }

  createSession(
    input: NewSession,
    status: SessionStatusRecord,
    actor: Actor,
    message: string,
  ): Promise<Session> {
    return timed('createSession', async () => {
      const closed = this.index.byName(sessionName(input.asn, input.router));
      // the create would pass its rules (checked again as it is written): only then does its REJECTED or
      // PURGED record of the same name go (docs/api.md, Decisions)
      if (closed && isTerminal(closed.status.code)) {
        this.prepareNewSession(input, status);
        await this.removeClosed(closed, actor, `AS${input.asn} asks again`);
      }
      return this.persistNewSession(input, status, actor, message);
    });
  }

  updateSession(
    uuid: string,
    mutate: (current: Session) => SessionChange,
    actor: Actor,
    message: string,
  ): Promise<Session | undefined> {
    return timed('updateSession', () => this.persistSessionChange(uuid, mutate, actor, message));
  }

  putPolicy(name: string, spec: PolicySpec, actor: Actor): Promise<Policy> {
    return timed('putPolicy', () => this.persistPolicy(name, spec, actor));
  }

  deletePolicy(name: string, actor: Actor): Promise<void> {
    return timed('deletePolicy', () => this.persistPolicyRemoval(name, actor));
  }

  revokeTokens(revocation: Revocation, actor: Actor): Promise<RevocationList> {
    return timed('revokeTokens', () => this.persistRevocation(revocation, actor));
  }

  appendEvents(events: readonly NotificationEvent[]): Promise<void> {
    return timed('appendEvents', () => this.persistOutbox(() => this.eventOutbox.prepare(events)));
  }

  confirmDelivered(ids: readonly string[]): Promise<void> {
    return timed('confirmDelivered', () => this.persistOutbox(() => this.eventOutbox.prepareRemoval(ids)));
  }

  // ---------------------------------------------------------------- reads

  listRouters(): Router[] {
    return this.index.listRouters();
  }

  getRouter(name: string): Router | undefined {
    return this.index.getRouter(name);
  }

  listSessions(filter?: { router?: string; asn?: number }): Session[] {
    return this.index.listSessions(filter);
  }

  getSession(uuid: string): Session | undefined {
    return this.index.getSession(uuid);
  }

  neighbours(spec: SessionSpec): Session[] {
    return this.index.neighbours(spec);
  }

  listPolicies(): Policy[] {
    return this.index.listPolicies();
  }

  getPolicy(name: string): Policy | undefined {
    return this.index.getPolicy(name);
  }

  getAgentTokenHash(router: string): string | undefined {
    return this.index.getRouter(router)?.spec.agentTokenSha256;
  }

  tokenRevoked(id: string, asn: number, issuedAt: number): boolean {
    return this.revocations.revoked(id, asn, issuedAt);
  }

  listRevocations(): RevocationList {
    return this.revocations.list();
  }

  outbox(): readonly NotificationEvent[] {
    return this.eventOutbox.list();
  }

  // ---------------------------------------------------------------- change feed

  revision(topic: Topic): number {
    return this.index.feed.revision(topic);
  }

  waitForChange(topic: Topic, since: number, timeoutMs: number, signal?: AbortSignal): Promise<number> {
    return this.index.feed.wait(topic, since, timeoutMs, signal);
  }

  onChange(listener: (event: StoreEvent) => void): () => void {
    return this.index.feed.subscribe(listener);
  }

  // ---------------------------------------------------------------- observations

  recordRouterStatus(router: string, patch: Partial<RouterStatus>): void {
    if (!this.index.getRouter(router)) return;
    // Every field is optional and the current status was checked when it was recorded: the patch alone
    // needs checking (a heartbeat would otherwise re-validate every mesh peer each time). Mesh peers
    // carry addresses to canonicalise, into a copy.
    this.index.observeRouter(
      router,
      patch.meshPeers === undefined
        ? checkOrThrow(RouterStatusSchema, patch, 'router status')
        : validateOrThrow<Partial<RouterStatus>>(RouterStatusSchema, patch, 'router status'),
    );
  }

  /**
   * A heartbeat also judges the router's Ready from the agent's conditions (BIRD down: not Ready); the
   * conditions are patched only when that changes something.
   */
  recordHeartbeat(router: string, heartbeat: Checked<HeartbeatBody>): boolean {
    const current = this.index.getRouter(router);
    if (!current) return false;
    // the agent's own conditions (ConfigApplied, BirdRunning) replace those of their type; Ready is the core's
    const patch = heartbeatStatus(heartbeat, current.status);
    const conditions = reportingRouterConditions(
      patch.conditions ?? current.status.conditions,
      patch.lastHeartbeat ?? isoNow(),
    );
    if (JSON.stringify(conditions) !== JSON.stringify(current.status.conditions))
      patch.conditions = conditions;
    else delete patch.conditions;
    return this.index.observeRouter(router, patch);
  }

  recordSessionMetrics(uuid: string, metrics: SessionMetrics): void {
    if (!this.index.getSession(uuid)) return;
    this.index.observeMetrics(
      uuid,
      validateOrThrow<SessionMetrics>(SessionMetricsSchema, metrics, 'session metrics'),
    );
  }

  // ---------------------------------------------------------------- write preparation (every rule)

  /** A new router: its name, its spec, and nothing another router has (uuid, nodeId, loopbacks). */
  protected prepareNewRouter(name: string, spec: RouterSpec): RouterSpec {
    assertRouterName(name);
    const value = validateOrThrow<RouterSpec>(RouterSpecSchema, spec, 'router spec');
    if (this.index.getRouter(name)) throw routerExists(name);
    assertNoRouterConflicts(name, value, this.index.routerValues());
    return value;
  }

  /** A router's next spec from `mutate`, checked as a new one would be. */
  protected prepareRouterUpdate(
    name: string,
    mutate: (spec: RouterSpec) => RouterSpec,
  ): { current: Router; spec: RouterSpec } {
    const current = this.index.getRouter(name);
    if (!current) throw routerNotFound(name);
    const spec = validateOrThrow<RouterSpec>(RouterSpecSchema, mutate(current.spec), 'router spec');
    assertNoRouterConflicts(name, spec, this.index.routerValues());
    return { current, spec };
  }

  /** The router to remove: it exists and no session uses it. */
  protected prepareRouterRemoval(name: string): Router {
    const current = this.index.getRouter(name);
    if (!current) throw routerNotFound(name);
    assertRouterUnused(name, this.index.listSessions({ router: name }));
    return current;
  }

  protected prepareTokenHash(router: string, sha256: string): Router {
    const current = this.index.getRouter(router);
    if (!current) throw routerNotFound(router);
    if (!/^[0-9a-f]{64}$/.test(sha256))
      throw fault('router.agentTokenHash', {}, [fieldError('/agentTokenSha256', 'field.hex64')]);
    return current;
  }

  /**
   * A new session: the spec checked (a placeholder listen port until allocatePort), its uuid and
   * createdAt, its first status checked, then every admission rule (common/rules, assertAdmission)
   * against the index and the creates the back end has in flight (`inFlight`), so creates sent at once
   * are each judged with the ones before them.
   */
  protected prepareNewSession(
    input: NewSession,
    status: SessionStatusRecord,
    inFlight: readonly InFlightSession[] = [],
  ): PreparedSession {
    const name = sessionName(input.asn, input.router);
    const spec = validateOrThrow<SessionSpec>(
      SessionSpecSchema,
      { ...input, uuid: randomUUID(), listenPort: 1, createdAt: new Date().toISOString() },
      'session',
    );
    const first = validateOrThrow<SessionStatusRecord>(SessionStatusSchema, status, 'session status');
    const router = assertAdmission(this.admissionView(spec, inFlight), spec);
    const session = { name, spec, status: withSessionConditions(first, undefined) };
    return { ...session, router, outbox: this.eventOutbox.prepare(changeEvents(undefined, session)) };
  }

  /** What assertAdmission reads: the index, and the creates in flight not in it yet. */
  protected admissionView(
    spec: Pick<SessionSpec, 'asn' | 'router' | 'ipv6' | 'ipv4' | 'publicKey'>,
    inFlight: readonly InFlightSession[] = [],
    self?: string,
  ): AdmissionView {
    const pending = inFlight.filter((s) => s.name !== self && !this.index.byName(s.name));
    const matching = function* (
      stored: Iterable<Session>,
      match: (s: AdmissionSession['spec']) => boolean,
    ): Iterable<AdmissionSession> {
      for (const s of stored) if (s.name !== self) yield s;
      for (const s of pending) if (match(s.spec)) yield s;
    };
    return {
      router: (r) => this.index.getRouter(r)?.spec,
      policyFor: (r) => mergedPolicy(this.index, r),
      sessionsOn: (r) => matching(this.index.sessionsMatching({ router: r }), (s) => s.router === r),
      sessionsOf: (asn) => matching(this.index.sessionsMatching({ asn }), (s) => s.asn === asn),
      network: {
        routers: this.index.routerValues(),
        sessions: [...this.index.neighbours(spec), ...pending],
      },
    };
  }

  /** A free listen port on the router for the ASN (docs/api.md, ports), besides `taken`; ROUTER_FULL if none. */
  protected allocatePort(session: PreparedSession, taken: Iterable<number> = []): number {
    const used = this.index.usedPorts(session.spec.router);
    for (const port of taken) used.add(port);
    const port = allocateListenPort(session.spec.asn, session.router, used);
    if (port === undefined)
      throw fault('session.noListenPort', { router: session.spec.router, asn: session.spec.asn });
    return port;
  }

  /** The creates a back end has let through and not yet indexed (none where writes are serialised). */
  protected sessionsInFlight(): readonly InFlightSession[] {
    return [];
  }

  /**
   * A session update: the session exists, mutate's change is checked (the spec's fields that never
   * change, a changed port free on the router, changed addresses or key by the address rules, the
   * status's schema).
   */
  protected prepareSessionChange(uuid: string, mutate: (current: Session) => SessionChange): PreparedChange {
    const current = this.index.getSession(uuid);
    if (!current) throw sessionNotFound(uuid);
    const change = mutate(current);
    if (change.delete)
      return { current, delete: true, outbox: this.eventOutbox.prepare(changeEvents(current, undefined)) };
    const spec = change.spec ? checkedSessionSpec(current, change.spec) : current.spec;
    if (spec.listenPort !== current.spec.listenPort) {
      const owner = this.index.portOwner(spec.router, spec.listenPort);
      if (owner && owner !== current.name) throw portTaken(spec.listenPort, owner);
    }
    const router = change.spec ? this.index.getRouter(spec.router) : undefined;
    if (router)
      assertAddressingChange(
        current.name,
        current.spec,
        spec,
        router.spec,
        mergedPolicy(this.index, spec.router),
        () => this.admissionView(spec, this.sessionsInFlight(), current.name).network,
      );
    const status = change.status
      ? withSessionConditions(
          validateOrThrow<SessionStatusRecord>(SessionStatusSchema, change.status, 'session status'),
          current.status.conditions,
        )
      : current.status;
    const after = { name: current.name, spec, status };
    return {
      current,
      delete: false,
      outbox: this.eventOutbox.prepare(changeEvents(current, after)),
      spec,
      status,
      specChanged: change.spec !== undefined,
      statusChanged: change.status !== undefined,
    };
  }

  /** The revocation list with `revocation` added to `current` (the stored one), expired entries dropped. */
  protected prepareRevocation(
    revocation: Revocation,
    current: RevocationList = this.revocations.list(),
  ): RevocationList {
    return withRevocation(current, revocation, Math.floor(Date.now() / 1000));
  }

  /** A policy's name (`default` or a router name) and spec. */
  protected preparePolicy(name: string, spec: PolicySpec): PolicySpec {
    if (name !== 'default') assertRouterName(name, 'policy name');
    return validateOrThrow<PolicySpec>(PolicySpecSchema, spec, 'policy spec');
  }

  protected preparePolicyRemoval(name: string): Policy {
    const current = this.index.getPolicy(name);
    if (!current) throw policyNotFound(name);
    return current;
  }
}

/** A write, its duration recorded by operation and outcome. */
async function timed<T>(operation: string, write: () => Promise<T>): Promise<T> {
  const end = storeLatency.startTimer({ operation });
  try {
    const result = await write();
    end({ outcome: 'ok' });
    return result;
  } catch (err) {
    end({ outcome: 'error' });
    throw err;
  }
}

/** CONFLICT: a listen port another session on the router holds. */
export function portTaken(port: number, owner: string): DomainError {
  return fault('session.portTaken', { port, owner }, [
    fieldError('/listenPort', 'field.portUsed', { owner }),
  ]);
}
