/**
 * The index's claims (controller/store/core/index.ts): which sessions hold a peer address or a key on a
 * router, as the address and key rules ask. A claim held by one session and by several (a session kept
 * against rules made stricter since) answer alike, and a removal leaves the other holders.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { SessionSpec } from '../../common/schema.ts';
import { StoreIndex } from '../../controller/store/core/index.ts';
import { newSession, pending, wgKey } from './fixtures.ts';

function spec(asn: number, extra: Partial<SessionSpec> = {}): SessionSpec {
  return {
    ...newSession(asn, 'fra1'),
    uuid: randomUUID(),
    listenPort: 20000 + (asn % 1000),
    createdAt: '2026-11-26T00:00:00.000Z',
    ...extra,
  };
}

describe('the index: sessions by claim', () => {
  it('finds each holder once, whether a claim has one holder or several, and forgets removed ones', () => {
    const index = new StoreIndex();
    const a = spec(4242420001);
    index.putSession('as4242420001-fra1', a, pending);
    const names = (of: Parameters<StoreIndex['neighbours']>[0]) => index.neighbours(of).map((s) => s.name);

    // address and key both a's: a once
    expect(names(a)).toEqual(['as4242420001-fra1']);
    expect(names({ router: 'fra1', ipv6: 'fd42:9::1', publicKey: wgKey() })).toEqual([]);
    // the key on another router is no claim of a's
    expect(names({ router: 'ams1', ipv6: 'fd42:9::1', publicKey: a.publicKey })).toEqual([]);

    // b kept with a's address: the claim has two holders
    const b = spec(4242420002, { ipv6: a.ipv6 });
    index.putSession('as4242420002-fra1', b, pending);
    const probe = { router: 'fra1', ipv6: a.ipv6, publicKey: wgKey() };
    expect(names(probe).sort()).toEqual(['as4242420001-fra1', 'as4242420002-fra1']);

    // a put again (a status change) stays one holder
    index.putSession('as4242420001-fra1', a, { code: 4, name: 'QUEUED_FOR_SETUP' });
    expect(names(probe).sort()).toEqual(['as4242420001-fra1', 'as4242420002-fra1']);

    index.removeSession('as4242420001-fra1');
    expect(names(probe)).toEqual(['as4242420002-fra1']);
    expect(names({ router: 'fra1', ipv6: 'fd42:9::1', publicKey: a.publicKey })).toEqual([]);
    index.removeSession('as4242420002-fra1');
    expect(names(probe)).toEqual([]);

    // a session that moves its address leaves the old one free
    const c = spec(4242420003);
    index.putSession('as4242420003-fra1', c, pending);
    index.putSession('as4242420003-fra1', { ...c, ipv6: 'fd42:3:3::3' }, pending);
    expect(names({ router: 'fra1', ipv6: c.ipv6, publicKey: wgKey() })).toEqual([]);
    expect(names({ router: 'fra1', ipv6: 'fd42:3:3::3', publicKey: wgKey() })).toEqual(['as4242420003-fra1']);
  });
});
