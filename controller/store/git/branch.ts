/**
 * One branch of the store's bare repository: its head, the mirror of its tree, commits built straight from
 * objects, and catching up with commits that arrived from outside (a push, a fetch). Moving the ref to a
 * new commit is the store's (git-store.ts, through its journal).
 */
import { syncWrittenDirs } from '../../git-fs.ts';
import type { Actor } from '../store.ts';
import { ParseCache, type CacheKind } from './parse-cache.ts';
import {
  encodeCommit,
  encodeObject,
  readCommitTree,
  writeObjects,
  type EncodedObject,
  type GitContext,
} from '../gitdb/objects.ts';
import type { RefUpdate } from '../gitdb/recovery.ts';
import { readRef } from '../gitdb/refs.ts';
import {
  EMPTY_DIR,
  diffTree,
  getFile,
  listFiles,
  setFiles,
  encodeTrees,
  type DirNode,
  type FileChange,
} from '../gitdb/tree.ts';

/** A file to write (`text`) or delete (undefined); `parsed`: what the text parses to, for the parse cache. */
export interface FileWrite {
  path: string;
  text: string | undefined;
  parsed?: unknown;
  /** `text` as a blob, encoded by a caller that spreads a large commit's work over turns of the event loop. */
  blob?: EncodedObject;
}

// eslint-disable-next-line no-control-regex -- stripping control characters is the point
const CONTROL = /[\u0000-\u001f\u007f]/g;

/** A commit message from a caller's text: one line without control characters (nothing can pose as a
 * trailer or another line), then the actor as trailers. */
export function commitMessage(message: string, actor: Actor): string {
  const text = message.replace(CONTROL, ' ').trim() || 'update';
  const trailers = [`Peerops-Actor: ${actor.name.replace(/[\r\n]/g, ' ')}`, `Peerops-Role: ${actor.role}`];
  if (actor.asn !== undefined) trailers.push(`Peerops-Asn: ${actor.asn}`);
  return `${text}\n\n${trailers.join('\n')}\n`;
}

/** The commit author for an actor: the name says who asked; the address is not a real mailbox. */
export function commitAuthor(actor: Actor): { name: string; email: string } {
  const name =
    actor.name
      .replace(CONTROL, ' ')
      .replace(/[<>\n]/g, ' ')
      .trim() || actor.role;
  const local =
    name
      .toLowerCase()
      .replace(/[^a-z0-9.-]+/g, '-')
      .replace(/^-+|-+$/g, '') || actor.role;
  return { name, email: `${local}@peerops.invalid` };
}

export class Branch {
  readonly ref: string;
  private readonly ctx: GitContext;
  private headOid: string | undefined;
  private tree: DirNode = EMPTY_DIR;

  private readonly cache: { cache: ParseCache; kind: CacheKind } | undefined;

