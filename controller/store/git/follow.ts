/**
 * Following the repository: what arrives on the spec branch and the status ref (a push, a merged pull
 * request, a fetch from the forge, a restart) is parsed, judged with the same rules as a create
 * (common/rules) and put into the shared index; an invalid manifest is reported once and skipped, its
 * previous state kept. What the store adds to manifests from git (allocated fields, first statuses) is
 * committed back. The bookkeeping of which session statuses the status ref holds lives here too.
 * Over 600 lines: both refs' changes are applied in one pass that shares which statuses are saved, which
 * manifests were rejected and why, and what still has to be completed; the rules it applies live in
 * common/rules.
 */
import { randomUUID } from 'node:crypto';
import type pino from 'pino';
import { mapLimit } from '../../../common/concurrency.ts';
import { withSessionConditions } from '../../../common/conditions.ts';
import type { FieldError } from '../../../common/errors.ts';
import {
  classifyPath,
  isManifestPath,
  parseManifest,
  parseYaml,
  sessionPath,
  type ParsedManifest,
  type ParseResult,
} from '../../../common/manifests.ts';
import { allocateListenPort } from '../../../common/naming.ts';
import {
  addressingChanged,
  isCompleteSpec,
  loopbackIndex,
  mergedPolicy,
  mergedSessionStatus,
  routerSetErrors,
  sessionAddressingErrors,
  sessionSetErrors,
  type SessionSetFacts,
} from '../../../common/rules/index.ts';
import {
  RouterStatus as RouterStatusSchema,
  SessionStatusSchema,
  type Adopted,
  type AdoptedInput,
  type RouterStatus,
  type SessionSpec,
  type SessionStatusRecord,
} from '../../../common/schema.ts';
import { validate } from '../../../common/validate.ts';
import { counter } from '../../metrics.ts';
import { SkipReport, type SkipReason } from '../core/skipped.ts';
import type { StoreIndex } from '../core/store-index.ts';
import { changeEvents, type EventSource, type NotificationEvent } from '../core/events.ts';
import { OUTBOX_LIMIT, type Outbox, type OutboxChange, type OutboxEntry } from '../core/outbox.ts';
import type { Actor, Session, SkippedManifest } from '../store.ts';
import type { Branch, FileWrite } from './branch.ts';
import type { Commits } from './commits.ts';
import { manifestWrite, sessionStatusWrite, type SessionStatusFile } from './file-writes.ts';
import { readText, type GitContext } from '../gitdb/objects.ts';
import type { ObservationFlush } from './observation-flush.ts';
import { routerObservations } from './observations.ts';
import { outboxId, outboxWrites, parseOutboxEntry } from './outbox.ts';
import { ParseCache, type Rejection } from './parse-cache.ts';
import type { FileChange } from '../gitdb/tree.ts';
import { fieldError } from '../../../common/messages.ts';

const CONTROLLER: Actor = { name: 'controller', role: 'controller' };

const invalidManifests = counter({
  name: 'peerops_store_invalid_manifests_total',
  help: 'Manifests arriving from git that failed validation and were skipped',
  labelNames: ['kind'],
});

/** The ASN and router of a session name `as<asn>-<router>`. */
function nameParts(name: string): { asn: number; router: string } {
  const m = /^as(\d+)-(.+)$/.exec(name);
  if (!m) throw new Error(`not a session name: ${name}`);
  return { asn: Number(m[1]), router: m[2] as string };
}

/** The status file of a session, from its name. */
function statusPathOf(name: string): string {
  const { asn, router } = nameParts(name);
  return sessionPath(router, asn);
}

/** A session as its status file on the status ref tells it: what an event says of it before a change. */
function savedSession(name: string, file: SessionStatusFile): EventSource {
  return { name, spec: { uuid: file.uuid, ...nameParts(name) }, status: file.status };
}

