/**
 * Per-router agent tokens: 32 random bytes, base64url, shown once; only the sha256 (hex) is stored.
 */
import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

export function newAgentToken(): { token: string; sha256: string } {
  const token = randomBytes(32).toString('base64url');
  return { token, sha256: hashAgentToken(token) };
}

export function hashAgentToken(token: string): string {
  return hash('sha256', token, 'hex');
}

/** Does `token` hash to `expectedSha256`? Constant time in the token's content. */
export function agentTokenMatches(token: string, expectedSha256: string | undefined): boolean {
  if (expectedSha256?.length !== 64) return false;
  const expected = Buffer.from(expectedSha256, 'hex');
  // Buffer.from stops at the first character that is not hex: a shorter buffer is no stored hash
  return expected.length === 32 && timingSafeEqual(hash('sha256', token, 'buffer'), expected);
}
