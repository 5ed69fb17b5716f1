/**
 * The git store: manifests in a bare repository (docs/store.md). Spec files live on the main branch,
 * written by people (pull requests pushed into the repository, a remote) and by the controller; status
 * lives on its own ref so controller writes never conflict with people's edits. Every write is one commit
 * whose author and message say who asked for what.
 *
 * The index, the reads and every rule are the core's, which holds this back end (../core/backend.ts):
 * it runs each write's attempt in its commit queue (caught up first, run again when a push moved the
 * branch), persists what the rules judged (commits.ts), follows the repository into the index
 * (follow.ts) and a forge (remote.ts), keeps observations (observation-flush.ts) and packs the
 * repository (../gitdb/housekeeping.ts).
 *
 * Over 600 lines: one back end's persistence of every kind of write, its lifecycle (instance lock, a
 * read-only start, taking over) and its cycles (poll, forge, housekeeping); what stands alone has a
 * module of its own (docs/store.md, The store core and the rules).
 */
import git from 'isomorphic-git';
import { access, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { dump } from 'js-yaml';
import pino from 'pino';
import { diskErrorCode } from '../../../common/atomic-write.ts';
import { parseYaml, policyPath, routerPath, sessionPath } from '../../../common/manifests.ts';
import type { ForgeConflict, RouterSpec } from '../../../common/schema.ts';
import { gitFs } from '../../git-fs.ts';
import { counter } from '../../metrics.ts';
import { topics, type Topic } from '../change-feed.ts';
import { forgeConflictEvent } from '../core/events.ts';
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
import { readRevocationList, type RevocationList, type Revocations } from '../core/revocations.ts';
import type { Outbox, OutboxChange } from '../core/outbox.ts';
import type { StoreIndex } from '../core/store-index.ts';
import type { Actor, Policy, Router, Session, WriteState } from '../store.ts';
import { Branch } from './branch.ts';
import { Commits } from './commits.ts';
import { manifestWrite, sessionStatusWrite, YAML } from './file-writes.ts';
import { Follower } from './follow.ts';
import { CONFLICTS_PATH, ForgeConflictRecords } from './forge-conflicts.ts';
import { gcAuto } from '../gitdb/housekeeping.ts';
import { closeObjects, encodeObject, readText, type GitContext } from '../gitdb/objects.ts';
import { ObservationFlush } from './observation-flush.ts';
import { outboxMessage, outboxWrites } from './outbox.ts';
import { ParseCache, type CacheLoad } from './parse-cache.ts';
import { installPreReceiveHook } from './pre-receive.ts';
import { Journal, takeOver, type InstanceLock } from '../gitdb/recovery.ts';
import { RemoteSync, type RemoteOptions } from './remote.ts';
import { SyncPush } from './sync-push.ts';
import { listFiles } from '../gitdb/tree.ts';

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
  /**
   * Install `hooks/pre-receive` running this process's `peerops hook pre-receive` whenever the store
   * takes the repository (docs/gitops.md, "Checked pushes"): `peerops serve` does; a test's or
   * benchmark's process is no peerops entry point.
   */
  preReceiveHook?: boolean;
  logger?: pino.Logger;
}

export const STATUS_REF = 'refs/heads/peerops-status';
/** The start's log line on the parse cache (docs/store.md, "The parse cache"). */
const CACHE_LOAD_SAID: Record<CacheLoad['found'], string> = {
  taken: 'taken',
  none: 'absent: every blob is read',
  'other revision': 'written by another revision of the code: every blob is read',
};

/**
 * The revoked tokens (docs/login.md, Revoking tokens), on the status ref: the controller's own record,
 * which no pull request edits, in the repository's history and backups like everything else it keeps.
 */
export const REVOCATIONS_PATH = 'tokens/revoked.yaml';
const CONTROLLER: Actor = { name: 'controller', role: 'controller' };

const syncErrors = counter({
  name: 'peerops_store_sync_errors_total',
  help: 'Failed attempts to follow the repository or remote',
});