export class Follower {
  /** Status files read from the status ref, by session name. */
  readonly statusFiles = new Map<string, SessionStatusFile>();
  /** Sessions (by name) whose status on the status ref is not what the index holds (or must be removed). */
  private readonly unsavedStatus = new Set<string>();
  /** Sessions whose spec file in git lacks what the store allocated (uuid, listenPort, createdAt). */
  private readonly incompleteSpecs = new Set<string>();
  /** Manifests reported invalid, by path, so a file is reported once and retried when others change. */
  private readonly rejected = new Map<string, Rejection>();
  /** The gauge and the admin's condition, after each change applied (core/skipped.ts). */
  private readonly skipReport = new SkipReport();
  /** Until the first sync: it may take the judgement the parse cache kept (parse-cache.ts). */
  private firstSync = true;

  private readonly ctx: GitContext;
  private readonly index: StoreIndex;
  private readonly events: Outbox;
  private readonly spec: Branch;
  private readonly status: Branch;
  private readonly cache: ParseCache;
  private readonly commits: Commits;
  private readonly observations: ObservationFlush;
  private readonly log: pino.Logger;

  constructor(parts: {
    ctx: GitContext;
    index: StoreIndex;
    events: Outbox;
    spec: Branch;
    status: Branch;
    cache: ParseCache;
    commits: Commits;
    observations: ObservationFlush;
    log: pino.Logger;
  }) {
    this.ctx = parts.ctx;
    this.index = parts.index;
    this.events = parts.events;
    this.spec = parts.spec;
    this.status = parts.status;
    this.cache = parts.cache;
    this.commits = parts.commits;
    this.observations = parts.observations;
    this.log = parts.log;
  }

  /** A session written by the store: into the index; `statusSaved` when the status ref holds its status. */
  putSession(name: string, spec: SessionSpec, status: SessionStatusRecord, statusSaved: boolean): Session {
    const session = this.index.putSession(name, spec, status);
    if (statusSaved) this.unsavedStatus.delete(name);
    else this.unsavedStatus.add(name);
    return session;
  }

  removeSession(name: string, statusSaved: boolean): void {
    if (!this.index.removeSession(name)) return;
    if (statusSaved) this.unsavedStatus.delete(name);
    else this.unsavedStatus.add(name);
    this.incompleteSpecs.delete(name);
  }

  /** Whether the status ref holds the session's status as the index does. */
  statusSaved(name: string): boolean {
    return !this.unsavedStatus.has(name);
  }

  hasUnsavedStatus(): boolean {
    return this.unsavedStatus.size > 0;
  }

  /** The status files the status ref now holds, after a commit of `writes`. */
  statusCommitted(writes: FileWrite[]): void {
    for (const w of writes) {
      const info = classifyPath(w.path);
      if (info?.kind !== 'PeeringSession') continue;
      if (w.text === undefined) this.statusFiles.delete(info.name);
      else this.statusFiles.set(info.name, w.parsed as SessionStatusFile);
      this.unsavedStatus.delete(info.name);
    }
  }

  /** An outbox change the status ref now holds (a write's events, a confirmation): into the outbox. */
  outboxCommitted(change: OutboxChange): void {
    this.events.apply(change);
    if (change.dropped > 0)
      this.log.warn(
        { dropped: change.dropped, limit: OUTBOX_LIMIT, maxAgeDays: 7 },
        'store: outbox full or events a week old: the oldest undelivered events dropped',
      );
  }

  /** Manifests this store rejected, by path (for diagnostics and tests). */
  rejectedManifests(): string[] {
    return [...this.rejected.keys()].sort();
  }

  /** The manifests skipped now, by path, and since when the store skips some, or none. */
  skipped(): { manifests: SkippedManifest[]; since: string } {
    return this.skipReport.report(
      [...this.rejected].map(([path, r]) => ({ path, reason: r.reason, errors: r.errors })),
    );
  }

  /** The manifests rejected in the trees the branches hold: their judgement, which the parse cache keeps. */
  judgement(): Map<string, Rejection> {
    return this.rejected;
  }

  /** A new router or policy may make manifests valid that were rejected before. */
  async retryRejected(): Promise<void> {
    if (this.rejected.size > 0) await this.applySpecChanges([]);
  }

  /** At start: status files left behind by a crash between a session's removal and its status removal. */
  markOrphanStatus(): void {
    for (const name of this.statusFiles.keys()) if (!this.index.byName(name)) this.unsavedStatus.add(name);
  }

