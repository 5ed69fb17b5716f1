/**
 * Following a repository on a forge and pushing back (docs/gitops.md, "Following a forge"): the forge's
 * branch is the whole truth and its history the audit log. Each cycle fetches the branch, then
 * fast-forwards to it, pushes what the store committed on top of it, or, when both moved, rebuilds the
 * store's own commits on the forge's new tip (file by file; where the forge changed a file too, its
 * version wins) and pushes that. A push refused as non-fast-forward (a merge landed meanwhile) is retried
 * by the next cycle, which starts again from the forge's tip. The status ref is pushed too, to its own
 * branch that nobody edits, so a controller's lost disk loses no approval.
 *
 * Network I/O runs outside the store's write queue: a slow or unreachable forge never holds an API
 * write, which is committed locally and pushed once the forge answers again.
 */
import git from 'isomorphic-git';
import type { GitHttpRequest, GitHttpResponse, HttpClient } from 'isomorphic-git';
import type pino from 'pino';
import { gitFs } from '../../git-fs.ts';
import { counter, gauge } from '../../metrics.ts';
import { Branch, type FileWrite } from './branch.ts';
import { readText, type GitContext } from './objects.ts';
import type { RefUpdate } from './recovery.ts';

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
}

const STATUS_BRANCH = 'refs/heads/peerops-status';
const REQUEST_TIMEOUT_MS = 30_000;

const inSync = gauge({
  name: 'peerops_git_remote_in_sync',
  help: '1 when the forge holds every commit of the store, 0 while the store is ahead or behind it',
});
const lastSuccess = gauge({
  name: 'peerops_git_remote_last_success_timestamp_seconds',
  help: 'When the store last fetched from and pushed to the forge successfully',
});
const failures = counter({
  name: 'peerops_git_remote_failures_total',
  help: 'Failed fetches and pushes to the forge',
  labelNames: ['operation'],
});

/** isomorphic-git's HTTP client over fetch, with a timeout: a forge that hangs must not hang a cycle. */
const httpClient: HttpClient = {
  async request({ url, method, headers, body }: GitHttpRequest): Promise<GitHttpResponse> {
    const chunks: Uint8Array[] = [];
    if (body) for await (const chunk of body) chunks.push(chunk);
    const res = await fetch(url, {
      method: method ?? 'GET',
      headers: headers ?? {},
      ...(chunks.length > 0 ? { body: Buffer.concat(chunks) } : {}),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
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
};

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
  private readonly host: RemoteHost;
  /** Why the last cycle failed, logged once until a cycle succeeds again. */
  private failing: string | undefined;
  private started = false;
  /** Why the last push was refused. */
  private refusal = '';
  /** The status commit last pushed: the status branch is pushed only when it moved. */
  private pushedStatus: string | undefined;

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

  /** One fetch, catch-up and push. Never throws: a failure is counted, logged once and retried. */
  async cycle(): Promise<void> {
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
      for (let attempt = 1; !(await this.once()); attempt++) {
        if (attempt >= 3) {
          failures.inc({ operation: 'push' });
          throw new Error(`the remote refused the push ${attempt} times: ${this.refusal}`);
        }
      }
      lastSuccess.setToCurrentTime();
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
          'store: cannot sync with the remote (down, or refusing the push); writes stay local and are pushed once it takes them',
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
      if (ours === undefined || (await this.descends(theirs, ours))) {
        await this.host.moveRefs([{ ref: specRef, from: ours, to: theirs }]);
        this.host.log.info(
          { remote: this.label, from: ours, to: theirs },
          'store: fast-forwarded to the remote',
        );
        return;
      }
      if (await this.descends(ours, theirs)) return;
      const tip = await this.rebuild(ours, theirs);
      await this.host.moveRefs([{ ref: specRef, from: ours, to: tip }]);
      this.host.log.info(
        { remote: this.label, theirs, tip },
        "store: rebuilt the store's commits on the remote's new tip",
      );
    });
    // What the forge lacks now, including what the store filled in when it applied the forge's commits
    // (the serialised step catches up with them after it ran): pushed in this cycle, not the next.
    const local = this.host.head(specRef);
    if (local !== undefined && local !== theirs) {
      const ok = await this.push(specRef, `refs/heads/${this.options.branch}`);
      if (!ok) return false;
    }
    const status = this.host.head(this.host.statusRef);
    if (this.options.pushStatus !== false && status !== undefined && status !== this.pushedStatus) {
      await this.push(this.host.statusRef, STATUS_BRANCH);
      this.pushedStatus = status;
    }
    inSync.set(1);
    return true;
  }

  /** The forge's head of `branch` (undefined: the branch does not exist there yet). */
  private async fetch(branch: string): Promise<string | undefined> {
    try {
      const result = await git.fetch({
        fs: gitFs,
        http: httpClient,
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

  /** Push `ref` to `remoteRef`; false when refused as non-fast-forward. */
  private async push(ref: string, remoteRef: string): Promise<boolean> {
    try {
      const result = await git.push({
        fs: gitFs,
        http: httpClient,
        gitdir: this.host.ctx.gitdir,
        url: this.options.url,
        ref,
        remoteRef,
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
   * edits win, and what the store fills in (uuid, port) is filled in again by its next sync.
   */
  private async rebuild(ours: string, theirs: string): Promise<string> {
    const { ctx } = this.host;
    const [base] = (await git.findMergeBase({
      fs: gitFs,
      gitdir: ctx.gitdir,
      oids: [ours, theirs],
      cache: ctx.cache,
    })) as string[];
    const scratch = (oid: string | undefined) => {
      const b = new Branch(ctx, 'refs/peerops/scratch');
      return oid ? b.sync(oid).then(() => b) : Promise.resolve(b);
    };
    const baseTree = await scratch(base);
    const theirTree = await scratch(theirs);
    const theirsChanged = (path: string) => theirTree.fileOid(path) !== baseTree.fileOid(path);
    const commits = await this.ownCommits(ours, base);
    const tip = await scratch(theirs);
    for (const commit of commits) {
      const before = await scratch(commit.parent);
      const changes = await before.sync(commit.oid);
      const writes: FileWrite[] = [];
      for (const change of changes) {
        if (theirsChanged(change.path)) continue;
        writes.push({ path: change.path, text: change.oid ? await readText(ctx, change.oid) : undefined });
      }
      const prepared = await tip.prepare(writes, { name: 'controller', role: 'controller' }, '', {
        replay: { author: commit.author, message: commit.message },
      });
      if (prepared) tip.advance(prepared);
    }
    return tip.head ?? theirs;
  }

  /** The first-parent chain from `ours` back to `base`, oldest first. */
  private async ownCommits(ours: string, base: string | undefined) {
    const { ctx } = this.host;
    const out: {
      oid: string;
      parent: string | undefined;
      author: { name: string; email: string };
      message: string;
    }[] = [];
    for (let oid: string | undefined = ours; oid !== undefined && oid !== base;) {
      const { commit } = await git.readCommit({ fs: gitFs, gitdir: ctx.gitdir, oid, cache: ctx.cache });
      out.push({
        oid,
        parent: commit.parent[0],
        author: { name: commit.author.name, email: commit.author.email },
        message: commit.message,
      });
      oid = commit.parent[0];
    }
    return out.reverse();
  }

  private async descends(oid: string, ancestor: string): Promise<boolean> {
    const { ctx } = this.host;
    return git.isDescendent({ fs: gitFs, gitdir: ctx.gitdir, oid, ancestor, cache: ctx.cache });
  }
}
