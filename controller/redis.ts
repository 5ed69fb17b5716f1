/**
 * The one Redis client of PEEROPS_REDIS_URL: the rate limiter and the login state (challenges, failed
 * attempts) share it, so that several replicas share their counts.
 */
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';

/** Connects and closes the client with the app; ioredis is loaded only when a Redis is configured. */
export async function connectRedis(app: FastifyInstance, url: string): Promise<Redis> {
  const ioredis = await import('ioredis');
  const redis = new ioredis.Redis(url, { connectTimeout: 2000, maxRetriesPerRequest: 1, lazyConnect: false });
  // ioredis reconnects by itself; without a listener it would print every failed attempt to the console
  redis.on('error', (err: Error) => app.log.warn({ err: err.message }, 'Redis unreachable; retrying'));
  app.addHook('onClose', async () => {
    await redis.quit().catch(() => redis.disconnect());
  });
  return redis;
}
