/**
 * An in-memory mirror of one commit's tree, persistent (a change copies only the directories on its path),
 * so a write builds the next commit from objects, encoding only the changed subtrees, and a failed ref
 * update simply drops the new mirror. Also the diff between the mirror and another commit's tree, which
 * reads only the subtrees whose ids differ.
 */
import {
  encodeTree,
  inGitOrder,
  readTree,
  type EncodedObject,
  type GitContext,
  type TreeEntry,
} from './objects.ts';

export interface FileNode {
  type: 'blob';
  oid: string;
}

export interface DirNode {
  type: 'tree';
  /** undefined when the directory changed and has not been written yet. */
  oid: string | undefined;
  entries: ReadonlyMap<string, FileNode | DirNode>;
}

export const EMPTY_DIR: DirNode = { type: 'tree', oid: undefined, entries: new Map() };

/** A changed file: `oid` undefined means deleted. */
export interface FileChange {
  path: string;
  oid: string | undefined;
}

export function getFile(root: DirNode, path: string): string | undefined {
  let node: FileNode | DirNode | undefined = root;
  for (const part of path.split('/')) {
    if (node?.type !== 'tree') return undefined;
    node = node.entries.get(part);
  }
  return node?.type === 'blob' ? node.oid : undefined;
}

/**
 * A new root with these files set (blob id) or removed (undefined); empty directories disappear. Each
 * directory on the way is copied once, however many files change in it.
 */
export function setFiles(root: DirNode, files: readonly (readonly [string, string | undefined])[]): DirNode {
  if (files.length === 0) return root;
  interface Draft {
    entries: Map<string, FileNode | DirNode | Draft>;
    draft: true;
  }
  const draft = (dir: DirNode): Draft => ({ entries: new Map(dir.entries), draft: true });
  const top = draft(root);
  for (const [path, oid] of files) {
    const parts = path.split('/');
    let dir = top;
    for (let i = 0; i < parts.length - 1; i++) {
      const name = parts[i] as string;
      const child = dir.entries.get(name);
      let next: Draft;
      if (child && 'draft' in child) next = child;
      else {
        next = draft(child?.type === 'tree' ? child : EMPTY_DIR);
        dir.entries.set(name, next);
      }
      dir = next;
    }
    const leaf = parts[parts.length - 1] as string;
    if (oid === undefined) dir.entries.delete(leaf);
    else dir.entries.set(leaf, { type: 'blob', oid });
  }
  const seal = (d: Draft): DirNode | undefined => {
    const entries = new Map<string, FileNode | DirNode>();
    for (const [name, node] of d.entries) {
      const sealed = 'draft' in node ? seal(node) : node;
      if (sealed) entries.set(name, sealed);
    }
    return entries.size === 0 ? undefined : { type: 'tree', oid: undefined, entries };
  };
  return seal(top) ?? EMPTY_DIR;
}

/**
 * Encode every directory changed since the last write, deepest first, in memory: returns the root
 * tree id, the sealed mirror and the tree objects to write (objects.ts, writeObjects).
 */
export function encodeTrees(root: DirNode): { oid: string; root: DirNode; objects: EncodedObject[] } {
  const objects: EncodedObject[] = [];
  const encode = (dir: DirNode): DirNode => {
    if (dir.oid !== undefined) return dir;
    const entries = new Map<string, FileNode | DirNode>();
    const tree: TreeEntry[] = [];
    for (const [name, node] of dir.entries) {
      const written = node.type === 'tree' ? encode(node) : node;
      entries.set(name, written);
      tree.push({ type: node.type, name, oid: written.oid as string });
    }
    const object = encodeTree(tree);
    objects.push(object);
    return { type: 'tree', oid: object.oid, entries };
  };
  const encoded = encode(root);
  return { oid: encoded.oid as string, root: encoded, objects };
}

/**
 * Compare the mirror with the tree `treeOid`: returns the new mirror and the files that differ. Subtrees
 * with equal ids are not read.
 */
