/**
 * The synchronous push mode (docs/gitops.md, "Push modes"): a user's or an admin's write is answered once
 * the forge holds it. The write commits locally as always (commits.ts), then waits here while the remote
 * cycle pushes: writes that commit while a push is under way go together in the next one (a group
 * commit). The status branch is pushed before the spec branch, each at the commit the batch was taken at,
 * so a write's spec never reaches the forge without its status.
 *
 * - The forge moved (the push is refused): fetch, and rebuild the store's commits on its tip; a waiting
 *   write that changed a manifest the forge changed too is taken out and answered 409 FORGE_CONFLICT, the
 *   others are pushed again, within the same wait.
 * - The forge cannot be reached before the oldest write's wait runs out: every waiting write is taken out
 *   of both refs (the commits made since are rebuilt without them) and answered 503 FORGE_UNAVAILABLE,
 *   so a retry starts clean.
 *
 * Taking writes out rebuilds the commits made after them without their files: agents' reports and what
 * the controller filled in stay, except on those files (an agent reports again at its next pass, as the
 * status it is served differs from what it sees). Network I/O runs outside the store's write queue; only
 * the rebuilds run in it.
 */
import git from 'isomorphic-git';
import type { DomainError } from '../../../common/errors.ts';
import { gitFs } from '../../git-fs.ts';
import { descends, mergeBase } from '../gitdb/ancestry.ts';
import { counter } from '../../metrics.ts';
import { Branch } from './branch.ts';
import { firstParentChain, replayChain } from './replay.ts';
import type { RefUpdate } from '../gitdb/recovery.ts';
import { remoteLabel, type RemoteHost, type RemoteSync } from './remote.ts';
import { listFiles } from '../gitdb/tree.ts';
import { fault } from '../../../common/messages.ts';

/** The heads of the store's two refs at one moment. */
export interface Heads {
  spec: string | undefined;
  status: string | undefined;
}

/** A write waiting for the forge: the heads before and after its commits. */
interface Waiting {
  before: Heads;
  after: Heads;
  deadline: number;
  timer: NodeJS.Timeout;
  resolve(): void;
  reject(err: DomainError): void;
}

/** Scratch refs a batch is pushed from: the commits it was taken at, not what later writes added. */
const PUSH_REFS = { spec: 'refs/peerops/push/spec', status: 'refs/peerops/push/status' };
const STATUS_BRANCH = 'refs/heads/peerops-status';
const CONTROLLER = { name: 'controller', role: 'controller' as const };
/** Why a cycle without waiting writes is ended early: a write waits now, and its cycle goes first. */
const PREEMPTED = 'a write waits for the forge';

const refused = counter({
  name: 'peerops_git_sync_push_refused_total',
  help: 'Writes of the synchronous push mode answered without being applied: forge unavailable or conflict',
  labelNames: ['reason'],
});

export class SyncPush {
  private readonly remote: RemoteSync;
  private readonly host: RemoteHost;
  private readonly options: { url: string; branch: string; timeoutMs: number; pushStatus: boolean };
  private waiting: Waiting[] = [];
  /** Aborts the cycle under way when a waiting write's wait runs out. */
  private current: AbortController | undefined;
  /** The cycle under way started without waiting writes (a fetch every interval, agents' reports). */
  private background = false;
  /** Refusals of writes taken out, sent once the index follows the refs (after the queue's step). */
  private answers: (() => void)[] = [];
  /** What the forge is known to hold: a ref at that commit is not pushed again. */
  private readonly held: Heads = { spec: undefined, status: undefined };

  constructor(
    remote: RemoteSync,
    host: RemoteHost,
    options: { url: string; branch: string; timeoutMs: number; pushStatus: boolean },
  ) {
    this.remote = remote;
    this.host = host;
    this.options = options;
  }

  heads(): Heads {
    return { spec: this.host.head(this.host.specRef), status: this.host.head(this.host.statusRef) };
  }

