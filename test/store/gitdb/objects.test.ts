/**
 * The store's own git object writer against the real git: the same ids git computes for the same blob,
 * tree and commit, and objects that `git fsck --strict` accepts. And its own object reader (objects.ts,
 * pack.ts) against `git cat-file`: loose objects, and packs with delta chains as `git gc` writes them.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readlinkSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  closeObjects,
  readCommitTree,
  readText,
  readTree,
  writeBlob,
  writeCommit,
  writeTree,
  type GitContext,
} from '../../../controller/store/gitdb/objects.ts';
import { PackReader } from '../../../controller/store/gitdb/pack.ts';

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

  it('freshens an object it would write again, so that git gc keeps it', async () => {
    const oid = await writeBlob(gitdir, Buffer.from('same bytes\n'));
    const file = join(gitdir, 'objects', oid.slice(0, 2), oid.slice(2));
    const old = new Date('2020-01-01T00:00:00Z');
    utimesSync(file, old, old);
    expect(await writeBlob(gitdir, Buffer.from('same bytes\n'))).toBe(oid);
    expect(statSync(file).mtimeMs).toBeGreaterThan(Date.now() - 60_000);
    // and one removed meanwhile (pruned) is written again
    rmSync(file);
    await writeBlob(gitdir, Buffer.from('same bytes\n'));
    expect(git(['cat-file', '-p', oid])).toBe('same bytes');
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

  it('orders names beyond ASCII by their UTF-8 bytes, as git does', async () => {
    const blob = await writeBlob(gitdir, Buffer.from('x\n'));
    // UTF-16 puts U+FF5E before U+1F600 (a surrogate pair, 0xD83D…); UTF-8 bytes put it after
    const entries = ['\u{1F600}.yaml', '\uFF5E.yaml', 'z.yaml', '\u00E9.yaml'].map((name) => ({
      type: 'blob' as const,
      name,
      oid: blob,
    }));
    const oid = await writeTree(gitdir, entries);
    const listing = entries.map((e) => `100644 blob ${e.oid}\t${e.name}`).join('\n');
    expect(oid).toBe(git(['mktree'], `${listing}\n`));
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

describe('git objects read by the store', () => {
  /** 300 similar files in two directories, committed twice (the second time all changed), loose. */
  function history(): string {
    const work = join(dir, 'work');
    execFileSync('git', ['init', '-q', '-b', 'main', work]);
    const run = (args: string[]) =>
      execFileSync('git', ['-C', work, '-c', 'user.name=t', '-c', 'user.email=t@example.org', ...args], {
        env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' },
      });
    for (const round of [1, 2]) {
      for (let i = 0; i < 300; i++) {
        const sub = join(work, 'sessions', i % 2 === 0 ? 'fra1' : 'ams1');
        mkdirSync(sub, { recursive: true });
        const body = Array.from({ length: 40 }, (_, line) => `  line${line}: ${line * i}\n`).join('');
        const text = `kind: PeeringSession\nspec:\n  asn: ${4242420000 + i}\n${body}  round: ${round}\n  note: ${'ü'.repeat(i % 7)}\n`;
        writeFileSync(join(sub, `as${4242420000 + i}.yaml`), text);
      }
      run(['add', '.']);
      run(['commit', '-q', '-m', `round ${round}`]);
    }
    execFileSync('git', ['clone', '-q', '--bare', '--no-local', work, gitdir + '.tmp']);
    return `${gitdir}.tmp`;
  }

  /** Every object of the repository as `git cat-file --batch` prints it. */
  function allObjects(repo: string): { oid: string; type: string; content: Buffer }[] {
    const out = execFileSync('git', [`--git-dir=${repo}`, 'cat-file', '--batch-all-objects', '--batch'], {
      maxBuffer: 1 << 26,
    });
    const objects: { oid: string; type: string; content: Buffer }[] = [];
    for (let pos = 0; pos < out.length;) {
      const eol = out.indexOf(10, pos);
      const [oid, type, size] = out.toString('latin1', pos, eol).split(' ') as [string, string, string];
      objects.push({ oid, type, content: out.subarray(eol + 1, eol + 1 + Number(size)) });
      pos = eol + 1 + Number(size) + 1;
    }
    return objects;
  }

  async function expectSameAsGit(repo: string): Promise<void> {
    const ctx: GitContext = { gitdir: repo, cache: {} };
    const objects = allObjects(repo);
    try {
      for (const { oid, type, content } of objects) {
        if (type === 'blob') expect(await readText(ctx, oid)).toBe(content.toString('utf8'));
        else if (type === 'tree') {
          // git's own tree format: `<mode> <name>\0<20 bytes>` per entry
          const entries = (await readTree(ctx, oid)).map((e) =>
            Buffer.concat([
              Buffer.from(`${e.type === 'tree' ? '40000' : '100644'} ${e.name}\0`),
              Buffer.from(e.oid, 'hex'),
            ]),
          );
          expect(Buffer.concat(entries).equals(content)).toBe(true);
        } else if (type === 'commit') {
          expect(await readCommitTree(ctx, oid)).toBe(content.toString('latin1', 5, 45));
        }
      }
    } finally {
      await closeObjects(ctx);
    }
    expect(objects.filter((o) => o.type === 'blob').length).toBeGreaterThanOrEqual(600);
  }

  it('reads loose objects as git does', async () => {
    const repo = history();
    // git unpacks only objects the repository does not hold: take the pack away first
    const pack = execFileSync('sh', ['-c', `cat ${repo}/objects/pack/*.pack && rm ${repo}/objects/pack/*`]);
    execFileSync('git', [`--git-dir=${repo}`, 'unpack-objects', '-q'], { input: pack });
    await expectSameAsGit(repo);
  });

  it('opens a pack once when its first reads come together', async () => {
    const repo = history();
    execFileSync('git', [`--git-dir=${repo}`, 'gc', '-q', '--prune=now']);
    const blobs = allObjects(repo).filter((o) => o.type === 'blob');
    const reader = new PackReader(repo);
    const packHandles = () =>
      readdirSync('/proc/self/fd').filter((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`).startsWith(join(repo, 'objects', 'pack'));
        } catch {
          return false; // closed meanwhile
        }
      }).length;
    try {
      const read = await Promise.all(blobs.slice(0, 16).map((b) => reader.read(b.oid)));
      expect(read.map((o) => o?.content.toString())).toEqual(
        blobs.slice(0, 16).map((b) => b.content.toString()),
      );
      expect(packHandles()).toBe(1);
    } finally {
      await reader.close();
    }
    expect(packHandles()).toBe(0);
  });

  it('reads a packed repository with delta chains (git gc --aggressive) as git does', async () => {
    const repo = history();
    execFileSync('git', [`--git-dir=${repo}`, 'gc', '-q', '--aggressive', '--prune=now']);
    const chains = execFileSync('sh', ['-c', `git verify-pack -v ${repo}/objects/pack/*.idx`]).toString();
    // the second round's files are deltas of the first's: the reader applies them
    expect(chains).toMatch(/chain length = [1-9]/);
    await expectSameAsGit(repo);
  });
});