  constructor(ctx: GitContext, ref: string, cache?: { cache: ParseCache; kind: CacheKind }) {
    this.ctx = ctx;
    this.ref = ref;
    this.cache = cache;
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

  /** Has the ref moved away from the head this mirror knows? */
  async moved(): Promise<string | undefined> {
    const current = await readRef(this.ctx.gitdir, this.ref);
    return current !== this.headOid ? current : undefined;
  }

  /** Catch up with the ref (or with `target`); returns the files that changed. */
  async sync(target?: string): Promise<FileChange[]> {
    const next = target ?? (await readRef(this.ctx.gitdir, this.ref));
    if (next === this.headOid) return [];
    if (next === undefined) {
      const { changes } = await diffTreeToEmpty(this.tree);
      this.tree = EMPTY_DIR;
      this.headOid = undefined;
      return changes;
    }
    // the first sync starts from the mirror of the last run when the parse cache has one
    const kept = this.tree === EMPTY_DIR ? this.cache?.cache.takeMirror(this.cache.kind) : undefined;
    const { root, changes } = await diffTree(
      this.ctx,
      kept ?? this.tree,
      await readCommitTree(this.ctx, next),
    );
    this.tree = root;
    this.headOid = next;
    // the changes since the kept mirror are not this branch's: it had nothing, so every file is one
    return kept ? listFiles(root).map(([path, oid]) => ({ path, oid })) : changes;
  }

  /**
   * One commit with these writes on top of the known head, its objects encoded in memory and not yet
   * written: the store writes them (writeObjects, then syncWrittenDirs) and moves refs through its
   * journal (recovery.ts), then calls `advance`. Undefined when nothing changed. `refNow`: the value the
   * ref must have when it differs from the mirror's head (a merge built on the other side's commit).
   */
  encode(
    writes: FileWrite[],
    actor: Actor,
    message: string,
    options: {
      extraParents?: string[];
      refNow?: string;
      /** Author and whole message of a commit rebuilt on another tip (remote.ts), kept as they were. */
      replay?: { author: { name: string; email: string }; message: string };
    } = {},
  ): PreparedCommit | undefined {
    const extraParents = options.extraParents ?? [];
    const blobs = writes.map((w) =>
      w.text === undefined ? undefined : (w.blob ?? encodeObject('blob', Buffer.from(w.text, 'utf8'))),
    );
    const written: [FileWrite, string][] = [];
    const changed: [string, string | undefined][] = [];
    writes.forEach((w, i) => {
      const oid = blobs[i]?.oid;
      if (oid !== undefined) written.push([w, oid]);
      if (getFile(this.tree, w.path) !== oid) changed.push([w.path, oid]);
    });
    if (changed.length === 0 && extraParents.length === 0) return undefined;
    const tree = encodeTrees(setFiles(this.tree, changed));
    const commit = encodeCommit({
      tree: tree.oid,
      parents: [...(this.headOid ? [this.headOid] : []), ...extraParents],
      author: options.replay?.author ?? commitAuthor(actor),
      committer: { name: 'peerops controller', email: 'controller@peerops.invalid' },
      timestamp: Math.floor(Date.now() / 1000),
      message: options.replay?.message ?? commitMessage(message, actor),
    });
    return {
      branch: this,
      update: {
        ref: this.ref,
        from: 'refNow' in options ? options.refNow : this.headOid,
        to: commit.oid,
      },
      root: tree.root,
      written,
      objects: [...blobs.filter((b): b is EncodedObject => b !== undefined), ...tree.objects, commit],
    };
  }

  /** encode, with the objects written and their directories fsynced (not yet on the ref). */
  async prepare(...args: Parameters<Branch['encode']>): Promise<PreparedCommit | undefined> {
    const prepared = this.encode(...args);
    if (prepared) {
      await writeObjects(this.ctx.gitdir, prepared.objects);
      await syncWrittenDirs();
    }
    return prepared;
  }

  /** The ref now points at a prepared commit: the mirror follows. */
  advance(prepared: PreparedCommit): void {
    this.headOid = prepared.update.to;
    this.tree = prepared.root;
    if (this.cache) {
      for (const [w, blob] of prepared.written) {
        if (w.parsed !== undefined)
          this.cache.cache.set(ParseCache.key(this.cache.kind, w.path, blob), w.parsed);
      }
    }
  }
}

/** A commit encoded (Branch.encode), its objects written or not, not yet on its ref. */
export interface PreparedCommit {
  branch: Branch;
  update: RefUpdate;
  root: DirNode;
  written: [FileWrite, string][];
  /** Every object of the commit: the written files' blobs, the changed trees, the commit. */
  objects: EncodedObject[];
}

async function diffTreeToEmpty(root: DirNode): Promise<{ changes: FileChange[] }> {
  const changes: FileChange[] = [];
  const walk = (dir: DirNode, prefix: string) => {
    for (const [name, node] of dir.entries) {
      if (node.type === 'tree') walk(node, `${prefix}${name}/`);
      else changes.push({ path: `${prefix}${name}`, oid: undefined });
    }
  };
  walk(root, '');
  return { changes };
}
