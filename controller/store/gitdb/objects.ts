/**
 * The git objects the store reads and writes itself, with native zlib: blobs, trees and commits are
 * serialised, hashed and deflated in memory here and stored as loose objects through gitFs (atomically,
 * fsynced); a loose object is read and inflated here, packed ones by pack.ts or isomorphic-git.
 *
 * Why not isomorphic-git's writeBlob/writeTree/writeCommit: under Node they deflate through
 * CompressionStream, web streams over a zlib stream. Those objects go through the same Readable and
 * Writable functions the HTTP server runs for every request, and V8 then re-optimises that code for
 * the mix: after a controller had written objects (an observation flush, a first start), agent requests
 * cost measurably more CPU for the rest of its life (see docs/api.md "Performance"). zlib's deflateSync
 * touches no stream.
 */
import { createHash } from 'node:crypto';
import { mkdir, readFile, utimes } from 'node:fs/promises';
import { join } from 'node:path';
import { constants, deflateSync, inflateSync } from 'node:zlib';
import git from 'isomorphic-git';
import { mapLimit } from '../../../common/concurrency.ts';
import { fsyncDir } from '../../../common/atomic-write.ts';
import { gitFs } from '../../git-fs.ts';
import { PackReader, type GitObject, type ObjectType } from './pack.ts';

export interface GitContext {
  gitdir: string;
  /** isomorphic-git's object cache (keeps packfile indexes loaded between calls). */
  cache: object;
}

export interface TreeEntry {
  type: 'blob' | 'tree';
  name: string;
  oid: string;
}

export interface CommitObject {
  tree: string;
  parents: string[];
  author: { name: string; email: string };
  committer: { name: string; email: string };
  /** Seconds since the epoch; author and committer share it, in UTC (+0000). */
  timestamp: number;
  message: string;
}

const MODE = { blob: '100644', tree: '40000' } as const;

/** An object serialised, hashed and deflated in memory, not yet on disk (writeObjects). */
export interface EncodedObject {
  oid: string;
  deflated: Buffer;
}

export function encodeObject(
  type: 'blob' | 'tree' | 'commit',
  content: Buffer,
  level: number = constants.Z_BEST_SPEED,
): EncodedObject {
  const wrapped = Buffer.concat([Buffer.from(`${type} ${content.length}\0`, 'latin1'), content]);
  const oid = createHash('sha1').update(wrapped).digest('hex');
  // zlib's output chunk sized to the object: the result is a slice of that chunk, so the default 16 KiB
  // chunk kept 16 KiB alive for each small object a commit holds until written (a first start at 10,000
  // sessions holds 20,000; docs/benchmarks.md, The git store)
  return { oid, deflated: deflateSync(wrapped, { level, chunkSize: wrapped.length + 64 }) };
}

/**
 * Store encoded objects as loose files, OBJECT_WRITES at a time: each file is written and fsynced on
 * its own (gitFs), so writing them side by side costs about one fsync's wait, not one per object.
 * Their directories are fsynced by syncWrittenDirs, before a ref may point at them.
 */
export async function writeObjects(gitdir: string, objects: readonly EncodedObject[]): Promise<void> {
  const unique = [...new Map(objects.map((o) => [o.oid, o])).values()];
  await mapLimit(unique, OBJECT_WRITES, (o) => writeLoose(gitdir, o));
}

/**
 * One loose object, unless it is stored already (the same bytes, as git does). Written here rather than
 * by isomorphic-git's writeObject, which probes its fs and looks for the git directory at every call.
 */
