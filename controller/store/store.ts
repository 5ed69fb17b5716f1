/**
 * The store interface: what the controller needs from a back end (git, the embedded default, or
 * Kubernetes). Reads are synchronous and come from an in-memory index; writes are serialised by the back
 * end, each one an audited change (a commit, or a resourceVersion-checked update). Callers never know
 * which back end they talk to; test/store/conformance.ts holds the suite every back end must pass.
 */
import type {
  ForgeConflict,
  PolicySpec,
  RouterSpec,
  RouterStatus,
  SessionMetrics,
  SessionSpec,
  SessionStatusRecord,
} from '../../common/schema.ts';
import type { HeartbeatBody } from '../../common/agent-api.ts';
import type { FieldError } from '../../common/errors.ts';
import type { Checked } from '../../common/validate.ts';
import { isoNow } from '../../common/clock.ts';
import type { Topic } from './change-feed.ts';
import type { SkipReason } from './core/skipped.ts';
import type { Revocation, RevocationList } from './core/revocations.ts';
import type { NotificationEvent } from './core/events.ts';

/** Who asked for a write: becomes the commit author / the managedFields manager, and the audit log. */
export interface Actor {
  /** e.g. `AS4242420001`, `admin AS4242420000`, `agent fra1`, `controller`. */
  name: string;
  role: 'user' | 'admin' | 'agent' | 'controller';
  asn?: number;
}

export interface Router {
  name: string;
  spec: RouterSpec;
  status: RouterStatus;
}

export interface Session {
  /** `as<asn>-<router>`: unique per (ASN, router). */
  name: string;
  spec: SessionSpec;
  status: SessionStatusRecord;
}

export interface Policy {
  /** `default`, or a router name for that router's overrides. */
  name: string;
  spec: PolicySpec;
}

/** A change to the store, from this controller or from outside (a pushed commit, another replica). */
export interface StoreEvent {
  kind: 'Router' | 'PeeringSession' | 'RoutingPolicy';
  name: string;
  type: 'put' | 'delete';
  /** The router the change belongs to (a session's, a router policy's); undefined: none or all. */
  router?: string;
}

/**
 * What createSession needs: everything of the spec except what the store allocates. `listenPort` only
 * where the port is given, not chosen: an adopted session keeps its hand-made one (docs/api.md, Adoptions).
 */
export type NewSession = Omit<SessionSpec, 'uuid' | 'listenPort' | 'createdAt'> & { listenPort?: number };

/**
 * The change a session update makes. `spec` and `status` replace the current ones when given;
 * `delete: true` removes the session. The mutate function may run more than once (optimistic
 * concurrency), so it must be pure.
 */
export type SessionChange =
  { spec?: SessionSpec; status?: SessionStatusRecord; delete?: false } | { delete: true };

/** A manifest the store holds in its repository but does not apply, and why. */
export interface SkippedManifest {
  path: string;
  /** The metric's label: a bound of the file, YAML, layout, schema, the rules across files, unreadable. */
  reason: SkipReason;
  errors: FieldError[];
}

/** Whether the store takes writes (the git store's disk); `problem` says why not. */
export interface WriteState {
  problem?: {
    /** A data directory read-only at start (no instance lock), or a disk refusing writes mid-run. */
    reason: 'ReadOnlyDataDirectory' | 'DiskRefusesWrites';
    message: string;
  };
  /** When writes last started or stopped succeeding. */
  since: string;
}