  /** Catch up with both refs; apply, validate and complete manifests that arrived from outside. */
  async syncAll(): Promise<void> {
    await this.commits.recoverJournal(false);
    const statusChanges = await this.status.sync();
    if (statusChanges.length > 0) await this.applyStatusChanges(statusChanges);
    const specChanges = await this.spec.sync();
    // A start on the trees the last run judged takes its judgement (which manifests the rules rejected)
    // instead of comparing every session with the others again: the same trees give the same verdicts.
    const judged = this.firstSync
      ? this.cache.takeJudgement(this.spec.root.oid, this.status.root.oid)
      : undefined;
    this.firstSync = false;
    if (specChanges.length > 0 || (statusChanges.length > 0 && this.rejected.size > 0)) {
      await this.applySpecChanges(specChanges, judged);
      if (specChanges.length > 0) {
        this.log.info(
          { commit: this.spec.head, files: specChanges.length, rejected: this.rejected.size },
          'store: caught up with the repository',
        );
      }
    }
    if (this.unsavedStatus.size > 0 || this.incompleteSpecs.size > 0) await this.completeDeferred();
  }

  /**
   * completeFromGit; what is not committed now stays marked and is retried on the next sync. Not tried
   * while the store cannot write (a read-only data directory, a full disk): the sync after it can does.
   */
  async completeDeferred(): Promise<void> {
    if (this.commits.writeState().problem) return;
    await this.completeFromGit().catch((err: unknown) =>
      this.log.warn({ err: String(err) }, 'store: completing manifests from git deferred'),
    );
  }

  /**
   * Commit what the store adds to manifests that arrived from git: first statuses (and removal of status
   * files whose session is gone), then the allocated fields. Status first: the uuid in the status file lets
   * a restart after a crash in between recover the same uuid.
   */
  private async completeFromGit(): Promise<void> {
    const statusWrites: FileWrite[] = [];
    // The events of what git brought (a merged session, one removed on the forge), from the status the
    // ref holds to the one written now: recorded in the same commit (docs/store.md, "The outbox").
    const events: NotificationEvent[] = [];
    for (const name of this.unsavedStatus) {
      const session = this.index.byName(name);
      const saved = this.statusFiles.get(name);
      events.push(...changeEvents(saved && savedSession(name, saved), session));
      if (session) statusWrites.push(sessionStatusWrite(session));
      else if (saved) statusWrites.push({ path: statusPathOf(name), text: undefined });
    }
    if (statusWrites.length > 0) {
      const outbox = this.events.prepare(events);
      await this.commits.commitStatus(
        [...statusWrites, ...outboxWrites(outbox)],
        CONTROLLER,
        `status of ${statusWrites.length} session(s) from git`,
      );
      this.statusCommitted(statusWrites);
      this.outboxCommitted(outbox);
    }
    this.unsavedStatus.clear();
    const specWrites: FileWrite[] = [];
    for (const name of this.incompleteSpecs) {
      const session = this.index.byName(name);
      if (session) {
        const path = sessionPath(session.spec.router, session.spec.asn);
        specWrites.push(manifestWrite('PeeringSession', path, name, session.spec));
      }
    }
    if (specWrites.length > 0) {
      await this.commits.commitSpec(
        specWrites,
        CONTROLLER,
        `complete ${specWrites.length} session(s) from git: uuid, listenPort, createdAt`,
      );
    }
    this.incompleteSpecs.clear();
  }

