/**
 * Following a repository on a forge and pushing back (docs/gitops.md, "Following a forge"): the forge's
 * branch is the whole truth and its history the audit log. Each cycle fetches the branch, then
 * fast-forwards to it, pushes what the store committed on top of it, or, when both moved, rebuilds the
 * store's own commits on the forge's new tip (file by file; where the forge changed a file too, its
 * version wins, and a change of the store's it replaced is kept on a branch of the forge and recorded as
 * a conflict: forge-conflicts.ts) and pushes that. A push refused as non-fast-forward (a merge landed
 * meanwhile) is retried by the next cycle, which starts again from the forge's tip. The status ref is
 * pushed too, to its own branch that nobody edits, so a controller's lost disk loses no approval.
 *
 * Network I/O runs outside the store's write queue: a slow or unreachable forge never holds the queue.
 * In the asynchronous push mode a write is answered once committed locally and pushed once the forge
 * answers again; in the synchronous one (the default) it is answered once the forge holds it (sync-push.ts).
 */
import { createHash } from 'node:crypto';
import git from 'isomorphic-git';
import type { GitHttpRequest, GitHttpResponse, HttpClient } from 'isomorphic-git';
import type pino from 'pino';
import { classifyPath, parseYaml } from '../../../common/manifests.ts';
import type { ForgeConflict } from '../../../common/schema.ts';
import { gitFs } from '../../git-fs.ts';
import { descends, mergeBase } from '../gitdb/ancestry.ts';
import { counter, gauge } from '../../metrics.ts';
import { Branch } from './branch.ts';
import { firstParentChain, replayChain, type ChainCommit } from './replay.ts';
import { readText, type GitContext } from '../gitdb/objects.ts';
import type { RefUpdate } from '../gitdb/recovery.ts';
import type { FileChange } from '../gitdb/tree.ts';

export interface RemoteOptions {
  /** HTTPS URL of the repository on the forge (credentials are not taken from it: see `credentials`). */
  url: string;
  /** The branch people merge into (default: the store's branch). */
  branch?: string;
  /** How often the forge is fetched (default 5000 ms); a forge webhook fetches at once. */
  intervalMs?: number;
  credentials?: { username: string; password: string };
  /** Push the status ref to the forge's `peerops-status` branch (default true). */
  pushStatus?: boolean;
  /**
   * `sync` (the default): a user's or admin's write is answered once the forge holds it (sync-push.ts);
   * `async`: writes are answered once committed locally and pushed by the next cycle.
   */
  pushMode?: 'sync' | 'async';
  /** How long a write of the synchronous mode waits for the forge (default 5000 ms). */
  pushTimeoutMs?: number;
}

/** What a cycle needs from the store: its refs and the journaled way to move them. */
export interface RemoteHost {
  ctx: GitContext;
  specRef: string;
  statusRef: string;
  log: pino.Logger;
  /** Runs fn in the store's write queue (after catching up with the refs). */
  serialised<T>(fn: () => Promise<T>): Promise<T>;
  /** The store's head of a ref as its mirror knows it. */
  head(ref: string): string | undefined;
  moveRefs(updates: RefUpdate[]): Promise<void>;
  /** The status commit recording `found` (objects written, ref not moved), to move with the rebuild. */
  recordConflicts(found: ForgeConflict[]): Promise<RefUpdate | undefined>;
  /** The conflicts recorded and not cleared: their kept branches belong on the forge. */
  conflicts(): readonly ForgeConflict[];
}

/** A change of the store's whose file the forge changed too, to a different content: the forge's stays. */
interface Replaced {
  commit: ChainCommit;
  path: string;
  /** The store's version of the file (undefined: the change deleted it). */
  text: string | undefined;
}

const STATUS_BRANCH = 'refs/heads/peerops-status';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const REQUEST_TIMEOUT_MS = 30_000;