/** What only some back ends have (core/backend.ts): the store answers with them where its back end does. */
export interface StoreCapabilities {
  /** Whether writes can succeed now, for /health and GET /admin/store (docs/store.md, "Crash safety"). */
  writeState?(): WriteState;
  /**
   * The manifests (git files, Kubernetes objects) the store skips now, and since when it skips some or
   * none (docs/store.md, "What the store refuses"), for the admin's store condition.
   */
  skippedManifests?(): { manifests: SkippedManifest[]; since: string };
  /** Look for outside changes now (a forge's push webhook) instead of at the next interval. */
  syncNow?(): void;
  /**
   * Acknowledged changes an edit on the forge replaced, unresolved, of the last 7 days (the git store
   * following a forge; docs/gitops.md, "When the forge and the API change the same file"), oldest first.
   */
  forgeConflicts?(): ForgeConflict[];
  /** The newest of those of a session, the note its record carries. */
  forgeConflictOf?(uuid: string): ForgeConflict | undefined;
  /** An admin resolved one: it is no longer listed. NOT_FOUND when no listed conflict has this id. */
  clearForgeConflict?(id: string, actor: Actor): Promise<void>;
}

export interface Store extends StoreCapabilities {
  readonly backend: 'git' | 'kubernetes';

  /** Build the index and start following outside changes. */
  start(): Promise<void>;
  /** Finish queued writes, flush batched observations, stop following. */
  close(): Promise<void>;

  // ---- reads (memory only) ----
  listRouters(): Router[];
  getRouter(name: string): Router | undefined;
  listSessions(filter?: { router?: string; asn?: number }): Session[];
  getSession(uuid: string): Session | undefined;
  /**
   * The sessions whose peer addresses or key `spec` can clash with: other ASNs' sessions with one of its
   * addresses, the sessions on its router with its WireGuard key (common/rules/addressing.ts).
   */
  neighbours(spec: SessionSpec): Session[];
  listPolicies(): Policy[];
  getPolicy(name: string): Policy | undefined;
  /**
   * The policy for sessions on `router`: the default with the router's own over it (mergedPolicy in
   * common/rules/policy.ts); the default alone without a router.
   */
  policyFor(router: string | undefined): PolicySpec;
  /** sha256 hex of the router's agent token, if one is set. */
  getAgentTokenHash(router: string): string | undefined;
  /**
   * Is the user or admin token with this id, of this ASN, issued at `issuedAt` (Unix seconds) revoked
   * (docs/login.md, Revoking tokens)? Kept current from the back end, as every other read.
   */
  tokenRevoked(id: string, asn: number, issuedAt: number): boolean;
  /** The revocations in force. */
  listRevocations(): RevocationList;

  // ---- change feed ----
  /** A number that grows whenever the answer of `topic` (change-feed.ts, `topics`) changes. */
  revision(topic: Topic): number;
  /**
   * Resolves with the topic's new revision once it exceeds `since`, or with the current one after
   * timeoutMs or on abort. Only a change to this topic wakes it.
   */
  waitForChange(topic: Topic, since: number, timeoutMs: number, signal?: AbortSignal): Promise<number>;
  /** Subscribe to changes; returns the unsubscribe function. */
  onChange(listener: (event: StoreEvent) => void): () => void;

  // ---- writes (serialised, audited) ----
  /** CONFLICT if the name, uuid or nodeId is taken. */
  createRouter(name: string, spec: RouterSpec, actor: Actor): Promise<Router>;
  /** ROUTER_NOT_FOUND if absent. */
  updateRouter(
    name: string,
    mutate: (spec: RouterSpec) => RouterSpec,
    actor: Actor,
    message: string,
  ): Promise<Router>;
  /** ROUTER_NOT_FOUND if absent; INVALID_STATE if sessions still use it. */
  deleteRouter(name: string, actor: Actor): Promise<void>;
  setAgentTokenHash(router: string, sha256: string, actor: Actor): Promise<void>;
  /**
   * Revoke one token by its id, or every token of an ASN issued until now; resolves once the revocation is
   * durable and every reader of this store sees it. INVALID_REQUEST for an id that is no token id.
   */
  revokeTokens(revocation: Revocation, actor: Actor): Promise<RevocationList>;