  private async applyStatusChanges(changes: FileChange[]): Promise<void> {
    await this.applyOutboxChanges(changes);
    const all = await mapLimit(changes, 16, async (change) => {
      const info = classifyPath(change.path);
      const parsed =
        info && change.oid !== undefined ? await this.parseStatus(change.path, change.oid, info.kind) : null;
      return { info, parsed };
    });
    for (const { info, parsed } of all) {
      if (!info) continue;
      if (info.kind === 'PeeringSession') {
        if (!parsed) {
          this.statusFiles.delete(info.name);
          continue;
        }
        const file = parsed as SessionStatusFile;
        this.statusFiles.set(info.name, file);
        // The status ref moved without this store's own commit: a write that stopped after its spec
        // commit, completed by this sync (recovery.ts). The ref holds its status, as a restart reads it.
        const session = this.index.byName(info.name);
        if (session?.spec.uuid === file.uuid) this.putSession(info.name, session.spec, file.status, true);
      } else if (info.kind === 'Router') {
        // the file holds the committed part; what agents reported since stays
        const file = (parsed ?? {}) as RouterStatus;
        const current = this.index.getRouter(info.name)?.status ?? {};
        // an older release committed observations too: the next flush moves them to the observation file
        if (Object.keys(routerObservations(file)).length > 0) {
          this.observations.routerStatusChanged(info.name);
          this.observations.fileStale();
        }
        this.index.setRouterStatus(info.name, { ...file, ...routerObservations(current) });
      }
    }
  }

  /**
   * Outbox files another writer added or removed (a start, a write completed by recovery, a fetch), read
   * through the parse cache: a restart with 10,000 events waiting reads none of their blobs.
   */
  private async applyOutboxChanges(changes: FileChange[]): Promise<void> {
    const files = changes.filter((c) => outboxId(c.path) !== undefined);
    if (files.length === 0) return;
    const gone = files.filter((c) => c.oid === undefined).map((c) => outboxId(c.path) as string);
    const read = await mapLimit(
      files.filter((c) => c.oid !== undefined),
      16,
      async (c): Promise<OutboxEntry | undefined> => {
        const key = ParseCache.key('status', c.path, c.oid as string);
        const cached = this.cache.get(key) as OutboxEntry | undefined;
        if (cached) return cached;
        const entry = parseOutboxEntry(c.path, await readText(this.ctx, c.oid as string).catch(() => ''));
        if (entry) this.cache.set(key, entry);
        else this.log.warn({ path: c.path }, 'store: unreadable outbox file ignored');
        return entry;
      },
    );
    this.events.forget(gone);
    this.events.load(read.filter((e): e is OutboxEntry => e !== undefined));
  }

  /** A status file's content, validated (null when unusable), through the parse cache. */
  private async parseStatus(
    path: string,
    oid: string,
    kind: string,
  ): Promise<SessionStatusFile | RouterStatus | null> {
    const key = ParseCache.key('status', path, oid);
    const cached = this.cache.get(key) as SessionStatusFile | RouterStatus | null | undefined;
    if (cached !== undefined) return cached;
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

  /** A spec file parsed and validated on its own, through the parse cache; an unreadable blob is not cached. */
  private async parseSpec(
    path: string,
    oid: string,
  ): Promise<ParseResult | { ok: false; reason: 'unreadable'; errors: FieldError[] }> {
    const key = ParseCache.key('spec', path, oid);
    const cached = this.cache.get(key) as ParseResult | undefined;
    if (cached) return cached;
    let result: ParseResult;
    try {
      result = parseManifest(path, await readText(this.ctx, oid));
    } catch (err) {
      return {
        ok: false,
        reason: 'unreadable',
        errors: [fieldError('/', 'field.unreadable', { reason: String(err) })],
      };
    }
    this.cache.set(key, result);
    return result;
  }

  /**
   * Apply changed spec files to the index: routers, then policies, then sessions (a pull request may add a
   * router and its sessions together). Invalid files are reported and skipped; the previous state of that
   * manifest stays. Then commit what the store completes: allocated fields and first statuses. With
   * `judged` (a start on trees judged before), the rules' verdicts are that judgement's: the manifests
   * it names are rejected again with its reasons, the others are not checked again.
   */
  private async applySpecChanges(changes: FileChange[], judged?: Map<string, Rejection>): Promise<void> {
    for (const c of changes) this.rejected.delete(c.path);
    const byPath = new Map<string, string | undefined>();
    for (const [path, { oid }] of this.rejected) byPath.set(path, oid);
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
      else this.reject(path, oid, result.reason, result.errors, previouslyRejected);
    }

    const order = { Router: 0, RoutingPolicy: 1, PeeringSession: 2 } as const;
    parsed.sort((a, b) => order[a.manifest.kind] - order[b.manifest.kind]);
    // Deleted sessions first, so their ports and names are free for sessions added in the same change.
    for (const path of deleted) {
      const info = classifyPath(path);
      if (info?.kind === 'PeeringSession') this.removeSession(info.name, false);
    }
    // routers come first: the loopbacks are indexed once they are all applied, for every session after
    let loopbacks: ReadonlyMap<string, string> | undefined;
    for (const { path, oid, manifest } of parsed) {
      const verdict = judged?.get(path);
      if (verdict !== undefined && verdict.oid === oid) {
        this.reject(path, oid, verdict.reason, verdict.errors, previouslyRejected);
        continue;
      }
      if (manifest.kind === 'Router') {
        const errors = judged ? [] : routerSetErrors(manifest.name, manifest.spec, this.index.routerValues());
        if (errors.length > 0) this.reject(path, oid, 'rules', errors, previouslyRejected);
        else this.index.putRouter(manifest.name, manifest.spec);
      } else if (manifest.kind === 'RoutingPolicy') {
        this.index.putPolicy(manifest.name, manifest.spec);
      } else if (judged) {
        this.applySession(path, oid, manifest, previouslyRejected);
      } else {
        loopbacks ??= loopbackIndex(this.index.routerValues());
        this.applySession(path, oid, manifest, previouslyRejected, loopbacks);
      }
    }
    for (const path of deleted) {
      const info = classifyPath(path);
      if (info?.kind === 'RoutingPolicy') this.index.removePolicy(info.name);
      if (info?.kind === 'Router') {
        const left = this.index.listSessions({ router: info.name }).length;
        if (left > 0) {
          this.log.warn(
            { router: info.name, sessions: left },
            'store: router removed in git while sessions still use it',
          );
        }
        this.index.removeRouter(info.name);
      }
    }
    this.skipReport.update(this.rejected.values());
  }

