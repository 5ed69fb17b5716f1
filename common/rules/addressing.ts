/**
 * The rules on a session's peer addresses, endpoint and WireGuard key, against its router, its policy and
 * the rest of the network (docs/api.md, Create: the checks). A create is refused by them, a manifest
 * merged in git skipped, `peerops validate` reports them and the admin list flags stored sessions
 * breaking them.
 */
import { type FieldError } from '../errors.ts';
import { fault, fieldAtFault, fieldError, type FieldMessageKey, type MessageParams } from '../messages.ts';
import {
  DN42_PEER_ADDRESS_RANGES,
  endpointProblem,
  inRanges,
  isLowOrderKey,
  parseAddress,
  sameWireGuardKey,
  specialPurposeProblem,
  wireGuardKeyId,
  type Family,
} from '../net.ts';
import { sessionOptions, type PolicySpec, type RouterSpec, type SessionSpec } from '../schema.ts';
import { blockedAsnError, mergePolicies } from './policy.ts';

/** The fields of its own that sessionAddressingErrors judges, besides asn and router (which never change). */
export const ADDRESSING_FIELDS = [
  'ipv6',
  'ipv4',
  'linkLocal',
  'publicKey',
  'mpbgp',
  'extendedNextHop',
  'endpoint',
] as const;

/** The fields of a session that `sessionAddressingErrors` judges (a create body or a stored spec). */
export type SessionAddressing = Pick<
  SessionSpec,
  'asn' | 'router' | 'ipv6' | 'ipv4' | 'linkLocal' | 'publicKey' | 'mpbgp' | 'extendedNextHop' | 'endpoint'
> & {
  /** Whether it was adopted (a stored session's block, or a git manifest's, which may lack by and at). */
  adopted?: Pick<NonNullable<SessionSpec['adopted']>, 'interface'> | undefined;
};

/**
 * The other routers and sessions a session's peer addresses and key are compared with. `sessions` may hold
 * only its neighbours (Store.neighbours): other ASNs' sessions with one of its addresses, and the
 * sessions on its router with its WireGuard key (those without router and publicKey are compared by
 * address only).
 */
export interface NetworkView {
  routers: Iterable<{ name: string; spec: RouterSpec }>;
  /**
   * The routers by loopback address, if the caller indexed them (loopbackIndex): judging every session
   * of a large network then does not walk every router per address.
   */
  loopbacks?: ReadonlyMap<string, string>;
  sessions: Iterable<{
    name: string;
    spec: Pick<SessionSpec, 'asn' | 'ipv6' | 'ipv4'> & Partial<Pick<SessionSpec, 'router' | 'publicKey'>>;
  }>;
}

/**
 * A session's addressing against its router, the policy merged for that router and the rest of the
 * network. The API refuses a create that breaks it, the git store skips such a merged manifest and
 * `peerops validate` reports it; `prefix` is where the fields sit (`''` in a body, `/spec` in a manifest).
 */
export function sessionAddressingErrors(
  name: string,
  spec: SessionAddressing,
  router: RouterSpec,
  policy: PolicySpec,
  network: NetworkView,
  prefix = '',
): FieldError[] {
  return [
    ...sessionPolicyErrors(spec, router, policy, prefix),
    ...peerAddressErrors(name, spec, policy.ownPrefixes, network, prefix),
    ...sessionKeyErrors(name, spec, router, network, prefix),
  ];
}

/**
 * The ranges a session's `family` address must lie in: the policy's peerAddressRanges of that family, or
 * DN42's own (DN42_PEER_ADDRESS_RANGES) where the policy sets none (docs/operator-guide.md, the policy).
 */
export function peerAddressRanges(policy: PolicySpec, family: Family): readonly string[] {
  const own = policy.peerAddressRanges?.[family];
  return own && own.length > 0 ? own : DN42_PEER_ADDRESS_RANGES[family];
}

