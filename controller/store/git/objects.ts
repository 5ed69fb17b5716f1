/**
 * The git objects the store reads and writes itself, with native zlib: blobs, trees and commits are
 * serialised and deflated here and stored as loose objects by isomorphic-git (through gitFs, so
 * atomically); a loose blob is read and inflated here, packed ones through isomorphic-git.
 *
 * Why not isomorphic-git's writeBlob/writeTree/writeCommit: under Node they deflate through
 * CompressionStream, web streams over a zlib stream. Those objects go through the same Readable and
 * Writable functions the HTTP server runs for every request, and V8 then re-optimises that code for
 * the mix: after a controller had written objects (an observation flush, a first start), agent requests
 * cost measurably more CPU for the rest of its life (see docs/api.md "Performance"). zlib's deflateSync
 * touches no stream.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { deflateSync, inflateSync } from 'node:zlib';
import git from 'isomorphic-git';
import { gitFs } from '../../git-fs.ts';

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

async function writeObject(
  gitdir: string,
  type: 'blob' | 'tree' | 'commit',
  content: Buffer,
): Promise<string> {
  const wrapped = Buffer.concat([Buffer.from(`${type} ${content.length}\0`, 'latin1'), content]);
  const oid = createHash('sha1').update(wrapped).digest('hex');
  await git.writeObject({ fs: gitFs, gitdir, type, object: deflateSync(wrapped), format: 'deflated', oid });
  return oid;
}

export function writeBlob(gitdir: string, content: Buffer): Promise<string> {
  return writeObject(gitdir, 'blob', content);
}

export function writeText(ctx: GitContext, text: string): Promise<string> {
  return writeBlob(ctx.gitdir, Buffer.from(text, 'utf8'));
}

/**
 * A blob's text. Loose objects (everything the store wrote itself) are read and inflated here directly,
 * one read and native zlib instead of isomorphic-git's stat + read + JavaScript inflate; packed objects
 * (pushed or fetched) go through isomorphic-git.
 */
export async function readText(ctx: GitContext, oid: string): Promise<string> {
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
    if (type !== 'blob' || Number(size) !== raw.length - nul - 1)
      throw new Error(`object ${oid} is not a valid blob`);
    return raw.subarray(nul + 1).toString('utf8');
  }
  const { blob } = await git.readBlob({ fs: gitFs, gitdir: ctx.gitdir, oid, cache: ctx.cache });
  return Buffer.from(blob).toString('utf8');
}

/** Entries in git's order: by the bytes of the name, a directory's as if it ended in "/". */
export function writeTree(gitdir: string, entries: TreeEntry[]): Promise<string> {
  const keyed = entries.map((e) => ({ e, key: Buffer.from(e.type === 'tree' ? `${e.name}/` : e.name) }));
  keyed.sort((a, b) => Buffer.compare(a.key, b.key));
  const parts = keyed.flatMap(({ e }) => [
    Buffer.from(`${MODE[e.type]} ${e.name}\0`),
    Buffer.from(e.oid, 'hex'),
  ]);
  return writeObject(gitdir, 'tree', Buffer.concat(parts));
}

/** Names and emails come from commitAuthor (no "<", ">" or newline); the message ends in one newline. */
export function writeCommit(gitdir: string, commit: CommitObject): Promise<string> {
  const person = (p: { name: string; email: string }) => `${p.name} <${p.email}> ${commit.timestamp} +0000`;
  const text = [
    `tree ${commit.tree}`,
    ...commit.parents.map((p) => `parent ${p}`),
    `author ${person(commit.author)}`,
    `committer ${person(commit.committer)}`,
    '',
    `${commit.message.replace(/\r/g, '').replace(/^\n+/, '').replace(/\n+$/, '')}\n`,
  ].join('\n');
  return writeObject(gitdir, 'commit', Buffer.from(text, 'utf8'));
}
