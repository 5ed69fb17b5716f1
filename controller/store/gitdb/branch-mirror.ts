/**
 * One ref of a bare repository mirrored in memory (docs/store.md, "Layout"): its head and the tree of
 * that commit, caught up with commits that arrived from outside (a push, a fetch), and commits encoded
 * on top of it. Moving the ref is the journaled move's (journaled-refs.ts); the mirror follows once it
 * moved (`advance`).
 */
import { encodeCommit, readCommitTree, type EncodedObject, type GitContext } from './objects.ts';
import type { RefUpdate } from './recovery.ts';
import { readRef } from './refs.ts';
import {
  EMPTY_DIR,
  diffTree,
  encodeTrees,
  getFile,
  listFiles,
  setFiles,
  type DirNode,
  type FileChange,
} from './tree.ts';

export interface Signature {
  name: string;
  email: string;
}

/** A commit encoded on the mirror's head, its objects not yet written, its ref not yet moved. */
export interface EncodedCommit {
  update: RefUpdate;
  root: DirNode;
  /** Every object of the commit: the files' blobs, the changed trees, the commit. */
  objects: EncodedObject[];
}

export class BranchMirror {
  readonly ref: string;
  private readonly ctx: GitContext;
  private headOid: string | undefined;
  private tree: DirNode = EMPTY_DIR;

  constructor(ctx: GitContext, ref: string) {
    this.ctx = ctx;
    this.ref = ref;
  }

  get head(): string | undefined {
    return this.headOid;
  }

  get root(): DirNode {
    return this.tree;
  }

  fileOid(path: string): string | undefined {
    return getFile(this.tree, path);
  }

  /** What the ref points at now (undefined: it does not exist). */
  current(): Promise<string | undefined> {
    return readRef(this.ctx.gitdir, this.ref);
  }

  /**
   * Catch up with `next` (undefined: the ref is gone); returns the files that changed. `kept`: a mirror
   * of an earlier run to diff from instead of nothing, on the first sync; every file then counts as
   * changed, since this mirror had none.
   */
  async sync(next: string | undefined, kept?: DirNode): Promise<FileChange[]> {
    if (next === this.headOid) return [];
    if (next === undefined) {
      const changes = listFiles(this.tree).map(([path]) => ({ path, oid: undefined }));
      this.tree = EMPTY_DIR;
      this.headOid = undefined;
      return changes;
    }
    const { root, changes } = await diffTree(
      this.ctx,
      kept ?? this.tree,
      await readCommitTree(this.ctx, next),
    );
    this.tree = root;
    this.headOid = next;
    return kept ? listFiles(root).map(([path, oid]) => ({ path, oid })) : changes;
  }

  /**
   * One commit setting these files (a blob, or undefined to delete) on top of the head; undefined when
   * nothing changed and no extra parent is given. `from`: the value the ref must have, when it is not the
   * head (a merge built on the other side's commit).
   */
  encode(
    files: { path: string; blob: EncodedObject | undefined }[],
    commit: {
      author: Signature;
      committer: Signature;
      message: string;
      extraParents?: string[];
      from?: string | undefined;
    },
  ): EncodedCommit | undefined {
    const extraParents = commit.extraParents ?? [];
    const changed: [string, string | undefined][] = [];
    for (const f of files)
      if (getFile(this.tree, f.path) !== f.blob?.oid) changed.push([f.path, f.blob?.oid]);
    if (changed.length === 0 && extraParents.length === 0) return undefined;
    const tree = encodeTrees(setFiles(this.tree, changed));
    const encoded = encodeCommit({
      tree: tree.oid,
      parents: [...(this.headOid ? [this.headOid] : []), ...extraParents],
      author: commit.author,
      committer: commit.committer,
      timestamp: Math.floor(Date.now() / 1000),
      message: commit.message,
    });
    return {
      update: { ref: this.ref, from: 'from' in commit ? commit.from : this.headOid, to: encoded.oid },
      root: tree.root,
      objects: [...files.flatMap((f) => (f.blob === undefined ? [] : [f.blob])), ...tree.objects, encoded],
    };
  }

  /** The ref now points at an encoded commit: the mirror follows. */
  advance(commit: EncodedCommit): void {
    this.headOid = commit.update.to;
    this.tree = commit.root;
  }
}
