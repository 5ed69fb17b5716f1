/**
 * The one Redis client of PEEROPS_REDIS_URL: the rate limiter and the login state (challenges, failed
 * attempts) share it, so that several replicas share their counts.
 */
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';

const CONNECT_TIMEOUT_MS = 2000;

/** Connects and closes the client with the app; ioredis is loaded only when a Redis is configured. */
export async function connectRedis(app: FastifyInstance, url: string): Promise<Redis> {
  const ioredis = await import('ioredis');
  const redis = new ioredis.Redis(url, {
    connectTimeout: CONNECT_TIMEOUT_MS,
    maxRetriesPerRequest: 1,
    lazyConnect: false,
  });
  // ioredis reconnects by itself; without a listener it would print every failed attempt to the console
  redis.on('error', (err: Error) => app.log.warn({ err: err.message }, 'Redis unreachable; retrying'));
  app.addHook('onClose', async () => {
    await redis.quit().catch(() => redis.disconnect());
  });
  // Serve once connected, so that the first requests are counted where every replica sees them; a Redis
  // that is down does not hold the start (the rate limiter counts in memory until it is back).
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, CONNECT_TIMEOUT_MS);
    const settle = () => {
      clearTimeout(timer);
      redis.off('ready', settle).off('error', settle);
      resolve();
    };
    redis.once('ready', settle).once('error', settle);
  });
  return redis;
}
