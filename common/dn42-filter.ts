/**
 * The DN42 registry's prefix filter (`data/filter.txt`, `data/filter6.txt`): numbered `permit` / `deny`
 * lines, `nr action prefix minlen maxlen # comment`, the first matching line deciding. The controller
 * judges route objects with it (a route object the filter denies gives no address) and sends it to the
 * agents, whose BIRD import and export filters are rendered from it (docs/routing-policy.md).
 */
import type { Dn42Filter, Dn42FilterRule } from './agent-api.ts';
import { canonicalPrefix, inRanges, parsePrefix, prefixProblem, type Family } from './net.ts';
import { saidText } from './messages.ts';

export type { Dn42Filter, Dn42FilterRule };

/**
 * The registry's own files as of 2025 (git.dn42.dev dn42/registry, data/filter.txt and data/filter6.txt,
 * rule lines as written there): what a controller without a registry, or with one lacking the files, uses.
 */
export const BUILTIN_FILTER_TEXT: Readonly<Record<Family, string>> = {
  ipv4: `
0001  deny    172.22.166.0/24  24      32      # block List due not responding to abuse mails after wiki grief
1001  permit  172.20.0.0/24    28      32      # dn42 anycast range
1002  permit  172.21.0.0/24    28      32      # dn42 anycast range
1003  permit  172.22.0.0/24    28      32      # dn42 anycast range
1004  permit  172.23.0.0/24    28      32      # dn42 anycast range
1100  permit  172.20.0.0/14    21      29      # dn42 main net
2001  permit  10.100.0.0/14    14      32      # ChaosVPN
2002  permit  10.127.0.0/16    16      32      # NeoNetwork
2003  permit  10.0.0.0/8       15      24      # IC-VPN / Freifunk
3001  permit  172.31.0.0/16    16      32      # ChaosVPN
9999  deny    0.0.0.0/0        0       32      # block the rest
`,
  ipv6: `
0010    deny      fdd6:6302:7c04::/48         48       128      # Filter test, see fdd6:6302:7c04::/48
1001    permit    fd00::/8                    44       64       # ULA (defined)
9999    deny      ::/0                         0      128       # block the rest
`,
};

/** The registry's file for each family, under the registry's root. */
export const FILTER_FILES: Readonly<Record<Family, string>> = {
  ipv4: 'data/filter.txt',
  ipv6: 'data/filter6.txt',
};

/** Lines a filter file may have; the registry's have about a dozen. */
const MAX_RULES = 1000;

/**
 * One filter file's rules, sorted by their number as the file's header requires. Throws naming the file,
 * the line and what is wrong: the rules reach BIRD, so a line that is not exactly a rule is not guessed at.
 * `minlen` must be at least the prefix's length (BIRD's `prefix{min,max}` needs it) and `maxlen` at least
 * `minlen`.
 */
export function parseFilter(
  text: string,
  family: Family,
  file: string = FILTER_FILES[family],
): Dn42FilterRule[] {
  const rules: Dn42FilterRule[] = [];
  const bits = family === 'ipv4' ? 32 : 128;
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.replace(/#.*$/, '').trim();
    if (line === '') return;
    const fail = (why: string): never => {
      throw new Error(`${file} line ${i + 1}: ${why}`);
    };
    if (rules.length >= MAX_RULES) fail(`more than ${MAX_RULES} rules`);
    const fields = line.split(/\s+/);
    if (fields.length !== 5) fail(`expected 'nr action prefix minlen maxlen', got ${fields.length} fields`);
    const [nr, action, prefix, min, max] = fields as [string, string, string, string, string];
    if (!/^[0-9]{1,9}$/.test(nr)) fail(`the number '${nr}' is not a number`);
    if (action !== 'permit' && action !== 'deny') fail(`the action '${action}' is neither permit nor deny`);
    const problem = prefixProblem(prefix, family);
    if (problem !== undefined) fail(`the prefix '${prefix}' ${saidText(problem)}`);
    const length = parsePrefix(prefix, family)?.length ?? 0;
    const lengthOf = (text: string, what: string): number => {
      if (!/^[0-9]{1,3}$/.test(text) || Number(text) > bits)
        fail(`${what} '${text}' is not a length 0-${bits}`);
      return Number(text);
    };
    const minLength = lengthOf(min, 'minlen');
    const maxLength = lengthOf(max, 'maxlen');
    if (minLength < length) fail(`minlen ${minLength} is shorter than the prefix's /${length}`);
    if (maxLength < minLength) fail(`maxlen ${maxLength} is shorter than minlen ${minLength}`);
    rules.push({
      nr: Number(nr),
      action: action as Dn42FilterRule['action'],
      prefix: canonicalPrefix(prefix),
      minLength,
      maxLength,
    });
  });
  return rules.sort((a, b) => a.nr - b.nr);
}

/** The built-in copy (BUILTIN_FILTER_TEXT), parsed. */
export const BUILTIN_FILTER: Readonly<Dn42Filter> = {
  ipv4: parseFilter(BUILTIN_FILTER_TEXT.ipv4, 'ipv4', 'built-in filter.txt'),
  ipv6: parseFilter(BUILTIN_FILTER_TEXT.ipv6, 'ipv6', 'built-in filter6.txt'),
};

/**
 * The line that decides a prefix: the first (by number) whose prefix holds it and whose minlen..maxlen
 * holds its length, as the registry's BIRD and FRR conversions (`prefix{min,max}`, `ge min le max`) and
 * the rendered import filter read the file. Undefined when no line matches: the prefix is denied.
 */
export function filterRuleFor(rules: readonly Dn42FilterRule[], prefix: string): Dn42FilterRule | undefined {
  const parsed = parsePrefix(prefix);
  if (!parsed) return undefined;
  return rules.find(
    (r) =>
      parsed.length >= r.minLength && parsed.length <= r.maxLength && inRanges(parsed.address, [r.prefix]),
  );
}
