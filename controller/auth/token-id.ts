/**
 * The id of a user or admin token, its `jti` claim (docs/login.md, Revoking tokens): `<asn>.<exp>.<random>`.
 * It names the token's ASN and expiry (Unix seconds), so that a revocation by id alone knows whose token it
 * is and when it can be forgotten (once the token would have expired), with no record of issued tokens.
 */
import { randomBytes } from 'node:crypto';

/** ASNs are 32-bit and AS 0 is reserved (RFC 7607): a token names 1..2^32-1. */
const MAX_ASN = 4294967295;
/** The longest a token lives (`peerops admin token --ttl`): 366 days. */
export const MAX_TOKEN_TTL_SECONDS = 366 * 24 * 3600;

const TOKEN_ID = /^([1-9][0-9]{0,9})\.([1-9][0-9]{0,11})\.[A-Za-z0-9_-]{16}$/;

export interface TokenId {
  asn: number;
  /** When the token expires, Unix seconds. */
  expiresAt: number;
}

export function isAsn(asn: unknown): asn is number {
  return typeof asn === 'number' && Number.isInteger(asn) && asn >= 1 && asn <= MAX_ASN;
}

/** A new id for a token of `asn` expiring at `expiresAt` (Unix seconds); 96 random bits. */
export function newTokenId(asn: number, expiresAt: number): string {
  return `${asn}.${expiresAt}.${randomBytes(12).toString('base64url')}`;
}

/** The ASN and expiry an id names, or undefined when it is not a token id. */
export function parseTokenId(id: string): TokenId | undefined {
  const match = TOKEN_ID.exec(id);
  if (!match) return undefined;
  const asn = Number(match[1]);
  return isAsn(asn) ? { asn, expiresAt: Number(match[2]) } : undefined;
}