/**
 * DN42's anycast service ranges (the registry's inetnum NET-ANY*-DN42 "reserved for anycast services" and
 * inet6num fd42:d42:d42::/48 "DN42 Infrastructure"): the recursive DNS 172.20.0.53, 172.23.0.53,
 * fd42:d42:d42:53::1 and fd42:d42:d42:54::1, whois, the wiki. Every network announces them and the
 * router reaches them over BGP; as one peer's tunnel address the router's own queries would go into that
 * tunnel (docs/login.md, Route objects).
 */
export const DN42_ANYCAST_RANGES: Readonly<Record<Family, readonly string[]>> = {
  ipv4: ['172.20.0.0/24', '172.21.0.0/24', '172.22.0.0/24', '172.23.0.0/24'],
  ipv6: ['fd42:d42:d42::/48'],
};

/**
 * Peer addresses a peer can own: never a special-purpose address (loopback, multicast, link-local,
 * documentation, an IPv4-mapped IPv6 address …, whatever the policy says), never in DN42's anycast service
 * ranges (DN42_ANYCAST_RANGES), and inside the policy's ranges (peerAddressRanges). They need nothing but the policy, so the API also runs them before it asks the
 * registry about the addresses.
 */
export function peerAddressRangeErrors(
  spec: Pick<SessionSpec, 'ipv6' | 'ipv4'>,
  policy: PolicySpec,
  prefix = '',
): FieldError[] {
  const errors: FieldError[] = [];
  for (const family of ['ipv6', 'ipv4'] as const) {
    const address = spec[family];
    if (address === undefined) continue;
    const parsed = parseAddress(address);
    const special = specialPurposeProblem(parsed);
    if (special !== undefined) {
      errors.push(fieldError(`${prefix}/${family}`, special.key, special.params));
      continue;
    }
    const anycast = DN42_ANYCAST_RANGES[family].find((range) => inRanges(parsed, [range]));
    if (anycast !== undefined) {
      errors.push(fieldError(`${prefix}/${family}`, 'field.anycast', { range: anycast }));
      continue;
    }
    const ranges = peerAddressRanges(policy, family);
    if (!inRanges(parsed, ranges))
      errors.push(
        fieldError(
          `${prefix}/${family}`,
          policy.peerAddressRanges?.[family]?.length ? 'field.outsidePolicyRanges' : 'field.outsideDn42',
          { ranges: ranges.join(', '), family },
        ),
      );
  }
  return errors;
}

/**
 * A session's endpoint is where the router sends the tunnel's packets: an address it reaches a peer at
 * (net.ts endpointProblem), so that no peer points a router's WireGuard at the router itself, its cloud's
 * metadata service or the operator's private network (docs/api.md, the endpoint field).
 */
export function endpointErrors(
  endpoint: string | undefined,
  policy: Pick<PolicySpec, 'allowPrivateEndpoints'>,
  prefix = '',
): FieldError[] {
  const problem =
    endpoint === undefined ? undefined : endpointProblem(endpoint, policy.allowPrivateEndpoints);
  return problem === undefined ? [] : [fieldError(`${prefix}/endpoint`, problem.key, problem.params)];
}

/**
 * A session's WireGuard key must be one a peer holds the private half of: not a low-order point (the
 * all-zero key), not the router's own key (WireGuard refuses a peer with the interface's key), and not the
 * key of another session on the same router (two tunnels would claim one peer).
 */
function sessionKeyErrors(
  name: string,
  spec: Pick<SessionSpec, 'router' | 'publicKey'>,
  router: RouterSpec,
  network: NetworkView,
  prefix: string,
): FieldError[] {
  const at = (key: FieldMessageKey, params: MessageParams = {}) => [
    fieldError(`${prefix}/publicKey`, key, params),
  ];
  if (isLowOrderKey(spec.publicKey)) return at('field.lowOrderKey');
  if (sameWireGuardKey(spec.publicKey, router.publicKey)) return at('field.routerKey');
  const id = wireGuardKeyId(spec.publicKey);
  for (const other of network.sessions)
    if (
      other.name !== name &&
      other.spec.router === spec.router &&
      other.spec.publicKey !== undefined &&
      (other.spec.publicKey === spec.publicKey || wireGuardKeyId(other.spec.publicKey) === id)
    )
      return at('field.keyTaken', { session: other.name, router: spec.router });
  return [];
}

