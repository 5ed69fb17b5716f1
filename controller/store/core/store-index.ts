/**
 * The in-memory index both back ends share: routers, policies and sessions as readers see them, with the
 * lookups the reads and the rules need (a router's ports and sessions, an ASN's sessions, the sessions
 * holding a peer address or key), and the change feed every put and remove publishes to. A back end puts
 * what it read from its storage here; it keeps only what it needs to write back (blob ids, resource
 * versions).
 *
 * Observations (heartbeats, metrics) are recorded here too, visible at once: the index remembers which
 * are not yet persisted (`unflushed…`), the back end writes them in batches and says which it wrote,
 * and a status read back from storage meanwhile does not hide a newer observation. Of two observations
 * of one thing the newer stays, whichever arrives last (observation-order.ts): one not yet persisted
 * that storage holds a newer one of (another replica's) is dropped, not written.
 */
import { isDeepStrictEqual } from 'node:util';
import type {
  RouterSpec,
  RouterStatus,
  SessionMetrics,
  SessionSpec,
  SessionStatusRecord,
} from '../../../common/schema.ts';
import { isTerminal } from '../../../common/status.ts';
import { withApproved } from '../../../common/approved-spec.ts';
import { ChangeFeed, topics, type Topic } from '../change-feed.ts';
import { SessionClaims, type ClaimSpec } from './claims.ts';
import { MultiMap } from './multimap.ts';
import { metricsBefore, routerObservationsNotBefore } from './observation-order.ts';
import type { Policy, Router, Session } from '../store.ts';

/**
 * Freezes a record and everything in it. Walks keys in place rather than through `Object.values`: a
 * start freezes every session, and an array per object was a third of the freezing's time.
 */
function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    const record = value as Record<string, unknown>;
    for (const key in record) {
      const v = record[key];
      if (typeof v === 'object' && v !== null) deepFreeze(v);
    }
  }
  return value;
}

function byName(a: { name: string }, b: { name: string }): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

/** A router's Ready condition as status and reason, to see it change. */
const readyOf = (status: RouterStatus): string => {
  const ready = status.conditions?.find((c) => c.type === 'Ready');
  return `${ready?.status}/${ready?.reason}`;
};

export class StoreIndex {
  readonly feed = new ChangeFeed();
  private readonly routers = new Map<string, Router>();
  private readonly policies = new Map<string, Policy>();
  private readonly sessions = new Map<string, Session>();
  private readonly uuidByName = new Map<string, string>();
  /** Per router: listen port → session name. */
  private readonly ports = new Map<string, Map<number, string>>();
  private readonly byAsn = new MultiMap<number, string>();
  private readonly claims = new SessionClaims();
  /** Router statuses as storage holds them, also for a router storage has not given yet. */
  private readonly storedStatus = new Map<string, RouterStatus>();
  /** Router status patches recorded and not yet persisted, merged over what storage says. */
  private readonly routerPatches = new Map<string, Partial<RouterStatus>>();
  /** Session metrics recorded and not yet persisted, by uuid. */
  private readonly metrics = new Map<string, SessionMetrics>();
  /** Called when a router's mesh key changes (the git store commits mesh keys, not every heartbeat). */
  onMeshKeyChange: ((router: string) => void) | undefined;

  // ---------------------------------------------------------------- reads

  listRouters(): Router[] {
    return [...this.routers.values()].sort(byName);
  }

  getRouter(name: string): Router | undefined {
    return this.routers.get(name);
  }

  routerCount(): number {
    return this.routers.size;
  }

  routerValues(): Iterable<Router> {
    return this.routers.values();
  }

  listPolicies(): Policy[] {
    return [...this.policies.values()].sort(byName);
  }

  getPolicy(name: string): Policy | undefined {
    return this.policies.get(name);
  }

  listSessions(filter?: { router?: string; asn?: number }): Session[] {
    const out: Session[] = [];
    for (const s of this.sessionsMatching(filter)) out.push(s);
    return out.sort(byName);
  }

