/**
 * What each blob of the repository parsed and validated to, keyed by path and blob id (content-addressed,
 * so an entry is right for as long as it exists). Kept in the bare repository's directory between runs,
 * so a restart reads neither the blobs nor YAML again: cold start with 10,000 sessions stays fast. Beside
 * the entries, each branch's tree mirror as it was at the last save (tree.ts, packMirror), so that a
 * restart reads only the tree objects of directories changed since (at 100,000 sessions the two trees
 * are 2,000 directories, and reading them was a quarter of a start). And the judgement of those two trees
 * (follow.ts): which manifests the rules rejected and why. The rules compare every session with the others,
 * and judging is a pure function of the trees, so a start on the same two trees takes the judgement
 * instead of judging 100,000 sessions again. Tied to the code's revision (common/version.ts): other
 * validation rules start with an empty cache, a checkout and the release built from it share one.
 */
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { FieldError } from '../../../common/errors.ts';
import type { SkipReason } from '../core/skipped.ts';
import { VERSION, codeRevision } from '../../../common/version.ts';
import { atomicWriteFile } from '../../../common/atomic-write.ts';
import { ConditionPacker, unpackConditions } from './packed-conditions.ts';
import { packMirror, unpackMirror, type DirNode, type PackedDir } from '../gitdb/tree.ts';

/**
 * 2: statuses' conditions packed (packed-conditions.ts); 3: the branches' mirrors; 4: refusal reasons;
 * 5: keyed by the code's revision.
 */
const FORMAT = 5;

/** What a load found: the cache taken, none, or one another revision of the code wrote (dropped). */
export type CacheLoad =
  | { found: 'taken'; entries: number; revision: string }
  | { found: 'none' }
  | { found: 'other revision'; revision: string };

export type CacheKind = 'spec' | 'status';

/** A manifest the store skipped: its blob and why. */
export interface Rejection {
  oid: string;
  reason: SkipReason;
  errors: FieldError[];
}

/** The manifests rejected when the spec and status trees were these (their root tree ids). */
interface Judgement {
  spec: string;
  status: string;
  rejected: [path: string, oid: string, errors: FieldError[]][];
}

const isJudgement = (value: unknown): value is Judgement => {
  const j = value as Partial<Judgement> | undefined;
  return (
    typeof j?.spec === 'string' &&
    typeof j.status === 'string' &&
    Array.isArray(j.rejected) &&
    j.rejected.every(
      (r) => Array.isArray(r) && typeof r[0] === 'string' && typeof r[1] === 'string' && Array.isArray(r[2]),
    )
  );
};

/** The revision a cache must have been written by to be taken (the release's version outside git). */
const cacheRevision = (): string => codeRevision() ?? VERSION;

export class ParseCache {
  private readonly file: string;
  private entries = new Map<string, unknown>();
  private changed = false;
  /** The mirrors as the file holds them, until a branch takes its own. */
  private mirrors: Partial<Record<CacheKind, unknown>> = {};
  /** The root tree ids of the mirrors in the file: a save with other ones writes it again. */
  private savedRoots: Partial<Record<CacheKind, string>> = {};
  /** The judgement the file holds, until the first sync takes it. */
  private judgement: Judgement | undefined;
  /** Does the file hold the judgement of its mirrors' trees? A save without one writes it. */
  private judgementSaved = false;

  constructor(gitdir: string) {
    this.file = join(gitdir, 'peerops', 'parsed.json');
  }

  static key(kind: CacheKind, path: string, oid: string): string {
    return `${kind}:${oid}:${path}`;
  }