/**
 * Peer addresses a peer can own (peerAddressRangeErrors), an endpoint the router may send to
 * (endpointErrors), a link-local that is not the router's own, and the MP-BGP /
 * extended next hop / IPv4 combination that gives the IPv4 side a session. An adopted session is what
 * its router already runs, and keeps its hand-made protocol's options: one that carries no IPv4 (an
 * IPv6-only peer, or the DN42 wiki's IPv4 channel over the link-local without extended next hop) is
 * kept so (docs/decisions.md, "An adopted session needs its link-local").
 */
function sessionPolicyErrors(
  spec: SessionAddressing,
  router: RouterSpec,
  policy: PolicySpec,
  prefix = '',
): FieldError[] {
  const errors: FieldError[] = [];
  const at = (field: string, key: FieldMessageKey, params: MessageParams = {}) =>
    errors.push(fieldError(`${prefix}/${field}`, key, params));
  errors.push(...peerAddressRangeErrors(spec, policy, prefix));
  errors.push(...endpointErrors(spec.endpoint, policy, prefix));
  if (spec.linkLocal === router.linkLocal)
    at('linkLocal', 'field.routerLinkLocal', { linkLocal: router.linkLocal });
  const { mpbgp, extendedNextHop: enh } = sessionOptions(spec);
  if (enh && !mpbgp) at('extendedNextHop', 'field.enhNeedsMpbgp');
  const ipv4Side = spec.ipv4 !== undefined || spec.adopted !== undefined;
  if (!mpbgp && !ipv4Side) at('mpbgp', 'field.noIpv4Side');
  if (mpbgp && !enh && !ipv4Side) at('extendedNextHop', 'field.noIpv4NextHop');
  return errors;
}

/**
 * A session's peer addresses become routes into its tunnel on the router (`ip route replace <ipv6> dev
 * wg_<port>`, `peer <ipv4>/32`), which win over what BIRD installs. So they must not be a router's
 * loopback (that would capture the iBGP mesh), lie in the network's own prefixes, or be another ASN's
 * session address (that would capture its traffic). The same ASN may use one address on several routers.
 */
function peerAddressErrors(
  name: string,
  spec: Pick<SessionSpec, 'asn' | 'ipv6' | 'ipv4'>,
  ownPrefixes: PolicySpec['ownPrefixes'],
  network: NetworkView,
  prefix: string,
): FieldError[] {
  const errors: FieldError[] = [];
  const loopbacks = network.loopbacks ?? loopbackIndex(network.routers);
  const check = (field: 'ipv6' | 'ipv4', address: string | undefined) => {
    if (address === undefined) return;
    const at = (key: FieldMessageKey, params: MessageParams) =>
      errors.push(fieldError(`${prefix}/${field}`, key, params));
    const router = loopbacks.get(address);
    if (router !== undefined) return at('field.routerLoopback', { router });
    if (ownPrefixes?.[field]?.length && inRanges(address, ownPrefixes[field]))
      return at('field.ownPrefix', { prefixes: ownPrefixes[field]?.join(', ') ?? '' });
    for (const other of network.sessions)
      if (other.name !== name && other.spec.asn !== spec.asn && other.spec[field] === address)
        return at('field.addressTaken', { asn: other.spec.asn, session: other.name });
  };
  check('ipv6', spec.ipv6);
  check('ipv4', spec.ipv4);
  return errors;
}

/**
 * The routers by loopback address (NetworkView.loopbacks). Of two routers with one loopback (which
 * the router rules refuse) the first keeps it, as a walk through the routers in order would find.
 */
export function loopbackIndex(
  routers: Iterable<{ name: string; spec: RouterSpec }>,
): ReadonlyMap<string, string> {
  const owners = new Map<string, string>();
  for (const { name, spec } of routers)
    for (const address of [spec.loopback.ipv6, spec.loopback.ipv4])
      if (address !== undefined && !owners.has(address)) owners.set(address, name);
  return owners;
}

/**
 * sessionAddressingErrors as the refusal of a create (INVALID_REQUEST naming the first field). The stores
 * run it where they write, so that two creates from different ASNs for one address cannot both pass.
 */