  /** The sessions of a router and/or ASN from the narrowest index, unsorted. */
  *sessionsMatching(filter?: { router?: string; asn?: number }): Iterable<Session> {
    const { router, asn } = filter ?? {};
    if (router === undefined && asn === undefined) {
      yield* this.sessions.values();
      return;
    }
    if (router !== undefined) {
      for (const name of this.ports.get(router)?.values() ?? []) {
        const s = this.byName(name);
        if (s && (asn === undefined || s.spec.asn === asn)) yield s;
      }
      return;
    }
    for (const uuid of this.byAsn.get(asn as number)) {
      const s = this.sessions.get(uuid);
      if (s) yield s;
    }
  }

  getSession(uuid: string): Session | undefined {
    return this.sessions.get(uuid);
  }

  byName(name: string): Session | undefined {
    const uuid = this.uuidByName.get(name);
    return uuid === undefined ? undefined : this.sessions.get(uuid);
  }

  sessionCount(): number {
    return this.sessions.size;
  }

  /** The name of the session holding `port` on `router`. */
  portOwner(router: string, port: number): string | undefined {
    return this.ports.get(router)?.get(port);
  }

  usedPorts(router: string): Set<number> {
    return new Set(this.ports.get(router)?.keys() ?? []);
  }

  /**
   * The sessions whose addresses or key `spec` can clash with (claims.ts): other ASNs' sessions with one
   * of its peer addresses, the sessions on its router with its WireGuard key; what the address and key
   * rules compare it with (NetworkView.sessions).
   */
  neighbours(spec: ClaimSpec): Session[] {
    const found = new Set<Session>();
    this.claims.forEachRival(spec, (uuid) => {
      const session = this.sessions.get(uuid);
      if (session) found.add(session);
    });
    // a session in review is also what its router runs: its approved addresses and key stay taken
    return [...found].flatMap((s) => claimedSpecs(s.spec, s.status).map((spec) => ({ ...s, spec })));
  }

  // ---------------------------------------------------------------- puts and removes (from storage or a write)

  /** A router's spec; its status stays, unless `status` (what storage holds) is given. */
  putRouter(name: string, spec: RouterSpec, status?: RouterStatus): Router {
    const current = this.routers.get(name);
    if (status !== undefined) this.settleRouterPatch(name, status);
    const base = status ?? current?.status ?? this.storedStatus.get(name) ?? {};
    const router = deepFreeze({ name, spec, status: this.withPatch(name, base) });
    this.routers.set(name, router);
    // a status read back from storage changes no answer kept or waited on (mesh lists are built per request)
    const changed = !current || !isDeepStrictEqual(current.spec, spec);
    this.feed.publish({ kind: 'Router', name, type: 'put' }, changed ? [topics.routers] : []);
    return router;
  }

  /** A router's whole status as storage holds it; observations not yet persisted stay over it. */
  setRouterStatus(name: string, status: RouterStatus): void {
    this.settleRouterPatch(name, status);
    const current = this.routers.get(name);
    if (!current) return;
    const next = deepFreeze(this.withPatch(name, status));
    this.routers.set(name, Object.freeze({ ...current, status: next }));
    // only the mesh lists show it, built per request; no long poll waits on those (docs/api.md)
    if (next.meshPublicKey !== current.status.meshPublicKey)
      this.feed.publish({ kind: 'Router', name, type: 'put' }, []);
  }

  /** Storage's status: kept, and the observations not yet persisted that it holds newer ones of dropped. */
  private settleRouterPatch(name: string, status: RouterStatus): void {
    this.storedStatus.set(name, status);
    const patch = this.routerPatches.get(name);
    if (!patch) return;
    const kept = routerObservationsNotBefore(patch, status);
    if (kept === patch) return;
    if (Object.keys(kept).length > 0) this.routerPatches.set(name, kept);
    else this.routerPatches.delete(name);
  }

  private withPatch(name: string, status: RouterStatus): RouterStatus {
    const patch = this.routerPatches.get(name);
    return patch ? { ...status, ...patch } : status;
  }

  removeRouter(name: string): void {
    this.routerPatches.delete(name);
    this.storedStatus.delete(name);
    if (!this.routers.delete(name)) return;
    this.feed.publish({ kind: 'Router', name, type: 'delete' }, [topics.routers]);
  }

  putPolicy(name: string, spec: Policy['spec']): Policy {
    const policy = deepFreeze({ name, spec });
    this.policies.set(name, policy);
    this.feed.publish({ kind: 'RoutingPolicy', name, type: 'put', router: policyRouter(name) }, [
      topics.policies,
    ]);
    return policy;
  }

