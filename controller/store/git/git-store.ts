/**
 * The git store: manifests in a bare repository (DESIGN.md section 2). Spec files live on the main branch,
 * written by people (pull requests pushed into the repository, a remote) and by the controller; status
 * lives on its own ref so controller writes never conflict with people's edits. Every write is one commit
 * whose author and message say who asked for what. Reads come from an in-memory index only.
 */
import { randomUUID } from 'node:crypto';
import { gitFs } from '../../git-fs.ts';
import { atomicWriteFile } from '../../../common/atomic-write.ts';
import { access, mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import git from 'isomorphic-git';
import { CORE_SCHEMA, dump } from 'js-yaml';
import pino from 'pino';
import { counter } from '../../metrics.ts';
import { ProblemError, type FieldError } from '../../../common/errors.ts';
import { allocateListenPort, sessionName } from '../../../common/naming.ts';
import { wireGuardKeyId } from '../../../common/net.ts';
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
import { checkOrThrow, validate, validateOrThrow, type Checked } from '../../../common/validate.ts';
import type { HeartbeatBody } from '../../../common/agent-api.ts';
import { ChangeFeed } from '../change-feed.ts';
import {
  ADDRESSING_FIELDS,
  assertAdmission,
  assertNoRouterConflicts,
  assertRouterUnused,
  assertRouterName,
  checkedSessionSpec,
  mergedPolicy,
  mergedSessionStatus,
  routerSetErrors,
  sessionAddressingErrors,
  sessionSetErrors,
  type ManifestSet,
  type NetworkView,
} from '../rules.ts';
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
import { mapLimit } from '../../../common/concurrency.ts';
import { Branch, type FileWrite, type PreparedCommit } from './branch.ts';
import { InstanceLock, Journal, removeTempLeftovers, type RefUpdate } from './recovery.ts';
import { RemoteSync, type RemoteOptions } from './remote.ts';
import {
  classifyPath,
  isManifestPath,
  parseManifest,
  parseYaml,
  policyPath,
  renderManifest,
  routerPath,
  sessionPath,
  type ParsedManifest,
  type ParseResult,
} from './manifests.ts';
import { RefMovedError, updateRef } from './refs.ts';
import { ParseCache } from './parse-cache.ts';
import { gcAuto } from './housekeeping.ts';
import {
  ObservationFile,
  routerObservations,
  routerState,
  type ObservationSnapshot,
} from './observations.ts';
import { readText, type GitContext } from './objects.ts';
import { listFiles, type FileChange } from './tree.ts';

export interface GitStoreOptions {
  /** The store repository (bare; created if missing). */
  dir: string;
  /** Branch holding the spec files (default `main`). */
  branch?: string;
  /** How often the repository is checked for pushed commits (default 2000 ms). */
  pollIntervalMs?: number;
  /** A repository on a forge to follow and push back to (remote.ts; HTTP(S) only). */
  remote?: RemoteOptions;
  /** How often observations are written to the observation file, observations.ts (default 30000 ms). */
  observationFlushMs?: number;
  /** How often `git gc --auto` packs the repository, housekeeping.ts (default one hour; 0: never). */
  housekeepingIntervalMs?: number;
  logger?: pino.Logger;
}

export const STATUS_REF = 'refs/heads/peerops-status';
const CONTROLLER: Actor = { name: 'controller', role: 'controller' };
/** Attempts of a write whose ref moved or was locked (a push in progress); about 2 s in all. */
const MAX_ATTEMPTS = 12;
const YAML = { schema: CORE_SCHEMA };

const invalidManifests = counter({
  name: 'peerops_store_invalid_manifests_total',
  help: 'Manifests arriving from git that failed validation and were skipped',
  labelNames: ['kind'],
});
const syncErrors = counter({
  name: 'peerops_store_sync_errors_total',
  help: 'Failed attempts to follow the repository or remote',
});

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/** The status file of a session on the status ref. */
interface SessionStatusFile {
  uuid: string;
  status: SessionStatusRecord;
}

export class GitStore implements Store {
  readonly backend = 'git' as const;
  private readonly options: Required<
    Pick<
      GitStoreOptions,
      'dir' | 'branch' | 'pollIntervalMs' | 'observationFlushMs' | 'housekeepingIntervalMs'
    >
  > &
    GitStoreOptions;
  private readonly log: pino.Logger;
  private readonly ctx: GitContext;
  private readonly spec: Branch;
  private readonly status: Branch;
  private readonly feed = new ChangeFeed();
  private readonly cache: ParseCache;

  private readonly routers = new Map<string, Router>();
  private readonly sessions = new Map<string, Session>();
  private readonly sessionByName = new Map<string, string>();
  private readonly ports = new Map<string, Map<number, string>>();
  /** Session uuids by claim (claimsOf: peer addresses, the key on the router): the rules look here. */
  private readonly sessionsByClaim = new Map<string, Set<string>>();
  private readonly policies = new Map<string, Policy>();
  /** Status files read from the status ref, by session name. */
  private readonly statusFiles = new Map<string, SessionStatusFile>();
  private readonly routerStatus = new Map<string, RouterStatus>();
  /** Sessions whose spec file in git lacks what the store allocated (uuid, listenPort, createdAt). */
  private readonly incompleteSpecs = new Set<string>();
  /** Sessions (by name) whose status on the status ref is not what the index holds (or must be removed). */
  private readonly unsavedStatus = new Set<string>();
  /** Manifests reported invalid, by path → blob id, so a file is reported once and retried when others change. */
  private readonly rejected = new Map<string, string>();

  private queue: Promise<unknown> = Promise.resolve();
  private readonly journal: Journal;
  /** A journal may be on disk: a write to finish before the next one (recovery.ts). */
  private journalPending = true;
  private instanceLock: InstanceLock | undefined;
  /** Why writes fail now (a full or read-only disk); undefined while they succeed. */
  private diskProblem: string | undefined;
  private readonly observations: ObservationFile;
  /** Observations recorded since the last flush wrote the observation file. */
  private observationsChanged = false;
  /** Routers whose committed status (the mesh key) is not on the status ref yet. */
  private readonly dirtyRouters = new Set<string>();
  private timers: NodeJS.Timeout[] = [];
  private readonly stopHousekeeping = new AbortController();
  private housekeeping: Promise<void> | undefined;
  private housekeepingUnavailable = false;
  private syncQueued = false;
  private remote: RemoteSync | undefined;
  /** The running remote cycle; a request meanwhile runs one more after it. */
  private remoteCycle: Promise<void> | undefined;
  private remoteAgain = false;
  private started = false;
  private closed = false;

  constructor(options: GitStoreOptions) {
    this.options = {
      branch: 'main',
      pollIntervalMs: 2000,
      observationFlushMs: 30000,
      housekeepingIntervalMs: 3_600_000,
      ...options,
    };
    this.log = options.logger ?? pino({ level: 'info' });
    this.ctx = { gitdir: options.dir, cache: {} };
    this.cache = new ParseCache(options.dir);
    this.observations = new ObservationFile(options.dir);
    this.journal = new Journal(options.dir);
    this.spec = new Branch(this.ctx, `refs/heads/${this.options.branch}`, {
      cache: this.cache,
      kind: 'spec',
    });
    this.status = new Branch(this.ctx, STATUS_REF, { cache: this.cache, kind: 'status' });
  }

  // ---------------------------------------------------------------- lifecycle

  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    try {
      await access(join(this.options.dir, 'HEAD'));
    } catch {
      await mkdir(this.options.dir, { recursive: true });
      await git.init({ fs: gitFs, dir: this.options.dir, bare: true, defaultBranch: this.options.branch });
    }
    await this.takeOver();
    await this.cache.load();
    await this.serialised(async () => {
      await this.syncAll();
      // status files left behind by a crash between a session's removal and its status removal
      for (const name of this.statusFiles.keys())
        if (!this.sessionByName.has(name)) this.unsavedStatus.add(name);
      if (this.unsavedStatus.size > 0) {
        await this.completeFromGit().catch((err: unknown) =>
          this.log.warn({ err: String(err) }, 'store: completing manifests from git deferred'),
        );
      }
      await this.loadObservations();
    });
    await this.saveCache();
    this.timers.push(setInterval(() => this.requestSync(), this.options.pollIntervalMs));
    this.timers.push(
      setInterval(() => void this.flushObservations().catch(() => {}), this.options.observationFlushMs),
    );
    if (this.options.housekeepingIntervalMs > 0)
      this.timers.push(setInterval(() => void this.housekeep(), this.options.housekeepingIntervalMs));
    if (this.options.remote) {
      const remote = this.options.remote;
      this.remote = new RemoteSync(
        { ...remote, branch: remote.branch ?? this.options.branch },
        {
          ctx: this.ctx,
          specRef: this.spec.ref,
          statusRef: this.status.ref,
          log: this.log,
          serialised: (fn) =>
            this.serialised(async () => {
              await this.syncAll();
              const result = await fn();
              await this.syncAll();
              return result;
            }),
          head: (ref) => (ref === this.spec.ref ? this.spec.head : this.status.head),
          moveRefs: (updates) => this.moveRefs(updates),
        },
      );
      this.timers.push(setInterval(() => this.requestRemoteSync(), remote.intervalMs ?? 5000));
      this.requestRemoteSync();
    }
    for (const t of this.timers) t.unref();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    this.stopHousekeeping.abort();
    await this.housekeeping;
    await this.remoteCycle;
    await this.queue.catch(() => {});
    try {
      await this.flushObservations();
      await this.saveCache();
    } finally {
      await this.instanceLock?.release();
    }
  }

  /**
   * Become the repository's one writer (recovery.ts): take the instance lock, then clean up after a
   * crashed predecessor: finish or drop its interrupted write, remove its ref locks and temp files, and
   * log each thing cleaned.
   */
  private async takeOver(): Promise<void> {
    const { lock, stale } = await InstanceLock.acquire(this.options.dir);
    this.instanceLock = lock;
    if (stale)
      this.log.warn({ pid: stale.pid }, 'store: took over from a controller that did not stop cleanly');
    await this.journal.recover(this.log, { removeLocks: true });
    this.journalPending = false;
    // Only the controller writes the status ref, and it holds the instance lock: a lock there is a leftover.
    const statusLock = join(this.options.dir, `${STATUS_REF}.lock`);
    if (
      await rm(statusLock).then(
        () => true,
        () => false,
      )
    )
      this.log.warn({ lock: `${STATUS_REF}.lock` }, 'store: removed a stale ref lock (a crashed write)');
    const removed = await removeTempLeftovers(this.options.dir);
    if (removed > 0) this.log.warn({ files: removed }, 'store: removed temp files of an interrupted write');
  }

  /** Why the store cannot write now (a full or read-only disk), for /health; undefined when it can. */
  writeProblem(): string | undefined {
    return this.diskProblem;
  }

  private async saveCache(): Promise<void> {
    const live = new Set<string>();
    for (const [path, oid] of listFiles(this.spec.root)) live.add(ParseCache.key('spec', path, oid));
    for (const [path, oid] of listFiles(this.status.root)) live.add(ParseCache.key('status', path, oid));
    try {
      await this.cache.save(live);
    } catch (err) {
      this.log.warn({ err: String(err) }, 'store: could not save the parse cache (next start reads blobs)');
    }
  }

  // ---------------------------------------------------------------- reads

  listRouters(): Router[] {
    return [...this.routers.values()].sort(byName);
  }

  getRouter(name: string): Router | undefined {
    return this.routers.get(name);
  }

  listSessions(filter?: { router?: string; asn?: number }): Session[] {
    const out: Session[] = [];
    const candidates =
      filter?.router === undefined ? this.sessions.values() : this.sessionsOfRouter(filter.router);
    for (const s of candidates) {
      if (filter?.asn !== undefined && s.spec.asn !== filter.asn) continue;
      out.push(s);
    }
    return out.sort(byName);
  }

  private *sessionsOfRouter(router: string): Iterable<Session> {
    for (const name of this.ports.get(router)?.values() ?? []) {
      const uuid = this.sessionByName.get(name);
      const session = uuid ? this.sessions.get(uuid) : undefined;
      if (session) yield session;
    }
  }

  getSession(uuid: string): Session | undefined {
    return this.sessions.get(uuid);
  }

  listPolicies(): Policy[] {
    return [...this.policies.values()].sort(byName);
  }

  getPolicy(name: string): Policy | undefined {
    return this.policies.get(name);
  }

  getAgentTokenHash(router: string): string | undefined {
    return this.routers.get(router)?.spec.agentTokenSha256;
  }

  // ---------------------------------------------------------------- change feed

  revision(router: string): number {
    return this.feed.revision(router);
  }

  waitForChange(router: string, since: number, timeoutMs: number, signal?: AbortSignal): Promise<number> {
    return this.feed.wait(router, since, timeoutMs, signal);
  }

  onChange(listener: (event: StoreEvent) => void): () => void {
    return this.feed.subscribe(listener);
  }

  // ---------------------------------------------------------------- router writes

  createRouter(name: string, spec: RouterSpec, actor: Actor): Promise<Router> {
    return this.write(async () => {
      assertRouterName(name);
      const value = validateOrThrow<RouterSpec>(RouterSpecSchema, spec, 'router spec');
      if (this.routers.has(name)) throw new ProblemError('CONFLICT', `router ${name} already exists`);
      assertNoRouterConflicts(name, value, this.routers.values());
      await this.commitSpec(
        [manifestWrite('Router', routerPath(name), name, value)],
        actor,
        `add router ${name}`,
      );
      return this.putRouter(name, value);
    });
  }

  updateRouter(
    name: string,
    mutate: (spec: RouterSpec) => RouterSpec,
    actor: Actor,
    message: string,
  ): Promise<Router> {
    return this.write(async () => {
      const current = this.routers.get(name);
      if (!current) throw new ProblemError('ROUTER_NOT_FOUND', `router ${name} does not exist`);
      const value = validateOrThrow<RouterSpec>(RouterSpecSchema, mutate(current.spec), 'router spec');
      assertNoRouterConflicts(name, value, this.routers.values());
      await this.commitSpec([manifestWrite('Router', routerPath(name), name, value)], actor, message);
      return this.putRouter(name, value);
    });
  }

  deleteRouter(name: string, actor: Actor): Promise<void> {
    return this.write(async () => {
      if (!this.routers.has(name))
        throw new ProblemError('ROUTER_NOT_FOUND', `router ${name} does not exist`);
      assertRouterUnused(name, this.listSessions({ router: name }));
      await this.commitSpec([{ path: routerPath(name), text: undefined }], actor, `remove router ${name}`);
      this.removeRouter(name);
      this.routerStatus.delete(name);
      this.dirtyRouters.add(name);
    });
  }

  async setAgentTokenHash(router: string, sha256: string, actor: Actor): Promise<void> {
    await this.updateRouter(
      router,
      (spec) => ({ ...spec, agentTokenSha256: sha256 }),
      actor,
      `set the agent token of router ${router}`,
    );
  }

  // ---------------------------------------------------------------- session writes

  createSession(
    input: NewSession,
    status: SessionStatusRecord,
    actor: Actor,
    message: string,
  ): Promise<Session> {
    return this.write(async () => {
      const name = sessionName(input.asn, input.router);
      // validated with a placeholder port first: the admission rules read a checked spec
      const draft = validateOrThrow<SessionSpec>(
        SessionSpecSchema,
        { ...input, uuid: randomUUID(), listenPort: 1, createdAt: new Date().toISOString() },
        'session',
      );
      // Every admission rule (limits, blocked ASN, one per router, addresses), inside the write queue:
      // checked before it, creates sent at once each passed before the others were stored (docs/store.md).
      const router = assertAdmission(
        {
          router: (r) => this.routers.get(r)?.spec,
          policyFor: (r) => mergedPolicy(this, r),
          sessionsOn: (r) => this.listSessions({ router: r }),
          sessionsOf: (asn) => this.listSessions({ asn }),
          network: this.addressNeighbours(draft),
        },
        draft,
      );
      const port = allocateListenPort(input.asn, router, this.usedPorts(input.router));
      if (port === undefined) {
        throw new ProblemError(
          'ROUTER_FULL',
          `router ${input.router} has no free listen port for AS${input.asn}`,
        );
      }
      const spec: SessionSpec = { ...draft, listenPort: port };
      const first = validateOrThrow<SessionStatusRecord>(SessionStatusSchema, status, 'session status');
      const path = sessionPath(spec.router, spec.asn);
      // spec and first status in one step: a crash leaves both or neither (recovery.ts)
      await this.commitSession(
        [manifestWrite('PeeringSession', path, name, spec)],
        [this.sessionStatusWrite({ name, spec, status: first })],
        actor,
        message,
      );
      return this.putSession(name, spec, first, { statusSaved: true });
    });
  }

  updateSession(
    uuid: string,
    mutate: (current: Session) => SessionChange,
    actor: Actor,
    message: string,
  ): Promise<Session | undefined> {
    return this.write(async () => {
      const current = this.sessions.get(uuid);
      if (!current) throw new ProblemError('SESSION_NOT_FOUND', `no session with uuid ${uuid}`);
      const change = mutate(current);
      const path = sessionPath(current.spec.router, current.spec.asn);
      if (change.delete) {
        await this.commitSession([{ path, text: undefined }], [{ path, text: undefined }], actor, message);
        this.removeSession(current.name, { statusSaved: true });
        return undefined;
      }
      const spec = change.spec ? this.checkSessionSpec(current, change.spec) : current.spec;
      const status = change.status
        ? validateOrThrow<SessionStatusRecord>(SessionStatusSchema, change.status, 'session status')
        : current.status;
      const next: Session = { name: current.name, spec, status };
      // nothing is applied, and nothing answered, before spec and status are committed together
      await this.commitSession(
        change.spec ? [manifestWrite('PeeringSession', path, current.name, spec)] : [],
        change.status ? [this.sessionStatusWrite(next)] : [],
        actor,
        message,
      );
      return this.putSession(current.name, spec, status, {
        statusSaved: change.status !== undefined || !this.unsavedStatus.has(current.name),
      });
    });
  }

  // ---------------------------------------------------------------- policy writes

  putPolicy(name: string, spec: PolicySpec, actor: Actor): Promise<Policy> {
    return this.write(async () => {
      if (name !== 'default') assertRouterName(name, 'policy name');
      const value = validateOrThrow<PolicySpec>(PolicySpecSchema, spec, 'policy spec');
      await this.commitSpec(
        [manifestWrite('RoutingPolicy', policyPath(name), name, value)],
        actor,
        `set policy ${name}`,
      );
      return this.putPolicyIndex(name, value);
    });
  }

  deletePolicy(name: string, actor: Actor): Promise<void> {
    return this.write(async () => {
      if (!this.policies.has(name)) throw new ProblemError('NOT_FOUND', `policy ${name} does not exist`);
      await this.commitSpec([{ path: policyPath(name), text: undefined }], actor, `remove policy ${name}`);
      this.removePolicy(name);
    });
  }

  // ---------------------------------------------------------------- observations

  recordRouterStatus(router: string, patch: Partial<RouterStatus>): void {
    const current = this.routers.get(router);
    if (!current) return;
    // Every field is optional and the current status was checked when it was recorded: the patch alone
    // needs checking (a heartbeat would otherwise re-validate every mesh peer each time). A patch of plain
    // fields is checked as it is; mesh peers carry addresses to canonicalise, into a copy to freeze.
    if (patch.meshPeers === undefined)
      this.putRouterStatus(current, checkOrThrow(RouterStatusSchema, patch, 'router status'));
    else
      this.putRouterStatus(
        current,
        deepFreeze(validateOrThrow<Partial<RouterStatus>>(RouterStatusSchema, patch, 'router status')),
      );
  }

  recordHeartbeat(router: string, heartbeat: Checked<HeartbeatBody>): boolean {
    const current = this.routers.get(router);
    if (current) this.putRouterStatus(current, heartbeatStatus(heartbeat, current.status));
    return current !== undefined;
  }

  /**
   * The router's status with the patch merged in (its fields plain values or frozen already): visible at
   * once, committed at the next flush.
   */
  private putRouterStatus(current: Router, patch: Partial<RouterStatus>): void {
    const status = Object.freeze({ ...current.status, ...patch });
    this.routerStatus.set(current.name, status);
    this.routers.set(current.name, Object.freeze({ ...current, status }));
    this.observationsChanged = true;
    if (status.meshPublicKey !== current.status.meshPublicKey) {
      this.dirtyRouters.add(current.name);
      this.feed.publish({ kind: 'Router', name: current.name, type: 'put' });
    }
  }

  recordSessionMetrics(uuid: string, metrics: SessionMetrics): void {
    const current = this.sessions.get(uuid);
    if (!current) return;
    const checked = validateOrThrow<SessionMetrics>(SessionMetricsSchema, metrics, 'session metrics');
    const status = { ...current.status, metrics: checked };
    this.sessions.set(uuid, deepFreeze({ ...current, status }));
    this.observationsChanged = true;
  }

  /**
   * Commit the mesh keys that changed since the last flush (one commit on the status ref), then write the
   * observations to the observation file (observations.ts), if any arrived.
   */
  flushObservations(): Promise<void> {
    return this.serialised(async () => {
      const routers = [...this.dirtyRouters];
      this.dirtyRouters.clear();
      if (routers.length > 0) {
        const writes = routers.map((name): FileWrite => {
          const state = routerState(this.routerStatus.get(name) ?? {});
          // no file for a router without a committed field (or without a router)
          const text = Object.keys(state).length > 0 ? dump({ status: state }, YAML) : undefined;
          return { path: routerPath(name), text, parsed: state };
        });
        try {
          await this.commitStatus(writes, CONTROLLER, `mesh keys of ${routers.length} router(s)`);
        } catch (err) {
          for (const n of routers) this.dirtyRouters.add(n);
          this.log.error({ err }, 'store: committing mesh keys failed; kept for the next flush');
          throw err;
        }
      }
      if (!this.observationsChanged) return;
      this.observationsChanged = false;
      try {
        await this.observations.save(this.observationSnapshot());
      } catch (err) {
        this.observationsChanged = true;
        this.log.error({ err }, 'store: writing observations failed; kept for the next flush');
        throw err;
      }
    });
  }

  private observationSnapshot(): ObservationSnapshot {
    const snapshot: ObservationSnapshot = { sessions: new Map(), routers: new Map() };
    for (const [uuid, session] of this.sessions)
      if (session.status.metrics) snapshot.sessions.set(uuid, session.status.metrics);
    for (const [name, router] of this.routers) {
      const observed = routerObservations(router.status);
      if (Object.keys(observed).length > 0) snapshot.routers.set(name, observed);
    }
    return snapshot;
  }

  /** At start: the observations of the last flush, over what the status ref holds (older releases wrote them there). */
  private async loadObservations(): Promise<void> {
    let snapshot: Awaited<ReturnType<ObservationFile['load']>>;
    try {
      snapshot = await this.observations.load();
    } catch (err) {
      this.log.warn({ err: String(err) }, 'store: observations not restored; agents report them again');
      return;
    }
    if (snapshot.invalid > 0)
      this.log.warn(
        { entries: snapshot.invalid },
        'store: invalid observations left out; agents report them again',
      );
    for (const [uuid, metrics] of snapshot.sessions) {
      const session = this.sessions.get(uuid);
      if (session)
        this.sessions.set(uuid, deepFreeze({ ...session, status: { ...session.status, metrics } }));
    }
    for (const [name, observed] of snapshot.routers) {
      const router = this.routers.get(name);
      if (router) this.setRouterStatus(name, { ...router.status, ...observed });
    }
  }

  /** A router's whole status, read from the status ref or the observation file (not the hot path's putRouterStatus). */
  private setRouterStatus(name: string, status: RouterStatus): void {
    if (Object.keys(status).length > 0) this.routerStatus.set(name, deepFreeze(status));
    else this.routerStatus.delete(name);
    const router = this.routers.get(name);
    if (router) this.routers.set(name, deepFreeze({ ...router, status: this.routerStatus.get(name) ?? {} }));
  }

  /**
   * `git gc --auto` on the repository (housekeeping.ts), one run at a time. Beside the store's writes, not
   * in their queue: packing a large repository takes seconds that no API write should wait for.
   */
  housekeep(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.housekeeping ??= gcAuto(this.options.dir, this.stopHousekeeping.signal)
      .then(
        (result) => {
          if (result.ran)
            this.log.debug({ ms: Math.round(result.ms) }, 'store: housekeeping (git gc --auto) done');
          else if (result.reason !== 'stopped' && !this.housekeepingUnavailable) {
            this.housekeepingUnavailable = true;
            this.log.warn(
              `store: no housekeeping, ${result.reason}: the repository's loose objects are never packed`,
            );
          }
        },
        (err: unknown) =>
          this.log.warn({ err: String(err) }, 'store: housekeeping failed; tried again later'),
      )
      .finally(() => {
        this.housekeeping = undefined;
      });
    return this.housekeeping;
  }

  // ---------------------------------------------------------------- serialisation

  /** Run fn after every earlier write; one at a time. */
  private serialised<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => {});
    return run;
  }

  /** A write: catch up with outside changes first; when the branch moves underneath, catch up and redo. */
  private write<T>(fn: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new ProblemError('STORE_UNAVAILABLE', 'the store is closed'));
    return this.serialised(async () => {
      try {
        const result = await this.attempt(fn);
        this.diskProblem = undefined;
        this.requestRemoteSync();
        return result;
      } catch (err) {
        throw this.diskFailure(err) ?? err;
      }
    });
  }

  private async attempt<T>(fn: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      await this.syncAll();
      try {
        const result = await fn();
        // a new router or policy may make manifests valid that were rejected before
        if (this.rejected.size > 0) await this.applySpecChanges([]);
        return result;
      } catch (err) {
        if (!(err instanceof RefMovedError)) throw err;
        if (attempt >= MAX_ATTEMPTS) throw unavailable(err);
        await backoff(attempt);
      }
    }
  }

  /**
   * A write that failed on the disk (full, read-only, I/O error) as STORE_UNAVAILABLE: nothing of it was
   * applied or answered, /health says why until a write succeeds again, and the poll tries the disk.
   */
  private diskFailure(err: unknown): ProblemError | undefined {
    const code = diskErrorCode(err);
    if (code === undefined) return undefined;
    if (this.diskProblem === undefined)
      this.log.error(
        { code, err: String(err) },
        'store: the disk refuses writes; answering 503 until it accepts them',
      );
    this.diskProblem = `the store's disk refuses writes (${code})`;
    return new ProblemError('STORE_UNAVAILABLE', `${this.diskProblem}; nothing was saved, try again later`);
  }

  /** A write of spec files alone (routers, policies): one commit on the spec branch. */
  private async commitSpec(writes: FileWrite[], actor: Actor, message: string): Promise<void> {
    await this.publish([await this.spec.prepare(writes, actor, message)]);
  }

  /**
   * A session's spec and status files as one step (either may be empty): both commits are written, then
   * both refs move through the journal, spec first (publish).
   */
  private async commitSession(
    specWrites: FileWrite[],
    statusWrites: FileWrite[],
    actor: Actor,
    message: string,
  ): Promise<void> {
    const [spec, status] = await Promise.all([
      specWrites.length > 0 ? this.spec.prepare(specWrites, actor, message) : undefined,
      statusWrites.length > 0 ? this.status.prepare(statusWrites, actor, message) : undefined,
    ]);
    await this.publish([spec, status]);
    this.noteStatusFiles(statusWrites);
  }

  /** Commit status writes outside a write (completing manifests, mesh keys), retrying when the ref moved. */
  private async commitStatus(writes: FileWrite[], actor: Actor, message: string): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.publish([await this.status.prepare(writes, actor, message)]);
        this.noteStatusFiles(writes);
        return;
      } catch (err) {
        if (!(err instanceof RefMovedError)) throw err;
        if (attempt >= MAX_ATTEMPTS) throw unavailable(err);
        await this.status.sync();
        await backoff(attempt);
      }
    }
  }

  /** The status files the status ref now holds, after a commit of `writes`. */
  private noteStatusFiles(writes: FileWrite[]): void {
    for (const w of writes) {
      const info = classifyPath(w.path);
      if (info?.kind !== 'PeeringSession') continue;
      if (w.text === undefined) this.statusFiles.delete(info.name);
      else this.statusFiles.set(info.name, w.parsed as SessionStatusFile);
      this.unsavedStatus.delete(info.name);
    }
  }

  /**
   * Move the refs of prepared commits as one step (recovery.ts): the journal names every update before
   * the first ref moves, the refs move in order, then the mirrors follow. RefMovedError when the first
   * ref had moved (nothing happened: the caller catches up and tries again). A failure after the first
   * ref moved leaves the journal for the next sync to finish, and is STORE_UNAVAILABLE, not retried:
   * the write is done once recovery completes it.
   */
  private async publish(commits: (PreparedCommit | undefined)[]): Promise<void> {
    const parts = commits.filter((c): c is PreparedCommit => c !== undefined);
    if (parts.length === 0) return;
    await this.moveRefs(parts.map((p) => p.update));
    for (const p of parts) p.branch.advance(p);
  }

  /** The journaled ref moves of `publish`, also for a fast-forward to fetched commits. */
  private async moveRefs(updates: RefUpdate[]): Promise<void> {
    await this.journal.begin(updates);
    this.journalPending = true;
    let moved = 0;
    try {
      for (const update of updates) {
        await updateRef(this.ctx.gitdir, update.ref, update.from, update.to, this.onStaleLock);
        moved++;
      }
    } catch (err) {
      if (moved === 0) {
        await this.journal.end().then(
          () => (this.journalPending = false),
          () => {},
        );
        throw err;
      }
      this.log.error({ err: String(err) }, 'store: a write stopped half-way; the next sync completes it');
      throw new ProblemError('STORE_UNAVAILABLE', `the store could not finish the write: ${String(err)}`);
    }
    await this.journal.end().then(
      () => (this.journalPending = false),
      (err: unknown) => this.log.warn({ err: String(err) }, 'store: journal left; the next sync removes it'),
    );
  }

  private readonly onStaleLock = (lock: string, ageMs: number): void =>
    this.log.warn({ lock, ageMs: Math.round(ageMs) }, 'store: removed a stale ref lock (a crashed writer)');

  /** Finish a write that a crash or a failed ref update interrupted (recovery.ts), before anything else. */
  private async recoverJournal(removeLocks: boolean): Promise<void> {
    if (!this.journalPending) return;
    await this.journal.recover(this.log, { removeLocks });
    this.journalPending = false;
  }

  private requestSync(): void {
    if (this.syncQueued || this.closed) return;
    this.syncQueued = true;
    void this.serialised(async () => {
      this.syncQueued = false;
      if (this.diskProblem !== undefined) await this.probeDisk();
      await this.syncAll();
    }).catch((err: unknown) => {
      syncErrors.inc();
      this.log.error({ err }, 'store: following the repository failed');
    });
  }

  /** While writes fail on the disk: does it take a small write again? Then /health is ok again. */
  private async probeDisk(): Promise<void> {
    try {
      await atomicWriteFile(join(this.options.dir, 'peerops', 'probe'), `${Date.now()}\n`);
      this.diskProblem = undefined;
      this.log.info('store: the disk accepts writes again');
    } catch {
      // still refused: the next poll tries again
    }
  }

  /**
   * Fetch from and push to the forge soon (remote.ts): one cycle at a time, outside the write queue, and
   * one more after the running one when asked meanwhile (a write or a webhook must not wait an interval).
   */
  private requestRemoteSync(): void {
    const remote = this.remote;
    if (!remote || this.closed) return;
    if (this.remoteCycle) {
      this.remoteAgain = true;
      return;
    }
    this.remoteCycle = remote.cycle().finally(() => {
      this.remoteCycle = undefined;
      if (this.remoteAgain) {
        this.remoteAgain = false;
        this.requestRemoteSync();
      }
    });
  }

  /** Look at the repository and the forge now (a forge's push webhook), instead of at the next interval. */
  syncNow(): void {
    this.requestSync();
    this.requestRemoteSync();
  }

  // ---------------------------------------------------------------- following outside changes

  /** Catch up with both refs; apply, validate and complete manifests that arrived from outside. */
  private async syncAll(): Promise<void> {
    await this.recoverJournal(false);
    const statusChanges = await this.status.sync();
    if (statusChanges.length > 0) await this.applyStatusChanges(statusChanges);
    const specChanges = await this.spec.sync();
    if (specChanges.length > 0 || (statusChanges.length > 0 && this.rejected.size > 0)) {
      await this.applySpecChanges(specChanges);
      if (specChanges.length > 0) {
        this.log.info(
          { commit: this.spec.head, files: specChanges.length, rejected: this.rejected.size },
          'store: caught up with the repository',
        );
      }
    }
    if (this.unsavedStatus.size > 0 || this.incompleteSpecs.size > 0) {
      // the index is right already; what is not committed now stays marked and is retried on the next sync
      await this.completeFromGit().catch((err: unknown) =>
        this.log.warn({ err: String(err) }, 'store: completing manifests from git deferred'),
      );
    }
  }

  /**
   * Commit what the store adds to manifests that arrived from git: first statuses (and removal of status
   * files whose session is gone), then the allocated fields. Status first: the uuid in the status file lets
   * a restart after a crash in between recover the same uuid.
   */
  private async completeFromGit(): Promise<void> {
    const statusWrites: FileWrite[] = [];
    for (const name of this.unsavedStatus) {
      const uuid = this.sessionByName.get(name);
      const session = uuid ? this.sessions.get(uuid) : undefined;
      if (session) statusWrites.push(this.sessionStatusWrite(session));
      else if (this.statusFiles.has(name)) statusWrites.push({ path: statusPathOf(name), text: undefined });
    }
    if (statusWrites.length > 0) {
      await this.commitStatus(
        statusWrites,
        CONTROLLER,
        `status of ${statusWrites.length} session(s) from git`,
      );
    }
    this.unsavedStatus.clear();
    const specWrites: FileWrite[] = [];
    for (const name of this.incompleteSpecs) {
      const uuid = this.sessionByName.get(name);
      const session = uuid ? this.sessions.get(uuid) : undefined;
      if (session) {
        const path = sessionPath(session.spec.router, session.spec.asn);
        specWrites.push(manifestWrite('PeeringSession', path, name, session.spec));
      }
    }
    if (specWrites.length > 0) {
      await this.commitSpec(
        specWrites,
        CONTROLLER,
        `complete ${specWrites.length} session(s) from git: uuid, listenPort, createdAt`,
      );
    }
    this.incompleteSpecs.clear();
  }

  private async applyStatusChanges(changes: FileChange[]): Promise<void> {
    const all = await mapLimit(changes, 16, async (change) => {
      const info = classifyPath(change.path);
      const parsed =
        info && change.oid !== undefined ? await this.parseStatus(change.path, change.oid, info.kind) : null;
      return { info, parsed };
    });
    for (const { info, parsed } of all) {
      if (!info) continue;
      if (info.kind === 'PeeringSession') {
        if (parsed) this.statusFiles.set(info.name, parsed as SessionStatusFile);
        else this.statusFiles.delete(info.name);
      } else if (info.kind === 'Router') {
        // the file holds the committed part; what agents reported since stays
        const file = (parsed ?? {}) as RouterStatus;
        const status = { ...file, ...routerObservations(this.routerStatus.get(info.name) ?? {}) };
        // an older release committed observations too: the next flush moves them to the observation file
        if (Object.keys(routerObservations(file)).length > 0) {
          this.dirtyRouters.add(info.name);
          this.observationsChanged = true;
        }
        this.setRouterStatus(info.name, status);
      }
    }
  }

  /** A status file's content, validated (null when unusable), through the parse cache. */
  private async parseStatus(
    path: string,
    oid: string,
    kind: string,
  ): Promise<SessionStatusFile | RouterStatus | null> {
    const key = ParseCache.key('status', path, oid);
    if (this.cache.has(key)) return this.cache.get(key) as SessionStatusFile | RouterStatus | null;
    let value: SessionStatusFile | RouterStatus | null = null;
    try {
      const doc = parseYaml(await readText(this.ctx, oid)) as
        { uuid?: unknown; status?: unknown } | undefined;
      if (kind === 'PeeringSession') {
        const checked = doc?.status
          ? validate<SessionStatusRecord>(SessionStatusSchema, doc.status)
          : undefined;
        if (typeof doc?.uuid === 'string' && checked?.ok) value = { uuid: doc.uuid, status: checked.value };
      } else {
        const checked = doc?.status ? validate<RouterStatus>(RouterStatusSchema, doc.status) : undefined;
        if (checked?.ok) value = checked.value;
      }
    } catch (err) {
      this.log.warn({ path, err: String(err) }, 'store: unreadable status file ignored');
    }
    this.cache.set(key, value);
    return value;
  }

  /** A spec file parsed and validated on its own, through the parse cache. */
  private async parseSpec(path: string, oid: string): Promise<ParseResult> {
    const key = ParseCache.key('spec', path, oid);
    const cached = this.cache.get(key) as ParseResult | undefined;
    if (cached) return cached;
    let result: ParseResult;
    try {
      result = parseManifest(path, await readText(this.ctx, oid));
    } catch (err) {
      return { ok: false, errors: [{ pointer: '/', message: `unreadable: ${String(err)}` }] };
    }
    this.cache.set(key, result);
    return result;
  }

  /**
   * Apply changed spec files to the index: routers, then policies, then sessions (a pull request may add a
   * router and its sessions together). Invalid files are reported and skipped; the previous state of that
   * manifest stays. Then commit what the store completes: allocated fields and first statuses.
   */
  private async applySpecChanges(changes: FileChange[]): Promise<void> {
    for (const c of changes) this.rejected.delete(c.path);
    const byPath = new Map<string, string | undefined>();
    for (const [path, oid] of this.rejected) byPath.set(path, oid);
    for (const c of changes) byPath.set(c.path, c.oid);
    const previouslyRejected = new Set(this.rejected.keys());
    this.rejected.clear();

    const parsed: { path: string; oid: string; manifest: ParsedManifest }[] = [];
    const deleted: string[] = [];
    const entries = [...byPath].filter(([path]) => isManifestPath(path));
    const results = await mapLimit(entries, 16, ([path, oid]) =>
      oid === undefined ? Promise.resolve(undefined) : this.parseSpec(path, oid),
    );
    for (const [i, [path, oid]] of entries.entries()) {
      const result = results[i];
      if (oid === undefined || result === undefined) {
        deleted.push(path);
        continue;
      }
      if (result.ok) parsed.push({ path, oid, manifest: result.manifest });
      else this.reject(path, oid, result.errors, previouslyRejected);
    }

    const order = { Router: 0, RoutingPolicy: 1, PeeringSession: 2 } as const;
    parsed.sort((a, b) => order[a.manifest.kind] - order[b.manifest.kind]);
    // Deleted sessions first, so their ports and names are free for sessions added in the same change.
    for (const path of deleted) {
      const info = classifyPath(path);
      if (info?.kind === 'PeeringSession') this.removeSession(info.name);
    }
    for (const { path, oid, manifest } of parsed) {
      if (manifest.kind === 'Router') {
        const errors = routerSetErrors(manifest.name, manifest.spec, this.routers.values());
        if (errors.length > 0) this.reject(path, oid, errors, previouslyRejected);
        else this.putRouter(manifest.name, manifest.spec);
      } else if (manifest.kind === 'RoutingPolicy') {
        this.putPolicyIndex(manifest.name, manifest.spec);
      } else {
        this.applySessionFromGit(path, oid, manifest, previouslyRejected);
      }
    }
    for (const path of deleted) {
      const info = classifyPath(path);
      if (info?.kind === 'RoutingPolicy') this.removePolicy(info.name);
      if (info?.kind === 'Router') {
        const left = this.listSessions({ router: info.name }).length;
        if (left > 0) {
          this.log.warn(
            { router: info.name, sessions: left },
            'store: router removed in git while sessions still use it',
          );
        }
        this.removeRouter(info.name);
      }
    }
  }

  private applySessionFromGit(
    path: string,
    oid: string,
    manifest: Extract<ParsedManifest, { kind: 'PeeringSession' }>,
    previouslyRejected: Set<string>,
  ): void {
    const existingUuid = this.sessionByName.get(manifest.name);
    const existing = existingUuid ? this.sessions.get(existingUuid) : undefined;
    const input = manifest.spec;
    const set = this.manifestSet();
    const errors: FieldError[] = sessionSetErrors(manifest.name, input, set);
    if (errors.length > 0) return this.reject(path, oid, errors, previouslyRejected);
    const router = this.routers.get(input.router) as Router;
    // What the API refuses at create, a merge must not bring in either: a peer address routed into the
    // tunnel would capture a loopback, the network's own prefixes or another ASN's traffic.
    const addressing = sessionAddressingErrors(
      manifest.name,
      input,
      router.spec,
      set.policyFor(input.router),
      this.addressNeighbours(input),
      '/spec',
    );
    if (addressing.length > 0) {
      // A policy tightened after a session was stored does not remove it (docs/api.md: the admin list
      // flags it, approve and enable refuse it): one the store holds, or at start finds with its status
      // under the same uuid, is kept while a merge leaves its addresses and key as they were.
      const kept = existing
        ? ADDRESSING_FIELDS.every((f) => existing.spec[f] === input[f])
        : input.uuid !== undefined && this.statusFiles.get(manifest.name)?.uuid === input.uuid;
      if (!kept) return this.reject(path, oid, addressing, previouslyRejected);
      this.log.warn(
        { session: manifest.name, errors: addressing.map((e) => `${e.pointer}: ${e.message}`) },
        'store: session breaks the current policy; kept, flagged in the admin list',
      );
    }
    let listenPort = input.listenPort ?? existing?.spec.listenPort;
    if (listenPort === undefined) {
      const used = this.usedPorts(input.router);
      if (existing) used.delete(existing.spec.listenPort);
      listenPort = allocateListenPort(input.asn, router.spec, used);
      if (listenPort === undefined) {
        return this.reject(
          path,
          oid,
          [{ pointer: '/spec/listenPort', message: `router ${input.router} has no free listen port` }],
          previouslyRejected,
        );
      }
    }
    const spec: SessionSpec = {
      ...input,
      uuid: input.uuid ?? existing?.spec.uuid ?? this.statusFiles.get(manifest.name)?.uuid ?? randomUUID(),
      listenPort,
      createdAt: input.createdAt ?? existing?.spec.createdAt ?? new Date().toISOString(),
    };
    if (existing && existing.spec.uuid !== spec.uuid) this.removeSession(manifest.name);
    if (input.uuid === undefined || input.listenPort === undefined || input.createdAt === undefined) {
      this.incompleteSpecs.add(manifest.name);
    } else this.incompleteSpecs.delete(manifest.name);
    let status: SessionStatusRecord;
    const file = this.statusFiles.get(manifest.name);
    if (existing && existing.spec.uuid === spec.uuid) status = existing.status;
    else if (file && file.uuid === spec.uuid) status = file.status;
    else {
      const mergeIsApproval = this.policies.get('default')?.spec.mergeIsApproval ?? false;
      status = mergedSessionStatus(mergeIsApproval, new Date().toISOString());
    }
    this.putSession(manifest.name, spec, status);
    if (file && file.uuid === spec.uuid) this.unsavedStatus.delete(manifest.name);
    this.log.debug({ session: manifest.name, path }, 'store: session applied from git');
  }

  private reject(path: string, oid: string, errors: FieldError[], previouslyRejected: Set<string>): void {
    this.rejected.set(path, oid);
    if (previouslyRejected.has(path)) return;
    const kind = classifyPath(path)?.kind ?? 'unknown';
    invalidManifests.inc({ kind });
    this.log.error(
      { path, errors: errors.map((e) => `${e.pointer}: ${e.message}`) },
      'store: invalid manifest in git skipped',
    );
  }

  /** Manifests this store rejected, by path (for diagnostics and tests). */
  rejectedManifests(): string[] {
    return [...this.rejected.keys()].sort();
  }

  // ---------------------------------------------------------------- index

  private manifestSet(): ManifestSet {
    return {
      router: (name) => this.routers.get(name)?.spec,
      policyFor: (router) => mergedPolicy(this, router),
      portOwner: (router, port, self) => {
        const owner = this.ports.get(router)?.get(port);
        return owner !== self ? owner : undefined;
      },
      sessionUuidOwner: (uuid, self) => {
        const owner = this.sessions.get(uuid)?.name;
        return owner !== self ? owner : undefined;
      },
    };
  }

  /**
   * Files the session under what it claims (its peer addresses, and its WireGuard key on its router), or
   * takes it out of that index: the rules compare a session with those holding a claim of its, never
   * with every session (loading 10,000 sessions must not compare each with all).
   */
  private indexClaims(session: Session, present: boolean): void {
    for (const claim of claimsOf(session.spec)) {
      let uuids = this.sessionsByClaim.get(claim);
      if (present) {
        if (!uuids) this.sessionsByClaim.set(claim, (uuids = new Set()));
        uuids.add(session.spec.uuid);
      } else if (uuids?.delete(session.spec.uuid) && uuids.size === 0) this.sessionsByClaim.delete(claim);
    }
  }

  /**
   * What the address and key rules compare a session with (rules.ts): the routers, and the sessions
   * holding one of its claims.
   */
  private addressNeighbours(
    spec: Pick<SessionSpec, 'router' | 'ipv6' | 'publicKey'> & { ipv4?: string | undefined },
  ): NetworkView {
    const uuids = new Set<string>();
    for (const claim of claimsOf(spec))
      for (const uuid of this.sessionsByClaim.get(claim) ?? []) uuids.add(uuid);
    return {
      routers: this.routers.values(),
      sessions: [...uuids].flatMap((uuid) => this.sessions.get(uuid) ?? []),
    };
  }

  private usedPorts(router: string): Set<number> {
    return new Set(this.ports.get(router)?.keys() ?? []);
  }

  /** The shared spec rules (rules.ts), then: a changed port must be free on this store's index. */
  private checkSessionSpec(current: Session, next: SessionSpec): SessionSpec {
    const spec = checkedSessionSpec(current, next);
    if (spec.listenPort !== current.spec.listenPort) {
      const owner = this.ports.get(spec.router)?.get(spec.listenPort);
      if (owner && owner !== current.name) {
        throw new ProblemError('CONFLICT', `port ${spec.listenPort} is used by session ${owner}`, [
          { pointer: '/listenPort', message: `is used by session ${owner}` },
        ]);
      }
    }
    return spec;
  }

  private sessionStatusWrite(session: Session): FileWrite {
    // metrics are observations (observations.ts), not status history
    const { metrics: _observed, ...status } = session.status;
    const file: SessionStatusFile = { uuid: session.spec.uuid, status };
    return { path: sessionPath(session.spec.router, session.spec.asn), text: dump(file, YAML), parsed: file };
  }

  private putRouter(name: string, spec: RouterSpec): Router {
    const router = deepFreeze({ name, spec, status: this.routerStatus.get(name) ?? {} });
    this.routers.set(name, router);
    this.feed.publish({ kind: 'Router', name, type: 'put' });
    return router;
  }

  private removeRouter(name: string): void {
    if (!this.routers.delete(name)) return;
    this.feed.publish({ kind: 'Router', name, type: 'delete' });
  }

  private putPolicyIndex(name: string, spec: PolicySpec): Policy {
    const policy = deepFreeze({ name, spec });
    this.policies.set(name, policy);
    this.feed.publish({
      kind: 'RoutingPolicy',
      name,
      type: 'put',
      router: name === 'default' ? undefined : name,
    });
    return policy;
  }

  private removePolicy(name: string): void {
    if (!this.policies.delete(name)) return;
    this.feed.publish({
      kind: 'RoutingPolicy',
      name,
      type: 'delete',
      router: name === 'default' ? undefined : name,
    });
  }

  /** `statusSaved`: the status ref holds this status already (else the next sync commits it). */
  private putSession(
    name: string,
    spec: SessionSpec,
    status: SessionStatusRecord,
    { statusSaved = false } = {},
  ): Session {
    const previous = this.sessions.get(spec.uuid);
    if (previous) {
      this.ports.get(previous.spec.router)?.delete(previous.spec.listenPort);
      this.indexClaims(previous, false);
    }
    const session = deepFreeze({ name, spec, status });
    this.sessions.set(spec.uuid, session);
    this.indexClaims(session, true);
    this.sessionByName.set(name, spec.uuid);
    let ports = this.ports.get(spec.router);
    if (!ports) this.ports.set(spec.router, (ports = new Map()));
    ports.set(spec.listenPort, name);
    if (statusSaved) this.unsavedStatus.delete(name);
    else this.unsavedStatus.add(name);
    this.feed.publish({ kind: 'PeeringSession', name, type: 'put', router: spec.router });
    return session;
  }

  private removeSession(name: string, { statusSaved = false } = {}): void {
    const uuid = this.sessionByName.get(name);
    const session = uuid ? this.sessions.get(uuid) : undefined;
    if (!uuid || !session) return;
    this.sessions.delete(uuid);
    this.sessionByName.delete(name);
    this.indexClaims(session, false);
    if (statusSaved) this.unsavedStatus.delete(name);
    else this.unsavedStatus.add(name);
    this.incompleteSpecs.delete(name);
    const ports = this.ports.get(session.spec.router);
    if (ports?.get(session.spec.listenPort) === name) ports.delete(session.spec.listenPort);
    this.feed.publish({ kind: 'PeeringSession', name, type: 'delete', router: session.spec.router });
  }
}

