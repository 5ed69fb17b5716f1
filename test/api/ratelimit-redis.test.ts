/** Two controller replicas sharing rate-limit counters through a real Redis (PEEROPS_REDIS_URL). */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../controller/app.ts';
import { problem, startHarness, type Harness } from './helpers.ts';

let h: Harness;
let redis: ChildProcess;
const replicas: FastifyInstance[] = [];

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

beforeAll(async () => {
  const port = await freePort();
  redis = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    {
      stdio: 'ignore',
    },
  );
  const deadline = Date.now() + 10_000;
  for (;;) {
    const up = await new Promise<boolean>((resolve) => {
      const s = createServer();
      s.once('error', () => resolve(true));
      s.listen(port, '127.0.0.1', () => s.close(() => resolve(false)));
    });
    if (up) break;
    if (Date.now() > deadline) throw new Error('redis-server did not start');
    await new Promise((r) => setTimeout(r, 50));
  }
  h = await startHarness();
  const config = {
    ...h.config,
    redisUrl: `redis://127.0.0.1:${port}`,
    rateLimit: { perMinute: 60, agentPerMinute: 300 },
  };
  for (let i = 0; i < 2; i++)
    replicas.push(await buildApp({ store: h.store, tokens: h.tokens, config, logger: false }));
});

afterAll(async () => {
  for (const app of replicas) await app.close();
  await h?.close();
  redis?.kill('SIGTERM');
});

describe('rate limits with Redis', () => {
  it('two replicas share one user counter: the 61st request across both is 429', async () => {
    const list = (app: FastifyInstance) =>
      app.inject({
        method: 'POST',
        url: '/session',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${h.user}` },
        payload: '{"action":"list"}',
      });
    for (let i = 1; i <= 60; i++) {
      const res = await list(replicas[i % 2] as FastifyInstance);
      expect(res.statusCode, `request ${i}`).toBe(200);
      expect(res.headers['x-ratelimit-remaining']).toBe(String(60 - i));
    }
    const res = await list(replicas[0] as FastifyInstance);
    expect(problem(res)).toMatchObject({ status: 429, code: 'RATE_LIMITED' });
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
  });
});
