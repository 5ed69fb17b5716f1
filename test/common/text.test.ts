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
  ];

  it('the Line schema refuses control, separator and bidi characters, and takes the rest', () => {
    const line = Line(100);
    for (const t of refused) expect(validate(line, t, 'text').ok, JSON.stringify(t)).toBe(false);
    for (const t of ['bird: "quoted" \\ back', '$(id) `x` ; |', 'ünïcödé 🙂 ｆｅ８０', 'x'])
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

  it('showable escapes what a terminal would act on and leaves the rest', () => {
    expect(showable('a\nb\u202ec\u001b[31m')).toBe('a\\u{a}b\\u{202e}c\\u{1b}[31m');
    expect(showable('plain "text" 🙂')).toBe('plain "text" 🙂');
  });
});
