/**
 * Per-router agent tokens: 32 random bytes, base64url, shown once; only the sha256 (hex) is stored. The
 * running controller remembers a token that matched (AgentTokenVerifier), in memory, never on disk.
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

/**
 * Checks agent tokens against the routers' stored hashes. A token that matched is remembered, in this
 * process's memory only, with the hash it matched: the same router's next request compares its token
 * with it in constant time instead of hashing again (SHA-256 cost about 6 µs of every agent request in
 * `npm run bench:api`, a sixth of the controller's budget). A changed hash (rotation, removal) drops it.
 */
export class AgentTokenVerifier {
  /** Per router: the token that matched and a buffer of its size that presented tokens are copied into. */
  private readonly known = new Map<string, { sha256: string; token: Buffer; presented: Buffer }>();
  private readonly hashOf: (router: string) => string | undefined;

  constructor(hashOf: (router: string) => string | undefined) {
    this.hashOf = hashOf;
  }

  matches(router: string, token: string): boolean {
    const sha256 = this.hashOf(router);
    const known = this.known.get(router);
    if (known && known.sha256 === sha256) {
      // Only the remembered token hashes to the stored hash: any other token is refused unhashed. The
      // presented token is copied into the router's own buffer (no allocation per request); its bytes
      // equal the remembered ones only if it fills the buffer exactly with the same (ASCII) characters.
      const size = known.token.length;
      return (
        token.length === size &&
        known.presented.write(token) === size &&
        timingSafeEqual(known.presented, known.token)
      );
    }
    if (known) this.known.delete(router);
    if (!agentTokenMatches(token, sha256)) return false;
    const remembered = Buffer.from(token);
    this.known.set(router, {
      sha256: sha256 as string,
      token: remembered,
      presented: Buffer.alloc(remembered.length),
    });
    return true;
  }
}
