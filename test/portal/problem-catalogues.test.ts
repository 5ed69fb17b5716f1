/**
 * Every key the controller can emit (the catalogue module's own list, common/messages.ts) is in every
 * portal catalogue of the controller's words (web/i18n/problems/), none empty, with no placeholder the
 * English sentence lacks; a key unknown to the portal falls back to the English message.
 */
import { describe, expect, it } from 'vitest';
import { englishText, MESSAGE_KEYS, placeholders } from '../../common/messages.ts';
import en from '../../web/i18n/en.ts';
import zhCN from '../../web/i18n/zh-CN.ts';
import { problemCatalogues } from '../../web/i18n/problems/catalogues.ts';

const catalogues = { en, 'zh-CN': zhCN };

describe("the portal's catalogues of the controller's words", () => {
  it('one for each language of the portal', () => {
    expect(Object.keys(problemCatalogues).sort()).toEqual(Object.keys(catalogues).sort());
  });

  for (const [lang, catalogue] of Object.entries(problemCatalogues))
    it(`${lang} has every key the controller can emit, no other, with its placeholders`, () => {
      expect(Object.keys(catalogue).sort()).toEqual([...MESSAGE_KEYS].sort());
      for (const key of MESSAGE_KEYS) {
        const text = (catalogue as Record<string, string>)[key] ?? '';
        expect(text.trim(), `${lang} ${key}`).not.toBe('');
        const english = placeholders(englishText(key, {}));
        for (const name of placeholders(text)) expect(english, `${lang} ${key} {${name}}`).toContain(name);
      }
    });

  it('English is the controller’s own sentence', () => {
    for (const key of MESSAGE_KEYS) expect(problemCatalogues.en[key]).toBe(englishText(key, {}));
  });

  it('Simplified Chinese is translated, not English copied', () => {
    const same = MESSAGE_KEYS.filter(
      (k) =>
        problemCatalogues['zh-CN'][k] === problemCatalogues.en[k] &&
        /[a-z]{3,} [a-z]{3,}/i.test(problemCatalogues.en[k]),
    );
    expect(same).toEqual([]);
  });
});
