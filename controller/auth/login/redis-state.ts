/**
 * Login state in Redis (PEEROPS_REDIS_URL), shared by every controller replica: challenges, so that one
 * handed out by one replica verifies at any other, and failed attempts, so that the failure limit holds
 * for the whole service, not per replica. Each challenge is one key that expires with it; `take` is
 * GETDEL, one atomic step, so a challenge is still used at most once across all replicas. Failures are
 * a sorted set per key (the client address), scored by time and trimmed to the window.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { ProblemError } from '../../../common/errors.ts';
import { FAILURE_LIMIT, type Challenge, type ChallengeStore, type FailureLimiter } from './challenges.ts';

const PREFIX = 'peerops-login:';

/** Redis down: the login answers 503 and says why, instead of an internal error. */
function unavailable(err: unknown): never {
  throw new ProblemError('STORE_UNAVAILABLE', `login: Redis is unreachable (${(err as Error).message})`);
}

export class RedisChallengeStore implements ChallengeStore {
  private readonly redis: Redis;
  private readonly now: () => number;

  constructor(redis: Redis, now: () => number = Date.now) {
    this.redis = redis;
    this.now = now;
  }

  async put(c: Challenge): Promise<void> {
    const ttl = Math.max(1, c.expiresAt - this.now());
    await this.redis.set(PREFIX + c.nonce, JSON.stringify(c), 'PX', ttl).catch(unavailable);
  }

  async take(nonce: string): Promise<Challenge | undefined> {
    const text = await this.redis.getdel(PREFIX + nonce).catch(unavailable);
    return text === null ? undefined : (JSON.parse(text) as Challenge);
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
