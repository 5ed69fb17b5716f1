/**
 * Rate limits of SPEC.md section 8: 60/min per user (or client address before login), 300/min per router
 * on /agent/* (set on those routes), none on /health and /metrics. Counters live in memory, or in Redis
 * (PEEROPS_REDIS_URL) so that several replicas share them. X-RateLimit-Reset is sent as Unix epoch seconds.
 */
import type { FastifyInstance } from 'fastify';
import rateLimit from '@fastify/rate-limit';
import type { Redis } from 'ioredis';
import { ProblemError } from '../../common/errors.ts';
import type { Config } from '../config.ts';
import { rateLimitKey } from './auth.ts';

export async function installRateLimit(
  app: FastifyInstance,
  config: Pick<Config, 'rateLimit'>,
  redis: Redis | undefined,
): Promise<void> {
  await app.register(rateLimit, {
    global: true,
    // One counter per key across every route (and both prefixes): agents get theirs per router.
    max: (_request, key) =>
      key.startsWith('agent:') ? config.rateLimit.agentPerMinute : config.rateLimit.perMinute,
    timeWindow: 60_000,
    keyGenerator: rateLimitKey,
    nameSpace: 'peerops-rl:',
    ...(redis ? { redis, skipOnError: true } : {}),
    errorResponseBuilder: (_request, context) =>
      new ProblemError(
        'RATE_LIMITED',
        `more than ${context.max} requests a minute; retry after ${context.after}`,
      ),
  });
  app.addHook('onSend', (_request, reply, payload, done) => {
    // The limiter gives whole seconds left (rounded up); rounding the current time up too keeps the
    // epoch second at or after the real reset, never before it (a client waiting for it is not early).
    const reset = reply.getHeader('x-ratelimit-reset');
    if (reset !== undefined) reply.header('x-ratelimit-reset', Math.ceil(Date.now() / 1000) + Number(reset));
    done(null, payload);
  });
}
