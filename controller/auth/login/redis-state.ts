/**
 * Login state in Redis (PEEROPS_REDIS_URL), shared by every controller replica: the challenges logins
 * have used, so that a challenge logs in once across all replicas, and failed attempts, so that the
 * failure limit holds for the whole service, not per replica. Challenges themselves are not stored
 * (challenges.ts: a MAC under a key every replica derives from the shared JWT key); a used one is one
 * key, set with NX (one atomic step: of two replicas racing on it only one sets it) and expiring with
 * the challenge. Failures are a sorted set per key (the client address), scored by time and trimmed to
 * the window.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { FAILURE_LIMIT, type Challenge, type FailureLimiter, type UsedChallenges } from './challenges.ts';
import { problem } from '../../../common/messages.ts';

const USED = 'peerops-login-used:';

/** Redis down: the login answers 503 and says why, instead of an internal error. */
function unavailable(err: unknown): never {
  throw problem('login.redisUnreachable', { reason: (err as Error).message });
}

export class RedisUsedChallenges implements UsedChallenges {
  private readonly redis: Redis;
  private readonly now: () => number;

  constructor(redis: Redis, now: () => number = Date.now) {
    this.redis = redis;
    this.now = now;
  }

  async spend(c: Challenge): Promise<boolean> {
    const ttl = Math.max(1, c.expiresAt - this.now());
    const set = await this.redis.set(USED + c.nonce, '1', 'PX', ttl, 'NX').catch(unavailable);
    return set === 'OK';
  }
}

const FAILURES = 'peerops-login-failures:';

export class RedisFailureLimiter implements FailureLimiter {
  private readonly redis: Redis;
  private readonly max: number;
  private readonly windowMs: number;
  private readonly now: () => number;

  constructor(redis: Redis, opts: { max?: number; windowMs?: number; now?: () => number } = {}) {
    this.redis = redis;
    this.max = opts.max ?? FAILURE_LIMIT.max;
    this.windowMs = opts.windowMs ?? FAILURE_LIMIT.windowMs;
    this.now = opts.now ?? Date.now;
  }

  async retryAfter(key: string): Promise<number> {
    const now = this.now();
    // The failure that must leave the window before another attempt: the max-th newest inside it
    // (older ones are outside the score range; fail() removes them).
    const [, at] = await this.redis
      .zrevrangebyscore(
        FAILURES + key,
        '+inf',
        `(${now - this.windowMs}`,
        'WITHSCORES',
        'LIMIT',
        this.max - 1,
        1,
      )
      .catch(unavailable);
    if (at === undefined) return 0;
    return Math.max(1, Math.ceil((Number(at) + this.windowMs - now) / 1000));
  }

  async fail(key: string): Promise<void> {
    const now = this.now();
    const member = `${now}-${randomBytes(4).toString('hex')}`;
    await this.redis
      .multi()
      .zadd(FAILURES + key, now, member)
      .zremrangebyscore(FAILURES + key, '-inf', now - this.windowMs)
      .pexpire(FAILURES + key, this.windowMs)
      .exec()
      .catch(unavailable);
  }
}
