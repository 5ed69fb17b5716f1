/**
 * The DN42 registry's prefix filter (common/dn42-filter.ts) as BIRD functions: `is_valid_network_v4()`
 * and `is_valid_network_v6()`, which the eBGP and iBGP filters call (docs/routing-policy.md). Each family's
 * lines are tested in their order, the first that matches deciding, as the registry's file says; its
 * `deny` lines (the filter-test prefixes 172.22.166.0/24 and fdd6:6302:7c04::/48 among them) come out as
 * `return false`. Nothing but numbers and canonical prefixes reaches BIRD: the comments stay behind.
 */
import type { Dn42Filter, Dn42FilterRule } from '../../common/agent-api.ts';
import { BUILTIN_FILTER } from '../../common/dn42-filter.ts';
import { canonicalPrefix, parsePrefix, type Family } from '../../common/net.ts';

/** `prefix{min,max}`, refused unless BIRD takes it (min at least the prefix's length, max at least min). */
function pattern(rule: Dn42FilterRule, where: string): string {
  const length = parsePrefix(rule.prefix)?.length ?? 0;
  if (rule.minLength < length || rule.maxLength < rule.minLength)
    throw new Error(
      `${where}: ${rule.prefix} ${rule.minLength}..${rule.maxLength} is not a range BIRD takes (minLength at least /${length}, maxLength at least minLength)`,
    );
  return `${canonicalPrefix(rule.prefix)}{${rule.minLength},${rule.maxLength}}`;
}

/** One family's function: consecutive lines with one action share a prefix set. */
function renderFamily(rules: readonly Dn42FilterRule[], family: Family, file: string): string {
  const groups: { action: Dn42FilterRule['action']; members: { set: string; nr: number }[] }[] = [];
  rules.forEach((rule, i) => {
    const member = { set: pattern(rule, `filter /${family}/${i}`), nr: rule.nr };
    const last = groups.at(-1);
    if (last?.action === rule.action) last.members.push(member);
    else groups.push({ action: rule.action, members: [member] });
  });
  const tests = groups.map(({ action, members }) => {
    const lines = members.map(
      (m, j) => `    ${m.set}${j < members.length - 1 ? ',' : ''} # ${file} ${String(m.nr).padStart(4, '0')}`,
    );
    return `  if net ~ [\n${lines.join('\n')}\n  ] then return ${action === 'permit'};`;
  });
  return `function is_valid_network_${family === 'ipv4' ? 'v4' : 'v6'}() {
${tests.join('\n')}
  return false;
}`;
}

/** Both families' functions and `is_valid_network()`; the built-in copy when the controller sent none. */
export function renderNetworkFilter(filter: Dn42Filter | undefined): string {
  const f = filter ?? BUILTIN_FILTER;
  return `# The DN42 registry's prefix filter (filter.txt, filter6.txt${filter ? '' : ': the built-in copy'}): the first line that matches decides
${renderFamily(f.ipv4, 'ipv4', 'filter.txt')}

${renderFamily(f.ipv6, 'ipv6', 'filter6.txt')}

function is_valid_network() {
  if net.type = NET_IP4 then return is_valid_network_v4();
  if net.type = NET_IP6 then return is_valid_network_v6();
  return false;
}`;
}
