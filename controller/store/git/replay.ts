/**
 * Rebuilding a first-parent chain of the store's commits on another commit, one at a time with its author
 * and message: the one walk of the forge's rebuild (remote.ts, when the forge and the store both moved)
 * and of taking writes out (sync-push.ts). What each keeps of a commit is its caller's choice.
 */
import git from 'isomorphic-git';
import { gitFs } from '../../git-fs.ts';
import { readText, type GitContext } from '../gitdb/objects.ts';
import type { FileChange } from '../gitdb/tree.ts';
import { Branch, type FileWrite } from './branch.ts';

/** One commit of a first-parent chain, as a replay rebuilds it. */
export interface ChainCommit {
  oid: string;
  parent: string | undefined;
  author: { name: string; email: string };
  message: string;
  /** When it was committed (Unix seconds). */
  time: number;
}

/**
 * The first-parent chain from `tip` back to `base` (excluded), oldest first. A `base` not on the chain
 * is an error (a rebuild from the root would replay every file), unless `throughRoot`: then the whole
 * chain (a merge base reached through a second parent, or none).
 */
export async function firstParentChain(
  ctx: GitContext,
  tip: string | undefined,
  base: string | undefined,
  options: { throughRoot?: boolean } = {},
): Promise<ChainCommit[]> {
  const out: ChainCommit[] = [];
  for (let oid = tip; oid !== base;) {
    if (oid === undefined) {
      if (options.throughRoot) break;
      throw new Error(`commit ${String(base)} is not an ancestor of ${String(tip)}`);
    }
    const { commit } = await git.readCommit({ fs: gitFs, gitdir: ctx.gitdir, oid, cache: ctx.cache });
    out.push({
      oid,
      parent: commit.parent[0],
      author: { name: commit.author.name, email: commit.author.email },
      message: commit.message,
      time: commit.committer.timestamp,
    });
    oid = commit.parent[0];
  }
  return out.reverse();
}

/**
 * `commits` rebuilt on `onto` (undefined: from nothing): each as the changes `select` keeps of those it
 * made to its parent (`drop`: the commit is left out), with its author and message; a commit that keeps
 * its parent and every change stays as it is. `tip`: the rebuilt head (undefined when nothing was
 * built); `moved`: each commit's new id (a dropped one's: what was built before it).
 */
export async function replayChain(
  ctx: GitContext,
  commits: readonly ChainCommit[],
  onto: string | undefined,
  select: (commit: ChainCommit, changes: FileChange[]) => Promise<FileChange[] | 'drop'>,
): Promise<{ tip: string | undefined; moved: Map<string, string> }> {
  const moved = new Map<string, string>();
  const built = new Branch(ctx, 'refs/peerops/scratch');
  if (onto !== undefined) await built.sync(onto);
  for (const commit of commits) {
    const before = new Branch(ctx, 'refs/peerops/scratch');
    if (commit.parent !== undefined) await before.sync(commit.parent);
    const changes = await before.sync(commit.oid);
    const kept = await select(commit, changes);
    if (kept === 'drop') {
      // a later write's `before` may be this commit: it is now what was built before it
      if (built.head !== undefined) moved.set(commit.oid, built.head);
      continue;
    }
    if (built.head === commit.parent && kept.length === changes.length) {
      await built.sync(commit.oid);
      moved.set(commit.oid, commit.oid);
      continue;
    }
    const writes: FileWrite[] = [];
    for (const c of kept) writes.push({ path: c.path, text: c.oid ? await readText(ctx, c.oid) : undefined });
    const prepared = await built.prepare(writes, { name: 'controller', role: 'controller' }, '', {
      replay: { author: commit.author, message: commit.message },
    });
    if (prepared) built.advance(prepared);
    if (built.head !== undefined) moved.set(commit.oid, built.head);
  }
  return { tip: built.head, moved };
}
