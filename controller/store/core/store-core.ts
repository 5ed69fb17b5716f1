/**
 * The store core, holding its back end (backend.ts) as headscale's state layer holds its database: the
 * index and every read, the change feed, observations, and every write judged with every rule
 * (common/rules) inside the back end's attempt, then persisted by it. A back end defines no rule and no
 * read of its own. Refusals are DomainErrors.
 *
 * Over 500 lines: every read, write and rule of the Store interface is here, so that each is defined
 * once and no back end can write around one; what stands alone (the index, claims, events, the outbox,
 * revocations) has a module of its own.
 */
import { randomUUID } from 'node:crypto';
import { isoNow } from '../../../common/clock.ts';
import { isTerminal } from '../../../common/status.ts';
import { reportingRouterConditionsChange, withSessionConditions } from '../../../common/conditions.ts';
import { fault, fieldError } from '../../../common/messages.ts';
import { allocateListenPort, sessionName } from '../../../common/naming.ts';
import {
  addressingChanged,
  assertAddressingChange,
  assertAdmission,
  assertNoRouterConflicts,
  assertRouterName,
  assertRouterUnused,
  checkedSessionSpec,
  mergedPolicy,
  sessionExistsError,
  type AdmissionFacts,
  type AdmissionSession,
  type NetworkView,
} from '../../../common/rules/index.ts';
import {
  type ForgeConflict,
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
  type SkippedManifest,
  type Store,
  type StoreEvent,
  type WriteState,
} from '../store.ts';
import { storeLatency } from '../../metrics.ts';
import { StoreIndex } from './store-index.ts';
import { Revocations, withRevocation, type Revocation, type RevocationList } from './revocations.ts';
import type { Topic } from '../change-feed.ts';
import { changeEvents, type NotificationEvent } from './events.ts';
import { Outbox } from './outbox.ts';
import { policyNotFound, portTaken, routerExists, routerNotFound, sessionNotFound } from './refusals.ts';
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
} from './backend.ts';

/** A create judged and not yet in the index (another replica cannot see it). */
interface InFlightSession {
  name: string;
  spec: SessionSpec;
  status: SessionStatusRecord;
}

const CONTROLLER: Actor = { name: 'controller', role: 'controller' };

/** Marks what a rule returns as judged: the one place a `Judged` value is made (backend.ts). */
const judged = <T>(value: T): Judged<T> => value as Judged<T>;

export class StoreCore<B extends StoreBackend = StoreBackend> implements Store {
  readonly backend: B['kind'];
  /** The back end this core persists through; its own extras (a git store's housekeeping) are there. */
  readonly storage: B;
  private readonly index = new StoreIndex();
  /** Revoked tokens, as the back end last stored or read them (revocations.ts). */
  private readonly revocations = new Revocations();
  /** Notification events waiting for delivery, as the back end last stored or read them (outbox.ts). */
  private readonly eventOutbox = new Outbox(this.index.feed);
  /** Session creates running, by name: a second create of a name waits for the first. */
  private readonly creating = new Map<string, Promise<unknown>>();
  /** The creates judged and not yet in the index: admission counts them (prepareNewSession). */
  private readonly inFlight = new Map<string, InFlightSession>();

  readonly writeState?: () => WriteState;
  readonly skippedManifests?: () => { manifests: SkippedManifest[]; since: string };
  readonly syncNow?: () => void;
  readonly forgeConflicts?: () => ForgeConflict[];
  readonly forgeConflictOf?: (uuid: string) => ForgeConflict | undefined;
  readonly clearForgeConflict?: (id: string, actor: Actor) => Promise<void>;

