/**
 * What the address and key rules (common/rules/addressing.ts) compare a session with, held so that a
 * session is compared with the few sessions it can clash with, never with all: the sessions of other
 * ASNs holding one of its peer addresses, and the sessions on its router holding its WireGuard key.
 *
 * One ASN may use one address on every router it peers with, so an address can have a holder per router;
 * they are held per ASN, and judging a session of that ASN does not walk them (at 1,000 routers a start
 * walked 1,000 holders per session). Most claims have one holder (multimap.ts).
 */
import { wireGuardKeyId } from '../../../common/net.ts';
import type { SessionSpec } from '../../../common/schema.ts';
import { MultiMap } from './multimap.ts';

/** The fields a session claims by. */
export type ClaimSpec = Pick<SessionSpec, 'asn' | 'router' | 'ipv6' | 'publicKey'> & {
  ipv4?: string | undefined;
};

const keyClaim = (spec: ClaimSpec) => `key ${spec.router} ${wireGuardKeyId(spec.publicKey)}`;
const addressClaim = (address: string, asn: number) => `address ${address} ${asn}`;

/** The peer addresses a session holds: a missing one (an adopted session's ipv6) claims nothing. */
function addressesOf(spec: ClaimSpec): string[] {
  return [spec.ipv6, spec.ipv4].filter((a) => a !== undefined);
}

export class SessionClaims {
  /** Session uuids by claim: `key <router> <key id>`, `address <address> <asn>`. */
  private readonly holders = new MultiMap<string, string>();
  /** The ASNs holding each address. */
  private readonly asns = new MultiMap<string, number>();

  add(uuid: string, spec: ClaimSpec): void {
    this.holders.add(keyClaim(spec), uuid);
    for (const address of addressesOf(spec)) {
      this.holders.add(addressClaim(address, spec.asn), uuid);
      this.asns.add(address, spec.asn);
    }
  }

  delete(uuid: string, spec: ClaimSpec): void {
    this.holders.delete(keyClaim(spec), uuid);
    for (const address of addressesOf(spec)) {
      const claim = addressClaim(address, spec.asn);
      this.holders.delete(claim, uuid);
      if (!this.holders.has(claim)) this.asns.delete(address, spec.asn);
    }
  }

  /** Calls `fn` with each session `spec` can clash with (a session holding two of its claims twice). */
  forEachRival(spec: ClaimSpec, fn: (uuid: string) => void): void {
    for (const uuid of this.holders.get(keyClaim(spec))) fn(uuid);
    for (const address of addressesOf(spec))
      for (const asn of this.asns.get(address))
        if (asn !== spec.asn) for (const uuid of this.holders.get(addressClaim(address, asn))) fn(uuid);
  }
}
