import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { KEY32_BASE64_PATTERN, isWireGuardKey } from '../../common/net.ts';

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
/** Characters around and outside the alphabet: base64url, padding, ASCII neighbours, non-ASCII. */
const STRANGERS = ['=', '-', '_', ' ', '.', '@', '[', '`', '{', '\u0000', '\n', 'é', 'Ａ', '\u0141', '😀'];

describe('isWireGuardKey', () => {
  it('answers as KEY32_BASE64_PATTERN does (the pattern of the schemas), and accepts exactly 32-byte keys', () => {
    const pattern = new RegExp(KEY32_BASE64_PATTERN);
    const key = randomBytes(32).toString('base64');
    const cases = [key, '', '=', key.slice(0, -1), `${key}=`, `${key} `, ` ${key}`, key.replace('=', 'A')];
    // every character at every position of a valid key
    for (let i = 0; i < key.length; i++)
      for (const c of [...ALPHABET, ...STRANGERS]) cases.push(key.slice(0, i) + c + key.slice(i + 1));
    // other lengths: one byte more and less, and 44 characters of a 31-byte key with two paddings
    cases.push(randomBytes(33).toString('base64'), randomBytes(31).toString('base64'));
    cases.push(`${randomBytes(31).toString('base64').slice(0, -1)}A=`);
    for (const value of cases) {
      expect(isWireGuardKey(value), JSON.stringify(value)).toBe(pattern.test(value));
      if (isWireGuardKey(value)) {
        const bytes = Buffer.from(value, 'base64');
        expect(bytes.length).toBe(32);
        expect(bytes.toString('base64')).toBe(value);
      }
    }
    expect(cases.filter(isWireGuardKey).length).toBeGreaterThan(2000);
    expect(cases.filter((v) => !isWireGuardKey(v)).length).toBeGreaterThan(500);
  });
});