  /**
   * Allocates uuid, listen port and createdAt and stores the session with `status` as its first status.
   * Every admission rule (assertAdmission in common/rules) is checked inside the store's write queue, counting
   * the creates before it, so the limits hold under concurrent creates: ROUTER_NOT_FOUND, ASN_BLOCKED,
   * ROUTER_FULL (not accepting, at maxSessions, or no listen port free), SESSION_EXISTS, CONFLICT (at
   * maxPendingPerAsn), INVALID_REQUEST (the spec, or a peer address breaking the address rules).
   */
  createSession(
    input: NewSession,
    status: SessionStatusRecord,
    actor: Actor,
    message: string,
  ): Promise<Session>;
  /**
   * Read-modify-write of one session. SESSION_NOT_FOUND if absent; whatever mutate throws is passed on and
   * nothing is written. Returns the session after the change, or undefined when it was deleted.
   */
  updateSession(
    uuid: string,
    mutate: (current: Session) => SessionChange,
    actor: Actor,
    message: string,
  ): Promise<Session | undefined>;

  putPolicy(name: string, spec: PolicySpec, actor: Actor): Promise<Policy>;
  deletePolicy(name: string, actor: Actor): Promise<void>;

  // ---- outbox: notification events kept with the changes that cause them (docs/notifications.md) ----
  /**
   * The events not yet confirmed, oldest first. The contract every back end keeps (core/outbox.ts holds
   * the rules, a back end persists what they prepare):
   * - a write's events (the core derives them from its state change, core/events.ts) are persisted in the
   *   same step as the change, so a crash keeps both or neither; once the write is acknowledged, they
   *   are here, on every replica that has read the change;
   * - an event keeps its id across reads, restarts and replicas; the outbox holds one event per id;
   * - bounded: OUTBOX_LIMIT events and OUTBOX_MAX_AGE_MS; a write beyond drops the oldest (counted);
   * - every change to it raises `revision(topics.outbox)`: the leader waits on that topic.
   */
  outbox(): readonly NotificationEvent[];
  /** Records events no session write causes (router.agent_offline) by a write of their own. */
  appendEvents(events: readonly NotificationEvent[]): Promise<void>;
  /**
   * Removes these events (the leader delivered them), all in one write; ids not held are ignored.
   * Resolves once the removal is durable.
   */
  confirmDelivered(ids: readonly string[]): Promise<void>;

  // ---- observations (frequent; visible at once, persisted in batches, never a commit each) ----
  recordRouterStatus(router: string, patch: Partial<RouterStatus>): void;
  /**
   * An agent's heartbeat: its version, uptime and mesh key become the router's status, lastHeartbeat the
   * time of recording. The API checked it against HeartbeatBody (the brand says so) and it is not checked
   * again: every agent sends one every 30 seconds, the most frequent write there is. False when there is
   * no such router (nothing recorded).
   */
  recordHeartbeat(router: string, heartbeat: Checked<HeartbeatBody>): boolean;
  recordSessionMetrics(uuid: string, metrics: SessionMetrics): void;
}

/** The router status fields a heartbeat sets, in either back end. */
export function heartbeatStatus(heartbeat: HeartbeatBody, previous?: RouterStatus): Partial<RouterStatus> {
  const status: Partial<RouterStatus> = {
    lastHeartbeat: isoNow(),
    agentVersion: heartbeat.version,
    uptime: heartbeat.uptime,
  };
  if (heartbeat.meshPublicKey !== undefined) status.meshPublicKey = heartbeat.meshPublicKey;
  if (heartbeat.heartbeatInterval !== undefined) status.heartbeatInterval = heartbeat.heartbeatInterval;
  if (heartbeat.conditions !== undefined) {
    // The agent's conditions replace those of the same type; other types (the controller's) stay.
    const reported = new Set(heartbeat.conditions.map((c) => c.type));
    const kept = (previous?.conditions ?? []).filter((c) => !reported.has(c.type));
    status.conditions = [...kept, ...heartbeat.conditions];
  }
  return status;
}
