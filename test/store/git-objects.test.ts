/**
 * The store's own git object writer against the real git: the same ids git computes for the same blob,
 * tree and commit, and objects that `git fsck --strict` accepts.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { writeBlob, writeCommit, writeTree } from '../../controller/store/git/objects.ts';

let dir: string;
let gitdir: string;

const git = (args: string[], input?: string, env: Record<string, string> = {}) =>
  execFileSync('git', [`--git-dir=${gitdir}`, ...args], {
    input,
    encoding: 'utf8',
    env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', ...env },
  }).trim();

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-objects-'));
  gitdir = join(dir, 'store.git');
  execFileSync('git', ['init', '--bare', '-q', '-b', 'main', gitdir]);
});
afterEach(() => rm(dir, { recursive: true, force: true }));

describe('git objects written by the store', () => {
  it('gives a blob the id git gives it and stores its bytes', async () => {
    const text = 'apiVersion: peerops.dn42/v1\nname: "ünïcode ✓"\n';
    const oid = await writeBlob(gitdir, Buffer.from(text));
    expect(oid).toBe(git(['hash-object', '--stdin'], text));
    expect(git(['cat-file', '-p', oid])).toBe(text.trim());
    // written twice: the same object, no error
    expect(await writeBlob(gitdir, Buffer.from(text))).toBe(oid);
  });

  it("orders a tree's entries as git does: by bytes, a directory as if it ended in /", async () => {
    const blob = await writeBlob(gitdir, Buffer.from('x\n'));
    const sub = await writeTree(gitdir, [{ type: 'blob', name: 'f.yaml', oid: blob }]);
    // "a-b" < "a.yaml" < "a/" (the directory) < "a0" by bytes; handed over in another order
    const entries = [
      { type: 'blob' as const, name: 'a0', oid: blob },
      { type: 'tree' as const, name: 'a', oid: sub },
      { type: 'blob' as const, name: 'a.yaml', oid: blob },
      { type: 'blob' as const, name: 'a-b', oid: blob },
    ];
    const oid = await writeTree(gitdir, entries);
    const listing = entries
      .map((e) => `${e.type === 'tree' ? '040000 tree' : '100644 blob'} ${e.oid}\t${e.name}`)
      .join('\n');
    expect(oid).toBe(git(['mktree'], `${listing}\n`));
    expect(git(['ls-tree', '--name-only', oid]).split('\n')).toEqual(['a-b', 'a.yaml', 'a', 'a0']);
  });

  it('writes the commit git commit-tree writes for the same content', async () => {
    const tree = await writeTree(gitdir, [
      { type: 'blob', name: 'p.yaml', oid: await writeBlob(gitdir, Buffer.from('p\n')) },
    ]);
    const when = 1795000000;
    const env = {
      GIT_AUTHOR_NAME: 'AS4242420001',
      GIT_AUTHOR_EMAIL: 'as4242420001@peerops.invalid',
      GIT_AUTHOR_DATE: `@${when} +0000`,
      GIT_COMMITTER_NAME: 'peerops controller',
      GIT_COMMITTER_EMAIL: 'controller@peerops.invalid',
      GIT_COMMITTER_DATE: `@${when} +0000`,
    };
    const first = git(['commit-tree', tree, '-m', 'first'], undefined, env);
    const oid = await writeCommit(gitdir, {
      tree,
      parents: [first],
      author: { name: 'AS4242420001', email: 'as4242420001@peerops.invalid' },
      committer: { name: 'peerops controller', email: 'controller@peerops.invalid' },
      timestamp: when,
      // trailing newlines and carriage returns normalised as git does for -m
      message: 'session as4242420001-r1: approve\r\n\nwhy: ok\n\n',
    });
    expect(oid).toBe(
      git(
        ['commit-tree', tree, '-p', first, '-m', 'session as4242420001-r1: approve\n\nwhy: ok'],
        undefined,
        env,
      ),
    );
    git(['update-ref', 'refs/heads/main', oid]);
    expect(git(['fsck', '--strict', '--no-progress', '--no-dangling'])).toBe('');
  });
});