export function assertSessionAddressing(
  name: string,
  spec: SessionAddressing,
  router: RouterSpec,
  policy: PolicySpec,
  network: NetworkView,
): void {
  const errors = sessionAddressingErrors(name, spec, router, policy, network);
  if (errors.length > 0) throw fault('request.fieldRefused', fieldAtFault(errors), errors);
}

/** Whether a change of a stored session touches what the address rules judge (ADDRESSING_FIELDS). */
export function addressingChanged(before: SessionAddressing, after: SessionAddressing): boolean {
  return ADDRESSING_FIELDS.some((f) => before[f] !== after[f]);
}

/**
 * The address rules on a change of a stored session (a modify) that addressingChanged: the change is
 * judged as a create would be, against the rest of the network, except for a fault the session already
 * had in a field the change leaves as it was (a policy tightened since it was stored: docs/api.md,
 * modify).
 */
export function assertAddressingChange(
  name: string,
  before: SessionAddressing,
  after: SessionAddressing,
  router: RouterSpec,
  policy: PolicySpec,
  network: NetworkView,
): void {
  const had = sessionAddressingErrors(name, before, router, policy, network);
  const changed = (pointer: string) => {
    const field = pointer.slice(1) as keyof SessionAddressing;
    return before[field] !== after[field];
  };
  const errors = sessionAddressingErrors(name, after, router, policy, network).filter(
    (e) => changed(e.pointer) || !had.some((h) => h.pointer === e.pointer && h.message === e.message),
  );
  if (errors.length > 0) throw fault('request.fieldRefused', fieldAtFault(errors), errors);
}

type Neighbour = { name: string; spec: SessionSpec };

/**
 * What the current policy says of a stored session: the rules a create of it would meet now
 * (sessionAddressingErrors, and an ASN the policy blocks), pointers as in a create body. A policy tightened
 * after a session was stored does not remove it; the admin list shows these as `policyViolations`, and
 * approve and enable refuse the session with them (docs/api.md).
 */
export function policyViolations(
  session: Neighbour,
  router: RouterSpec | undefined,
  policy: PolicySpec,
  network: NetworkView,
): FieldError[] {
  const errors: FieldError[] = [];
  if (policy.blockedAsns?.includes(session.spec.asn))
    errors.push(blockedAsnError('/asn', session.spec.asn, session.spec.router));
  // a session of a removed router is the reconciler's (docs/architecture.md), not a policy matter
  if (router) errors.push(...sessionAddressingErrors(session.name, session.spec, router, policy, network));
  return errors;
}

/**
 * INVALID_STATE when the current policy no longer allows the session (its `violations`, policyJudge):
 * approve and enable would queue it for setup. INVALID_STATE rather than INVALID_REQUEST because the
 * request is right and the stored session is what breaks the rule; the errors name its fields as a
 * create would.
 */
export function assertPolicyAllows(
  session: { name: string },
  violations: FieldError[],
  action: string,
): void {
  if (violations.length > 0)
    throw fault(
      'session.breaksPolicy',
      { action, name: session.name, ...fieldAtFault(violations) },
      violations,
    );
}

/**
 * policyViolations for the sessions of one network, its routers and policies (as stored, unmerged)
 * indexed once; each session is judged with its neighbours (NetworkView.sessions), which the caller
 * looks up.
 */
export function policyJudge(
  routers: readonly { name: string; spec: RouterSpec }[],
  policies: readonly { name: string; spec: PolicySpec }[],
): (session: Neighbour, neighbours: NetworkView['sessions']) => FieldError[] {
  const byName = new Map(routers.map((r) => [r.name, r.spec]));
  const loopbacks = loopbackIndex(routers);
  const own = new Map(policies.map((p) => [p.name, p.spec]));
  const merged = new Map<string, PolicySpec>();
  return (session, neighbours) => {
    const name = session.spec.router;
    let policy = merged.get(name);
    if (!policy) merged.set(name, (policy = mergePolicies(own.get('default'), own.get(name))));
    return policyViolations(session, byName.get(name), policy, {
      routers,
      loopbacks,
      sessions: neighbours,
    });
  };
}
