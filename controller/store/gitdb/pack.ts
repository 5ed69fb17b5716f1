/**
 * Reading objects from the repository's packs (version 2 indexes; what `git gc`, a push and
 * `git fast-import` write) with native zlib. isomorphic-git reads a packed object in about 2.5 ms: per
 * object it first fails to open the loose file, looks for the git directory, and inflates in JavaScript
 * with a fresh window, and a cold start reads every tree (2,000 with 1,000 routers) from the pack
 * (docs/decisions.md). Here a pack's index is read once,
 * an object's bytes are read at its offset (up to the next object's) and inflated natively, and deltas
 * are applied from a small cache of recent bases. Anything this reader does not handle (an index of
 * another version) is left to isomorphic-git (objects.ts).
 */
import { open, readdir, readFile, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { inflateSync } from 'node:zlib';

export type ObjectType = 'commit' | 'tree' | 'blob' | 'tag';

export interface GitObject {
  type: ObjectType;
  content: Buffer;
}

const TYPES: Record<number, ObjectType> = { 1: 'commit', 2: 'tree', 3: 'blob', 4: 'tag' };
const OFS_DELTA = 6;
const REF_DELTA = 7;
/**
 * Objects read last, by pack offset, up to this many bytes of content: a delta is applied to the object
 * before it in its chain (up to 50 long), and similar files read in path order are mostly the ones
 * before them in the pack, so each read applies one delta instead of resolving its whole chain.
 */
const RECENT_BYTES = 16 << 20;

interface Pack {
  /** The index file, kept whole: fan-out table, sorted object ids, CRCs, offsets. */
  idx: Buffer;
  count: number;
  file: FileHandle;
  /** Every object's offset, sorted, and the end of the last one: an object ends where the next begins. */
  ends: Float64Array;
  recent: Map<number, GitObject>;
  recentBytes: number;
}

async function openPack(dir: string, name: string): Promise<Pack | undefined> {
  const idx = await readFile(join(dir, `${name}.idx`));
  // version 2: \377tOc, version 2; anything else is left to isomorphic-git
  if (idx.readUInt32BE(0) !== 0xff744f63 || idx.readUInt32BE(4) !== 2) return undefined;
  const count = idx.readUInt32BE(8 + 255 * 4);
  const file = await open(join(dir, `${name}.pack`), 'r');
  const size = (await file.stat()).size;
  const offsets = new Float64Array(count + 1);
  for (let i = 0; i < count; i++) offsets[i] = offsetAt(idx, count, i);
  offsets[count] = size - 20; // the pack's trailing checksum
  offsets.sort();
  return { idx, count, file, ends: offsets, recent: new Map(), recentBytes: 0 };
}

function offsetAt(idx: Buffer, count: number, i: number): number {
  const table = 8 + 256 * 4 + count * 24;
  const small = idx.readUInt32BE(table + i * 4);
  if ((small & 0x80000000) === 0) return small;
  const large = table + count * 4 + (small & 0x7fffffff) * 8;
  return Number(idx.readBigUInt64BE(large));
}

/** The position of `oid` in the pack's index, or -1: binary search within its fan-out bucket. */
function find(pack: Pack, oid: Buffer): number {
  const first = oid[0] ?? 0;
  let lo = first === 0 ? 0 : pack.idx.readUInt32BE(8 + (first - 1) * 4);
  let hi = pack.idx.readUInt32BE(8 + first * 4);
  const ids = 8 + 256 * 4;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const cmp = pack.idx.compare(oid, 0, 20, ids + mid * 20, ids + mid * 20 + 20);
    if (cmp === 0) return mid;
    if (cmp < 0) lo = mid + 1;
    else hi = mid;
  }
  return -1;
}

/** The end of the object starting at `offset`: the next object's offset. */
function endOf(pack: Pack, offset: number): number {
  const ends = pack.ends;
  let lo = 0;
  let hi = ends.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((ends[mid] as number) <= offset) lo = mid + 1;
    else hi = mid;
  }
  return ends[lo] as number;
}

/** A delta's instructions applied to its base (git's pack-format documentation, "Deltified representation"). */
function applyDelta(base: Buffer, delta: Buffer): Buffer {
  let pos = 0;
  const varint = () => {
    let value = 0;
    let shift = 0;
    let byte: number;
    do {
      byte = delta[pos++] as number;
      value += (byte & 0x7f) * 2 ** shift;
      shift += 7;
    } while (byte & 0x80);
    return value;
  };
  if (varint() !== base.length) throw new Error('pack: delta base has the wrong size');
  const out = Buffer.allocUnsafe(varint());
  let at = 0;
  while (pos < delta.length) {
    const op = delta[pos++] as number;
    if (op & 0x80) {
      let offset = 0;
      let size = 0;
      for (let i = 0; i < 4; i++) if (op & (1 << i)) offset += (delta[pos++] as number) * 2 ** (8 * i);
      for (let i = 0; i < 3; i++) if (op & (1 << (4 + i))) size += (delta[pos++] as number) << (8 * i);
      if (size === 0) size = 0x10000;
      at += base.copy(out, at, offset, offset + size);
    } else if (op > 0) {
      at += delta.copy(out, at, pos, pos + op);
      pos += op;
    } else throw new Error('pack: invalid delta instruction');
  }
  if (at !== out.length) throw new Error('pack: delta result has the wrong size');
  return out;
}

