/**
 * TokenIssuer.verify remembers the tokens it verified (controller/auth/jwt.ts): a remembered token must
 * still expire at its `exp`, and a forged one must never be taken for it.
 */
import { generateKeyPairSync } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { TokenIssuer } from '../../controller/auth/jwt.ts';

const pem = () =>
  generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();

afterEach(() => {
  vi.useRealTimers();
});

describe('TokenIssuer.verify', () => {
  it('a token verified before stops being valid at its exp', () => {
    vi.useFakeTimers({ now: new Date('2026-11-26T00:00:00Z'), toFake: ['Date'] });
    const issuer = new TokenIssuer(pem());
    const { token } = issuer.issueToken(4242420001, 'user', 60);
    expect(issuer.verify(token)).toEqual({ asn: 4242420001, role: 'user' });
    vi.setSystemTime(new Date('2026-11-26T00:00:59Z'));
    expect(issuer.verify(token)).toEqual({ asn: 4242420001, role: 'user' });
    vi.setSystemTime(new Date('2026-11-26T00:01:00.001Z'));
    expect(() => issuer.verify(token)).toThrow(/expired/);
    // and stays refused, not remembered as valid
    expect(() => issuer.verify(token)).toThrow(/expired/);
  });

  it('a remembered token does not make a changed one valid', () => {
    const issuer = new TokenIssuer(pem());
    const { token } = issuer.issueToken(4242420001, 'admin');
    expect(issuer.verify(token).role).toBe('admin');
    const foreign = new TokenIssuer(pem()).issueToken(4242420001, 'admin').token;
    expect(() => issuer.verify(foreign)).toThrow(/not valid/);
    expect(() => issuer.verify(`${token}x`)).toThrow(/not valid/);
  });
});
