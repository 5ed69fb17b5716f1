/**
 * What each blob of the repository parsed and validated to, keyed by path and blob id (content-addressed,
 * so an entry is right for as long as it exists). Kept in the bare repository's directory between runs,
 * so a restart reads neither the blobs nor YAML again: cold start with 10,000 sessions stays fast. Beside
 * the entries, each branch's tree mirror as it was at the last save (tree.ts, packMirror), so that a
 * restart reads only the tree objects of directories changed since (at 100,000 sessions the two trees
 * are 2,000 directories, and reading them was a quarter of a start). Tied to the release (VERSION): new
 * validation rules start with an empty cache.
 */
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { VERSION } from '../../../common/version.ts';
import { atomicWriteFile } from '../../../common/atomic-write.ts';
import { ConditionPacker, unpackConditions } from './packed-conditions.ts';
import { packMirror, unpackMirror, type DirNode, type PackedDir } from './tree.ts';

/** 2: statuses' conditions packed (packed-conditions.ts); 3: the branches' mirrors. */
const FORMAT = 3;

export type CacheKind = 'spec' | 'status';

export class ParseCache {
  private readonly file: string;
  private entries = new Map<string, unknown>();
  private changed = false;
  /** The mirrors as the file holds them, until a branch takes its own. */
  private mirrors: Partial<Record<CacheKind, unknown>> = {};
  /** The root tree ids of the mirrors in the file: a save with other ones writes it again. */
  private savedRoots: Partial<Record<CacheKind, string>> = {};

  constructor(gitdir: string) {
    this.file = join(gitdir, 'peerops', 'parsed.json');
  }

  static key(kind: CacheKind, path: string, oid: string): string {
    return `${kind}:${oid}:${path}`;
  }

  async load(): Promise<void> {
    try {
      const doc = JSON.parse(await readFile(this.file, 'utf8')) as {
        format?: number;
        version?: string;
        entries?: [string, unknown][];
        conditionTexts?: Parameters<typeof unpackConditions>[1];
        mirrors?: Partial<Record<CacheKind, PackedDir>>;
      };
      if (doc.format === FORMAT && doc.version === VERSION && Array.isArray(doc.entries)) {
        const texts = doc.conditionTexts ?? [];
        for (const [key, value] of doc.entries) if (key.startsWith('status:')) unpackConditions(value, texts);
        this.entries = new Map(doc.entries);
        this.mirrors = doc.mirrors ?? {};
        for (const kind of ['spec', 'status'] as const) {
          const root = doc.mirrors?.[kind]?.[0];
          if (typeof root === 'string') this.savedRoots[kind] = root;
        }
      }
    } catch {
      // missing or unreadable: start empty, the blobs are the truth
      this.entries = new Map();
      this.mirrors = {};
    }
  }

  /**
   * The branch's mirror as of the last save, once (a branch takes it at its first sync and diffs it
   * with its head); undefined when there is none or it is damaged, and the branch reads its whole tree.
   */
  takeMirror(kind: CacheKind): DirNode | undefined {
    const packed = this.mirrors[kind];
    delete this.mirrors[kind];
    if (packed === undefined) return undefined;
    try {
      return unpackMirror(packed);
    } catch {
      // the next save writes a good one
      delete this.savedRoots[kind];
      return undefined;
    }
  }

  get(key: string): unknown {
    return this.entries.get(key);
  }

  has(key: string): boolean {
    return this.entries.has(key);
  }

  set(key: string, value: unknown): void {
    this.entries.set(key, value);
    this.changed = true;
  }

  /**
   * If an entry was added or a branch's tree is not the one saved: keep only the `live()` keys and write
   * the file, with the branches' `mirrors`, atomically (common/atomic-write.ts). Otherwise nothing is
   * written, and entries of files gone meanwhile stay until the next write: never wrong
   * (content-addressed), and a restart with nothing new (the usual cold start) does not list every file of
   * both trees for nothing.
   */
  async save(live: () => Set<string>, mirrors: Record<CacheKind, DirNode>): Promise<void> {
    const moved = (['spec', 'status'] as const).some((k) => mirrors[k].oid !== this.savedRoots[k]);
    if (!this.changed && !moved) return;
    const keep = live();
    for (const key of this.entries.keys()) if (!keep.has(key)) this.entries.delete(key);
    this.changed = false;
    const packed = { spec: packMirror(mirrors.spec), status: packMirror(mirrors.status) };
    await mkdir(join(this.file, '..'), { recursive: true });
    await atomicWriteFile(this.file, this.pieces(packed), { mode: 0o600 });
    this.savedRoots = { spec: packed.spec?.[0], status: packed.status?.[0] };
  }

  /**
   * The file's JSON in pieces of about 1 MiB: at 100,000 sessions it is 127 MB, and stringified whole
   * (then copied into a buffer to write) it was the peak of a first start's memory.
   */
  private *pieces(mirrors: Partial<Record<CacheKind, PackedDir>>): Generator<string> {
    let piece = `{"format":${FORMAT},"version":${JSON.stringify(VERSION)},"entries":[`;
    let first = true;
    const conditions = new ConditionPacker();
    for (const [key, value] of this.entries) {
      const written = key.startsWith('status:') ? conditions.pack(value) : value;
      piece += (first ? '' : ',') + JSON.stringify([key, written]);
      first = false;
      if (piece.length >= 1 << 20) {
        yield piece;
        piece = '';
      }
    }
    // after the entries: the table is complete only once every one is written
    yield `${piece}],"conditionTexts":${JSON.stringify(conditions.texts)}`;
    yield `,"mirrors":${JSON.stringify(mirrors)}}`;
  }
}
