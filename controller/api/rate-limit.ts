/**
 * Rate limits (docs/api.md, Rate limits): 60/min per user (or client address before login: an IPv6 client
 * by its /64), 300/min per router on /agent/*; routes that must answer whatever the load (/health,
 * /livez, /metrics) do not list `app.rateLimit` among their hooks. Every limited answer carries X-RateLimit-Limit, -Remaining and
 * -Reset (Unix epoch seconds); a 429 also Retry-After.
 *
 * Counting is rate-limiter-flexible's: fixed windows of one minute per key, in memory, or in Redis
 * (PEEROPS_REDIS_URL) so that replicas share them. While Redis is unreachable each replica counts in
 * memory (the library's insurance limiter): the limits hold per replica instead of not at all. This
 * module is the fastify side: one callback onRequest hook that picks the limit and writes the headers
 * (why not @fastify/rate-limit: docs/decisions.md).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import type { IncomingMessage } from 'node:http';
import type { Redis } from 'ioredis';
import ipaddr from 'ipaddr.js';
import {
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
  type RateLimiterAbstract,
} from 'rate-limiter-flexible';
import type { Config } from '../config.ts';
import { problem } from '../../common/messages.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** onRequest, after `identify`/`identifyAgent`: counts the request against the caller's limit. */
    rateLimit: onRequestHookHandler;
  }
}

const RATE_LIMIT_WINDOW_SECONDS = 60;

/**
 * The limit headers each counted request was given, kept on its raw request: a request cut by Node (its
 * body did not arrive in time) is answered on the socket, not through fastify's reply, and still carries
 * them (problem.ts, clientErrorHandler; docs/api.md, Errors). A property rather than a WeakMap entry,
 * which cost more than the rest of the count.
 */
const countedHeaders = Symbol('peerops.rateLimitHeaders');

type Counted = IncomingMessage & { [countedHeaders]?: Record<string, number> };

export function rateLimitHeadersOf(request: IncomingMessage): Record<string, number> | undefined {
  return (request as Counted)[countedHeaders];
}

/**
 * The users' rate-limit keys, made once per ASN: one string fewer to build on every user request. Only
 * ASNs of valid tokens get here, so the map grows no further than the users of this controller.
 */
const userKeys = new Map<number, string>();

/** Rate-limit key: the user, the router (agent routes), or before authentication the client address. */
export function rateLimitKey(request: FastifyRequest): string {
  if (request.agentRouter !== undefined) return `agent:${request.agentRouter}`;
  if (request.identity) {
    const { asn } = request.identity;
    let key = userKeys.get(asn);
    if (key === undefined) userKeys.set(asn, (key = `asn:${asn}`));
    return key;
  }
  return addressKey(request.ip);
}

/**
 * The key of a client address (`request.ip`: the proxy's client with trustProxy, docs/operator-guide.md).
 * IPv4 as it is. IPv6 by its /64: a network hands one subscriber at least a /64, whose hosts take any of
 * its 2^64 addresses at will, so one client per address would be no limit at all. An IPv4-mapped IPv6
 * address (an IPv4 client of a dual-stack socket) is that IPv4 address.
 */
export function addressKey(address: string): string {
  if (!address.includes(':')) return `ip:${address}`;
  let parsed: ipaddr.IPv6;
  try {
    parsed = ipaddr.IPv6.parse(address);
  } catch {
    return `ip:${address}`;
  }
  if (parsed.isIPv4MappedAddress()) return `ip:${parsed.toIPv4Address().toString()}`;
  return `ip:${parsed.parts
    .slice(0, 4)
    .map((part) => part.toString(16))
    .join(':')}::/64`;
}

/** A limiter of `points` requests a window, in Redis when one is given, else in this process. */
function limiter(points: number, redis: Redis | undefined): RateLimiterAbstract {
  const memory = new RateLimiterMemory({ points, duration: RATE_LIMIT_WINDOW_SECONDS });
  if (!redis) return memory;
  return new RateLimiterRedis({
    points,
    duration: RATE_LIMIT_WINDOW_SECONDS,
    storeClient: redis,
    keyPrefix: 'peerops-rl',
    // Not ready (down, reconnecting): count in memory at once rather than queue behind the reconnect.
    rejectIfRedisNotReady: true,
    insuranceLimiter: memory,
  });
}

/**
 * Decorates the instance with `rateLimit`, the onRequest hook each limited route lists after the one
 * that names the caller. Returns the same count for the 404 answer, which no route's hooks reach.
 */
export function installRateLimit(
  app: FastifyInstance,
  config: Pick<Config, 'rateLimit'>,
  redis?: Redis,
): (request: FastifyRequest, reply: FastifyReply) => Promise<void> {
  const users = limiter(config.rateLimit.perMinute, redis);
  const agents = limiter(config.rateLimit.agentPerMinute, redis);

  const headers = (request: FastifyRequest, reply: FastifyReply, max: number, res: RateLimiterRes) => {
    const reset = Math.ceil((Date.now() + res.msBeforeNext) / 1000);
    reply.header('x-ratelimit-limit', max);
    reply.header('x-ratelimit-remaining', res.remainingPoints);
    reply.header('x-ratelimit-reset', reset);
    (request.raw as Counted)[countedHeaders] = {
      'x-ratelimit-limit': max,
      'x-ratelimit-remaining': res.remainingPoints,
      'x-ratelimit-reset': reset,
    };
  };

  const limit: onRequestHookHandler = (request, reply, done) => {
    const key = rateLimitKey(request);
    const counter = request.agentRouter !== undefined ? agents : users;
    counter.consume(key).then(
      (res) => {
        headers(request, reply, counter.points, res);
        done();
      },
      (refusal: unknown) => {
        if (!(refusal instanceof RateLimiterRes)) {
          // Only if the in-memory stand-in failed too: the request goes through uncounted.
          request.log.warn({ reqId: request.id, err: String(refusal) }, 'rate limit not counted');
          return done();
        }
        headers(request, reply, counter.points, refusal);
        const after = Math.max(1, Math.ceil(refusal.msBeforeNext / 1000));
        reply.header('retry-after', after);
        done(problem('request.rateLimitedFor', { points: counter.points, seconds: after }));
      },
    );
  };

  app.decorate('rateLimit', limit);
  // For requests no route's hooks see (unknown URLs): the same count, as a promise.
  return (request, reply) =>
    new Promise<void>((resolve, reject) =>
      limit.call(app, request, reply, (err?: Error) => (err ? reject(err) : resolve())),
    );
}