/** The git back end the store core holds (../core/backend.ts). */
export class GitBackend implements StoreBackend {
  readonly kind = 'git' as const;
  private readonly index: StoreIndex;
  private readonly revocations: Revocations;
  private readonly eventOutbox: Outbox;
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
  private readonly cache: ParseCache;
  private readonly journal: Journal;
  private readonly commits: Commits;
  private readonly follower: Follower;
  private readonly observations: ObservationFlush;
  private instanceLock: InstanceLock | undefined;
  private timers: NodeJS.Timeout[] = [];
  private readonly stopHousekeeping = new AbortController();
  private housekeeping: Promise<void> | undefined;
  private housekeepingUnavailable = false;
  private syncQueued = false;
  /** The blob of REVOCATIONS_PATH the revocations in memory were read from. */
  private revocationsOid: string | undefined;
  private remote: RemoteSync | undefined;
  /** The synchronous push mode's waiting writes (sync-push.ts); undefined without a forge or in async mode. */
  private syncPush: SyncPush | undefined;
  /** Changes of the store's that forge edits replaced (forge-conflicts.ts), as the status ref holds them. */
  private readonly conflicts = new ForgeConflictRecords();
  /** The running remote cycle; a request meanwhile runs one more after it. */
  private remoteCycle: Promise<void> | undefined;
  private remoteAgain = false;
  private started = false;
  private closed = false;

  constructor(options: GitStoreOptions, state: CoreState) {
    this.index = state.index;
    this.revocations = state.revocations;
    this.eventOutbox = state.outbox;
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
    this.journal = new Journal(options.dir);
    this.spec = new Branch(this.ctx, `refs/heads/${this.options.branch}`, {
      cache: this.cache,
      kind: 'spec',
    });
    this.status = new Branch(this.ctx, STATUS_REF, { cache: this.cache, kind: 'status' });
    const parts = {
      ctx: this.ctx,
      journal: this.journal,
      spec: this.spec,
      status: this.status,
      log: this.log,
    };
    this.commits = new Commits(parts);
    this.observations = new ObservationFlush({
      gitdir: options.dir,
      index: this.index,
      commits: this.commits,
      log: this.log,
    });
    this.follower = new Follower({
      ...parts,
      index: this.index,
      events: this.eventOutbox,
      cache: this.cache,
      commits: this.commits,
      observations: this.observations,
    });
    this.index.onMeshKeyChange = (router) => this.observations.routerStatusChanged(router);
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
    const taken = await takeOver(this.options.dir, this.journal, STATUS_REF, this.log);
    if ('lock' in taken) {
      this.instanceLock = taken.lock;
      this.commits.recovered();
    } else this.startReadOnly(taken.readOnly);
    const cache = await this.cache.load();
    this.log.info({ parseCache: cache }, `store: parse cache ${CACHE_LOAD_SAID[cache.found]}`);
    await this.commits.serialised(async () => {
      await this.follower.syncAll();
      this.follower.markOrphanStatus();
      if (this.follower.hasUnsavedStatus()) await this.follower.completeDeferred();
      await this.observations.restore();
      await this.loadRevocations();
      await this.loadForgeConflicts();
    });
    if (this.instanceLock) await this.saveCache();
    this.timers.push(setInterval(() => this.requestSync(), this.options.pollIntervalMs));
    this.timers.push(
      setInterval(() => void this.flushObservations().catch(() => {}), this.options.observationFlushMs),
    );
    if (this.options.housekeepingIntervalMs > 0)
      this.timers.push(setInterval(() => void this.housekeep(), this.options.housekeepingIntervalMs));
    for (const t of this.timers) t.unref();
    if (this.instanceLock) await this.startWriting();
  }

