/**
 * What the address and key rules (common/rules/addressing.ts) compare a session with, held so that a
 * session is compared with the few sessions it can clash with, never with all: the sessions of other
 * ASNs holding one of its peer addresses, and the sessions on its router holding its WireGuard key.
 *
 * One ASN may use one address on every router it peers with, so an address can have a holder per router;
 * they are held per ASN, and judging a session of that ASN does not walk them (at 1,000 routers a start
 * walked 1,000 holders per session). Most claims have one holder, kept as the uuid itself: a Set only
 * where several hold one (at 100,000 sessions a Set per claim was 300,000 Sets).
 */
import { wireGuardKeyId } from '../../../common/net.ts';
import type { SessionSpec } from '../../../common/schema.ts';

/** The fields a session claims by. */
export type ClaimSpec = Pick<SessionSpec, 'asn' | 'router' | 'ipv6' | 'publicKey'> & {
  ipv4?: string | undefined;
};

const keyClaim = (spec: ClaimSpec) => `key ${spec.router} ${wireGuardKeyId(spec.publicKey)}`;
const addressClaim = (address: string, asn: number) => `address ${address} ${asn}`;

function addressesOf(spec: ClaimSpec): string[] {
  return spec.ipv4 === undefined ? [spec.ipv6] : [spec.ipv6, spec.ipv4];
}

/** A value or a Set of them; a Set only for two or more. */
type OneOrMore<T> = T | Set<T>;

function added<T>(held: OneOrMore<T> | undefined, value: T): OneOrMore<T> {
  if (held === undefined) return value;
  if (held instanceof Set) return held.add(value);
  return held === value ? held : new Set([held, value]);
}

/** What is left of `held` without `value`; undefined when nothing is. */
function removed<T>(held: OneOrMore<T> | undefined, value: T): OneOrMore<T> | undefined {
  if (!(held instanceof Set)) return held === value ? undefined : held;
  held.delete(value);
  return held.size === 1 ? (held.values().next().value as T) : held;
}

function forEach<T>(held: OneOrMore<T> | undefined, fn: (value: T) => void): void {
  if (held instanceof Set) held.forEach((value) => fn(value));
  else if (held !== undefined) fn(held);
}

export class SessionClaims {
  /** Session uuids by claim: `key <router> <key id>`, `address <address> <asn>`. */
  private readonly holders = new Map<string, OneOrMore<string>>();
  /** The ASNs holding each address. */
  private readonly asns = new Map<string, OneOrMore<number>>();

  add(uuid: string, spec: ClaimSpec): void {
    this.hold(keyClaim(spec), uuid);
    for (const address of addressesOf(spec)) {
      this.hold(addressClaim(address, spec.asn), uuid);
      this.asns.set(address, added(this.asns.get(address), spec.asn));
    }
  }

  delete(uuid: string, spec: ClaimSpec): void {
    this.release(keyClaim(spec), uuid);
    for (const address of addressesOf(spec)) {
      const claim = addressClaim(address, spec.asn);
      this.release(claim, uuid);
      if (this.holders.has(claim)) continue;
      const left = removed(this.asns.get(address), spec.asn);
      if (left === undefined) this.asns.delete(address);
      else this.asns.set(address, left);
    }
  }

  /** Calls `fn` with each session `spec` can clash with (a session holding two of its claims twice). */
  forEachRival(spec: ClaimSpec, fn: (uuid: string) => void): void {
    forEach(this.holders.get(keyClaim(spec)), fn);
    for (const address of addressesOf(spec))
      forEach(this.asns.get(address), (asn) => {
        if (asn !== spec.asn) forEach(this.holders.get(addressClaim(address, asn)), fn);
      });
  }

  private hold(claim: string, uuid: string): void {
    this.holders.set(claim, added(this.holders.get(claim), uuid));
  }

  private release(claim: string, uuid: string): void {
    const left = removed(this.holders.get(claim), uuid);
    if (left === undefined) this.holders.delete(claim);
    else this.holders.set(claim, left);
  }
}
