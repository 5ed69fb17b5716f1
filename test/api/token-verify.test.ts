/**
 * TokenIssuer.verify remembers the tokens it verified (controller/auth/jwt.ts): a remembered token must
 * still expire at its `exp`, and a forged one must never be taken for it.
 */
import { generateKeyPairSync } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createSigner } from 'fast-jwt';
import { AUDIENCE, ISSUER, TokenIssuer } from '../../controller/auth/jwt.ts';

const pem = () =>
  generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();

afterEach(() => {
  vi.useRealTimers();
});

describe('TokenIssuer.verify', () => {
  it('a token verified before stops being valid at its exp', () => {
    vi.useFakeTimers({ now: new Date('2026-11-26T00:00:00Z'), toFake: ['Date'] });
    const issuer = new TokenIssuer(pem());
    const { token, id } = issuer.issueToken(4242420001, 'user', 60);
    const claims = {
      asn: 4242420001,
      role: 'user',
      source: 'operator',
      id,
      issuedAt: Date.parse('2026-11-26T00:00:00Z') / 1000,
    };
    expect(issuer.verify(token)).toEqual(claims);
    vi.setSystemTime(new Date('2026-11-26T00:00:59Z'));
    expect(issuer.verify(token)).toEqual(claims);
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

  it('a token names its id, which names its ASN and expiry; one without an id (an older release) is refused', () => {
    const key = pem();
    const issuer = new TokenIssuer(key);
    const issued = issuer.issueToken(4242420001, 'admin', 3600, 'login');
    const exp = Date.parse(issued.expiresAt) / 1000;
    expect(issued.id).toMatch(new RegExp(`^4242420001\\.${exp}\\.[A-Za-z0-9_-]{16}$`));
    expect(issuer.verify(issued.token)).toMatchObject({ id: issued.id, source: 'login', role: 'admin' });

    const sign = createSigner({ key, algorithm: 'EdDSA' });
    const now = Math.floor(Date.now() / 1000);
    const base = {
      sub: 'AS4242420001',
      asn: 4242420001,
      role: 'user',
      iss: ISSUER,
      aud: AUDIENCE,
      iat: now,
      exp: now + 60,
    };
    expect(() => issuer.verify(sign(base))).toThrow(/no id .*log in again/);
    // an id that names another ASN or expiry than the token's own is not its id
    const elsewhere = { ...base, src: 'login', jti: `4242420002.${now + 60}.AAAAAAAAAAAAAAAA` };
    expect(() => issuer.verify(sign(elsewhere))).toThrow(/claims are not valid/);
    const later = { ...base, src: 'login', jti: `4242420001.${now + 61}.AAAAAAAAAAAAAAAA` };
    expect(() => issuer.verify(sign(later))).toThrow(/claims are not valid/);
    expect(() =>
      issuer.verify(sign({ ...base, src: 'someone', jti: `4242420001.${now + 60}.AAAAAAAAAAAAAAAA` })),
    ).toThrow(/claims are not valid/);
    expect(issuer.verify(sign({ ...later, jti: `4242420001.${now + 60}.AAAAAAAAAAAAAAAA` })).source).toBe(
      'login',
    );
  });
});