const inSync = gauge({
  name: 'peerops_git_remote_in_sync',
  help: '1 when the forge holds every commit of the store, 0 while the store is ahead or behind it',
});
const lastSuccess = gauge({
  name: 'peerops_git_remote_last_success_timestamp_seconds',
  help: 'When the store last fetched from and pushed to the forge successfully',
});
const forgeConflicts = counter({
  name: 'peerops_git_forge_conflicts_total',
  help: "Changes of the store's that an edit on the forge replaced, each kept on a branch of the forge",
});
const failures = counter({
  name: 'peerops_git_remote_failures_total',
  help: 'Failed fetches and pushes to the forge',
  labelNames: ['operation'],
});

/**
 * isomorphic-git's HTTP client over fetch, with a timeout (a forge that hangs must not hang a cycle) and,
 * in the synchronous push mode, the end of the writes' wait (`signal`).
 */
const httpClientUntil = (signal?: AbortSignal): HttpClient => ({
  async request({ url, method, headers, body }: GitHttpRequest): Promise<GitHttpResponse> {
    const chunks: Uint8Array[] = [];
    if (body) for await (const chunk of body) chunks.push(chunk);
    const res = await fetch(url, {
      method: method ?? 'GET',
      headers: headers ?? {},
      ...(chunks.length > 0 ? { body: Buffer.concat(chunks) } : {}),
      signal: signal
        ? AbortSignal.any([signal, AbortSignal.timeout(REQUEST_TIMEOUT_MS)])
        : AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    const bytes = new Uint8Array(await res.arrayBuffer());
    return {
      url: res.url,
      method: method ?? 'GET',
      statusCode: res.status,
      statusMessage: res.statusText,
      headers: Object.fromEntries(res.headers),
      body: (async function* () {
        yield bytes;
      })(),
    };
  },
});
const httpClient = httpClientUntil();

/** The forge's address for logs: host and path, never credentials. */
export function remoteLabel(url: string): string {
  try {
    const u = new URL(url);
    return `${u.host}${u.pathname}`;
  } catch {
    return 'the remote';
  }
}

export class RemoteSync {
  private readonly options: RemoteOptions & { branch: string };
  readonly host: RemoteHost;
  /** Why the last cycle failed, logged once until a cycle succeeds again. */
  private failing: string | undefined;
  private started = false;
  /** Why the last push was refused. */
  private refusal = '';
  /** The status commit last pushed: the status branch is pushed only when it moved. */
  private pushedStatus: string | undefined;
  /** Conflicts whose kept branch this process pushed (after a restart, each is pushed again: a no-op). */
  private readonly keptPushed = new Set<string>();

  constructor(options: RemoteOptions & { branch: string }, host: RemoteHost) {
    this.options = options;
    this.host = host;
    inSync.set(0);
  }

  private get label(): string {
    return remoteLabel(this.options.url);
  }

  private auth() {
    const credentials = this.options.credentials;
    return {
      onAuth: () => (credentials ? { ...credentials } : { cancel: true }),
      onAuthFailure: () => ({ cancel: true }),
    };
  }

  /**
   * One fetch, catch-up and push (`step`: the synchronous push mode's, sync-push.ts). Never throws: a
   * failure is counted, logged once and retried.
   */
  async cycle(step: () => Promise<boolean> = () => this.once()): Promise<void> {
    try {
      if (!this.started) {
        // isomorphic-git fetches through a configured remote (its refspec names refs/remotes/origin/*)
        await git.addRemote({
          fs: gitFs,
          gitdir: this.host.ctx.gitdir,
          remote: 'origin',
          url: this.options.url,
          force: true,
        });
        await this.adoptStatus();
        this.started = true;
      }
      for (let attempt = 1; !(await step()); attempt++) {
        if (attempt >= 3) {
          failures.inc({ operation: 'push' });
          throw new Error(`the remote refused the push ${attempt} times: ${this.refusal}`);
        }
      }
      lastSuccess.setToCurrentTime();
      inSync.set(1);
      if (this.failing !== undefined) {
        this.host.log.info({ remote: this.label }, 'store: caught up with the remote again');
        this.failing = undefined;
      }
    } catch (err) {
      inSync.set(0);
      const reason = err instanceof Error ? err.message : String(err);
      if (this.failing === undefined)
        this.host.log.warn(
          { remote: this.label, err: reason },
          this.options.pushMode === 'async'
            ? 'store: cannot sync with the remote (down, or refusing the push); writes stay local and are pushed once it takes them'
            : 'store: cannot sync with the remote (down, or refusing the push); writes are answered 503 FORGE_UNAVAILABLE until it takes them',
        );
      this.failing = reason;
    }
  }

  /** Fetch, move the local branch, push. False when the push was refused (the forge moved meanwhile). */
  private async once(): Promise<boolean> {
    const { specRef } = this.host;
    const theirs = await this.fetch(this.options.branch);
    await this.host.serialised(async () => {
      const ours = this.host.head(specRef);
      if (theirs === undefined || theirs === ours) return;
      if (ours === undefined || (await descends(this.host.ctx, theirs, ours))) {
        await this.host.moveRefs([{ ref: specRef, from: ours, to: theirs }]);
        this.host.log.info(
          { remote: this.label, from: ours, to: theirs },
          'store: fast-forwarded to the remote',
        );
        return;
      }
      if (await descends(this.host.ctx, ours, theirs)) return;
      const { tip, replaced } = await this.rebuild(ours, theirs);
      const found = await this.keep(replaced, theirs);
      // the records move with the rebuilt tip, in one journaled step: no replaced change goes unrecorded
      const recorded = found.length > 0 ? await this.host.recordConflicts(found) : undefined;
      await this.host.moveRefs([{ ref: specRef, from: ours, to: tip }, ...(recorded ? [recorded] : [])]);
      this.host.log.info(
        { remote: this.label, theirs, tip },
        "store: rebuilt the store's commits on the remote's new tip",
      );
      for (const c of found) {
        forgeConflicts.inc();
        this.host.log.warn(
          { path: c.path, commit: c.commit, actor: c.actor, forgeCommit: c.forgeCommit, branch: c.branch },
          "store: an edit on the forge replaced a change of the store's; its version is kept on a branch of the forge",
        );
      }
    });
    // What the forge lacks now, including what the store filled in when it applied the forge's commits
    // (the serialised step catches up with them after it ran): pushed in this cycle, not the next.
    const local = this.host.head(specRef);
    if (local !== undefined && local !== theirs) {
      const ok = await this.push(specRef, `refs/heads/${this.options.branch}`);
      if (!ok) return false;
    }
    await this.pushKept();
    const status = this.host.head(this.host.statusRef);
    if (this.options.pushStatus !== false && status !== undefined && status !== this.pushedStatus) {
      await this.push(this.host.statusRef, STATUS_BRANCH);
      this.pushedStatus = status;
    }
    inSync.set(1);
    return true;
  }

  /**
   * The forge's head of `branch` (undefined: the branch does not exist there yet); `signal` ends the
   * requests (the synchronous push mode's wait).
   */
  async fetch(branch: string, signal?: AbortSignal): Promise<string | undefined> {
    try {
      const result = await git.fetch({
        fs: gitFs,
        http: signal ? httpClientUntil(signal) : httpClient,
        gitdir: this.host.ctx.gitdir,
        url: this.options.url,
        ref: branch,
        singleBranch: true,
        tags: false,
        cache: this.host.ctx.cache,
        ...this.auth(),
      });
      return result.fetchHead ?? undefined;
    } catch (err) {
      if ((err as { code?: string }).code === 'NotFoundError') return undefined;
      failures.inc({ operation: 'fetch' });
      throw err;
    }
  }

  /** Push `ref` to `remoteRef`; false when refused as non-fast-forward. `signal` as for fetch. */
  async push(
    ref: string,
    remoteRef: string,
    options: { signal?: AbortSignal; force?: boolean } = {},
  ): Promise<boolean> {
    try {
      const result = await git.push({
        fs: gitFs,
        http: options.signal ? httpClientUntil(options.signal) : httpClient,
        gitdir: this.host.ctx.gitdir,
        url: this.options.url,
        ref,
        remoteRef,
        force: options.force ?? false,
        cache: this.host.ctx.cache,
        ...this.auth(),
      });
      if (result.ok) return true;
      this.refusal = JSON.stringify(result.refs);
    } catch (err) {
      const code = (err as { code?: string }).code;
      // Refused as non-fast-forward by the client's check, or by the server when a push landed between
      // our fetch and our push ("failed to update ref"): catch up and try again. A refusal that stays
      // (a protected branch) fails the cycle after a few attempts.
      if (code !== 'PushRejectedError' && code !== 'GitPushError') {
        failures.inc({ operation: 'push' });
        throw err;
      }
      this.refusal = err instanceof Error ? err.message : String(err);
    }
    this.host.log.info(
      { remote: this.label, ref: remoteRef, reason: this.refusal },
      'store: the remote refused the push; catching up and trying again',
    );
    return false;
  }

  /**
   * A store started on an empty disk takes the status branch from the forge: approvals and transitions
   * survive the loss of the controller's disk.
   */
  private async adoptStatus(): Promise<void> {
    if (this.options.pushStatus === false || this.host.head(this.host.statusRef) !== undefined) return;
    const theirs = await this.fetch('peerops-status');
    if (theirs === undefined) return;
    await this.host.serialised(async () => {
      if (this.host.head(this.host.statusRef) !== undefined) return;
      await this.host.moveRefs([{ ref: this.host.statusRef, from: undefined, to: theirs }]);
      this.host.log.info({ remote: this.label }, 'store: took the status branch from the remote');
    });
  }

  /**
   * The store's commits since the merge base, rebuilt one by one on the forge's tip with their authors
   * and messages. A file the forge changed since the merge base keeps the forge's version: people's
   * edits win, and what the store fills in (uuid, port) is filled in again by its next sync. A change
   * someone asked for (not the controller's filling in) that the forge's version replaced is returned.
   */
  private async rebuild(ours: string, theirs: string): Promise<{ tip: string; replaced: Replaced[] }> {
    const { ctx } = this.host;
    const base = await mergeBase(ctx, ours, theirs);
    const scratch = (oid: string | undefined) => {
      const b = new Branch(ctx, 'refs/peerops/scratch');
      return oid ? b.sync(oid).then(() => b) : Promise.resolve(b);
    };
    const baseTree = await scratch(base);
    const theirTree = await scratch(theirs);
    const theirsChanged = (path: string) => theirTree.fileOid(path) !== baseTree.fileOid(path);
    const commits = await firstParentChain(ctx, ours, base, { throughRoot: true });
    const replaced: Replaced[] = [];
    const { tip } = await replayChain(ctx, commits, theirs, async (commit, changes) => {
      const kept: FileChange[] = [];
      for (const change of changes) {
        if (!theirsChanged(change.path)) kept.push(change);
        else if (change.oid !== theirTree.fileOid(change.path) && trailer(commit, 'Role') !== 'controller')
          replaced.push({
            commit,
            path: change.path,
            text: change.oid ? await readText(ctx, change.oid) : undefined,
          });
      }
      return kept;
    });
    return { tip: tip ?? theirs, replaced };
  }

  /**
   * Each replaced change kept as a commit on the forge's tip holding the store's version of the file
   * (objects written, the local ref and the push come later: pushKept), as a conflict record.
   */
  private async keep(replaced: Replaced[], theirs: string): Promise<ForgeConflict[]> {
    const { ctx } = this.host;
    const detectedAt = new Date().toISOString();
    const found: ForgeConflict[] = [];
    // prepare leaves the branch at the forge's tip: one mirror of it serves every kept commit
    const base = new Branch(ctx, 'refs/peerops/scratch');
    if (replaced.length > 0) await base.sync(theirs);
    for (const { commit, path, text } of replaced) {
      const forgeOid = base.fileOid(path);
      const uuid = uuidOf(text) ?? uuidOf(forgeOid ? await readText(ctx, forgeOid) : undefined);
      const [subject, ...rest] = commit.message.split('\n');
      const message = [
        subject,
        '',
        `Kept by peerops: an edit on the forge (${theirs.slice(0, 7)}) replaced this change of ${path}`,
        `(commit ${commit.oid.slice(0, 7)}). A pull request from this branch restores it.`,
        ...rest,
      ].join('\n');
      const prepared = await base.prepare([{ path, text }], { name: 'controller', role: 'controller' }, '', {
        replay: { author: commit.author, message },
      });
      if (!prepared) continue;
      const info = classifyPath(path);
      const stem = info?.kind === 'PeeringSession' ? info.name : path.replace(/\.yaml$/, '');
      found.push({
        id: createHash('sha256').update(`${commit.oid}\n${path}`).digest('hex').slice(0, 12),
        path,
        ...(info?.kind === 'PeeringSession'
          ? { session: { name: info.name, asn: info.asn, ...(uuid ? { uuid } : {}) } }
          : {}),
        at: new Date(commit.time * 1000).toISOString(),
        detectedAt,
        commit: commit.oid,
        actor: trailer(commit, 'Actor') ?? commit.author.name,
        forgeCommit: theirs,
        branch: `peerops-conflicts/${stem.replace(/[^A-Za-z0-9.-]+/g, '-')}-${commit.oid.slice(0, 7)}`,
        keptCommit: prepared.update.to,
      });
    }
    return found;
  }

  /**
   * The kept branch of every recorded conflict on the forge, once per process (pushed again after a
   * restart: the forge holds it already, or lost it). A branch the forge refuses (someone pushed onto it)
   * is the forge's now and left alone.
   */
  private async pushKept(): Promise<void> {
    const { ctx } = this.host;
    for (const c of this.host.conflicts()) {
      if (this.keptPushed.has(c.id)) continue;
      const local = `refs/peerops/conflicts/${c.id}`;
      await git.writeRef({ fs: gitFs, gitdir: ctx.gitdir, ref: local, value: c.keptCommit, force: true });
      try {
        await git.push({
          fs: gitFs,
          http: httpClient,
          gitdir: ctx.gitdir,
          url: this.options.url,
          ref: local,
          remoteRef: `refs/heads/${c.branch}`,
          cache: ctx.cache,
          ...this.auth(),
        });
      } catch (err) {
        const code = (err as { code?: string }).code;
        // its objects gone (a repository restored without them): the record still names the change
        if (code === 'NotFoundError')
          this.host.log.warn({ branch: c.branch, err: String(err) }, 'store: a kept branch cannot be pushed');
        else if (code === 'PushRejectedError' || code === 'GitPushError')
          this.host.log.info(
            { branch: c.branch },
            'store: the forge holds another version of a kept branch; left',
          );
        else {
          failures.inc({ operation: 'push' });
          throw err;
        }
      }
      // the ref only names what to push; the record keeps the commit for a push after a restart
      await git.deleteRef({ fs: gitFs, gitdir: ctx.gitdir, ref: local });
      this.keptPushed.add(c.id);
    }
  }
}

/** A `Peerops-<name>:` trailer of a commit the store made (branch.ts, commitMessage). */
function trailer(commit: ChainCommit, name: 'Actor' | 'Role'): string | undefined {
  return new RegExp(`^Peerops-${name}: (.+)$`, 'm').exec(commit.message)?.[1];
}

/** A session manifest's uuid, when the text is one that names it. */
function uuidOf(text: string | undefined): string | undefined {
  if (text === undefined) return undefined;
  try {
    const uuid = (parseYaml(text) as { spec?: { uuid?: unknown } } | undefined)?.spec?.uuid;
    return typeof uuid === 'string' && UUID.test(uuid) ? uuid : undefined;
  } catch {
    return undefined;
  }
}
