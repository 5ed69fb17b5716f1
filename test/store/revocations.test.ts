/**
 * The revocation list's rules (controller/store/core/revocations.ts): bounded by time and per ASN, and
 * read back leniently from what anyone with access to the store may have edited.
 */
import { describe, expect, it } from 'vitest';
import { isProblem } from '../../common/errors.ts';
import { MAX_TOKEN_TTL_SECONDS, newTokenId } from '../../controller/auth/token-id.ts';
import {
  MAX_REVOKED_IDS_PER_ASN,
  Revocations,
  readRevocationList,
  withRevocation,
  type RevocationList,
} from '../../controller/store/core/revocations.ts';

const NOW = 1_800_000_000;
const EMPTY: RevocationList = { tokens: [], asns: {} };

describe('withRevocation', () => {
  it('forgets an id once its token has expired, and an ASN once the longest lifetime has passed', () => {
    const soon = newTokenId(4242421234, NOW + 10);
    const later = newTokenId(4242421234, NOW + 3600);
    let list = withRevocation(EMPTY, { token: soon }, NOW);
    list = withRevocation(list, { token: later }, NOW);
    list = withRevocation(list, { asn: 4242425678 }, NOW);
    expect(list).toEqual({ tokens: [soon, later].sort(), asns: { '4242425678': NOW } });

    const next = withRevocation(list, { asn: 4242420001 }, NOW + 11);
    expect(next.tokens).toEqual([later]);
    const yearOn = withRevocation(next, { asn: 4242420001 }, NOW + MAX_TOKEN_TTL_SECONDS + 1);
    expect(yearOn).toEqual({ tokens: [], asns: { '4242420001': NOW + MAX_TOKEN_TTL_SECONDS + 1 } });
    // an id whose token has expired already needs no entry
    expect(withRevocation(EMPTY, { token: newTokenId(4242421234, NOW - 1) }, NOW)).toEqual(EMPTY);
  });

  it("keeps at most MAX_REVOKED_IDS_PER_ASN ids of one ASN: one more revokes the ASN's tokens so far", () => {
    let list = EMPTY;
    for (let i = 0; i < MAX_REVOKED_IDS_PER_ASN; i++)
      list = withRevocation(list, { token: newTokenId(4242421234, NOW + 60) }, NOW);
    const other = newTokenId(4242425678, NOW + 60);
    list = withRevocation(list, { token: other }, NOW);
    expect(list.tokens).toHaveLength(MAX_REVOKED_IDS_PER_ASN + 1);
    list = withRevocation(list, { token: newTokenId(4242421234, NOW + 60) }, NOW);
    expect(list).toEqual({ tokens: [other], asns: { '4242421234': NOW } });
  });

  it('refuses what is no token id or ASN, naming the field', () => {
    const refused = (r: Parameters<typeof withRevocation>[1]) => {
      try {
        withRevocation(EMPTY, r, NOW);
      } catch (err) {
        return isProblem(err, 'INVALID_REQUEST') ? err.errors?.[0]?.pointer : String(err);
      }
      return 'accepted';
    };
    expect(refused({ token: 'abc' })).toBe('/id');
    expect(refused({ token: newTokenId(4242421234, NOW + MAX_TOKEN_TTL_SECONDS + 1) })).toBe('/id');
    expect(refused({ asn: 0 })).toBe('/asn');
  });
});

describe('Revocations', () => {
  it('revokes a listed id, and tokens of a listed ASN issued up to its second', () => {
    const id = newTokenId(4242421234, NOW + 60);
    const r = new Revocations();
    r.replace({ tokens: [id], asns: { '4242425678': NOW } });
    expect(r.revoked(id, 4242421234, NOW - 5)).toBe(true);
    expect(r.revoked(newTokenId(4242421234, NOW + 60), 4242421234, NOW - 5)).toBe(false);
    expect(r.revoked(newTokenId(4242425678, NOW + 60), 4242425678, NOW)).toBe(true);
    expect(r.revoked(newTokenId(4242425678, NOW + 60), 4242425678, NOW + 1)).toBe(false);
  });
});

describe('readRevocationList', () => {
  it('keeps the well-formed entries and counts the others', () => {
    const id = newTokenId(4242421234, NOW + 60);
    const { list, skipped } = readRevocationList({
      tokens: [id, 'junk', 7],
      asns: { '4242425678': NOW, AS1: NOW, '4242420001': 'soon' },
    });
    expect(list).toEqual({ tokens: [id], asns: { '4242425678': NOW } });
    expect(skipped).toBe(4);
    expect(readRevocationList(undefined)).toEqual({ list: EMPTY, skipped: 0 });
  });
});
