/**
 * The rules on routing policies: how a router's policy merges over the default, the one wording of a
 * blocked ASN, and what `peerops validate` advises about a policy.
 */
import type { FieldError } from '../errors.ts';
import type { PolicySpec } from '../schema.ts';
import { fieldError } from '../messages.ts';

/**
 * The DN42 communities of a policy that leaves them out (docs/routing-policy.md, "DN42 communities"):
 * propagation on, bandwidth 24 (at least 100 Mbit/s) and crypto 33 (encrypted with perfect forward
 * secrecy: a WireGuard tunnel).
 */
export const DEFAULT_COMMUNITIES = { enabled: true, bandwidth: 24, crypto: 33 } as const;

/** The import limit of a policy that leaves it out, per address family (docs/routing-policy.md). */
export const DEFAULT_IMPORT_LIMIT = { ipv4: 10000, ipv6: 10000, action: 'block' } as const;

/** A policy's import limit with the defaults filled in: what the agent renders. */
export function importLimitOf(policy: PolicySpec): { ipv4: number; ipv6: number; action: string } {
  return { ...DEFAULT_IMPORT_LIMIT, ...policy.importLimit };
}

/** A policy's communities with the defaults filled in: what the agent renders. */
export function communitiesOf(policy: PolicySpec): { enabled: boolean; bandwidth: number; crypto: number } {
  return { ...DEFAULT_COMMUNITIES, ...policy.communities };
}

/** What reads policies: a store, or the manifests of a checkout. */
export interface PolicySource {
  getPolicy(name: string): { spec: PolicySpec } | undefined;
}

/** The one wording of a blocked ASN: the create's refusal, a merged manifest's and the admin list's flag. */
export function blockedAsnError(pointer: string, asn: number, router: string): FieldError {
  return fieldError(pointer, 'field.asnBlocked', { asn, router });
}

/**
 * The policy for one router: its own policy over the default, field by field, except `blockedAsns`,
 * which adds to the default's list (a router's list must not unblock an ASN the network blocks).
 */
export function mergePolicies(base: PolicySpec | undefined, own: PolicySpec | undefined): PolicySpec {
  const merged: PolicySpec = { ...base, ...own };
  if (base?.blockedAsns && own?.blockedAsns)
    merged.blockedAsns = [...new Set([...base.blockedAsns, ...own.blockedAsns])];
  return merged;
}

/** The policy a store holds for one router (mergePolicies), or the default alone without a router. */
export function mergedPolicy(store: PolicySource, router: string | undefined): PolicySpec {
  return mergePolicies(
    store.getPolicy('default')?.spec,
    router === undefined ? undefined : store.getPolicy(router)?.spec,
  );
}

/**
 * Is the ASN blocked on every router, by the default policy's `blockedAsns`? Its logins are refused and so
 * is every request of its tokens (docs/login.md, Tokens and what is true now).
 */
export function blockedEverywhere(defaultPolicy: PolicySpec | undefined, asn: number): boolean {
  const list = defaultPolicy?.blockedAsns;
  return list ? blockedSet(list).has(asn) : false;
}

/**
 * The list as a set, made once per stored list: every user request asks (auth.ts), and a policy may block
 * 100,000 ASNs, which a scan of the array would cost on each. Stored specs are replaced, never changed.
 */
const blockedSets = new WeakMap<readonly number[], ReadonlySet<number>>();
function blockedSet(list: readonly number[]): ReadonlySet<number> {
  let set = blockedSets.get(list);
  if (!set) {
    set = new Set(list);
    blockedSets.set(list, set);
  }
  return set;
}

/** Policy-level advice that the store tolerates but validate reports. */
export function policyWarnings(name: string, spec: PolicySpec): FieldError[] {
  if (name === 'default' && spec.dn42Asn === undefined) {
    return [fieldError('/spec/dn42Asn', 'field.defaultNeedsAsn')];
  }
  return [];
}

/**
 * The one wording of a network that announces nothing: `peerops serve` logs it at start and `peerops
 * admin policy` prints it while the default policy names no own prefix (docs/routing-policy.md).
 */
export const NO_OWN_PREFIX_WARNING =
  'this network announces no prefix: peers receive no routes from it; set one with peerops admin policy set --own-prefix PREFIX';

/**
 * Whether the default policy names none of the network's own prefixes: the routers then originate no
 * route (agent/bird/main-config.ts), so peers learn nothing from this network.
 */
export function announcesNoPrefix(defaultPolicy: PolicySpec | undefined): boolean {
  const own = defaultPolicy?.ownPrefixes;
  return !own?.ipv4?.length && !own?.ipv6?.length;
}
