/**
 * What each blob of the repository parsed and validated to, keyed by path and blob id (content-addressed,
 * so an entry is right for as long as it exists). Kept in the bare repository's directory between runs,
 * so a restart reads neither the blobs nor YAML again: cold start with 10,000 sessions stays fast.
 * Tied to the release (VERSION): new validation rules start with an empty cache.
 */
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { VERSION } from '../../../common/version.ts';
import { atomicWriteFile } from '../../../common/atomic-write.ts';
import { ConditionPacker, unpackConditions } from './packed-conditions.ts';

/** 2: statuses' conditions packed (packed-conditions.ts). */
const FORMAT = 2;

export class ParseCache {
  private readonly file: string;
  private entries = new Map<string, unknown>();
  private changed = false;

  constructor(gitdir: string) {
    this.file = join(gitdir, 'peerops', 'parsed.json');
  }

  static key(kind: 'spec' | 'status', path: string, oid: string): string {
    return `${kind}:${oid}:${path}`;
  }

  async load(): Promise<void> {
    try {
      const doc = JSON.parse(await readFile(this.file, 'utf8')) as {
        format?: number;
        version?: string;
        entries?: [string, unknown][];
        conditionTexts?: Parameters<typeof unpackConditions>[1];
      };
      if (doc.format === FORMAT && doc.version === VERSION && Array.isArray(doc.entries)) {
        const texts = doc.conditionTexts ?? [];
        for (const [key, value] of doc.entries) if (key.startsWith('status:')) unpackConditions(value, texts);
        this.entries = new Map(doc.entries);
      }
    } catch {
      // missing or unreadable: start empty, the blobs are the truth
      this.entries = new Map();
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
   * If an entry was added: keep only the `live()` keys and write the file atomically
   * (common/atomic-write.ts). Without one nothing is written, and entries of files gone meanwhile stay
   * until the next write: never wrong (content-addressed), and a restart with nothing new (the usual
   * cold start) does not list every file of both trees for nothing.
   */
  async save(live: () => Set<string>): Promise<void> {
    if (!this.changed) return;
    const keep = live();
    for (const key of this.entries.keys()) if (!keep.has(key)) this.entries.delete(key);
    this.changed = false;
    await mkdir(join(this.file, '..'), { recursive: true });
    await atomicWriteFile(this.file, this.pieces(), { mode: 0o600 });
  }

  /**
   * The file's JSON in pieces of about 1 MiB: at 100,000 sessions it is 127 MB, and stringified whole
   * (then copied into a buffer to write) it was the peak of a first start's memory.
   */
  private *pieces(): Generator<string> {
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
    yield `${piece}],"conditionTexts":${JSON.stringify(conditions.texts)}}`;
  }
}