async function writeLoose(gitdir: string, { oid, deflated }: EncodedObject): Promise<void> {
  const dir = join(gitdir, 'objects', oid.slice(0, 2));
  const path = join(dir, oid.slice(2));
  // Stored already: freshened instead, as git does, so that `git gc` does not prune it as old and
  // unreachable before the ref that will reach it moves; gone meanwhile (pruned): written again.
  const now = new Date();
  if (
    await utimes(path, now, now).then(
      () => true,
      () => false,
    )
  )
    return;
  let made = false;
  for (let attempt = 1; ; attempt++) {
    try {
      await gitFs.promises.writeFile(path, deflated);
      break;
    } catch (err) {
      // no objects/xx directory yet, or `git gc` (prune-packed) removed it as empty meanwhile
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || attempt >= 5) throw err;
      await mkdir(dir, { recursive: true });
      made = true;
    }
  }
  // a directory made here holds the object now (gc leaves it); its own entry is durable before the
  // object counts
  if (made) await fsyncDir(join(gitdir, 'objects'));
}

/** Objects written at once: enough to overlap their fsyncs, few enough for libuv's thread pool. */
const OBJECT_WRITES = 16;

async function writeObject(
  gitdir: string,
  type: 'blob' | 'tree' | 'commit',
  content: Buffer,
): Promise<string> {
  const object = encodeObject(type, content);
  await writeObjects(gitdir, [object]);
  return object.oid;
}

export function writeBlob(gitdir: string, content: Buffer): Promise<string> {
  return writeObject(gitdir, 'blob', content);
}

/** Each repository's pack reader (pack.ts), by context; closed with closeObjects. */
const packReaders = new WeakMap<GitContext, PackReader>();

function packs(ctx: GitContext): PackReader {
  let reader = packReaders.get(ctx);
  if (!reader) packReaders.set(ctx, (reader = new PackReader(ctx.gitdir)));
  return reader;
}

/** Close the files the context's pack reader holds open (a store's close). */
export async function closeObjects(ctx: GitContext): Promise<void> {
  await packReaders.get(ctx)?.close();
  packReaders.delete(ctx);
}

/**
 * An object's type and content: from a pack already known (pack.ts), else its loose file (everything
 * the store wrote itself, one read and native zlib), else a pack added since, else isomorphic-git
 * (packs pack.ts does not read).
 */