export async function diffTree(
  ctx: GitContext,
  old: DirNode,
  treeOid: string,
): Promise<{ root: DirNode; changes: FileChange[] }> {
  const changes: FileChange[] = [];
  const removedAll = (dir: DirNode, prefix: string) => {
    for (const [name, node] of dir.entries) {
      if (node.type === 'tree') removedAll(node, `${prefix}${name}/`);
      else changes.push({ path: `${prefix}${name}`, oid: undefined });
    }
  };
  const walk = async (before: DirNode, oid: string, prefix: string): Promise<DirNode> => {
    if (before.oid === oid) return before;
    const entries = new Map<string, FileNode | DirNode>();
    for (const entry of await readTree(ctx, oid)) {
      const prev = before.entries.get(entry.name);
      const path = `${prefix}${entry.name}`;
      if (entry.type === 'tree') {
        if (prev?.type === 'blob') changes.push({ path, oid: undefined });
        entries.set(entry.name, await walk(prev?.type === 'tree' ? prev : EMPTY_DIR, entry.oid, `${path}/`));
      } else {
        if (prev?.type === 'tree') removedAll(prev, `${path}/`);
        if (prev?.type !== 'blob' || prev.oid !== entry.oid) changes.push({ path, oid: entry.oid });
        entries.set(entry.name, { type: 'blob', oid: entry.oid });
      }
    }
    for (const [name, node] of before.entries) {
      if (entries.has(name)) continue;
      if (node.type === 'tree') removedAll(node, `${prefix}${name}/`);
      else changes.push({ path: `${prefix}${name}`, oid: undefined });
    }
    return { type: 'tree', oid, entries };
  };
  const root = await walk(old, treeOid, '');
  return { root, changes };
}

/** Every file of a mirror as [path, blob id]. */
export function listFiles(root: DirNode): [string, string][] {
  const out: [string, string][] = [];
  const walk = (dir: DirNode, prefix: string) => {
    for (const [name, node] of dir.entries) {
      if (node.type === 'tree') walk(node, `${prefix}${name}/`);
      else out.push([`${prefix}${name}`, node.oid]);
    }
  };
  walk(root, '');
  return out;
}

/**
 * A mirror as JSON, kept in the parse cache (parse-cache.ts) so that a start reads no tree objects for the
 * directories unchanged since: [tree id, [name, blob id or subdirectory, name, …]], entries in git's order
 * (a start applies files in the order a walk of the tree gives).
 */
export type PackedDir = [oid: string, entries: (string | PackedDir)[]];

/** The mirror packed; undefined when a directory has no id yet (not written: nothing to trust it for). */
export function packMirror(dir: DirNode): PackedDir | undefined {
  if (dir.oid === undefined) return undefined;
  const entries: (string | PackedDir)[] = [];
  const named = [...dir.entries].map(([name, node]) => ({ type: node.type, name, node }));
  for (const { name, node } of inGitOrder(named)) {
    if (node.type === 'blob') {
      entries.push(name, node.oid);
      continue;
    }
    const packed = packMirror(node);
    if (!packed) return undefined;
    entries.push(name, packed);
  }
  return [dir.oid, entries];
}

const OID_LENGTH = 40;

/** A packed mirror back; throws when it is not one (a damaged cache file is not trusted). */
export function unpackMirror(value: unknown): DirNode {
  if (!Array.isArray(value) || value.length !== 2) throw new Error('not a packed directory');
  const [oid, list] = value as [unknown, unknown];
  if (typeof oid !== 'string' || oid.length !== OID_LENGTH || !Array.isArray(list) || list.length % 2 !== 0)
    throw new Error('not a packed directory');
  const entries = new Map<string, FileNode | DirNode>();
  for (let i = 0; i < list.length; i += 2) {
    const name: unknown = list[i];
    const node: unknown = list[i + 1];
    if (typeof name !== 'string' || name === '') throw new Error('a packed entry without a name');
    if (typeof node === 'string') {
      if (node.length !== OID_LENGTH) throw new Error(`a packed entry ${name} without a blob id`);
      entries.set(name, { type: 'blob', oid: node });
    } else entries.set(name, unpackMirror(node));
  }
  return { type: 'tree', oid, entries };
}
