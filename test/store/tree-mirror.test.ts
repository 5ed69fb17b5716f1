/**
 * The branches' tree mirrors kept in the parse cache (controller/store/git/parse-cache.ts, tree.ts): a
 * start takes them instead of reading every tree object, and what it holds is the same as a start that
 * reads the whole tree, whether the kept mirror is current, older than the branch or damaged.
 */
import { copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createGitStore, type GitStore } from '../../controller/store/git/index.ts';
import { ParseCache } from '../../controller/store/git/parse-cache.ts';
import { EMPTY_DIR, packMirror, unpackMirror, type DirNode } from '../../controller/store/gitdb/tree.ts';
import { admin, newSession, pending, routerSpec, user } from './fixtures.ts';
import { git } from './git-helpers.ts';

const quiet = pino({ level: 'silent' });

let dir: string;
let bare: string;
let store: GitStore | undefined;

const open = async () => {
  const s = createGitStore({ dir: bare, logger: quiet, pollIntervalMs: 60_000 });
  await s.start();
  return s;
};
const view = (s: GitStore) => ({
  routers: s.listRouters(),
  sessions: s.listSessions(),
  policies: s.listPolicies(),
});
const cacheFile = () => join(bare, 'peerops', 'parsed.json');

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-tree-mirror-'));
  bare = join(dir, 'store.git');
  store = await open();
  await store.createRouter('fra1', routerSpec(1), admin);
  await store.createRouter('ams1', routerSpec(2), admin);
  for (let i = 0; i < 6; i++)
    await store.createSession(
      newSession(4242420100 + i, i % 2 ? 'fra1' : 'ams1'),
      pending,
      user(4242420100 + i),
      `create ${i}`,
    );
  await store.close();
  store = undefined;
});
afterEach(async () => {
  await store?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('tree mirrors in the parse cache', () => {
  it('packs a mirror in git order and unpacks it the same; refuses a damaged one', () => {
    const oid = (c: string) => c.repeat(40);
    const blob = (c: string) => ({ type: 'blob' as const, oid: oid(c) });
    // inserted out of git's order, as a write leaves a directory: "a.yaml" sorts before the directory "a"
    const sub: DirNode = { type: 'tree', oid: oid('2'), entries: new Map([['x.yaml', blob('3')]]) };
    const root: DirNode = {
      type: 'tree',
      oid: oid('1'),
      entries: new Map<string, DirNode | { type: 'blob'; oid: string }>([
        ['a', sub],
        ['a.yaml', blob('4')],
      ]),
    };
    const packed = packMirror(root);
    expect(packed).toEqual([oid('1'), ['a.yaml', oid('4'), 'a', [oid('2'), ['x.yaml', oid('3')]]]]);
    const back = unpackMirror(JSON.parse(JSON.stringify(packed)));
    expect([...back.entries.keys()]).toEqual(['a.yaml', 'a']);
    expect(back.entries.get('a')).toEqual(sub);
    // a directory not written yet has no id to trust it by
    expect(packMirror({ ...root, entries: new Map([['a', { ...sub, oid: undefined }]]) })).toBeUndefined();
    expect(packMirror(EMPTY_DIR)).toBeUndefined();
    for (const damaged of [null, [oid('1')], [oid('1'), ['a']], ['short', []], [oid('1'), ['a', 'short']]])
      expect(() => unpackMirror(damaged)).toThrow();
  });

  it('starts from a current mirror without reading the trees it holds', async () => {
    const doc = JSON.parse(await readFile(cacheFile(), 'utf8')) as {
      mirrors: { spec: [string, unknown[]]; status: [string, unknown[]] };
    };
    const specRoot = (await git(bare, 'rev-parse', 'main^{tree}')).trim();
    expect(doc.mirrors.spec[0]).toBe(specRoot);
    const sessionsDir = (await git(bare, 'rev-parse', 'main:sessions/fra1')).trim();
    const before = await openAndView();
    // the tree of sessions/fra1 gone from the repository: only the kept mirror can list its files
    await rm(join(bare, 'objects', sessionsDir.slice(0, 2), sessionsDir.slice(2)));
    store = await open();
    expect(view(store)).toEqual(before);
    expect(store.listSessions({ router: 'fra1' })).toHaveLength(3);
  });

  it('catches up from an older mirror to what the branches hold now', async () => {
    const older = join(dir, 'parsed-older.json');
    await copyFile(cacheFile(), older);
    store = await open();
    const [gone] = store.listSessions({ router: 'ams1' });
    await store.updateSession(gone!.spec.uuid, () => ({ delete: true }), admin, 'delete one');
    await store.createSession(newSession(4242420200, 'fra1'), pending, user(4242420200), 'create one more');
    await store.createRouter('ber1', routerSpec(3), admin);
    await store.createSession(newSession(4242420201, 'ber1'), pending, user(4242420201), 'on a new router');
    const now = view(store);
    await store.close();
    // a crash after these writes leaves the cache of the last save: mirrors older than the branches
    await copyFile(older, cacheFile());
    store = await open();
    expect(view(store)).toEqual(now);
    await store.close();
    // the same as a start that reads every tree and blob
    await rm(cacheFile());
    store = await open();
    expect(view(store)).toEqual(now);
  });

  it('reads the whole tree when the kept mirror is damaged', async () => {
    const before = await openAndView();
    const doc = JSON.parse(await readFile(cacheFile(), 'utf8')) as {
      mirrors: Record<string, [string, unknown[]]>;
    };
    // its root's id as the tree's, its entries cut short
    doc.mirrors.spec = [doc.mirrors.spec![0], ['sessions']];
    await writeFile(cacheFile(), JSON.stringify(doc));
    const cache = new ParseCache(bare);
    await cache.load();
    expect(cache.takeMirror('spec')).toBeUndefined();
    expect(cache.takeMirror('status')).toBeDefined();
    // taken once: a branch emptied and filled again reads its tree
    expect(cache.takeMirror('status')).toBeUndefined();
    store = await open();
    expect(view(store)).toEqual(before);
    // the start wrote a good one in its place
    const saved = JSON.parse(await readFile(cacheFile(), 'utf8')) as { mirrors: { spec: unknown } };
    expect(unpackMirror(saved.mirrors.spec).oid).toBe((await git(bare, 'rev-parse', 'main^{tree}')).trim());
  });
});

async function openAndView() {
  const s = await open();
  const seen = view(s);
  await s.close();
  return seen;
}
