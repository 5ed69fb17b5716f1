/**
 * Per-router agent tokens: 32 random bytes, base64url, shown once; only the sha256 (hex) is stored.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

export function newAgentToken(): { token: string; sha256: string } {
  const token = randomBytes(32).toString('base64url');
  return { token, sha256: hashAgentToken(token) };
}

export function hashAgentToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/** Does `token` hash to `expectedSha256`? Constant time in the token's content. */
export function agentTokenMatches(token: string, expectedSha256: string | undefined): boolean {
  if (!expectedSha256 || !/^[0-9a-f]{64}$/.test(expectedSha256)) return false;
  const actual = createHash('sha256').update(token, 'utf8').digest();
  return timingSafeEqual(actual, Buffer.from(expectedSha256, 'hex'));
}