  /** What the rules spanning manifests read about one session (sessionSetErrors), from the index. */
  private sessionSetFacts(
    input: Extract<ParsedManifest, { kind: 'PeeringSession' }>['spec'],
  ): SessionSetFacts {
    const portHolder =
      input.listenPort === undefined ? undefined : this.index.portOwner(input.router, input.listenPort);
    const uuidHolder = input.uuid === undefined ? undefined : this.index.getSession(input.uuid)?.name;
    return {
      router: this.index.getRouter(input.router)?.spec,
      policy: mergedPolicy(this.index, input.router),
      portHolders: portHolder === undefined ? [] : [portHolder],
      uuidHolders: uuidHolder === undefined ? [] : [uuidHolder],
    };
  }

  /**
   * A session manifest into the index, once the rules accept it (`loopbacks`: the routers by loopback
   * address, which they ask about); without `loopbacks` the manifest was judged before (the judgement a
   * start took, applySpecChanges) and is not checked again.
   */
  private applySession(
    path: string,
    oid: string,
    manifest: Extract<ParsedManifest, { kind: 'PeeringSession' }>,
    previouslyRejected: Set<string>,
    loopbacks?: ReadonlyMap<string, string>,
  ): void {
    const existing = this.index.byName(manifest.name);
    const input = manifest.spec;
    if (loopbacks) {
      const errors = this.sessionRuleErrors(manifest.name, input, existing, loopbacks);
      if (errors.length > 0) return this.reject(path, oid, 'rules', errors, previouslyRejected);
    }
    const router = this.index.getRouter(input.router);
    if (!router) return;
    let listenPort = input.listenPort ?? existing?.spec.listenPort;
    if (listenPort === undefined) {
      const used = this.index.usedPorts(input.router);
      if (existing) used.delete(existing.spec.listenPort);
      listenPort = allocateListenPort(input.asn, router.spec, used);
      if (listenPort === undefined) {
        return this.reject(
          path,
          oid,
          'rules',
          [fieldError('/spec/listenPort', 'field.noFreePort', { router: input.router })],
          previouslyRejected,
        );
      }
    }
    const file = this.statusFiles.get(manifest.name);
    const complete = isCompleteSpec(input);
    // a complete manifest (every one the store wrote) is stored as parsed, not copied
    const { adopted, ...named } = input;
    const spec: SessionSpec = complete
      ? input
      : {
          ...named,
          uuid: input.uuid ?? existing?.spec.uuid ?? file?.uuid ?? randomUUID(),
          listenPort,
          createdAt: input.createdAt ?? existing?.spec.createdAt ?? new Date().toISOString(),
          ...(adopted ? { adopted: this.adoptedByMerge(adopted, existing?.spec.adopted) } : {}),
        };
    if (existing && existing.spec.uuid !== spec.uuid) this.removeSession(manifest.name, false);
    if (!complete) this.incompleteSpecs.add(manifest.name);
    else this.incompleteSpecs.delete(manifest.name);
    let status: SessionStatusRecord;
    if (existing && existing.spec.uuid === spec.uuid) status = existing.status;
    else if (file && file.uuid === spec.uuid) status = file.status;
    else {
      const mergeIsApproval = this.index.getPolicy('default')?.spec.mergeIsApproval ?? false;
      status = withSessionConditions(
        mergedSessionStatus(mergeIsApproval, new Date().toISOString(), spec.adopted !== undefined),
        undefined,
      );
    }
    this.putSession(manifest.name, spec, status, file !== undefined && file.uuid === spec.uuid);
    this.log.debug({ session: manifest.name, path }, 'store: session applied from git');
  }