async function readObject(ctx: GitContext, oid: string): Promise<GitObject> {
  const reader = packs(ctx);
  const known = await reader.read(oid, false);
  if (known) return known;
  let compressed: Buffer | undefined;
  try {
    compressed = await readFile(join(ctx.gitdir, 'objects', oid.slice(0, 2), oid.slice(2)));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (compressed) {
    const raw = inflateSync(compressed);
    const nul = raw.indexOf(0);
    const [type, size] = raw.subarray(0, nul).toString('latin1').split(' ');
    if (!type || !['commit', 'tree', 'blob', 'tag'].includes(type) || Number(size) !== raw.length - nul - 1)
      throw new Error(`object ${oid} is not a valid git object`);
    return { type: type as ObjectType, content: raw.subarray(nul + 1) };
  }
  const packed = await reader.read(oid);
  if (packed) return packed;
  const { type, object } = await git.readObject({
    fs: gitFs,
    gitdir: ctx.gitdir,
    oid,
    format: 'content',
    cache: ctx.cache,
  });
  // with format 'content' isomorphic-git answers one of git's four object types
  return { type: type as ObjectType, content: Buffer.from(object as Uint8Array) };
}

async function readTyped(ctx: GitContext, oid: string, type: ObjectType): Promise<Buffer> {
  const object = await readObject(ctx, oid);
  if (object.type !== type) throw new Error(`object ${oid} is a ${object.type}, not a ${type}`);
  return object.content;
}

/** A blob's text. */
export async function readText(ctx: GitContext, oid: string): Promise<string> {
  return (await readTyped(ctx, oid, 'blob')).toString('utf8');
}

/** The tree of a commit: its first line, `tree <id>`. */
export async function readCommitTree(ctx: GitContext, oid: string): Promise<string> {
  const content = await readTyped(ctx, oid, 'commit');
  const match = /^tree ([0-9a-f]{40})\n/.exec(content.toString('latin1', 0, 46));
  if (!match) throw new Error(`commit ${oid} has no tree`);
  return match[1] as string;
}

/** A tree's entries as git stores them: `<mode> <name>\0<20-byte id>` each. */
export async function readTree(ctx: GitContext, oid: string): Promise<TreeEntry[]> {
  const content = await readTyped(ctx, oid, 'tree');
  const entries: TreeEntry[] = [];
  let pos = 0;
  while (pos < content.length) {
    const space = content.indexOf(0x20, pos);
    const nul = content.indexOf(0, space);
    if (space < 0 || nul < 0 || nul + 21 > content.length) throw new Error(`tree ${oid} is damaged`);
    const mode = content.toString('latin1', pos, space);
    const name = content.toString('utf8', space + 1, nul);
    const id = content.toString('hex', nul + 1, nul + 21);
    pos = nul + 21;
    // directories and files; submodules (160000) are neither and are left out, as the store ignores them
    if (mode === '40000' || mode === '040000') entries.push({ type: 'tree', name, oid: id });
    else if (mode !== '160000') entries.push({ type: 'blob', name, oid: id });
  }
  return entries;
}

/** Printable ASCII: JavaScript's string order is then git's byte order. */
const ASCII = /^[\x20-\x7e]*$/;

/** Tree entries in git's order: by the bytes of the name, a directory's as if it ended in "/". */
export function inGitOrder<T extends { type: 'blob' | 'tree'; name: string }>(entries: T[]): T[] {
  const keyed = entries.map((e) => ({ e, key: e.type === 'tree' ? `${e.name}/` : e.name }));
  if (keyed.every(({ key }) => ASCII.test(key)))
    keyed.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  else keyed.sort((a, b) => Buffer.compare(Buffer.from(a.key), Buffer.from(b.key)));
  return keyed.map(({ e }) => e);
}

/**
 * Entries in git's order (inGitOrder). Encoded into
 * one buffer: a create re-encodes the `sessions` directory, one entry per router (1,000 at 100,000
 * sessions), on both branches.
 */
export function encodeTree(entries: TreeEntry[]): EncodedObject {
  const sorted = inGitOrder(entries);
  let size = 0;
  for (const e of sorted) size += MODE[e.type].length + 1 + Buffer.byteLength(e.name) + 1 + 20;
  const content = Buffer.allocUnsafe(size);
  let pos = 0;
  for (const e of sorted) {
    pos += content.write(`${MODE[e.type]} ${e.name}\0`, pos);
    pos += content.write(e.oid, pos, 20, 'hex');
  }
  // a large tree is mostly object ids, which do not compress: stored as they are (git reads any level)
  return encodeObject('tree', content, size > 4096 ? constants.Z_NO_COMPRESSION : constants.Z_BEST_SPEED);
}

export function writeTree(gitdir: string, entries: TreeEntry[]): Promise<string> {
  const object = encodeTree(entries);
  return writeObjects(gitdir, [object]).then(() => object.oid);
}

/** Names and emails come from commitAuthor (no "<", ">" or newline); the message ends in one newline. */
export function encodeCommit(commit: CommitObject): EncodedObject {
  const person = (p: { name: string; email: string }) => `${p.name} <${p.email}> ${commit.timestamp} +0000`;
  const text = [
    `tree ${commit.tree}`,
    ...commit.parents.map((p) => `parent ${p}`),
    `author ${person(commit.author)}`,
    `committer ${person(commit.committer)}`,
    '',
    `${commit.message.replace(/\r/g, '').replace(/^\n+/, '').replace(/\n+$/, '')}\n`,
  ].join('\n');
  return encodeObject('commit', Buffer.from(text, 'utf8'));
}

export function writeCommit(gitdir: string, commit: CommitObject): Promise<string> {
  const object = encodeCommit(commit);
  return writeObjects(gitdir, [object]).then(() => object.oid);
}
