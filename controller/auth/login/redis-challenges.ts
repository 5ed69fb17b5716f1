/**
 * Login challenges in Redis (PEEROPS_REDIS_URL), so that a challenge one controller replica hands out
 * verifies at any other. Each challenge is one key that expires with it; `take` is GETDEL, one atomic step,
 * so a challenge is still used at most once across all replicas.
 */
import type { Redis } from 'ioredis';
import { type Challenge, type ChallengeStore } from './challenges.ts';

const PREFIX = 'peerops-login:';

export class RedisChallengeStore implements ChallengeStore {
  private readonly redis: Redis;
  private readonly now: () => number;

  constructor(redis: Redis, now: () => number = Date.now) {
    this.redis = redis;
    this.now = now;
  }

  async put(c: Challenge): Promise<boolean> {
    const ttl = Math.max(1, c.expiresAt - this.now());
    return (await this.redis.set(PREFIX + c.nonce, JSON.stringify(c), 'PX', ttl, 'NX')) === 'OK';
  }

  async take(nonce: string): Promise<Challenge | undefined> {
    const text = await this.redis.getdel(PREFIX + nonce);
    return text === null ? undefined : (JSON.parse(text) as Challenge);
  }
}