  /**
   * A data directory that refuses the instance lock (docs/store.md, "A read-only data directory"): reads
   * and agents' polls are served from the repository as it is, every write answers 503, and each poll
   * tries the lock again (takeWriterRole).
   */
  private startReadOnly(code: string): void {
    this.commits.readOnly(`the store's data directory is read-only (${code})`);
    this.log.warn(
      { dir: this.options.dir, code },
      'store: the data directory is read-only: serving reads without the instance lock (no process can write here, so another reader is harmless); writes answer 503 until it is writable. Skipped until then: crash leftovers cleanup, parse cache save, observation flushes, housekeeping, the pre-receive hook and the forge',
    );
  }

  /** While read-only: once the data directory takes the instance lock, the store writes again. */
  private async takeWriterRole(): Promise<void> {
    let taken: Awaited<ReturnType<typeof takeOver>>;
    try {
      taken = await takeOver(this.options.dir, this.journal, STATUS_REF, this.log);
    } catch (err) {
      // still refused by the disk (full now, say): the next poll tries again
      if ((err as NodeJS.ErrnoException).code !== undefined) return;
      // a controller that started meanwhile on the writable directory owns it now: "… in use by another
      // controller (pid N); stop it first"
      const reason = (err as Error).message;
      if (this.commits.writeState().problem?.message !== reason) this.log.warn(reason);
      this.commits.readOnly(reason);
      return;
    }
    if (!('lock' in taken)) return;
    this.instanceLock = taken.lock;
    this.commits.recovered();
    this.commits.writable();
    this.log.info('store: the data directory is writable again: took the instance lock; writes accepted');
    await this.startWriting();
  }

  /** What only the holder of the instance lock runs: the pre-receive hook, following a forge. */
  private async startWriting(): Promise<void> {
    if (this.options.preReceiveHook)
      await installPreReceiveHook(this.options.dir, {
        ...(this.options.branch !== 'main' ? { branch: this.options.branch } : {}),
      }).catch((err: unknown) =>
        this.log.error({ err: String(err) }, 'store: the pre-receive hook could not be installed'),
      );
    if (this.options.remote) this.followRemote(this.options.remote);
  }

  private followRemote(remote: RemoteOptions): void {
    this.remote = new RemoteSync(
      { ...remote, branch: remote.branch ?? this.options.branch },
      {
        ctx: this.ctx,
        specRef: this.spec.ref,
        statusRef: this.status.ref,
        log: this.log,
        serialised: (fn) =>
          this.commits.serialised(async () => {
            await this.follower.syncAll();
            const result = await fn();
            await this.follower.syncAll();
            await this.loadForgeConflicts();
            return result;
          }),
        head: (ref) => (ref === this.spec.ref ? this.spec.head : this.status.head),
        moveRefs: (updates) => this.commits.moveRefs(updates),
        // the records and their admin event in one status commit (the sync after reads both back)
        recordConflicts: async (found) =>
          (
            await this.status.prepare(
              [
                this.conflicts.adding(found),
                ...outboxWrites(this.eventOutbox.prepare(found.map(forgeConflictEvent))),
              ],
              CONTROLLER,
              `record ${found.length} change(s) replaced by forge edits`,
            )
          )?.update,
        conflicts: () => this.conflicts.list(),
      },
    );
    if ((remote.pushMode ?? 'sync') === 'sync')
      this.syncPush = new SyncPush(this.remote, this.remote.host, {
        url: remote.url,
        branch: remote.branch ?? this.options.branch,
        timeoutMs: remote.pushTimeoutMs ?? 5000,
        pushStatus: remote.pushStatus !== false,
      });
    this.timers.push(setInterval(() => this.requestRemoteSync(), remote.intervalMs ?? 5000).unref());
    this.requestRemoteSync();
  }

