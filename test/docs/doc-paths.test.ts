/**
 * Every file pointer the documentation names exists: a path such as `controller/store/git/remote.ts` or
 * `agent/` in docs/*.md or README.md, under one of the checkout's source directories. A file moved or
 * renamed without its docs fails here (docs/decisions.md is a reference of current decisions, and its
 * pointers are how a reader finds the code).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
/** Built or local, never part of a checkout: a pointer into them is not checked. */
const NOT_SOURCE = new Set(['node_modules', 'dist', 'data', 'coverage']);
const SOURCE_DIRS = readdirSync(ROOT, { withFileTypes: true })
  .filter((e) => e.isDirectory() && !e.name.startsWith('.') && !NOT_SOURCE.has(e.name))
  .map((e) => e.name);
/** A path under a source directory, up to what cannot be part of one (space, backtick, `:line`, `)`). */
const POINTER = new RegExp(`(?<![\\w/.-])((?:${SOURCE_DIRS.join('|')})/[\\w./-]*[\\w/-])`, 'g');

const pages = [
  ...readdirSync(path.join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
  'README.md',
];

describe('file pointers in the docs', () => {
  it('finds pointers to check', () => {
    const all = pages.flatMap((page) => [...readFileSync(path.join(ROOT, page), 'utf8').matchAll(POINTER)]);
    expect(all.length).toBeGreaterThan(100);
  });

  it.each(pages)('%s names only paths that exist', (page) => {
    const text = readFileSync(path.join(ROOT, page), 'utf8');
    const missing = [...new Set([...text.matchAll(POINTER)].map((m) => m[1] as string))].filter(
      (p) => !existsSync(path.join(ROOT, p)),
    );
    expect(missing).toEqual([]);
  });
});