export class PackReader {
  private readonly dir: string;
  private packs = new Map<string, Pack | undefined>();
  /**
   * The first listing of the pack directory, under way or done, and a listing again after a miss (a gc
   * or push may have added a pack), while under way. Reads started together (a start reads 16 at once)
   * share one: each opening every pack left all but one listing's file handles to the garbage collector.
   */
  private listing: Promise<void> | undefined;
  private relisting: Promise<void> | undefined;

  constructor(gitdir: string) {
    this.dir = join(gitdir, 'objects', 'pack');
  }

  /**
   * The object, or undefined when no pack this reader handles holds it. With `relist`, a miss lists the
   * pack directory again first (a gc or a push may have added a pack since).
   */
  async read(oid: string, relist = true): Promise<GitObject | undefined> {
    const id = Buffer.from(oid, 'hex');
    await (this.listing ??= this.list());
    let found = this.locate(id);
    if (!found && relist) {
      await this.relist();
      found = this.locate(id);
    }
    return found && this.readAt(found.pack, found.offset);
  }

  async close(): Promise<void> {
    await Promise.allSettled([this.listing, this.relisting]);
    const packs = [...this.packs.values()];
    this.packs.clear();
    this.listing = undefined;
    await Promise.all(packs.flatMap((p) => (p ? [p.file.close()] : [])));
  }

  private locate(id: Buffer): { pack: Pack; offset: number } | undefined {
    for (const pack of this.packs.values()) {
      if (!pack) continue;
      const i = find(pack, id);
      if (i >= 0) return { pack, offset: offsetAt(pack.idx, pack.count, i) };
    }
    return undefined;
  }

  private relist(): Promise<void> {
    this.relisting ??= this.list().finally(() => (this.relisting = undefined));
    return this.relisting;
  }

  private async list(): Promise<void> {
    let names: string[];
    try {
      names = (await readdir(this.dir)).filter((n) => n.endsWith('.idx')).map((n) => n.slice(0, -4));
    } catch {
      names = [];
    }
    const next = new Map<string, Pack | undefined>();
    for (const name of names) {
      if (this.packs.has(name)) next.set(name, this.packs.get(name));
      else {
        try {
          next.set(name, await openPack(this.dir, name));
        } catch {
          next.set(name, undefined); // removed meanwhile, or half written: isomorphic-git decides
        }
      }
    }
    // packs a gc removed: their objects are in the new pack
    for (const [name, pack] of this.packs) if (!next.has(name)) await pack?.file.close().catch(() => {});
    this.packs = next;
  }

  private async readAt(pack: Pack, offset: number): Promise<GitObject> {
    const cached = pack.recent.get(offset);
    if (cached) return cached;
    const end = endOf(pack, offset);
    const raw = Buffer.allocUnsafe(end - offset);
    await pack.file.read(raw, 0, raw.length, offset);
    let pos = 0;
    // the type, then the size, which inflating tells anyway
    let byte = raw[pos++] as number;
    const kind = (byte >> 4) & 7;
    while (byte & 0x80) byte = raw[pos++] as number;
    let object: GitObject;
    if (kind === OFS_DELTA) {
      byte = raw[pos++] as number;
      let back = byte & 0x7f;
      while (byte & 0x80) {
        byte = raw[pos++] as number;
        back = (back + 1) * 128 + (byte & 0x7f);
      }
      const base = await this.readAt(pack, offset - back);
      object = { type: base.type, content: applyDelta(base.content, inflateSync(raw.subarray(pos))) };
    } else if (kind === REF_DELTA) {
      const baseId = raw.subarray(pos, pos + 20).toString('hex');
      const base = await this.read(baseId);
      if (!base) throw new Error(`pack: delta base ${baseId} not found`);
      object = { type: base.type, content: applyDelta(base.content, inflateSync(raw.subarray(pos + 20))) };
    } else {
      const type = TYPES[kind];
      if (!type) throw new Error(`pack: unknown object type ${kind} at ${offset}`);
      object = { type, content: inflateSync(raw.subarray(pos)) };
    }
    pack.recent.set(offset, object);
    pack.recentBytes += object.content.length;
    for (const [at, old] of pack.recent) {
      if (pack.recentBytes <= RECENT_BYTES) break;
      pack.recent.delete(at);
      pack.recentBytes -= old.content.length;
    }
    return object;
  }
}
