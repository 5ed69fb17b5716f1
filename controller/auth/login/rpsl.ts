/**
 * RPSL objects as the DN42 registry writes them: `key: value` lines, where a line starting with
 * whitespace or `+` continues the attribute above (`+` stands for an empty line in the value).
 * Lines starting with `%` or `#` are comments.
 */

export interface RpslAttribute {
  key: string;
  value: string;
}

const ATTRIBUTE = /^([A-Za-z0-9][A-Za-z0-9_-]*):[ \t]*(.*)$/;

export function parseRpsl(text: string): RpslAttribute[] {
  const out: RpslAttribute[] = [];
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.replace(/[ \t]+$/, '');
    if (line.startsWith('%') || line.startsWith('#')) continue;
    const last = out[out.length - 1];
    if (/^[ \t+]/.test(line)) {
      if (last) last.value += '\n' + (line.startsWith('+') ? line.slice(1).trim() : line.trim());
      continue;
    }
    if (line === '') continue;
    const m = ATTRIBUTE.exec(line);
    if (m) out.push({ key: m[1]!.toLowerCase(), value: m[2]! });
  }
  return out;
}

/** Every value of one attribute, in file order. */
export function values(attrs: readonly RpslAttribute[], key: string): string[] {
  return attrs.filter((a) => a.key === key).map((a) => a.value);
}

/** An object name value (`mnt-by: FOO-MNT # comment`) without its trailing comment. */
export function nameValue(value: string): string {
  return value.replace(/#.*$/s, '').trim();
}