  /** `open` makes the back end over the state this core owns (createGitStore, createKubernetesStore). */
  constructor(open: (state: CoreState) => B) {
    this.storage = open({ index: this.index, revocations: this.revocations, outbox: this.eventOutbox });
    this.backend = this.storage.kind;
    const s = this.storage;
    // the Store's optional answers exist exactly when the back end has them (the API asks for them)
    if (s.writeState) this.writeState = s.writeState.bind(s);
    if (s.skippedManifests) this.skippedManifests = s.skippedManifests.bind(s);
    if (s.syncNow) this.syncNow = s.syncNow.bind(s);
    if (s.forgeConflicts) this.forgeConflicts = s.forgeConflicts.bind(s);
    if (s.forgeConflictOf) this.forgeConflictOf = s.forgeConflictOf.bind(s);
    if (s.clearForgeConflict) this.clearForgeConflict = s.clearForgeConflict.bind(s);
  }

  start(): Promise<void> {
    return this.storage.start();
  }

  close(): Promise<void> {
    return this.storage.close();
  }

  /** Persist the buffered observations now (the back end does so at its interval and on close). */
  flushObservations(): Promise<void> {
    return this.storage.flushObservations();
  }

  // ---------------------------------------------------------------- writes (judged, then persisted; timed)

  /**
   * A write in the back end's retry shape, each attempt judged then persisted (backend.ts), its duration
   * recorded (peerops_store_operation_duration_seconds): every back end's writes are measured alike.
   */
  private write<T>(operation: string, actor: Actor, attempt: Attempt<T>): Promise<T> {
    return timed(operation, () => this.storage.write(actor, attempt));
  }

  createRouter(name: string, spec: RouterSpec, actor: Actor): Promise<Router> {
    return this.write('createRouter', actor, () =>
      this.storage.persistNewRouter(this.prepareNewRouter(name, spec), actor),
    );
  }

  updateRouter(
    name: string,
    mutate: (spec: RouterSpec) => RouterSpec,
    actor: Actor,
    message: string,
  ): Promise<Router> {
    return this.write('updateRouter', actor, () =>
      this.storage.persistRouterUpdate(this.prepareRouterUpdate(name, mutate), actor, message),
    );
  }

  deleteRouter(name: string, actor: Actor): Promise<void> {
    return timed('deleteRouter', async () => {
      // its REJECTED and PURGED records hold nothing on it and go with it (docs/api.md, Decisions)
      const sessions = this.index.listSessions({ router: name });
      if (sessions.every((s) => isTerminal(s.status.code)))
        for (const closed of sessions) await this.removeClosed(closed, actor, `router ${name} is removed`);
      return this.storage.write(actor, () =>
        this.storage.persistRouterRemoval(this.prepareRouterRemoval(name), actor),
      );
    });
  }

  /** Removes a REJECTED or PURGED record; SESSION_EXISTS if it became something else meanwhile. */
  private async removeClosed(closed: Session, actor: Actor, why: string): Promise<void> {
    const message = `remove session ${closed.name} (${closed.status.name}): ${why}`;
    const remove = (s: Session): SessionChange => {
      if (!isTerminal(s.status.code)) throw sessionExistsError(s.spec.asn, s.spec.router);
      return { delete: true };
    };
    await this.storage.write(actor, () =>
      this.storage.persistSessionChange(this.prepareSessionChange(closed.spec.uuid, remove), actor, message),
    );
  }

  setAgentTokenHash(router: string, sha256: string, actor: Actor): Promise<void> {
    return this.write('setAgentTokenHash', actor, () =>
      this.storage.persistTokenHash(this.prepareTokenHash(router, sha256), actor),
    );
  }

  createSession(
    input: NewSession,
    status: SessionStatusRecord,
    actor: Actor,
    message: string,
  ): Promise<Session> {
    return timed('createSession', async () => {
      const name = sessionName(input.asn, input.router);
      const closed = this.index.byName(name);
      // the create would pass its rules (checked again as it is written): only then does its REJECTED or
      // PURGED record of the same name go (docs/api.md, Decisions)
      if (closed && isTerminal(closed.status.code)) {
        this.prepareNewSession(input, status);
        await this.removeClosed(closed, actor, `AS${input.asn} asks again`);
      }
      for (let running = this.creating.get(name); running; running = this.creating.get(name))
        await running.catch(() => undefined);
      const created = this.storage.write(actor, async () => {
        // judged and recorded before the attempt's first await: of creates sent at once, each is judged
        // with the ones before it still in flight (another replica's are the back end's to count again)
        const prepared = this.prepareNewSession(input, status, [...this.inFlight.values()]);
        this.inFlight.set(name, prepared);
        try {
          return await this.storage.persistNewSession(prepared, actor, message);
        } finally {
          this.inFlight.delete(name);
        }
      });
      this.creating.set(name, created);
      try {
        return await created;
      } finally {
        if (this.creating.get(name) === created) this.creating.delete(name);
      }
    });
  }