  /**
   * An `adopted` block that came by a merge, with who and when: the merge commit that brought it and now
   * (docs/gitops.md, "Adopted sessions by pull request"); what the store already filled in is kept.
   */
  private adoptedByMerge(input: AdoptedInput, stored: Adopted | undefined): Adopted {
    return {
      ...input,
      by: input.by ?? stored?.by ?? `merge ${this.spec.head?.slice(0, 12) ?? ''}`.trimEnd(),
      at: input.at ?? stored?.at ?? new Date().toISOString(),
    };
  }

  /** Why the rules refuse a session manifest (common/rules); none when they accept it. */
  private sessionRuleErrors(
    name: string,
    input: Extract<ParsedManifest, { kind: 'PeeringSession' }>['spec'],
    existing: Session | undefined,
    loopbacks: ReadonlyMap<string, string>,
  ): FieldError[] {
    const facts = this.sessionSetFacts(input);
    const errors = sessionSetErrors(name, input, facts);
    if (errors.length > 0) return errors;
    if (!facts.router) return [];
    // What the API refuses at create, a merge must not bring in either: a peer address routed into the
    // tunnel would capture a loopback, the network's own prefixes or another ASN's traffic.
    const addressing = sessionAddressingErrors(
      name,
      input,
      facts.router,
      facts.policy,
      { routers: this.index.routerValues(), sessions: this.index.neighbours(input), loopbacks },
      '/spec',
    );
    if (addressing.length === 0) return [];
    // A policy tightened after a session was stored does not remove it (docs/api.md: the admin list
    // flags it, approve and enable refuse it): one the store holds, or at start finds with its status
    // under the same uuid, is kept while a merge leaves its addresses and key as they were.
    const kept = existing
      ? !addressingChanged(existing.spec, input)
      : input.uuid !== undefined && this.statusFiles.get(name)?.uuid === input.uuid;
    if (!kept) return addressing;
    this.log.warn(
      { session: name, errors: addressing.map((e) => `${e.pointer}: ${e.message}`) },
      'store: session breaks the current policy; kept, flagged in the admin list',
    );
    return [];
  }

  private reject(
    path: string,
    oid: string,
    reason: SkipReason,
    errors: FieldError[],
    previouslyRejected: Set<string>,
  ): void {
    this.rejected.set(path, { oid, reason, errors });
    if (previouslyRejected.has(path)) return;
    const kind = classifyPath(path)?.kind ?? 'unknown';
    invalidManifests.inc({ kind });
    this.log.error(
      { path, reason, errors: errors.map((e) => `${e.pointer}: ${e.message}`) },
      'store: invalid manifest in git skipped',
    );
  }
}
