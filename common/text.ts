/**
 * What "printable text" means for every free-text field (names, reasons, an agent's error message): no
 * C0 or C1 control characters, DEL, line or paragraph separators, or bidirectional embeddings, overrides
 * and isolates. Such a field then reads as what it is, on one line, in a log line, a git commit message,
 * a terminal table or a BIRD comment: no forged second line, no text that displays reversed (U+202E).
 */

/** The refused characters, as the body of a regular-expression character class (JSON Schema and JS). */
export const UNPRINTABLE_CLASS = '\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029\\u202a-\\u202e\\u2066-\\u2069';

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
