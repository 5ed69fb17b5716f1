/**
 * Revoked user and admin tokens (docs/login.md, Revoking tokens): the store's rules for its revocation
 * list, and the form every request is checked against. A token is revoked by its id (its `jti`), or with
 * every token of its ASN issued up to a second. An entry is forgotten, at the next revocation, once no
 * token it revokes can still be valid: an id when its token expires (the id names when), an ASN's entry
 * when the longest token lifetime (366 days) has passed since its second.
 */
import type { DomainError } from '../../../common/errors.ts';
import { isAsn, MAX_TOKEN_TTL_SECONDS, parseTokenId } from '../../auth/token-id.ts';
import { fault, fieldError, type FieldMessageKey } from '../../../common/messages.ts';

/** The stored list: revoked token ids, and per ASN the last second (Unix) whose tokens are revoked. */
export interface RevocationList {
  tokens: string[];
  asns: Record<string, number>;
}

/** One token by its id, or every token of an ASN issued until now. */
export type Revocation = { token: string } | { asn: number };

/**
 * Revoked ids kept per ASN. One more (a peer logging out over and over) revokes every token of that ASN
 * issued until then instead, so that no ASN can grow the list without bound.
 */
export const MAX_REVOKED_IDS_PER_ASN = 100;

/** The revocations in memory: two lookups per request. */
export class Revocations {
  private ids = new Set<string>();
  private asns = new Map<number, number>();

  replace(list: RevocationList): void {
    this.ids = new Set(list.tokens);
    this.asns = new Map(Object.entries(list.asns).map(([asn, upTo]) => [Number(asn), upTo]));
  }

  /** Is the token with this id, of this ASN, issued at `issuedAt` (Unix seconds) revoked? */
  revoked(id: string, asn: number, issuedAt: number): boolean {
    if (this.ids.has(id)) return true;
    const upTo = this.asns.get(asn);
    return upTo !== undefined && issuedAt <= upTo;
  }

  list(): RevocationList {
    return listOf(this.ids, this.asns);
  }
}

function listOf(ids: Iterable<string>, asns: Map<number, number>): RevocationList {
  return {
    tokens: [...ids].sort(),
    asns: Object.fromEntries([...asns].sort(([a], [b]) => a - b).map(([asn, upTo]) => [String(asn), upTo])),
  };
}

function invalid(pointer: string, key: FieldMessageKey): DomainError {
  const error = fieldError(pointer, key);
  return fault('token.invalidField', { pointer, reason: error.message }, [error]);
}

/**
 * `list` with `revocation` added and what has expired by `now` (Unix seconds) dropped. INVALID_REQUEST for
 * an id that is no token id (`/id`) or an ASN out of range (`/asn`).
 */
export function withRevocation(list: RevocationList, revocation: Revocation, now: number): RevocationList {
  const asns = new Map<number, number>();
  for (const [asn, upTo] of Object.entries(list.asns))
    if (upTo + MAX_TOKEN_TTL_SECONDS >= now) asns.set(Number(asn), upTo);
  const ids = new Map<string, number>();
  for (const id of list.tokens) {
    const parsed = parseTokenId(id);
    if (parsed && parsed.expiresAt >= now) ids.set(id, parsed.asn);
  }
  const revokeAsn = (asn: number) => asns.set(asn, Math.max(now, asns.get(asn) ?? 0));
  if ('asn' in revocation) {
    if (!isAsn(revocation.asn)) throw invalid('/asn', 'field.notAsn');
    revokeAsn(revocation.asn);
  } else {
    const parsed = parseTokenId(revocation.token);
    if (!parsed) throw invalid('/id', 'field.notTokenId');
    if (parsed.expiresAt > now + MAX_TOKEN_TTL_SECONDS) throw invalid('/id', 'field.expiryTooLate');
    // a token already expired needs no entry
    if (parsed.expiresAt >= now) ids.set(revocation.token, parsed.asn);
    const ofAsn = [...ids].filter(([, asn]) => asn === parsed.asn);
    if (ofAsn.length > MAX_REVOKED_IDS_PER_ASN) {
      for (const [id] of ofAsn) ids.delete(id);
      revokeAsn(parsed.asn);
    }
  }
  return listOf(ids.keys(), asns);
}

/**
 * A stored list as read back (a file or object anyone with access may have edited): the entries that are
 * well formed, and how many were not.
 */
export function readRevocationList(value: unknown): { list: RevocationList; skipped: number } {
  const doc = (value !== null && typeof value === 'object' ? value : {}) as {
    tokens?: unknown;
    asns?: unknown;
  };
  let skipped = 0;
  const ids: string[] = [];
  for (const id of Array.isArray(doc.tokens) ? doc.tokens : []) {
    if (typeof id === 'string' && parseTokenId(id)) ids.push(id);
    else skipped++;
  }
  const asns = new Map<number, number>();
  const stored = doc.asns !== null && typeof doc.asns === 'object' ? doc.asns : {};
  for (const [asn, upTo] of Object.entries(stored)) {
    if (isAsn(Number(asn)) && Number.isSafeInteger(upTo) && (upTo as number) > 0)
      asns.set(Number(asn), upTo as number);
    else skipped++;
  }
  return { list: listOf(ids, asns), skipped };
}
