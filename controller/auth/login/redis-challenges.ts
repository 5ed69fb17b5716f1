/**
 * Login challenges in Redis (PEEROPS_REDIS_URL), so that a challenge one controller replica hands out
 * verifies at any other. Each challenge is one key that expires with it; `take` is GETDEL, one atomic step,
 * so a challenge is still used at most once across all replicas.
 */
import type { Redis } from 'ioredis';
import { ProblemError } from '../../../common/errors.ts';
import { type Challenge, type ChallengeStore } from './challenges.ts';

const PREFIX = 'peerops-login:';

/** Redis down: the login answers 503 and says why, instead of an internal error. */
function unavailable(err: unknown): never {
  throw new ProblemError(
    'STORE_UNAVAILABLE',
    `login challenges: Redis is unreachable (${(err as Error).message})`,
  );
}

export class RedisChallengeStore implements ChallengeStore {
  private readonly redis: Redis;
  private readonly now: () => number;

  constructor(redis: Redis, now: () => number = Date.now) {
    this.redis = redis;
    this.now = now;
  }

  async put(c: Challenge): Promise<boolean> {
    const ttl = Math.max(1, c.expiresAt - this.now());
    const answer = await this.redis
      .set(PREFIX + c.nonce, JSON.stringify(c), 'PX', ttl, 'NX')
      .catch(unavailable);
    return answer === 'OK';
  }

  async take(nonce: string): Promise<Challenge | undefined> {
    const text = await this.redis.getdel(PREFIX + nonce).catch(unavailable);
    return text === null ? undefined : (JSON.parse(text) as Challenge);
  }
}
