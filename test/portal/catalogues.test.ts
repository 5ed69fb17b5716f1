/** Every portal string is in every message catalogue, with the same placeholders (web/i18n/). */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import en from '../../web/i18n/en.ts';
import zhCN from '../../web/i18n/zh-CN.ts';

const WEB = path.join(import.meta.dirname, '..', '..', 'web');
const catalogues: Record<string, Record<string, string>> = { en, 'zh-CN': zhCN };
const placeholders = (text: string) => [...text.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();

describe('message catalogues', () => {
  it('registers every catalogue file of web/i18n', async () => {
    // files only: i18n/problems/ holds the controller's words (test/portal/problem-catalogues.test.ts)
    const files = (await readdir(path.join(WEB, 'i18n'), { withFileTypes: true }))
      .filter((f) => f.isFile() && f.name !== 'index.ts')
      .map((f) => f.name.replace(/\.ts$/, ''));
    expect(files.sort()).toEqual(Object.keys(catalogues).sort());
  });

  for (const [lang, catalogue] of Object.entries(catalogues))
    it(`${lang} has every key of English, no other, none empty, the same placeholders`, () => {
      expect(Object.keys(catalogue).sort()).toEqual(Object.keys(en).sort());
      for (const [key, text] of Object.entries(en)) {
        expect(catalogue[key]?.trim(), `${lang} ${key}`).not.toBe('');
        expect(placeholders(catalogue[key]!), `${lang} ${key}`).toEqual(placeholders(text));
      }
    });

  it('Simplified Chinese is translated, not English copied', () => {
    const same = Object.keys(en).filter(
      (k) =>
        zhCN[k as keyof typeof en] === en[k as keyof typeof en] &&
        /[a-z]{4,} [a-z]{4,}/i.test(en[k as keyof typeof en]),
    );
    expect(same).toEqual([]);
  });

  it('every key the source asks for exists', async () => {
    const used = new Set<string>();
    const walk = async (dir: string): Promise<void> => {
      for (const entry of await readdir(dir, { withFileTypes: true })) {
        const file = path.join(dir, entry.name);
        if (entry.isDirectory()) {
          if (entry.name !== 'i18n') await walk(file);
        } else if (/\.tsx?$/.test(entry.name)) {
          const text = await readFile(file, 'utf8');
          for (const m of text.matchAll(/\bt\(\s*'([a-zA-Z0-9.-]+)'/g)) used.add(m[1]!);
          for (const m of text.matchAll(/'((?:advice|error|nav)\.[a-zA-Z.]+)'/g)) used.add(m[1]!);
        }
      }
    };
    await walk(WEB);
    expect(used.size).toBeGreaterThan(100);
    expect([...used].filter((k) => !(k in en))).toEqual([]);
  });
});
