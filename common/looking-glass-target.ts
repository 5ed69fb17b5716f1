/**
 * Which addresses and prefixes the looking glass may be asked about (docs/api.md, Looking glass): the
 * controller's check of a caller's target, and the agent's of the query it runs.
 */
import {
  DN42_PEER_ADDRESS_RANGES,
  inRanges,
  isIpv4,
  isIpv6,
  prefixProblem,
  specialPurposeProblem,
} from './net.ts';
import type { FieldSaid } from './messages.ts';

/** Is the address inside DN42's ranges (common/net.ts), the only ones a peer may ask about? */
function inDn42(address: string): boolean {
  return inRanges(address, DN42_PEER_ADDRESS_RANGES[isIpv6(address) ? 'ipv6' : 'ipv4']);
}

/**
 * Why `target` cannot be asked about, or undefined. An address for ping and traceroute, an address or a
 * prefix for route; a peer (`admin` false) only inside DN42's ranges; nobody a special-purpose address
 * (loopback, multicast, …), which would probe the router itself or nothing.
 */
export function lgTargetProblem(
  target: string,
  op: 'ping' | 'traceroute' | 'route',
  admin: boolean,
): FieldSaid | undefined {
  const slash = target.indexOf('/');
  const address = slash >= 0 ? target.slice(0, slash) : target;
  if (slash >= 0) {
    if (op !== 'route') return { key: 'field.lgPrefix', params: {} };
    const family = isIpv6(address) ? 'ipv6' : 'ipv4';
    const problem = prefixProblem(target, family);
    if (problem) return problem;
  } else if (!isIpv4(address) && !isIpv6(address)) return { key: 'field.lgNotAddress', params: {} };
  else {
    const special = specialPurposeProblem(address);
    if (special) return special;
  }
  if (!admin && !inDn42(address)) {
    const ranges = [...DN42_PEER_ADDRESS_RANGES.ipv6, ...DN42_PEER_ADDRESS_RANGES.ipv4].join(', ');
    return { key: 'field.lgOutsideDn42', params: { ranges } };
  }
  return undefined;
}
