/**
 * The domain-free git layer's journaled ref move and serialized queue (controller/store/gitdb/,
 * docs/store.md "Layout", "Crash safety") against the real `git`: two refs move as one step; a refused
 * lock, a ref moved underneath or failed objects move none; a move cut after its first ref leaves the
 * journal that completes it; the queue runs one write at a time whatever the one before did.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { JournaledRefs, RefsHalfMovedError } from '../../../controller/store/gitdb/journaled-refs.ts';
import { writeBlob, writeCommit, writeObjects } from '../../../controller/store/gitdb/objects.ts';
import { Journal } from '../../../controller/store/gitdb/recovery.ts';
import { RefMovedError, updateRef } from '../../../controller/store/gitdb/refs.ts';
import { EMPTY_DIR, encodeTrees, setFiles } from '../../../controller/store/gitdb/tree.ts';
import { WriteQueue } from '../../../controller/store/gitdb/write-queue.ts';

let dir: string;
let gitdir: string;
const silent = pino({ level: 'silent' });
const git = (args: string[]) =>
  execFileSync('git', ['--git-dir', gitdir, ...args], { encoding: 'utf8' }).trim();
const who = { name: 'test', email: 'test@example.invalid' };

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-gitdb-refs-'));
  gitdir = join(dir, 'repo.git');
  execFileSync('git', ['init', '--bare', '-q', gitdir]);
  mkdirSync(join(gitdir, 'peerops'));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Two refs at one commit, and a child of it to move both to. */
async function twoRefs(a: string, b: string) {
  const tree = encodeTrees(setFiles(EMPTY_DIR, [['f', await writeBlob(gitdir, Buffer.from('f\n'))]]));
  await writeObjects(gitdir, tree.objects);
  const commit = (parents: string[]) =>
    writeCommit(gitdir, {
      tree: tree.oid,
      parents,
      author: who,
      committer: who,
      timestamp: 1795000000,
      message: 'm\n',
    });
  const base = await commit([]);
  await updateRef(gitdir, a, undefined, base);
  await updateRef(gitdir, b, undefined, base);
  const next = await commit([base]);
  return { base, next, updates: [a, b].map((ref) => ({ ref, from: base, to: next })) };
}

const refsOf = (journal: Journal) =>
  new JournaledRefs({ gitdir, journal, log: silent, lockEarly: ['refs/heads/b'] });

describe('journaled ref move', () => {
  it('moves both refs as git then reads them, and forgets the journal', async () => {
    const { next, updates } = await twoRefs('refs/heads/a', 'refs/heads/b');
    const journal = new Journal(gitdir);
    await refsOf(journal).move(updates);
    expect(git(['rev-parse', 'refs/heads/a'])).toBe(next);
    expect(git(['rev-parse', 'refs/heads/b'])).toBe(next);
    expect(await journal.pending()).toBeUndefined();
  });

  it('moves no ref when another writer holds one lock', async () => {
    const { base, updates } = await twoRefs('refs/heads/a', 'refs/heads/b');
    await writeFile(join(gitdir, 'refs/heads/b.lock'), 'held\n');
    const journal = new Journal(gitdir);
    await expect(refsOf(journal).move(updates)).rejects.toBeInstanceOf(RefMovedError);
    expect(git(['rev-parse', 'refs/heads/a'])).toBe(base);
    expect(git(['rev-parse', 'refs/heads/b'])).toBe(base);
    expect(existsSync(join(gitdir, 'refs/heads/a.lock'))).toBe(false);
    expect(await journal.pending()).toBeUndefined();
  });

  it('moves no ref when one moved underneath (a push landed first)', async () => {
    const { base, next, updates } = await twoRefs('refs/heads/a', 'refs/heads/b');
    git(['update-ref', 'refs/heads/b', next, base]);
    const journal = new Journal(gitdir);
    await expect(refsOf(journal).move(updates)).rejects.toBeInstanceOf(RefMovedError);
    expect(git(['rev-parse', 'refs/heads/a'])).toBe(base);
    expect(existsSync(join(gitdir, 'refs/heads/a.lock'))).toBe(false);
    expect(await journal.pending()).toBeUndefined();
  });

  it("moves no ref when the write's objects fail, and answers their error", async () => {
    const { base, updates } = await twoRefs('refs/heads/a', 'refs/heads/b');
    const journal = new Journal(gitdir);
    const objects = Promise.reject(new Error('ENOSPC: no space left on device'));
    await expect(refsOf(journal).move(updates, objects)).rejects.toThrow(/ENOSPC/);
    expect(git(['rev-parse', 'refs/heads/a'])).toBe(base);
    expect(git(['rev-parse', 'refs/heads/b'])).toBe(base);
    expect(existsSync(join(gitdir, 'refs/heads/b.lock'))).toBe(false);
    expect(await journal.pending()).toBeUndefined();
  });

  it("finishes a dead writer's journal unless take-over handled it already", async () => {
    const { next, updates } = await twoRefs('refs/heads/a', 'refs/heads/b');
    const journal = new Journal(gitdir);
    // the crashed writer: its journal written, its first ref moved, then killed
    await journal.begin(updates);
    git(['update-ref', 'refs/heads/a', next]);
    const handedOver = refsOf(journal);
    handedOver.recovered();
    await handedOver.recover(false);
    expect(await journal.pending()).toEqual(updates);
    await refsOf(journal).recover(false);
    expect(git(['rev-parse', 'refs/heads/b'])).toBe(next);
    expect(await journal.pending()).toBeUndefined();
  });

  it('leaves the journal of a move cut after its first ref, and recover completes it', async () => {
    const { base, next, updates } = await twoRefs('refs/heads/a', 'refs/other/b');
    const journal = new Journal(gitdir);
    const refs = refsOf(journal);
    const b = join(gitdir, 'refs/other/b');
    // while the move waits for its objects, both locks taken: b's place becomes a directory git cannot
    // rename onto, so a moves and b does not
    const objects = (async () => {
      // a lock is taken once it holds the new value (checked against the ref before it is written)
      const taken = (lock: string) => existsSync(lock) && readFileSync(lock, 'utf8') === `${next}\n`;
      while (!taken(`${b}.lock`) || !taken(join(gitdir, 'refs/heads/a.lock')))
        await new Promise((r) => setImmediate(r));
      rmSync(b);
      mkdirSync(join(b, 'in-the-way'), { recursive: true });
    })();
    await expect(refs.move(updates, objects)).rejects.toBeInstanceOf(RefsHalfMovedError);
    expect(git(['rev-parse', 'refs/heads/a'])).toBe(next);
    expect(await journal.pending()).toEqual(updates);
    // out of the way again, b as it was: the next start finishes the move
    rmSync(b, { recursive: true });
    writeFileSync(b, `${base}\n`);
    await refs.recover(true);
    expect(git(['rev-parse', 'refs/other/b'])).toBe(next);
    expect(await journal.pending()).toBeUndefined();
  });
});

describe('write queue', () => {
  it('runs one write at a time, in order, a failure not stopping the next', async () => {
    const queue = new WriteQueue();
    const seen: string[] = [];
    let running = 0;
    const step = (name: string, fail = false) =>
      queue.run(async () => {
        expect(++running).toBe(1);
        await new Promise((r) => setImmediate(r));
        seen.push(name);
        running--;
        if (fail) throw new Error(name);
        return name;
      });
    const results = await Promise.allSettled([step('one'), step('two', true), step('three')]);
    await queue.drain();
    expect(seen).toEqual(['one', 'two', 'three']);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
  });
});
