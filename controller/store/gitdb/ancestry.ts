/**
 * How two commits relate in history, as a sync with a remote asks it: whether one descends from the
 * other (a fast-forward), and where two diverging tips last met.
 */
import git from 'isomorphic-git';
import { gitFs } from '../../git-fs.ts';
import type { GitContext } from './objects.ts';

/** Whether `oid` has `ancestor` in its history (a move from `ancestor` to `oid` is a fast-forward). */
export function descends(ctx: GitContext, oid: string, ancestor: string): Promise<boolean> {
  return git.isDescendent({ fs: gitFs, gitdir: ctx.gitdir, oid, ancestor, cache: ctx.cache });
}

/** The commit two tips last shared; undefined when their histories never met. */
export async function mergeBase(ctx: GitContext, a: string, b: string): Promise<string | undefined> {
  const [base] = (await git.findMergeBase({
    fs: gitFs,
    gitdir: ctx.gitdir,
    oids: [a, b],
    cache: ctx.cache,
  })) as string[];
  return base;
}
