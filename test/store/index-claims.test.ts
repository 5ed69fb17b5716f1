/**
 * The sessions a session is judged against (controller/store/core/claims.ts, through the index): other
 * ASNs' sessions holding one of its peer addresses, the sessions on its router holding its key. A claim
 * held by one session or by several answers alike, and a removal leaves the other holders.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { SessionSpec } from '../../common/schema.ts';
import { StoreIndex } from '../../controller/store/core/store-index.ts';
import { newSession, pending, wgKey } from './fixtures.ts';

function spec(asn: number, router = 'fra1', extra: Partial<SessionSpec> = {}): SessionSpec {
  return {
    ...newSession(asn, router),
    uuid: randomUUID(),
    listenPort: 20000 + (asn % 1000),
    createdAt: '2026-11-26T00:00:00.000Z',
    ...extra,
  };
}

describe('the index: the sessions a session can clash with', () => {
  const index = new StoreIndex();
  const put = (s: SessionSpec) => index.putSession(`as${s.asn}-${s.router}`, s, pending);
  const names = (of: SessionSpec) =>
    index
      .neighbours(of)
      .map((s) => s.name)
      .sort();

  it("finds other ASNs' sessions by address and the router's sessions by key, each once", () => {
    const a = put(spec(4242420001)).spec;
    // its own key claim: the rules skip a session's own name
    expect(names(a)).toEqual(['as4242420001-fra1']);
    // another ASN with a's address; another session of a's ASN with it (one address on several routers)
    expect(names(spec(4242420009, 'ams1', { ipv6: a.ipv6 }))).toEqual(['as4242420001-fra1']);
    expect(names(spec(4242420001, 'ams1', { ipv6: a.ipv6 }))).toEqual([]);
    // a's key: on its router a clash, on another router none
    expect(names(spec(4242420009, 'fra1', { publicKey: a.publicKey }))).toEqual(['as4242420001-fra1']);
    expect(names(spec(4242420009, 'ams1', { publicKey: a.publicKey }))).toEqual([]);
    // address and key both a's: a once
    expect(names(spec(4242420009, 'fra1', { ipv6: a.ipv6, publicKey: a.publicKey }))).toEqual([
      'as4242420001-fra1',
    ]);
    index.removeSession('as4242420001-fra1');
  });

  it('holds one ASN on many routers per ASN, and two ASNs on one address (a session kept) apart', () => {
    const address = 'fd42:77::1';
    const routers = ['r1', 'r2', 'r3', 'r4', 'r5'];
    for (const router of routers) put(spec(4242420004, router, { ipv6: address }));
    expect(names(spec(4242420004, 'r6', { ipv6: address }))).toEqual([]);
    expect(names(spec(4242420005, 'r6', { ipv6: address }))).toEqual(routers.map((r) => `as4242420004-${r}`));
    // a session of another ASN kept with the same address
    put(spec(4242420006, 'r1', { ipv6: address, publicKey: wgKey() }));
    expect(names(spec(4242420004, 'r6', { ipv6: address }))).toEqual(['as4242420006-r1']);
    expect(names(spec(4242420005, 'r6', { ipv6: address }))).toHaveLength(6);
    // put again (a status change): still one holder
    put(index.byName('as4242420006-r1')!.spec);
    expect(names(spec(4242420004, 'r6', { ipv6: address }))).toEqual(['as4242420006-r1']);

    for (const router of routers.slice(1)) index.removeSession(`as4242420004-${router}`);
    expect(names(spec(4242420005, 'r6', { ipv6: address }))).toEqual(['as4242420004-r1', 'as4242420006-r1']);
    index.removeSession('as4242420006-r1');
    expect(names(spec(4242420004, 'r6', { ipv6: address }))).toEqual([]);
    expect(names(spec(4242420005, 'r6', { ipv6: address }))).toEqual(['as4242420004-r1']);
    index.removeSession('as4242420004-r1');
    expect(names(spec(4242420005, 'r6', { ipv6: address }))).toEqual([]);
  });

  it('forgets the address a session moved away from', () => {
    const c = put(spec(4242420003)).spec;
    put({ ...c, ipv6: 'fd42:3:3::3', ipv4: '172.23.3.3' });
    expect(names(spec(4242420009, 'ams1', { ipv6: c.ipv6 }))).toEqual([]);
    expect(names(spec(4242420009, 'ams1', { ipv6: 'fd42:3:3::3' }))).toEqual(['as4242420003-fra1']);
    expect(names(spec(4242420009, 'ams1', { ipv4: '172.23.3.3' }))).toEqual(['as4242420003-fra1']);
  });
});
