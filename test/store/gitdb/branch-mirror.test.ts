/**
 * The domain-free mirror of one ref (controller/store/gitdb/branch-mirror.ts, docs/store.md "Layout")
 * against the real `git`: a commit it encodes is one git reads, a commit made by git is caught up with
 * file by file, a ref deleted empties the mirror, and a kept mirror of an earlier run makes every file
 * count on the first sync.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BranchMirror } from '../../../controller/store/gitdb/branch-mirror.ts';
import { encodeObject, writeObjects, type GitContext } from '../../../controller/store/gitdb/objects.ts';
import { updateRef } from '../../../controller/store/gitdb/refs.ts';

let dir: string;
let gitdir: string;
let ctx: GitContext;
const git = (args: string[], input?: string) =>
  execFileSync('git', ['--git-dir', gitdir, ...args], {
    encoding: 'utf8',
    ...(input ? { input } : {}),
  }).trim();
const who = { name: 'test', email: 'test@example.invalid' };
const blob = (text: string) => encodeObject('blob', Buffer.from(text, 'utf8'));
const REF = 'refs/heads/main';

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-gitdb-mirror-'));
  gitdir = join(dir, 'repo.git');
  execFileSync('git', ['init', '--bare', '-q', gitdir]);
  ctx = { gitdir, cache: {} };
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Encode, write and publish a commit of `files` on the mirror. */
async function commit(mirror: BranchMirror, files: { path: string; text: string | undefined }[]) {
  const encoded = mirror.encode(
    files.map((f) => ({ path: f.path, blob: f.text === undefined ? undefined : blob(f.text) })),
    { author: who, committer: who, message: 'm\n' },
  );
  if (encoded === undefined) return undefined;
  await writeObjects(gitdir, encoded.objects);
  await updateRef(gitdir, encoded.update.ref, encoded.update.from, encoded.update.to);
  mirror.advance(encoded);
  return encoded;
}

describe('branch mirror', () => {
  it('encodes commits git reads, and nothing when nothing changes', async () => {
    const mirror = new BranchMirror(ctx, REF);
    await commit(mirror, [
      { path: 'a/x.yaml', text: 'x\n' },
      { path: 'b.yaml', text: 'b\n' },
    ]);
    expect(git(['ls-tree', '-r', '--name-only', REF]).split('\n')).toEqual(['a/x.yaml', 'b.yaml']);
    expect(await commit(mirror, [{ path: 'b.yaml', text: 'b\n' }])).toBeUndefined();
    const second = await commit(mirror, [{ path: 'a/x.yaml', text: undefined }]);
    expect(git(['rev-parse', REF])).toBe(second?.update.to);
    expect(git(['ls-tree', '-r', '--name-only', REF])).toBe('b.yaml');
    expect(git(['show', `${REF}:b.yaml`])).toBe('b');
  });

  it("catches up with git's commits file by file, and empties when the ref is gone", async () => {
    const mirror = new BranchMirror(ctx, REF);
    await commit(mirror, [{ path: 'b.yaml', text: 'b\n' }]);
    const oid = git(['hash-object', '-w', '--stdin'], 'c\n');
    const tree = git(
      ['mktree'],
      `100644 blob ${git(['rev-parse', `${REF}:b.yaml`])}\tb.yaml\n100644 blob ${oid}\tc.yaml\n`,
    );
    const made = git(['commit-tree', tree, '-p', REF, '-m', 'by git']);
    git(['update-ref', REF, made]);
    expect(await mirror.sync(await mirror.current())).toEqual([{ path: 'c.yaml', oid }]);
    expect(mirror.head).toBe(made);
    git(['update-ref', '-d', REF]);
    const gone = await mirror.sync(await mirror.current());
    expect(gone.map((c) => c.path).sort()).toEqual(['b.yaml', 'c.yaml']);
    expect(gone.every((c) => c.oid === undefined)).toBe(true);
    expect(mirror.head).toBeUndefined();
  });

  it('a kept mirror of an earlier run: every file counts on the first sync', async () => {
    const first = new BranchMirror(ctx, REF);
    await commit(first, [{ path: 'b.yaml', text: 'b\n' }]);
    await commit(first, [{ path: 'c.yaml', text: 'c\n' }]);
    const next = new BranchMirror(ctx, REF);
    const changes = await next.sync(await next.current(), first.root);
    expect(changes.map((c) => c.path)).toEqual(['b.yaml', 'c.yaml']);
    expect(next.fileOid('c.yaml')).toBe(first.fileOid('c.yaml'));
  });
});
