/**
 * controller/store/git/parse-cache.ts on the real file system: what is saved (in pieces, past 1 MiB)
 * loads back the same, only live keys are kept, and a file of another release reads as empty.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ParseCache } from '../../controller/store/git/parse-cache.ts';

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
    await cache.save(() => new Set(keys));
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

  it('reads a file another release wrote as empty', async () => {
    const cache = new ParseCache(gitdir);
    await cache.load();
    const key = ParseCache.key('spec', 'sessions/fra1/a.yaml', 'a'.repeat(40));
    cache.set(key, { a: 1 });
    await cache.save(() => new Set([key]));
    const file = join(gitdir, 'peerops', 'parsed.json');
    const doc = JSON.parse(await readFile(file, 'utf8')) as { version: string };
    await writeFile(file, JSON.stringify({ ...doc, version: '0.0.0-other' }));
    const other = new ParseCache(gitdir);
    await other.load();
    expect(other.has(key)).toBe(false);
  });
});