  removePolicy(name: string): void {
    if (!this.policies.delete(name)) return;
    this.feed.publish({ kind: 'RoutingPolicy', name, type: 'delete', router: policyRouter(name) }, [
      topics.policies,
    ]);
  }

  /**
   * A session as storage holds it, or as a write made it. Metrics are observations: a status without
   * them (a status file, a write) keeps the ones recorded, and recorded ones not yet persisted win.
   */
  putSession(name: string, spec: SessionSpec, status: SessionStatusRecord): Session {
    const previous = this.sessions.get(spec.uuid);
    const previousName = this.uuidByName.get(name);
    if (previousName !== undefined && previousName !== spec.uuid) this.removeSession(name);
    if (previous) this.unindex(previous);
    const unflushed = this.metrics.get(spec.uuid);
    if (unflushed && metricsBefore(unflushed, status.metrics)) this.metrics.delete(spec.uuid);
    const metrics = this.metrics.get(spec.uuid) ?? status.metrics ?? previous?.status.metrics;
    const session = deepFreeze({
      name,
      spec,
      status: metrics === status.metrics ? status : { ...status, metrics },
    });
    this.sessions.set(spec.uuid, session);
    this.uuidByName.set(name, spec.uuid);
    let ports = this.ports.get(spec.router);
    if (!ports) this.ports.set(spec.router, (ports = new Map<number, string>()));
    ports.set(spec.listenPort, name);
    this.byAsn.add(spec.asn, spec.uuid);
    // a REJECTED or PURGED record claims no address or key: others may take them at once (docs/api.md, Decisions)
    if (!isTerminal(status.code))
      for (const claimed of claimedSpecs(spec, status)) this.claims.add(spec.uuid, claimed);
    this.feed.publish(
      { kind: 'PeeringSession', name, type: 'put', router: spec.router },
      sessionTopics(previous, session),
    );
    return session;
  }

  /** Removes the session `name`; returns it, or undefined when there was none. */
  removeSession(name: string): Session | undefined {
    const session = this.byName(name);
    if (!session) return undefined;
    this.sessions.delete(session.spec.uuid);
    this.uuidByName.delete(name);
    this.metrics.delete(session.spec.uuid);
    this.unindex(session);
    this.feed.publish(
      { kind: 'PeeringSession', name, type: 'delete', router: session.spec.router },
      sessionTopics(session, undefined),
    );
    return session;
  }

  private unindex(session: Session): void {
    const ports = this.ports.get(session.spec.router);
    if (ports?.get(session.spec.listenPort) === session.name) ports.delete(session.spec.listenPort);
    this.byAsn.delete(session.spec.asn, session.spec.uuid);
    for (const claimed of claimedSpecs(session.spec, session.status))
      this.claims.delete(session.spec.uuid, claimed);
  }

  // ---------------------------------------------------------------- observations

  /**
   * Merges a checked patch into a router's status (visible at once; persisted with the next flush), but
   * for what the status holds newer observations of. False when there is no such router.
   */
  observeRouter(name: string, observed: Partial<RouterStatus>): boolean {
    const current = this.routers.get(name);
    if (!current) return false;
    const patch = routerObservationsNotBefore(observed, current.status);
    if (Object.keys(patch).length === 0) return true;
    const status = Object.freeze({ ...current.status, ...patch });
    this.routerPatches.set(name, { ...this.routerPatches.get(name), ...patch });
    this.routers.set(name, Object.freeze({ ...current, status }));
    if (status.meshPublicKey !== current.status.meshPublicKey) {
      this.onMeshKeyChange?.(name);
      // only the mesh lists show it, built per request; no long poll waits on those (docs/api.md)
      this.feed.publish({ kind: 'Router', name, type: 'put' }, []);
    }
    // whether its agent reports shows in users' lists (who a queued session waits for: common/waiting.ts)
    if (readyOf(status) !== readyOf(current.status)) this.feed.publish(undefined, [topics.routers]);
    return true;
  }

  /** Records a session's checked metrics unless it shows newer ones; false when there is no such session. */
  observeMetrics(uuid: string, metrics: SessionMetrics): boolean {
    const current = this.sessions.get(uuid);
    if (!current) return false;
    if (metricsBefore(metrics, current.status.metrics)) return true;
    this.metrics.set(uuid, metrics);
    this.sessions.set(uuid, deepFreeze({ ...current, status: { ...current.status, metrics } }));
    // shown in users' lists, not to agents
    this.feed.publish(undefined, [topics.asnSessions(current.spec.asn), topics.allSessions]);
    return true;
  }

