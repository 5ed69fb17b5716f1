/**
 * One branch of the store as peerops writes it: commits made from an actor's file writes (author, one-line
 * message and trailers), the parse cache fed with what they hold and its kept mirror used on the first
 * sync, over the domain-free mirror of the ref (gitdb/branch-mirror.ts). Moving the ref to a new commit
 * is the store's (commits.ts, through the journal).
 */
import { syncWrittenDirs } from '../../git-fs.ts';
import type { Actor } from '../store.ts';
import { ParseCache, type CacheKind } from './parse-cache.ts';
import { BranchMirror, type EncodedCommit } from '../gitdb/branch-mirror.ts';
import { encodeObject, writeObjects, type EncodedObject, type GitContext } from '../gitdb/objects.ts';
import { EMPTY_DIR, type DirNode, type FileChange } from '../gitdb/tree.ts';

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
  private readonly gitdir: string;
  private readonly mirror: BranchMirror;
  private readonly cache: { cache: ParseCache; kind: CacheKind } | undefined;

  constructor(ctx: GitContext, ref: string, cache?: { cache: ParseCache; kind: CacheKind }) {
    this.ref = ref;
    this.gitdir = ctx.gitdir;
    this.mirror = new BranchMirror(ctx, ref);
    this.cache = cache;
  }

  get head(): string | undefined {
    return this.mirror.head;
  }

  get root(): DirNode {
    return this.mirror.root;
  }

  fileOid(path: string): string | undefined {
    return this.mirror.fileOid(path);
  }

  /** Has the ref moved away from the head this mirror knows? */
  async moved(): Promise<string | undefined> {
    const current = await this.mirror.current();
    return current !== this.mirror.head ? current : undefined;
  }

  /** Catch up with the ref (or with `target`); returns the files that changed. */
  async sync(target?: string): Promise<FileChange[]> {
    const next = target ?? (await this.mirror.current());
    if (next === this.mirror.head) return [];
    // the first sync starts from the mirror of the last run when the parse cache has one
    const kept =
      next !== undefined && this.mirror.root === EMPTY_DIR
        ? this.cache?.cache.takeMirror(this.cache.kind)
        : undefined;
    return this.mirror.sync(next, kept);
  }

  /**
   * One commit with these writes on top of the known head, its objects encoded in memory and not yet
   * written: the store writes them (writeObjects, then syncWrittenDirs) and moves refs through its
   * journal (gitdb/journaled-refs.ts), then calls `advance`. Undefined when nothing changed. `refNow`:
   * the value the ref must have when it differs from the mirror's head (a merge built on the other
   * side's commit).
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
    const blobs = writes.map((w) =>
      w.text === undefined ? undefined : (w.blob ?? encodeObject('blob', Buffer.from(w.text, 'utf8'))),
    );
    const commit = this.mirror.encode(
      writes.map((w, i) => ({ path: w.path, blob: blobs[i] })),
      {
        author: options.replay?.author ?? commitAuthor(actor),
        committer: { name: 'peerops controller', email: 'controller@peerops.invalid' },
        message: options.replay?.message ?? commitMessage(message, actor),
        ...(options.extraParents ? { extraParents: options.extraParents } : {}),
        ...('refNow' in options ? { from: options.refNow } : {}),
      },
    );
    if (commit === undefined) return undefined;
    const written: [FileWrite, string][] = [];
    writes.forEach((w, i) => {
      const oid = blobs[i]?.oid;
      if (oid !== undefined) written.push([w, oid]);
    });
    return { ...commit, branch: this, written };
  }

  /** encode, with the objects written and their directories fsynced (not yet on the ref). */
  async prepare(...args: Parameters<Branch['encode']>): Promise<PreparedCommit | undefined> {
    const prepared = this.encode(...args);
    if (prepared) {
      await writeObjects(this.gitdir, prepared.objects);
      await syncWrittenDirs();
    }
    return prepared;
  }

  /** The ref now points at a prepared commit: the mirror follows, and the parse cache learns its files. */
  advance(prepared: PreparedCommit): void {
    this.mirror.advance(prepared);
    if (this.cache) {
      for (const [w, blob] of prepared.written) {
        if (w.parsed !== undefined)
          this.cache.cache.set(ParseCache.key(this.cache.kind, w.path, blob), w.parsed);
      }
    }
  }
}

/** A commit encoded (Branch.encode), its objects written or not, not yet on its ref. */
export interface PreparedCommit extends EncodedCommit {
  branch: Branch;
  written: [FileWrite, string][];
}