  /**
   * A write in the commit queue (commits.ts), one at a time: caught up with the repository first, run
   * again when a push moved a ref underneath; after it, what it makes valid, and the forge. The loop is
   * here, beside what it calls, so the queue below calls nothing back up (docs/architecture.md).
   */
  private async queued<T>(fn: () => Promise<T>): Promise<T> {
    this.commits.admit();
    return this.commits.serialised(async () => {
      this.commits.refuseWhileReadOnly();
      try {
        for (let attempt = 1; ; attempt++) {
          await this.follower.syncAll();
          try {
            const result = await fn();
            await this.follower.retryRejected();
            this.requestRemoteSync();
            this.commits.writeSucceeded();
            return result;
          } catch (err) {
            await this.commits.retryOrGiveUp(err, attempt);
          }
        }
      } catch (err) {
        throw this.commits.writeFailed(err);
      }
    });
  }

  /**
   * A write, answered as the push mode says (docs/gitops.md, "Push modes"): in the synchronous mode a
   * user's or an admin's once the forge holds it; agents' reports and the controller's own are pushed by
   * the next cycle without waiting (docs/decisions.md).
   */
  async write<T>(actor: Actor, attempt: Attempt<T>): Promise<T> {
    const sync = this.syncPush;
    if (!sync || (actor.role !== 'user' && actor.role !== 'admin')) return this.queued(attempt);
    let held: Promise<void> = Promise.resolve();
    const result = await this.queued(async () => {
      const before = sync.heads();
      const value = await attempt();
      held = sync.enlist(before);
      // answered below; a write that fails after enlisting is not awaited, nor an unhandled rejection
      held.catch(() => {});
      return value;
    });
    await held;
    return result;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.commits.close();
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    this.stopHousekeeping.abort();
    await this.housekeeping;
    await this.remoteCycle;
    await this.commits.drain();
    try {
      if (this.instanceLock) {
        // a disk that refuses the last flush loses what a crash would (docs/store.md): logged, not fatal
        await this.flushObservations().catch((err: unknown) => {
          if (diskErrorCode(err) === undefined) throw err;
          this.log.error({ err: String(err) }, 'store: observations since the last flush not saved');
        });
        await this.saveCache();
      } else this.log.warn('store: read-only data directory: observations since the start not saved');
    } finally {
      await closeObjects(this.ctx);
      await this.instanceLock?.release();
    }
  }

  writeState(): WriteState {
    return this.commits.writeState();
  }

  /** Manifests this store rejected, by path (for diagnostics and tests). */
  rejectedManifests(): string[] {
    return this.follower.rejectedManifests();
  }

  skippedManifests(): ReturnType<Follower['skipped']> {
    return this.follower.skipped();
  }

  private async saveCache(): Promise<void> {
    const live = () => {
      const keys = new Set<string>();
      for (const [path, oid] of listFiles(this.spec.root)) keys.add(ParseCache.key('spec', path, oid));
      for (const [path, oid] of listFiles(this.status.root)) keys.add(ParseCache.key('status', path, oid));
      return keys;
    };
    try {
      await this.cache.save(live, { spec: this.spec.root, status: this.status.root }, () =>
        this.follower.judgement(),
      );
    } catch (err) {
      this.log.warn({ err: String(err) }, 'store: could not save the parse cache (next start reads blobs)');
    }
  }

  // ---------------------------------------------------------------- router writes (each inside write's attempt)

  async persistNewRouter({ name, spec }: Judged<NewRouter>, actor: Actor): Promise<Router> {
    return this.commitRouter(name, spec, actor, `add router ${name}`);
  }

  persistRouterUpdate(
    { current, spec }: Judged<RouterUpdate>,
    actor: Actor,
    message: string,
  ): Promise<Router> {
    return this.commitRouter(current.name, spec, actor, message);
  }

  async persistTokenHash({ router, spec }: Judged<TokenHash>, actor: Actor): Promise<void> {
    await this.commitRouter(router.name, spec, actor, `set the agent token of router ${router.name}`);
  }

  private async commitRouter(name: string, spec: RouterSpec, actor: Actor, message: string): Promise<Router> {
    await this.commits.commitSpec([manifestWrite('Router', routerPath(name), name, spec)], actor, message);
    return this.index.putRouter(name, spec);
  }