  /** Observations loaded from storage at start: shown, not marked unflushed. */
  restoreObservations(
    routers: Map<string, Partial<RouterStatus>>,
    metrics: Map<string, SessionMetrics>,
  ): void {
    const changed = new Set<Topic>([topics.allSessions]);
    for (const [uuid, m] of metrics) {
      const current = this.sessions.get(uuid);
      if (!current) continue;
      this.sessions.set(uuid, deepFreeze({ ...current, status: { ...current.status, metrics: m } }));
      changed.add(topics.asnSessions(current.spec.asn));
    }
    this.feed.publish(undefined, changed);
    for (const [name, observed] of routers) {
      const current = this.routers.get(name);
      if (current) this.setRouterStatus(name, { ...current.status, ...observed });
    }
  }

  /** Routers with observations not yet persisted, each with its whole current status. */
  unflushedRouters(): [string, RouterStatus][] {
    const out: [string, RouterStatus][] = [];
    for (const name of this.routerPatches.keys()) {
      const router = this.routers.get(name);
      if (router) out.push([name, router.status]);
    }
    return out;
  }

  /** The router's whole current status when it has observations not yet persisted. */
  unflushedRouter(name: string): RouterStatus | undefined {
    return this.routerPatches.has(name) ? this.routers.get(name)?.status : undefined;
  }

  /** Session metrics not yet persisted, by uuid. */
  unflushedMetrics(): [string, SessionMetrics][] {
    return [...this.metrics];
  }

  /** The session's metrics not yet persisted. */
  unflushedMetricsOf(uuid: string): SessionMetrics | undefined {
    return this.metrics.get(uuid);
  }

  hasUnflushed(): boolean {
    return this.routerPatches.size > 0 || this.metrics.size > 0;
  }

  /** The back end persisted this router status: its patch is settled unless a newer one came meanwhile. */
  routerFlushed(name: string, written: RouterStatus): void {
    if (this.routers.get(name)?.status === written) this.routerPatches.delete(name);
  }

  /** The back end persisted these metrics: settled unless newer ones came meanwhile. */
  metricsFlushed(uuid: string, written: SessionMetrics): void {
    if (this.metrics.get(uuid) === written) this.metrics.delete(uuid);
  }

  /** Everything recorded is persisted (the git store writes all observations at once). */
  allFlushed(): void {
    this.routerPatches.clear();
    this.metrics.clear();
  }

  /** Every router's and session's observations, for a back end that writes them all at once. */
  *observedSessions(): Iterable<Session> {
    yield* this.sessions.values();
  }
}

/**
 * The specs a session claims its addresses and key by: its own, and while a modify waits for review the
 * one its router runs (common/approved-spec.ts), whose addresses no other network may take meanwhile.
 */
function claimedSpecs(spec: SessionSpec, status: SessionStatusRecord): SessionSpec[] {
  if (!status.approved) return [spec];
  const running = withApproved(spec, status.approved.spec);
  const same =
    running.ipv6 === spec.ipv6 && running.ipv4 === spec.ipv4 && running.publicKey === spec.publicKey;
  return same ? [spec] : [spec, running];
}

/**
 * The answers a session's change changes: its ASN's lists always; its router's agent answer only when
 * what the agent sees changed (the spec, the status code, or the approved copy a session in review keeps
 * on its router: common/approved-spec.ts; not BGP state or metrics).
 */
function sessionTopics(before: Session | undefined, after: Session | undefined): Topic[] {
  const changed = [topics.allSessions];
  for (const s of [before, after]) if (s) changed.push(topics.asnSessions(s.spec.asn));
  const agentSees =
    !before ||
    !after ||
    before.status.code !== after.status.code ||
    !isDeepStrictEqual(before.spec, after.spec) ||
    !isDeepStrictEqual(before.status.approved, after.status.approved);
  if (agentSees) for (const s of [before, after]) if (s) changed.push(topics.routerSessions(s.spec.router));
  return changed;
}

function policyRouter(name: string): string | undefined {
  return name === 'default' ? undefined : name;
}
