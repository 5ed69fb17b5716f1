/**
 * The domain-free git layer (controller/store/gitdb/, docs/store.md "Layout") against the real `git`: the
 * tree mirror writes the trees git reads, the diff finds what a `git commit` changed, refs move only from
 * the value expected, and the journal finishes or drops a write cut between its two ref moves. Also the
 * layer's one rule of direction: it imports nothing of peerops.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  writeBlob,
  writeCommit,
  writeObjects,
  type GitContext,
} from '../../../controller/store/gitdb/objects.ts';
import { Journal } from '../../../controller/store/gitdb/recovery.ts';
import { readRef, RefMovedError, updateRef } from '../../../controller/store/gitdb/refs.ts';
import {
  diffTree,
  EMPTY_DIR,
  encodeTrees,
  getFile,
  listFiles,
  setFiles,
} from '../../../controller/store/gitdb/tree.ts';

let dir: string;
let gitdir: string;
let ctx: GitContext;

const git = (args: string[], env: Record<string, string> = {}) =>
  execFileSync('git', [`--git-dir=${gitdir}`, ...args], {
    encoding: 'utf8',
    env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', ...env },
  }).trim();

const who = { name: 'test', email: 'test@example.invalid' };
const commitOf = (tree: string, parents: string[] = []) =>
  writeCommit(gitdir, { tree, parents, author: who, committer: who, timestamp: 1795000000, message: 'm\n' });

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-gitdb-'));
  gitdir = join(dir, 'repo.git');
  execFileSync('git', ['init', '--bare', '-q', gitdir]);
  ctx = { gitdir, cache: {} };
  // the store's own directory, where the journal lives (made by the store at start)
  mkdirSync(join(gitdir, 'peerops'));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('tree mirror', () => {
  it('writes nested trees git lists file by file, and drops a directory emptied', async () => {
    const a = await writeBlob(gitdir, Buffer.from('a\n'));
    const b = await writeBlob(gitdir, Buffer.from('b\n'));
    let root = setFiles(EMPTY_DIR, [
      ['x/y/a.yaml', a],
      ['x/b.yaml', b],
      ['top.yaml', a],
    ]);
    let encoded = encodeTrees(root);
    await writeObjects(gitdir, encoded.objects);
    expect(git(['ls-tree', '-r', '--name-only', encoded.oid]).split('\n')).toEqual([
      'top.yaml',
      'x/b.yaml',
      'x/y/a.yaml',
    ]);
    expect(getFile(encoded.root, 'x/y/a.yaml')).toBe(a);

    // the only file of x/y removed: git lists no x/y; only the changed directories are encoded again
    root = setFiles(encoded.root, [['x/y/a.yaml', undefined]]);
    encoded = encodeTrees(root);
    expect(encoded.objects).toHaveLength(2);
    await writeObjects(gitdir, encoded.objects);
    expect(git(['ls-tree', '-r', '-t', '--name-only', encoded.oid]).split('\n')).toEqual([
      'top.yaml',
      'x',
      'x/b.yaml',
    ]);
    expect(listFiles(encoded.root).sort()).toEqual([
      ['top.yaml', a],
      ['x/b.yaml', b],
    ]);
    const commit = await commitOf(encoded.oid);
    git(['update-ref', 'refs/heads/main', commit]);
    git(['fsck', '--strict', '--no-dangling']);
  });

  it('diffs the mirror against a commit git made: the files it added, changed and removed', async () => {
    const a = await writeBlob(gitdir, Buffer.from('a\n'));
    const encoded = encodeTrees(
      setFiles(EMPTY_DIR, [
        ['keep.yaml', a],
        ['gone/one.yaml', a],
        ['edit.yaml', a],
      ]),
    );
    await writeObjects(gitdir, encoded.objects);
    // a user's commit made with git's own tools, from a work tree of the mirror's commit
    const work = join(dir, 'work');
    git(['update-ref', 'refs/heads/main', await commitOf(encoded.oid)]);
    execFileSync('git', ['clone', '-q', '-b', 'main', gitdir, work]);
    const inWork = (args: string[]) =>
      execFileSync('git', ['-C', work, '-c', 'user.name=u', '-c', 'user.email=u@example.invalid', ...args]);
    writeFileSync(join(work, 'edit.yaml'), 'edited\n');
    writeFileSync(join(work, 'new.yaml'), 'new\n');
    inWork(['rm', '-q', 'gone/one.yaml']);
    inWork(['add', '.']);
    inWork(['commit', '-q', '-m', 'edit']);
    const tree = execFileSync('git', ['-C', work, 'rev-parse', 'HEAD^{tree}'], { encoding: 'utf8' }).trim();
    inWork(['push', '-q', 'origin', 'HEAD:main']);

    const { root, changes } = await diffTree(ctx, encoded.root, tree);
    const blob = (path: string) => git(['rev-parse', `${tree}:${path}`]);
    expect(changes.sort((x, y) => x.path.localeCompare(y.path))).toEqual([
      { path: 'edit.yaml', oid: blob('edit.yaml') },
      { path: 'gone/one.yaml', oid: undefined },
      { path: 'new.yaml', oid: blob('new.yaml') },
    ]);
    expect(root.oid).toBe(tree);
    expect(getFile(root, 'keep.yaml')).toBe(a);
  });
});

describe('refs', () => {
  it('moves a ref only from the value expected, as git then reads it', async () => {
    const tree = encodeTrees(setFiles(EMPTY_DIR, [['f', await writeBlob(gitdir, Buffer.from('f\n'))]]));
    await writeObjects(gitdir, tree.objects);
    const first = await commitOf(tree.oid);
    const second = await commitOf(tree.oid, [first]);
    await updateRef(gitdir, 'refs/heads/main', undefined, first);
    expect(git(['rev-parse', 'refs/heads/main'])).toBe(first);
    await expect(updateRef(gitdir, 'refs/heads/main', undefined, second)).rejects.toBeInstanceOf(
      RefMovedError,
    );
    await updateRef(gitdir, 'refs/heads/main', first, second);
    expect(git(['rev-parse', 'refs/heads/main'])).toBe(second);
    // after `git pack-refs` the ref lives in packed-refs only, and is read from there
    git(['pack-refs', '--all']);
    expect(await readRef(gitdir, 'refs/heads/main')).toBe(second);
    expect(await readRef(gitdir, 'refs/heads/absent')).toBeUndefined();
  });
});

describe('journal', () => {
  const silent = pino({ level: 'silent' });

  async function twoRefWrite() {
    const tree = encodeTrees(setFiles(EMPTY_DIR, [['f', await writeBlob(gitdir, Buffer.from('f\n'))]]));
    await writeObjects(gitdir, tree.objects);
    const base = await commitOf(tree.oid);
    await updateRef(gitdir, 'refs/heads/a', undefined, base);
    await updateRef(gitdir, 'refs/heads/b', undefined, base);
    const next = await commitOf(tree.oid, [base]);
    return {
      base,
      next,
      updates: [
        { ref: 'refs/heads/a', from: base, to: next },
        { ref: 'refs/heads/b', from: base, to: next },
      ],
    };
  }

  it('finishes a write whose first ref moved before the crash', async () => {
    const { base, next, updates } = await twoRefWrite();
    const journal = new Journal(gitdir);
    await journal.begin(updates);
    await updateRef(gitdir, 'refs/heads/a', base, next);
    // (killed here: b never moved)
    expect(await journal.recover(silent, { removeLocks: true })).toBe('completed');
    expect(git(['rev-parse', 'refs/heads/b'])).toBe(next);
    expect(await journal.pending()).toBeUndefined();
  });

  it('drops a write no ref of which moved', async () => {
    const { base, updates } = await twoRefWrite();
    const journal = new Journal(gitdir);
    await journal.begin(updates);
    expect(await journal.recover(silent, { removeLocks: true })).toBe('dropped');
    expect(git(['rev-parse', 'refs/heads/a'])).toBe(base);
    expect(git(['rev-parse', 'refs/heads/b'])).toBe(base);
  });
});

describe('direction', () => {
  it('imports nothing of peerops but the domain-free file helpers', () => {
    const root = resolve(import.meta.dirname, '../../..');
    const layer = join(root, 'controller/store/gitdb');
    // what it may use besides node and npm packages: atomic writes, a concurrency limit, git's fs
    const allowed = new Set(['common/atomic-write.ts', 'common/concurrency.ts', 'controller/git-fs.ts']);
    const outside: string[] = [];
    for (const file of readdirSync(layer).filter((f) => f.endsWith('.ts'))) {
      const text = readFileSync(join(layer, file), 'utf8');
      for (const [, spec] of text.matchAll(/from '(\.[^']+)'/g)) {
        const target = resolve(layer, spec as string);
        const rel = target.slice(root.length + 1);
        if (!rel.startsWith('controller/store/gitdb/') && !allowed.has(rel))
          outside.push(`${file} -> ${rel}`);
      }
    }
    expect(outside).toEqual([]);
  });
});