  /**
   * In the write queue, right after a write committed (its commits are those since `before`): resolves
   * once the forge holds them; FORGE_UNAVAILABLE or FORGE_CONFLICT once they were taken out again.
   */
  enlist(before: Heads): Promise<void> {
    const after = this.heads();
    if (after.spec === before.spec && after.status === before.status) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => this.current?.abort(), this.options.timeoutMs);
      timer.unref();
      this.waiting.push({
        before,
        after,
        deadline: Date.now() + this.options.timeoutMs,
        timer,
        resolve,
        reject,
      });
      // a cycle that is not pushing writes (possibly stuck on a forge that stopped answering) gives way
      if (this.background) this.current?.abort(PREEMPTED);
    });
  }

  /**
   * One cycle of the remote (RemoteSync.cycle): catch up with the forge, push the waiting writes, answer
   * them. With writes waiting it pushes first (a fetch only when the push is refused): one round trip
   * less per write. Throws when the forge cannot be reached, after taking the waiting writes out.
   */
  async step(): Promise<boolean> {
    const abort = new AbortController();
    this.current = abort;
    const oldest = this.waiting[0];
    this.background = oldest === undefined;
    const signal = oldest
      ? AbortSignal.any([abort.signal, AbortSignal.timeout(Math.max(0, oldest.deadline - Date.now()))])
      : abort.signal;
    try {
      let fetch = oldest === undefined;
      for (let refused = 0; ; refused++) {
        // a refusal that stays (a protected branch) ends the wait, as it ends an asynchronous cycle
        if (refused >= 3) throw new Error(`the forge refused the push ${refused} times`);
        if (fetch) {
          const theirs = await this.remote.fetch(this.options.branch, signal);
          await this.host.serialised(() => this.catchUp(theirs)).finally(() => this.sendAnswers());
        }
        const batch = [...this.waiting];
        // pushing writes now: one enlisting meanwhile waits for the next cycle instead of restarting this one
        if (batch.length > 0) this.background = false;
        const heads = this.heads();
        if (await this.push(heads, signal)) {
          for (const w of batch) this.settle(w);
          return true;
        }
        signal.throwIfAborted();
        fetch = true;
      }
    } catch (err) {
      // given way to a waiting write: the cycle starts again at once (RemoteSync.cycle), pushing it
      if (abort.signal.reason === PREEMPTED) return false;
      if (this.waiting.length > 0) {
        const reason = signal.aborted
          ? `the forge (${remoteLabel(this.options.url)}) did not take the write within ${this.options.timeoutMs / 1000} s`
          : `the forge (${remoteLabel(this.options.url)}) cannot be reached: ${String(err)}`;
        await this.host
          .serialised(() => this.takeOut([...this.waiting], reason))
          .finally(() => this.sendAnswers());
      }
      throw err;
    } finally {
      if (this.current === abort) {
        this.current = undefined;
        this.background = false;
      }
    }
  }

  /** The status branch, then the spec branch, each at the batch's commit. False when the forge moved. */
  private async push(heads: Heads, signal: AbortSignal): Promise<boolean> {
    const { ctx } = this.host;
    const send = async (ref: string, oid: string, remoteRef: string, force: boolean) => {
      await git.writeRef({ fs: gitFs, gitdir: ctx.gitdir, ref, value: oid, force: true });
      return this.remote.push(ref, remoteRef, { signal, force });
    };
    const { status, spec } = heads;
    // the status branch is the controller's alone: forced, it drops what a batch taken out had pushed
    if (this.options.pushStatus && status !== undefined && status !== this.held.status) {
      if (!(await send(PUSH_REFS.status, status, STATUS_BRANCH, true)))
        throw new Error('the forge refused the status branch peerops-status');
      this.held.status = status;
    }
    if (spec === undefined || spec === this.held.spec) return true;
    if (!(await send(PUSH_REFS.spec, spec, `refs/heads/${this.options.branch}`, false))) return false;
    this.held.spec = spec;
    return true;
  }

  private settle(w: Waiting): void {
    clearTimeout(w.timer);
    this.waiting = this.waiting.filter((x) => x !== w);
    w.resolve();
  }

  /** In the write queue: the store's branch onto the forge's head (fast-forward, or a rebuild). */
  private async catchUp(theirs: string | undefined): Promise<void> {
    const ours = this.host.head(this.host.specRef);
    this.held.spec = theirs;
    if (theirs === undefined || theirs === ours) return;
    if (ours === undefined || (await descends(this.host.ctx, theirs, ours))) {
      await this.host.moveRefs([{ ref: this.host.specRef, from: ours, to: theirs }]);
      return;
    }
    if (await descends(this.host.ctx, ours, theirs)) return;
    const { ctx } = this.host;
    const base = await mergeBase(ctx, ours, theirs);
    const forgeChanged = new Set(await this.changedPaths(base, theirs));
    // a waiting write that touched a manifest the forge changed, or one a write taken out touched
    const conflicting: Waiting[] = [];
    const touched = new Set<string>();
    for (const w of this.waiting) {
      const paths = await this.pathsOf(w);
      if (paths.some((p) => forgeChanged.has(p) || touched.has(p))) {
        conflicting.push(w);
        for (const p of paths) touched.add(p);
      }
    }
    const specDrop = await this.oidsOf(conflicting, 'spec');
    const spec = await this.replay(
      ours,
      base,
      theirs,
      specDrop,
      (p) => forgeChanged.has(p) || touched.has(p),
    );
    const updates: RefUpdate[] = [{ ref: this.host.specRef, from: ours, to: spec.tip }];
    let status: Awaited<ReturnType<SyncPush['replay']>> | undefined;
    const first = conflicting[0];
    const statusOurs = this.host.head(this.host.statusRef);
    if (first && statusOurs !== undefined && first.before.status !== statusOurs) {
      const statusDrop = await this.oidsOf(conflicting, 'status');
      status = await this.replay(statusOurs, first.before.status, first.before.status, statusDrop, (p) =>
        touched.has(p),
      );
      updates.push({ ref: this.host.statusRef, from: statusOurs, to: status.tip });
    }
    await this.host.moveRefs(updates);
    this.host.log.info(
      { theirs, tip: spec.tip, conflicts: conflicting.length },
      "store: rebuilt the store's commits on the remote's new tip",
    );
    this.answer(conflicting, 'conflict', 'the manifest was changed on the forge at the same time');
    this.remap(spec.moved, status?.moved, theirs, base);
  }

  /**
   * In the write queue: `out` taken out of both refs. The commits made since the first of them are rebuilt
   * without theirs and without the files they touched; then each is answered FORGE_UNAVAILABLE.
   */
  private async takeOut(out: Waiting[], reason: string): Promise<void> {
    const first = out[0];
    if (!first) return;
    const touched = new Set<string>();
    for (const w of out) for (const p of await this.pathsOf(w)) touched.add(p);
    const updates: RefUpdate[] = [];
    for (const kind of ['spec', 'status'] as const) {
      const ref = kind === 'spec' ? this.host.specRef : this.host.statusRef;
      const ours = this.host.head(ref);
      const from = first.before[kind];
      if (ours === undefined || ours === from) continue;
      const { tip } = await this.replay(ours, from, from, await this.oidsOf(out, kind), (p) =>
        touched.has(p),
      );
      updates.push({ ref, from: ours, to: tip });
    }
    if (updates.length > 0) await this.host.moveRefs(updates);
    this.answer(out, 'unavailable', reason);
  }

  /** `out` no longer waits; each is refused once the index no longer holds it (sendAnswers). */
  private answer(out: Waiting[], why: 'unavailable' | 'conflict', reason: string): void {
    if (out.length === 0) return;
    this.waiting = this.waiting.filter((w) => !out.includes(w));
    refused.inc({ reason: why }, out.length);
    this.host.log.warn({ writes: out.length, reason }, 'store: writes taken out, not acknowledged');
    const err =
      why === 'conflict'
        ? fault('forge.writeConflict', { reason })
        : fault('forge.writeUnavailable', { reason });
    for (const w of out) {
      clearTimeout(w.timer);
      this.answers.push(() => w.reject(err));
    }
  }

  private sendAnswers(): void {
    const answers = this.answers;
    this.answers = [];
    for (const send of answers) send();
  }

  /** The writes still waiting after a rebuild: their heads as the rebuilt commits. */
  private remap(
    spec: Map<string, string>,
    status: Map<string, string> | undefined,
    theirs: string,
    base: string | undefined,
  ): void {
    const specOf = (oid: string | undefined) => (oid === base ? theirs : oid && (spec.get(oid) ?? oid));
    const statusOf = (oid: string | undefined) => (oid && status?.get(oid)) ?? oid;
    for (const w of this.waiting) {
      w.before = { spec: specOf(w.before.spec), status: statusOf(w.before.status) };
      w.after = { spec: specOf(w.after.spec), status: statusOf(w.after.status) };
    }
  }

  /** The files a write changed, on either ref (a session's spec and status share its path). */
  private async pathsOf(w: Waiting): Promise<string[]> {
    const paths: string[] = [];
    for (const kind of ['spec', 'status'] as const)
      paths.push(...(await this.changedPaths(w.before[kind], w.after[kind])));
    return paths;
  }

  private async changedPaths(from: string | undefined, to: string | undefined): Promise<string[]> {
    if (from === to) return [];
    const b = new Branch(this.host.ctx, 'refs/peerops/scratch');
    if (from !== undefined) await b.sync(from);
    if (to === undefined) return [];
    return (await b.sync(to)).map((c) => c.path);
  }

  /** The commits of these writes on one ref. */
  private async oidsOf(writes: Waiting[], kind: keyof Heads): Promise<Set<string>> {
    const oids = new Set<string>();
    for (const w of writes)
      for (const c of await firstParentChain(this.host.ctx, w.after[kind], w.before[kind])) oids.add(c.oid);
    return oids;
  }

  /**
   * The chain from `tip` back to `base` rebuilt on `onto` (replay.ts), without the commits in `drop` and
   * without the files `skip` names. `moved`: each kept commit's new id.
   */
  private async replay(
    tip: string,
    base: string | undefined,
    onto: string | undefined,
    drop: Set<string>,
    skip: (path: string) => boolean,
  ): Promise<{ tip: string; moved: Map<string, string> }> {
    const { ctx } = this.host;
    const commits = await firstParentChain(ctx, tip, base);
    const built = await replayChain(ctx, commits, onto, (commit, changes) =>
      Promise.resolve(drop.has(commit.oid) ? 'drop' : changes.filter((c) => !skip(c.path))),
    );
    if (built.tip !== undefined) return { tip: built.tip, moved: built.moved };
    // the ref's first commits taken out: a ref is never deleted, so a commit without files stands for none
    const emptied = new Branch(ctx, 'refs/peerops/scratch');
    await emptied.sync(tip);
    const prepared = await emptied.prepare(
      listFiles(emptied.root).map(([path]) => ({ path, text: undefined })),
      CONTROLLER,
      'take out writes the forge did not take',
    );
    return { tip: prepared?.update.to ?? tip, moved: built.moved };
  }
}