/** What a session claims for itself alone: its peer addresses, and its WireGuard key on its router. */
function claimsOf(spec: {
  router: string;
  ipv6: string;
  ipv4?: string | undefined;
  publicKey: string;
}): string[] {
  const claims = [`address ${spec.ipv6}`, `key ${spec.router} ${wireGuardKeyId(spec.publicKey)}`];
  if (spec.ipv4 !== undefined) claims.push(`address ${spec.ipv4}`);
  return claims;
}

const DISK_ERRORS = new Set(['ENOSPC', 'EDQUOT', 'EROFS', 'EIO', 'EACCES', 'EPERM', 'EMFILE', 'ENFILE']);

/** The errno code of a file system failure that is the disk's, not the request's. */
function diskErrorCode(err: unknown): string | undefined {
  for (let e = err; e instanceof Error; e = e.cause) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== undefined && DISK_ERRORS.has(code)) return code;
  }
  return undefined;
}

function backoff(attempt: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 30 * attempt));
}

function unavailable(err: RefMovedError): ProblemError {
  return new ProblemError('STORE_UNAVAILABLE', `the store repository is busy: ${err.message}; try again`);
}

function byName(a: { name: string }, b: { name: string }): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

/** The status file of a session, from its name `as<asn>-<router>`. */
function statusPathOf(name: string): string {
  const m = /^as(\d+)-(.+)$/.exec(name);
  if (!m) throw new Error(`not a session name: ${name}`);
  return sessionPath(m[2] as string, Number(m[1]));
}

/** A spec file write, with what it parses to for the parse cache. */
function manifestWrite(kind: ParsedManifest['kind'], path: string, name: string, spec: object): FileWrite {
  const parsed: ParseResult = { ok: true, manifest: { kind, name, spec } as ParsedManifest };
  return { path, text: renderManifest(kind, name, spec), parsed };
}
