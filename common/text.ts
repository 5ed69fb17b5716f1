/**
 * What "printable text" means for every free-text field (names, reasons, an agent's error message): one
 * line of characters that show as themselves, decided by Unicode general category rather than by a list
 * of code points, so that new format characters are covered too. Refused:
 *
 * - Cc, control characters: C0, DEL, C1 (a forged second line, terminal escapes);
 * - Cf, format characters: zero-width space and joiners, the BOM, soft hyphen, bidi marks, embeddings,
 *   overrides and isolates (text that displays reversed or hides what it says, U+202E);
 * - Co, private use: no meaning of its own, shown differently by every font;
 * - Cs, lone surrogates: not a character at all (a pair, an emoji say, is one code point and allowed);
 * - Zl and Zp, line and paragraph separators.
 *
 * Such a field then reads as what it is, on one line, in a log line, a git commit message, a terminal
 * table or a BIRD comment (docs/api.md, Conventions, Free text).
 */

/**
 * The refused characters, as the body of a regular-expression character class. Unicode property
 * escapes: JavaScript needs the `u` or `v` flag (ajv compiles schema patterns with `u`); Go's RE2 (the
 * CRDs' patterns) knows the same categories.
 */
export const UNPRINTABLE_CLASS = '\\p{Cc}\\p{Cf}\\p{Co}\\p{Cs}\\p{Zl}\\p{Zp}';

const unprintable = new RegExp(`[${UNPRINTABLE_CLASS}]`, 'gu');
const unprintableRun = new RegExp(`(?:\\s|[${UNPRINTABLE_CLASS}])+`, 'gu');
/**
 * Text from elsewhere (BIRD's or the kernel's error output) made one printable line: every run of white
 * space and refused characters becomes one space. Cut to `max` characters, never inside a surrogate pair.
 */
export function oneLine(text: string, max: number): string {
  const line = text.replace(unprintableRun, ' ').trim();
  if (line.length <= max) return line;
  const cut = line.slice(0, max);
  return /[\ud800-\udbff]$/.test(cut) ? cut.slice(0, -1) : cut;
}

/**
 * Text to show in a terminal: each refused character as a visible `\u{…}` escape. For what a server
 * returns, which an older store may still hold from before these fields were checked.
 */
export function showable(text: string): string {
  return text.replace(unprintable, (c) => `\\u{${(c.codePointAt(0) ?? 0).toString(16)}}`);
}