  updateSession(
    uuid: string,
    mutate: (current: Session) => SessionChange,
    actor: Actor,
    message: string,
  ): Promise<Session | undefined> {
    return this.write('updateSession', actor, () =>
      this.storage.persistSessionChange(this.prepareSessionChange(uuid, mutate), actor, message),
    );
  }

  putPolicy(name: string, spec: PolicySpec, actor: Actor): Promise<Policy> {
    return this.write('putPolicy', actor, () =>
      this.storage.persistPolicy(this.preparePolicy(name, spec), actor),
    );
  }

  deletePolicy(name: string, actor: Actor): Promise<void> {
    return this.write('deletePolicy', actor, () =>
      this.storage.persistPolicyRemoval(this.preparePolicyRemoval(name), actor),
    );
  }

  revokeTokens(revocation: Revocation, actor: Actor): Promise<RevocationList> {
    return this.write('revokeTokens', actor, () =>
      this.storage.persistRevocations(this.prepareRevocation(revocation), actor),
    );
  }

  appendEvents(events: readonly NotificationEvent[]): Promise<void> {
    return this.write('appendEvents', CONTROLLER, () =>
      this.storage.persistOutbox(judged(this.eventOutbox.prepare(events))),
    );
  }

  confirmDelivered(ids: readonly string[]): Promise<void> {
    return this.write('confirmDelivered', CONTROLLER, () =>
      this.storage.persistOutbox(judged(this.eventOutbox.prepareRemoval(ids))),
    );
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

  policyFor(router: string | undefined): PolicySpec {
    return mergedPolicy(this.index, router);
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
    const reported = patch.conditions ?? current.status.conditions;
    const conditions = reportingRouterConditionsChange(reported, patch.lastHeartbeat ?? isoNow()) ?? reported;
    // the same list (a settled router's heartbeat without conditions) needs no serialising to compare
    if (
      conditions !== current.status.conditions &&
      JSON.stringify(conditions) !== JSON.stringify(current.status.conditions)
    )
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
  private prepareNewRouter(name: string, spec: RouterSpec): Judged<NewRouter> {
    assertRouterName(name);
    const value = validateOrThrow<RouterSpec>(RouterSpecSchema, spec, 'router spec');
    if (this.index.getRouter(name)) throw routerExists(name);
    assertNoRouterConflicts(name, value, this.index.routerValues());
    return judged({ name, spec: value });
  }

  /** A router's next spec from `mutate`, checked as a new one would be. */
  private prepareRouterUpdate(name: string, mutate: (spec: RouterSpec) => RouterSpec): Judged<RouterUpdate> {
    const current = this.index.getRouter(name);
    if (!current) throw routerNotFound(name);
    const spec = validateOrThrow<RouterSpec>(RouterSpecSchema, mutate(current.spec), 'router spec');
    assertNoRouterConflicts(name, spec, this.index.routerValues());
    return judged({ current, spec });
  }

  /** The router to remove: it exists and no session uses it. */
  private prepareRouterRemoval(name: string): Judged<Router> {
    const current = this.index.getRouter(name);
    if (!current) throw routerNotFound(name);
    assertRouterUnused(name, this.index.listSessions({ router: name }));
    return judged(current);
  }

  /** The router exists and the hash is one; the rest of its spec was judged when it was stored. */
  private prepareTokenHash(router: string, sha256: string): Judged<TokenHash> {
    const current = this.index.getRouter(router);
    if (!current) throw routerNotFound(router);
    if (!/^[0-9a-f]{64}$/.test(sha256))
      throw fault('router.agentTokenHash', {}, [fieldError('/agentTokenSha256', 'field.hex64')]);
    return judged({ router: current, sha256, spec: { ...current.spec, agentTokenSha256: sha256 } });
  }

  /**
   * A new session: the spec checked (a placeholder listen port until allocatePort), its uuid and
   * createdAt, its first status checked, then every admission rule (common/rules, assertAdmission)
   * against the index and the creates in flight (`inFlight`), so creates sent at once are each judged
   * with the ones before them.
   */
  private prepareNewSession(
    input: NewSession,
    status: SessionStatusRecord,
    inFlight: readonly InFlightSession[] = [],
  ): Judged<PreparedSession> {
    const name = sessionName(input.asn, input.router);
    const spec = validateOrThrow<SessionSpec>(
      SessionSpecSchema,
      { ...input, uuid: randomUUID(), listenPort: 1, createdAt: new Date().toISOString() },
      'session',
    );
    const first = validateOrThrow<SessionStatusRecord>(SessionStatusSchema, status, 'session status');
    const pending = this.unindexed(inFlight);
    const router = assertAdmission(
      { ...this.admissionCounts(spec, pending), network: this.network(spec, pending) },
      spec,
    );
    const session = { name, spec, status: withSessionConditions(first, undefined) };
    return judged({
      ...session,
      router,
      outbox: this.eventOutbox.prepare(changeEvents(undefined, session)),
      allocatePort: (taken: Iterable<number> = []) =>
        this.allocatePort(spec, router, taken, input.listenPort),
      limits: {
        perRouter: router.maxSessions !== undefined,
        perAsn: mergedPolicy(this.index, spec.router).maxPendingPerAsn !== undefined,
      },
      readmit: (fresh: { onRouter?: AdmissionSession[]; ofAsn?: AdmissionSession[] }) => {
        const counts = this.admissionCounts(
          spec,
          this.unindexed([...this.inFlight.values()], name),
          name,
          fresh,
        );
        // the addresses passed before the create; only the counts are judged again
        assertAdmission({ ...counts, network: { routers: [], sessions: [] } }, spec);
      },
    });
  }

  /** The creates of `inFlight` the index does not hold yet, less `self`. */
  private unindexed(inFlight: readonly InFlightSession[], self?: string): InFlightSession[] {
    return inFlight.filter((s) => s.name !== self && !this.index.byName(s.name));
  }

  /**
   * What assertAdmission counts a create with, besides the addresses: its router and policy, the
   * sessions on the router and of the ASN from the index (less `self`, judged again) and `pending`, or
   * the lists `given` (the storage's own, fresh).
   */
  private admissionCounts(
    spec: Pick<SessionSpec, 'asn' | 'router'>,
    pending: readonly InFlightSession[],
    self?: string,
    given: { onRouter?: AdmissionSession[]; ofAsn?: AdmissionSession[] } = {},
  ): Omit<AdmissionFacts, 'network'> {
    const gather = (
      filter: { router: string } | { asn: number },
      match: (s: AdmissionSession['spec']) => boolean,
    ): AdmissionSession[] => {
      const found: AdmissionSession[] = [];
      for (const s of this.index.sessionsMatching(filter)) if (s.name !== self) found.push(s);
      for (const s of pending) if (match(s.spec)) found.push(s);
      return found;
    };
    return {
      router: this.index.getRouter(spec.router)?.spec,
      policy: mergedPolicy(this.index, spec.router),
      onRouter: given.onRouter ?? gather({ router: spec.router }, (s) => s.router === spec.router),
      ofAsn: given.ofAsn ?? gather({ asn: spec.asn }, (s) => s.asn === spec.asn),
    };
  }

  /**
   * What the address rules compare a session with: every router, the sessions it can clash with (the
   * index's claims: StoreIndex.neighbours) and the creates in flight.
   */
  private network(
    spec: Pick<SessionSpec, 'asn' | 'router' | 'ipv6' | 'ipv4' | 'publicKey'>,
    pending: readonly InFlightSession[],
  ): NetworkView {
    return {
      routers: this.index.routerValues(),
      sessions: [...this.index.neighbours(spec), ...pending],
    };
  }

  /**
   * A free listen port on the router for the ASN (docs/api.md, ports), besides `taken`; ROUTER_FULL if
   * none. A `wanted` port (an adopted session's) is that one when free, else CONFLICT naming its owner.
   */
  private allocatePort(
    spec: SessionSpec,
    router: RouterSpec,
    taken: Iterable<number>,
    wanted: number | undefined,
  ): number {
    const used = this.index.usedPorts(spec.router);
    for (const port of taken) used.add(port);
    if (wanted !== undefined) {
      if (!used.has(wanted)) return wanted;
      throw portTaken(wanted, this.index.portOwner(spec.router, wanted) ?? 'a session being created');
    }
    const port = allocateListenPort(spec.asn, router, used);
    if (port === undefined) throw fault('session.noListenPort', { router: spec.router, asn: spec.asn });
    return port;
  }

  /**
   * A session update: the session exists, mutate's change is checked (the spec's fields that never
   * change, a changed port free on the router, changed addresses or key by the address rules, the
   * status's schema).
   */
  private prepareSessionChange(
    uuid: string,
    mutate: (current: Session) => SessionChange,
  ): Judged<PreparedChange> {
    const current = this.index.getSession(uuid);
    if (!current) throw sessionNotFound(uuid);
    const change = mutate(current);
    if (change.delete)
      return judged({
        current,
        delete: true,
        outbox: this.eventOutbox.prepare(changeEvents(current, undefined)),
      });
    const spec = change.spec ? checkedSessionSpec(current, change.spec) : current.spec;
    if (spec.listenPort !== current.spec.listenPort) {
      const owner = this.index.portOwner(spec.router, spec.listenPort);
      if (owner && owner !== current.name) throw portTaken(spec.listenPort, owner);
    }
    const router = change.spec ? this.index.getRouter(spec.router) : undefined;
    if (router && addressingChanged(current.spec, spec)) {
      const pending = this.unindexed([...this.inFlight.values()], current.name);
      assertAddressingChange(
        current.name,
        current.spec,
        spec,
        router.spec,
        mergedPolicy(this.index, spec.router),
        this.network(spec, pending),
      );
    }
    const status = change.status
      ? withSessionConditions(
          validateOrThrow<SessionStatusRecord>(SessionStatusSchema, change.status, 'session status'),
          current.status.conditions,
        )
      : current.status;
    const after = { name: current.name, spec, status };
    return judged({
      current,
      delete: false,
      outbox: this.eventOutbox.prepare(changeEvents(current, after)),
      spec,
      status,
      specChanged: change.spec !== undefined,
      statusChanged: change.status !== undefined,
    });
  }

  /** The revocation list in force with `revocation` added, expired entries dropped. */
  private prepareRevocation(revocation: Revocation): Judged<RevocationsPut> {
    return judged({
      list: withRevocation(this.revocations.list(), revocation, Math.floor(Date.now() / 1000)),
      message:
        'asn' in revocation
          ? `revoke every token of AS${revocation.asn} issued until now`
          : `revoke token ${revocation.token}`,
    });
  }

  /** A policy's name (`default` or a router name) and spec. */
  private preparePolicy(name: string, spec: PolicySpec): Judged<PolicyPut> {
    if (name !== 'default') assertRouterName(name, 'policy name');
    return judged({ name, spec: validateOrThrow<PolicySpec>(PolicySpecSchema, spec, 'policy spec') });
  }

  private preparePolicyRemoval(name: string): Judged<Policy> {
    const current = this.index.getPolicy(name);
    if (!current) throw policyNotFound(name);
    return judged(current);
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
