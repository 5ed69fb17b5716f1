/**
 * controller/store/git/parse-cache.ts on the real file system: what is saved (in pieces, past 1 MiB)
 * loads back the same, only live keys are kept, and a file of another release reads as empty.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ParseCache } from '../../controller/store/git/parse-cache.ts';
import { EMPTY_DIR } from '../../controller/store/gitdb/tree.ts';

/** No branch written: the mirrors are test/store/tree-mirror.test.ts's. */
const NO_MIRRORS = { spec: EMPTY_DIR, status: EMPTY_DIR };
/** Nothing rejected: the judgement is test/store/judgement.test.ts's. */
const NO_REJECTED = () => new Map();

let gitdir: string;
beforeEach(async () => {
  gitdir = await mkdtemp(join(tmpdir(), 'peerops-parse-cache-'));
});
afterEach(async () => rm(gitdir, { recursive: true, force: true }));

describe('ParseCache', () => {
  it('loads back what it saved, in pieces past 1 MiB, keeping only the live keys', async () => {
    const cache = new ParseCache(gitdir);
    await cache.load();
    const keys = Array.from({ length: 5000 }, (_, i) =>
      ParseCache.key('spec', `sessions/fra1/s${i}.yaml`, i.toString(16).padStart(40, '0')),
    );
    for (const [i, key] of keys.entries())
      cache.set(key, { uuid: `s${i}`, note: 'x'.repeat(300), nested: { n: i, list: [i, 'ü'] } });
    const gone = ParseCache.key('status', 'sessions/fra1/gone.yaml', 'f'.repeat(40));
    cache.set(gone, { dropped: true });
    await cache.save(() => new Set(keys), NO_MIRRORS, NO_REJECTED);
    const text = await readFile(join(gitdir, 'peerops', 'parsed.json'), 'utf8');
    expect(text.length).toBeGreaterThan(1 << 21);
    expect(() => JSON.parse(text)).not.toThrow();

    const again = new ParseCache(gitdir);
    await again.load();
    expect(again.has(gone)).toBe(false);
    for (const [i, key] of keys.entries())
      expect(again.get(key)).toEqual({
        uuid: `s${i}`,
        note: 'x'.repeat(300),
        nested: { n: i, list: [i, 'ü'] },
      });
  });

  it("writes statuses' conditions packed, each text once, and loads them back the same", async () => {
    const cache = new ParseCache(gitdir);
    await cache.load();
    const condition = (type: string, at: string) => ({
      type,
      status: 'False',
      reason: 'Provisioning',
      message: "waiting for the router's agent to set up the tunnel and BGP session",
      lastTransitionTime: at,
    });
    const sessions = Array.from({ length: 100 }, (_, i) => {
      const at = new Date(Date.UTC(2026, 10, 26, 8, 0, i)).toISOString();
      return [
        ParseCache.key('status', `sessions/fra1/as${i}.yaml`, i.toString(16).padStart(40, '0')),
        {
          uuid: `u${i}`,
          status: { code: 4, conditions: [condition('Ready', at), condition('Stalled', at)] },
        },
      ] as const;
    });
    // a router's status holds its conditions itself; one with a field beyond the five is kept as it is
    const router = ParseCache.key('status', 'routers/fra1.yaml', 'b'.repeat(40));
    const routerStatus = {
      meshPublicKey: 'k',
      conditions: [{ ...condition('Ready', '2026-11-26T08:00:00.000Z'), observedGeneration: 3 }],
    };
    const unusable = ParseCache.key('status', 'sessions/fra1/bad.yaml', 'c'.repeat(40));
    for (const [key, value] of sessions) cache.set(key, value);
    cache.set(router, routerStatus);
    cache.set(unusable, null);
    await cache.save(
      () => new Set([...sessions.map(([key]) => key), router, unusable]),
      NO_MIRRORS,
      NO_REJECTED,
    );
    const text = await readFile(join(gitdir, 'peerops', 'parsed.json'), 'utf8');
    // 200 conditions packed: the texts of Ready and of Stalled once each in the table (and the router's own)
    expect(text.split("waiting for the router's agent").length - 1).toBe(3);
    // what is in memory is not changed by the packing
    expect(cache.get(sessions[0]![0])).toEqual(sessions[0]![1]);

    const again = new ParseCache(gitdir);
    await again.load();
    for (const [key, value] of sessions) expect(again.get(key)).toStrictEqual(value);
    expect(again.get(router)).toStrictEqual(routerStatus);
    expect(again.get(unusable)).toBeNull();
  });

  it('reads a file whose condition table is missing as empty, not half', async () => {
    const cache = new ParseCache(gitdir);
    await cache.load();
    const key = ParseCache.key('status', 'sessions/fra1/a.yaml', 'a'.repeat(40));
    const condition = { type: 'Ready', status: 'True', reason: 'Established', message: 'up' };
    cache.set(key, {
      uuid: 'u',
      status: { code: 1, conditions: [{ ...condition, lastTransitionTime: 'x' }] },
    });
    await cache.save(() => new Set([key]), NO_MIRRORS, NO_REJECTED);
    const file = join(gitdir, 'peerops', 'parsed.json');
    const doc = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
    delete doc.conditionTexts;
    await writeFile(file, JSON.stringify(doc));
    const damaged = new ParseCache(gitdir);
    await damaged.load();
    // the blobs are the truth: the entry is read again from git rather than kept without its conditions
    expect(damaged.has(key)).toBe(false);
  });

  it('reads a file another revision of the code wrote as empty', async () => {
    const cache = new ParseCache(gitdir);
    await cache.load();
    const key = ParseCache.key('spec', 'sessions/fra1/a.yaml', 'a'.repeat(40));
    cache.set(key, { a: 1 });
    await cache.save(() => new Set([key]), NO_MIRRORS, NO_REJECTED);
    const file = join(gitdir, 'peerops', 'parsed.json');
    const doc = JSON.parse(await readFile(file, 'utf8')) as { revision: string };
    await writeFile(file, JSON.stringify({ ...doc, revision: `${doc.revision}-other` }));
    const other = new ParseCache(gitdir);
    expect(await other.load()).toMatchObject({ found: 'other revision' });
    expect(other.has(key)).toBe(false);
    const same = new ParseCache(gitdir);
    await writeFile(file, JSON.stringify(doc));
    expect(await same.load()).toMatchObject({ found: 'taken', revision: doc.revision });
    expect(same.has(key)).toBe(true);
  });
});