  async load(): Promise<CacheLoad> {
    const revision = cacheRevision();
    try {
      const doc = JSON.parse(await readFile(this.file, 'utf8')) as {
        format?: number;
        revision?: string;
        entries?: [string, unknown][];
        conditionTexts?: Parameters<typeof unpackConditions>[1];
        mirrors?: Partial<Record<CacheKind, PackedDir>>;
        judgement?: unknown;
      };
      if (doc.format !== FORMAT || doc.revision !== revision || !Array.isArray(doc.entries))
        return { found: 'other revision', revision: `${doc.format ?? '?'}/${doc.revision ?? '?'}` };
      const texts = doc.conditionTexts ?? [];
      for (const [key, value] of doc.entries) if (key.startsWith('status:')) unpackConditions(value, texts);
      this.entries = new Map(doc.entries);
      this.mirrors = doc.mirrors ?? {};
      for (const kind of ['spec', 'status'] as const) {
        const root = doc.mirrors?.[kind]?.[0];
        if (typeof root === 'string') this.savedRoots[kind] = root;
      }
      if (isJudgement(doc.judgement)) {
        this.judgement = doc.judgement;
        this.judgementSaved =
          doc.judgement.spec === this.savedRoots.spec && doc.judgement.status === this.savedRoots.status;
      }
      return { found: 'taken', entries: this.entries.size, revision };
    } catch {
      // missing or unreadable: start empty, the blobs are the truth
      this.entries = new Map();
      this.mirrors = {};
      return { found: 'none' };
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

  /**
   * The manifests rejected when the trees were last judged, by path, if that was with these two root
   * trees; undefined otherwise (the trees moved since, or no judgement was saved): judge them all. Once.
   */
  takeJudgement(
    specRoot: string | undefined,
    statusRoot: string | undefined,
  ): Map<string, Rejection> | undefined {
    const judgement = this.judgement;
    this.judgement = undefined;
    if (judgement === undefined || judgement.spec !== specRoot || judgement.status !== statusRoot)
      return undefined;
    // only the verdicts on manifests that parsed are taken (Follower.applySpecChanges): the rules'
    return new Map(
      judgement.rejected.map(([path, oid, errors]) => [path, { oid, reason: 'rules' as const, errors }]),
    );
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
   * the file, with the branches' `mirrors` and the manifests the store rejects in those trees (`rejected`,
   * the trees' judgement), atomically (common/atomic-write.ts). Otherwise nothing is
   * written, and entries of files gone meanwhile stay until the next write: never wrong
   * (content-addressed), and a restart with nothing new (the usual cold start) does not list every file of
   * both trees for nothing.
   */
  async save(
    live: () => Set<string>,
    mirrors: Record<CacheKind, DirNode>,
    rejected: () => Map<string, Rejection>,
  ): Promise<void> {
    const moved = (['spec', 'status'] as const).some((k) => mirrors[k].oid !== this.savedRoots[k]);
    if (!this.changed && !moved && this.judgementSaved) return;
    const keep = live();
    for (const key of this.entries.keys()) if (!keep.has(key)) this.entries.delete(key);
    this.changed = false;
    const packed = { spec: packMirror(mirrors.spec), status: packMirror(mirrors.status) };
    const [spec, status] = [packed.spec?.[0], packed.status?.[0]];
    const judgement: Judgement | undefined =
      spec !== undefined && status !== undefined
        ? { spec, status, rejected: [...rejected()].map(([path, r]) => [path, r.oid, r.errors]) }
        : undefined;
    await mkdir(join(this.file, '..'), { recursive: true });
    await atomicWriteFile(this.file, this.pieces(packed, judgement), { mode: 0o600 });
    this.savedRoots = { spec, status };
    this.judgementSaved = true;
  }

  /**
   * The file's JSON in pieces of about 1 MiB: at 100,000 sessions it is 127 MB, and stringified whole
   * (then copied into a buffer to write) it was the peak of a first start's memory.
   */
  private *pieces(
    mirrors: Partial<Record<CacheKind, PackedDir>>,
    judgement: Judgement | undefined,
  ): Generator<string> {
    let piece = `{"format":${FORMAT},"revision":${JSON.stringify(cacheRevision())},"entries":[`;
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
    yield `,"mirrors":${JSON.stringify(mirrors)},"judgement":${JSON.stringify(judgement ?? null)}}`;
  }
}
