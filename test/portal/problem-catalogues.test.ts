/**
 * Every key the controller can emit (the catalogue module's own list, common/messages.ts) is in every
 * portal catalogue of the controller's words (web/i18n/problems/), none empty, with no placeholder the
 * English sentence lacks. English shows the controller's sentence as sent, so each other language has
 * one: in its asset (web/i18n/languages/), beside the portal's own words.
 */
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { englishText, MESSAGE_KEYS, placeholders } from '../../common/messages.ts';

const I18N = path.join(import.meta.dirname, '..', '..', 'web', 'i18n');
const LANGUAGES_DIR = path.join(I18N, 'languages');
// the portal's languages: its catalogue files (test/portal/catalogues.test.ts)
const portalLangs = (await readdir(I18N, { withFileTypes: true }))
  .filter((f) => f.isFile() && f.name !== 'index.ts')
  .map((f) => f.name.replace(/\.ts$/, ''));
const fetched = portalLangs.filter((l) => l !== 'en');
const languages = Object.fromEntries(
  await Promise.all(
    fetched.map(
      async (l) =>
        [
          l,
          (
            (await import(path.join(LANGUAGES_DIR, `${l}.ts`))) as {
              default: { problems: Record<string, string> };
            }
          ).default,
        ] as const,
    ),
  ),
);

describe("the portal's catalogues of the controller's words", () => {
  it('one asset for each language of the portal but English', async () => {
    const files = (await readdir(LANGUAGES_DIR)).map((f) => f.replace(/\.ts$/, ''));
    expect(files.sort()).toEqual([...fetched].sort());
  });

  for (const [lang, language] of Object.entries(languages))
    it(`${lang} has every key the controller can emit, no other, with its placeholders`, () => {
      const catalogue = language.problems as Record<string, string>;
      expect(Object.keys(catalogue).sort()).toEqual([...MESSAGE_KEYS].sort());
      for (const key of MESSAGE_KEYS) {
        const text = catalogue[key] ?? '';
        expect(text.trim(), `${lang} ${key}`).not.toBe('');
        const english = placeholders(englishText(key, {}));
        for (const name of placeholders(text)) expect(english, `${lang} ${key} {${name}}`).toContain(name);
      }
    });

  it('Simplified Chinese is translated, not English copied', () => {
    const zh = languages['zh-CN']!.problems;
    const same = MESSAGE_KEYS.filter(
      (k) => zh[k] === englishText(k, {}) && /[a-z]{3,} [a-z]{3,}/i.test(englishText(k, {})),
    );
    expect(same).toEqual([]);
  });
});
