/**
 * The DN42 community propagation functions (64511, n): latency 1–9, bandwidth 21–29, crypto 31–34.
 * A route keeps the worst value of each property seen along its path: the highest latency, the lowest
 * bandwidth, the lowest crypto. This is the standard logic of the DN42 BIRD 2 examples, rendered once
 * so every session's filter calls the same functions.
 */

/** BIRD source of update_latency/update_bandwidth/update_crypto/update_flags. */
export function renderCommunityFunctions(): string {
  const latency = range(9, 2)
    .map(
      (n) =>
        `  if (64511, ${n}) ~ bgp_community then { bgp_community.delete([(64511, 1..${n - 1})]); return ${n}; }`,
    )
    .join('\n');
  const bandwidth = range(21, 28)
    .map(
      (n) =>
        `  if (64511, ${n}) ~ bgp_community then { bgp_community.delete([(64511, ${n + 1}..29)]); return ${n}; }`,
    )
    .join('\n');
  const crypto = range(31, 33)
    .map(
      (n) =>
        `  if (64511, ${n}) ~ bgp_community then { bgp_community.delete([(64511, ${n + 1}..34)]); return ${n}; }`,
    )
    .join('\n');
  return `# DN42 link properties: a route carries the worst latency, bandwidth and crypto seen on its path.
function update_latency(int link_latency) {
  bgp_community.add((64511, link_latency));
${latency}
  return 1;
}

function update_bandwidth(int link_bandwidth) {
  bgp_community.add((64511, link_bandwidth));
${bandwidth}
  return 29;
}

function update_crypto(int link_crypto) {
  bgp_community.add((64511, link_crypto));
${crypto}
  return 34;
}

function update_flags(int link_latency; int link_bandwidth; int link_crypto) {
  update_latency(link_latency);
  update_bandwidth(link_bandwidth);
  update_crypto(link_crypto);
  return true;
}
`;
}

/** Integers from `from` to `to`, inclusive, in either direction. */
function range(from: number, to: number): number[] {
  const step = from <= to ? 1 : -1;
  const out: number[] = [];
  for (let n = from; step > 0 ? n <= to : n >= to; n += step) out.push(n);
  return out;
}
