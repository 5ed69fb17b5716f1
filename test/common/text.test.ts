import { describe, expect, it } from 'vitest';
import { validate } from '../../common/validate.ts';
import { Line } from '../../common/schema.ts';
import { oneLine, showable } from '../../common/text.ts';

describe('printable text (common/text.ts)', () => {
  const refused = [
    'a\nb',
    'a\rb',
    'nul\u0000',
    'del\u007f',
    'c1\u0085',
    'ls\u2028',
    '\u202eevil',
    'iso\u2066x\u2069',
    // format characters (Cf): zero-width space, joiner, BOM, soft hyphen, bidi marks, language tag
    'zero\u200bwidth',
    'join\u200dx',
    '\ufeffbom',
    'soft\u00adhyphen',
    'lrm\u200e',
    'alm\u061c',
    'tag\u{e0001}',
    // private use (Co), in the BMP and beyond
    'pua\ue000',
    'pua\u{f0000}',
    // lone surrogates (Cs), high and low
    'lone\ud800',
    '\udc00lone',
    // paragraph separator (Zp)
    'para\u2029graph',
  ];

  it('the Line schema refuses control, separator and bidi characters, and takes the rest', () => {
    const line = Line(100);
    for (const t of refused) expect(validate(line, t, 'text').ok, JSON.stringify(t)).toBe(false);
    for (const t of ['bird: "quoted" \\ back', '$(id) `x` ; |', 'ünïcödé 🙂 ｆｅ８０', 'x', 'עברית عربي'])
      expect(validate(line, t, 'text').ok, t).toBe(true);
    expect(validate(line, '', 'text').ok).toBe(false);
    expect(validate(line, 'x'.repeat(101), 'text').ok).toBe(false);
  });

  it('oneLine makes BIRD output one printable line and keeps surrogate pairs whole', () => {
    expect(oneLine('bird: /etc/bird/peers/a.conf:3:1 syntax error\n  near "}"\r\n', 200)).toBe(
      'bird: /etc/bird/peers/a.conf:3:1 syntax error near "}"',
    );
    expect(oneLine('a\u0000\u202e\tb', 10)).toBe('a b');
    expect(oneLine('ab🙂', 3)).toBe('ab');
    for (const t of refused) expect(validate(Line(100), oneLine(`x${t}`, 100), 'text').ok, t).toBe(true);
  });

  it('the refused characters are those of the Unicode categories Cc, Cf, Co, Cs, Zl and Zp', () => {
    const line = Line(100);
    const category = /[\p{Cc}\p{Cf}\p{Co}\p{Cs}\p{Zl}\p{Zp}]/u;
    // every code point of the BMP, and the supplementary planes' format and private-use blocks
    const points = [
      ...Array.from({ length: 0x10000 }, (_, i) => i),
      ...Array.from({ length: 0x80 }, (_, i) => 0xe0000 + i),
      0xf0000,
      0x10fffd,
      0x1f642,
    ];
    const wrong: string[] = [];
    for (const cp of points) {
      const text = `a${String.fromCodePoint(cp)}b`;
      if (validate(line, text, 'text').ok === category.test(text)) wrong.push(cp.toString(16));
    }
    expect(wrong).toEqual([]);
  });

  it('showable escapes what a terminal would act on and leaves the rest', () => {
    expect(showable('a\nb\u202ec\u001b[31m')).toBe('a\\u{a}b\\u{202e}c\\u{1b}[31m');
    expect(showable('plain "text" 🙂')).toBe('plain "text" 🙂');
    expect(showable('zw\u200bbom\ufeffpua\ue000lone\ud800')).toBe(
      'zw\\u{200b}bom\\u{feff}pua\\u{e000}lone\\u{d800}',
    );
  });
});