  async persistRouterRemoval({ name }: Judged<Router>, actor: Actor): Promise<void> {
    await this.commits.commitSpec(
      [{ path: routerPath(name), text: undefined }],
      actor,
      `remove router ${name}`,
    );
    this.index.removeRouter(name);
    this.observations.routerStatusChanged(name);
  }

  // ---------------------------------------------------------------- session writes

  async persistNewSession(
    prepared: Judged<PreparedSession>,
    actor: Actor,
    message: string,
  ): Promise<Session> {
    // judged inside the write queue: creates sent at once are each judged after the ones before
    const spec = { ...prepared.spec, listenPort: prepared.allocatePort() };
    const { name } = prepared;
    // spec, first status and their events in one step: a crash leaves all or none (recovery.ts)
    const statusWrites = [
      sessionStatusWrite({ name, spec, status: prepared.status }),
      ...outboxWrites(prepared.outbox),
    ];
    await this.commits.commitSession(
      [manifestWrite('PeeringSession', sessionPath(spec.router, spec.asn), name, spec)],
      statusWrites,
      actor,
      message,
    );
    this.follower.statusCommitted(statusWrites);
    this.follower.outboxCommitted(prepared.outbox);
    return this.follower.putSession(name, spec, prepared.status, true);
  }

  async persistSessionChange(
    change: Judged<PreparedChange>,
    actor: Actor,
    message: string,
  ): Promise<Session | undefined> {
    const { current } = change;
    const path = sessionPath(current.spec.router, current.spec.asn);
    // a write's events go in its status commit: a write of the spec alone makes none (core/events.ts)
    const events = outboxWrites(change.outbox);
    if (change.delete) {
      const statusWrites = [{ path, text: undefined }, ...events];
      await this.commits.commitSession([{ path, text: undefined }], statusWrites, actor, message);
      this.follower.statusCommitted(statusWrites);
      this.follower.outboxCommitted(change.outbox);
      this.follower.removeSession(current.name, true);
      return undefined;
    }
    const next: Session = { name: current.name, spec: change.spec, status: change.status };
    // nothing is applied, and nothing answered, before spec, status and events are committed together
    const statusWrites = change.statusChanged ? [sessionStatusWrite(next), ...events] : events;
    await this.commits.commitSession(
      change.specChanged ? [manifestWrite('PeeringSession', path, current.name, change.spec)] : [],
      statusWrites,
      actor,
      message,
    );
    this.follower.statusCommitted(statusWrites);
    this.follower.outboxCommitted(change.outbox);
    return this.follower.putSession(
      current.name,
      change.spec,
      change.status,
      change.statusChanged || this.follower.statusSaved(current.name),
    );
  }

  // ---------------------------------------------------------------- policy writes

  async persistPolicy({ name, spec }: Judged<PolicyPut>, actor: Actor): Promise<Policy> {
    await this.commits.commitSpec(
      [manifestWrite('RoutingPolicy', policyPath(name), name, spec)],
      actor,
      `set policy ${name}`,
    );
    return this.index.putPolicy(name, spec);
  }

  async persistPolicyRemoval({ name }: Judged<Policy>, actor: Actor): Promise<void> {
    await this.commits.commitSpec(
      [{ path: policyPath(name), text: undefined }],
      actor,
      `remove policy ${name}`,
    );
    this.index.removePolicy(name);
  }

  // ---------------------------------------------------------------- token revocations

  async persistRevocations({ list, message }: Judged<RevocationsPut>, actor: Actor): Promise<RevocationList> {
    const text = dump(list, YAML);
    const blob = encodeObject('blob', Buffer.from(text, 'utf8'));
    await this.commits.commitStatus([{ path: REVOCATIONS_PATH, text, blob }], actor, message);
    this.revocations.replace(list);
    this.revocationsOid = blob.oid;
    return list;
  }

  // ---------------------------------------------------------------- outbox

  async persistOutbox(change: Judged<OutboxChange>): Promise<void> {
    if (change.add.length === 0 && change.remove.length === 0) return;
    await this.commits.commitStatus(outboxWrites(change), CONTROLLER, outboxMessage(change));
    this.follower.outboxCommitted(change);
  }

  /** The revocations the status ref holds, when they are not the ones in memory (start, a sync). */
  private async loadRevocations(): Promise<void> {
    const oid = this.status.fileOid(REVOCATIONS_PATH);
    if (oid === this.revocationsOid) return;
    let value: unknown;
    try {
      value = oid === undefined ? undefined : parseYaml(await readText(this.ctx, oid));
    } catch (err) {
      // The ones in memory stay: forgetting revocations would let revoked tokens in again.
      this.log.error({ err: String(err), path: REVOCATIONS_PATH }, 'store: unreadable token revocations');
      return;
    }
    const { list, skipped } = readRevocationList(value);
    if (skipped > 0)
      this.log.warn({ path: REVOCATIONS_PATH, skipped }, 'store: malformed token revocations left out');
    this.revocations.replace(list);
    this.revocationsOid = oid;
  }

  // ---------------------------------------------------------------- forge conflicts

  forgeConflicts(): ForgeConflict[] {
    return this.conflicts.list();
  }

  forgeConflictOf(uuid: string): ForgeConflict | undefined {
    return this.conflicts.ofSession(uuid);
  }

  clearForgeConflict(id: string, actor: Actor): Promise<void> {
    return this.queued(async () => {
      await this.commits.commitStatus([this.conflicts.clearing(id)], actor, `clear forge conflict ${id}`);
      await this.loadForgeConflicts();
    });
  }

  /** The conflicts the status ref holds, when they are not the ones in memory; their sessions' lists change. */
  private async loadForgeConflicts(): Promise<void> {
    const oid = this.status.fileOid(CONFLICTS_PATH);
    try {
      const change = this.conflicts.load(oid, oid === undefined ? undefined : await readText(this.ctx, oid));
      if (change.skipped > 0)
        this.log.warn(
          { path: CONFLICTS_PATH, skipped: change.skipped },
          'store: malformed forge conflicts left out',
        );
      const changed = new Set<Topic>();
      for (const c of [...change.added, ...change.removed])
        if (c.session) changed.add(topics.asnSessions(c.session.asn)).add(topics.allSessions);
      if (changed.size > 0) this.index.feed.publish(undefined, changed);
    } catch (err) {
      this.log.error({ err: String(err), path: CONFLICTS_PATH }, 'store: unreadable forge conflicts');
    }
  }

  // ---------------------------------------------------------------- observations

  /** Commit the mesh keys that changed, then write the observation file (observation-flush.ts). */
  async flushObservations(): Promise<void> {
    // without the instance lock nothing is written; the observations stay in memory (startReadOnly)
    if (!this.instanceLock) return;
    await this.observations.flush();
  }

  // ---------------------------------------------------------------- following and housekeeping

  /**
   * `git gc --auto` on the repository (housekeeping.ts), one run at a time. Beside the store's writes, not
   * in their queue: packing a large repository takes seconds that no API write should wait for.
   */
  housekeep(): Promise<void> {
    if (this.closed || !this.instanceLock) return Promise.resolve();
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

  private requestSync(): void {
    if (this.syncQueued || this.closed) return;
    this.syncQueued = true;
    void this.commits
      .serialised(async () => {
        this.syncQueued = false;
        if (this.instanceLock) await this.commits.probeDisk();
        else await this.takeWriterRole();
        await this.follower.syncAll();
        await this.loadRevocations();
        await this.loadForgeConflicts();
      })
      .catch((err: unknown) => {
        syncErrors.inc();
        this.log.error({ err }, 'store: following the repository failed');
      });
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
    const sync = this.syncPush;
    this.remoteCycle = remote.cycle(sync ? () => sync.step() : undefined).finally(() => {
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
}
