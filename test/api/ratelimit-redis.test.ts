/**
 * Two controller replicas sharing a real Redis (PEEROPS_REDIS_URL): one rate-limit counter per caller (per
 * replica while Redis is down), login challenges that one replica hands out and the other verifies, once,
 * and one count of failed logins.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createServer } from 'node:net';
import { freePort } from '../support/ports.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../controller/app.ts';
import { openRegistry, type Registry } from '../../controller/auth/login/registry.ts';
import { ADMIN_ASN, problem, startHarness, type Harness } from './helpers.ts';

const exec = promisify(execFile);

let h: Harness;
let redis: ChildProcess;
const replicas: FastifyInstance[] = [];
let registry: Registry;
let keyDir: string;

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
  keyDir = await mkdtemp(join(tmpdir(), 'peerops-redislogin-'));
  await exec('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'test', '-f', join(keyDir, 'key')]);
  const pub = (await readFile(join(keyDir, 'key.pub'), 'utf8')).trim();
  await writeFile(join(keyDir, 'users'), `AS${ADMIN_ASN}: ${pub}\n`);
  registry = await openRegistry({ source: join(keyDir, 'users') });
  const login = { registry, serviceHost: 'peerops.test', admins: [ADMIN_ASN] };
  for (let i = 0; i < 2; i++)
    replicas.push(await buildApp({ store: h.store, tokens: h.tokens, config, logger: false, login }));
});

afterAll(async () => {
  for (const app of replicas) await app.close();
  await registry?.close();
  await h?.close();
  redis?.kill('SIGTERM');
  if (keyDir) await rm(keyDir, { recursive: true, force: true });
});

/** The test user's session list, on one replica. */
const list = (app: FastifyInstance) =>
  app.inject({
    method: 'POST',
    url: '/session',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${h.user}` },
    payload: '{"action":"list"}',
  });

describe('rate limits with Redis', () => {
  it('two replicas share one user counter: the 61st request across both is 429', async () => {
    for (let i = 1; i <= 60; i++) {
      const res = await list(replicas[i % 2] as FastifyInstance);
      expect(res.statusCode, `request ${i}`).toBe(200);
      expect(res.headers['x-ratelimit-remaining']).toBe(String(60 - i));
    }
    const res = await list(replicas[0] as FastifyInstance);
    expect(problem(res)).toMatchObject({ status: 429, code: 'RATE_LIMITED' });
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
  });
  it("a router's 300 a minute are shared too: its 301st agent request across both is 429", async () => {
    const token = await h.addRouter('rl1');
    const sessions = (app: FastifyInstance) =>
      app.inject({
        method: 'GET',
        url: '/agent/rl1/sessions',
        headers: { authorization: `Bearer ${token}` },
      });
    for (let i = 1; i <= 300; i++) {
      const res = await sessions(replicas[i % 2] as FastifyInstance);
      if (res.statusCode !== 200 || res.headers['x-ratelimit-remaining'] !== String(300 - i))
        throw new Error(
          `request ${i}: ${res.statusCode} remaining ${String(res.headers['x-ratelimit-remaining'])}`,
        );
    }
    const res = await sessions(replicas[1] as FastifyInstance);
    expect(problem(res)).toMatchObject({ status: 429, code: 'RATE_LIMITED' });
    expect(res.headers['x-ratelimit-limit']).toBe('300');
    expect(res.headers['x-ratelimit-remaining']).toBe('0');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    expect(Number(res.headers['x-ratelimit-reset'])).toBeGreaterThan(Math.floor(Date.now() / 1000));
  });
});

describe('login challenges with Redis', () => {
  it('a challenge from one replica verifies at the other, and only once', async () => {
    const post = (app: FastifyInstance, body: unknown) =>
      app.inject({
        method: 'POST',
        url: '/login',
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify(body),
      });
    const [a, b] = replicas as [FastifyInstance, FastifyInstance];
    const c = await post(a, { action: 'challenge', asn: ADMIN_ASN });
    expect(c.statusCode, c.body).toBe(200);
    const challenge = c.json().challenge as string;
    await writeFile(join(keyDir, 'challenge'), challenge);
    await exec('ssh-keygen', [
      '-Y',
      'sign',
      '-n',
      'peerops',
      '-f',
      join(keyDir, 'key'),
      join(keyDir, 'challenge'),
    ]);
    const signature = await readFile(join(keyDir, 'challenge.sig'), 'utf8');
    const verify = { action: 'verify', asn: ADMIN_ASN, challenge, signature };
    const v = await post(b, verify);
    expect(v.statusCode, v.body).toBe(200);
    expect(h.tokens.verify(v.json().token)).toMatchObject({ asn: ADMIN_ASN, role: 'admin' });
    // used up everywhere: neither replica takes it again
    for (const app of [a, b]) expect(problem(await post(app, verify))).toMatchObject({ code: 'AUTH_FAILED' });
  });

  it('a flood of challenge requests for the ASN at one replica, from 200 addresses, does not stop its login at the other', async () => {
    const post = (app: FastifyInstance, body: unknown, remoteAddress = '198.51.100.20') =>
      app.inject({
        method: 'POST',
        url: '/login',
        remoteAddress,
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify(body),
      });
    const [a, b] = replicas as [FastifyInstance, FastifyInstance];
    const c = await post(a, { action: 'challenge', asn: ADMIN_ASN });
    expect(c.statusCode, c.body).toBe(200);
    const challenge = c.json().challenge as string;
    for (let i = 0; i < 200; i++) {
      const from = `2001:db8:f00d:${i.toString(16)}::1`;
      const answers = await Promise.all(
        [a, b, a].map((app) => post(app, { action: 'challenge', asn: ADMIN_ASN }, from)),
      );
      for (const res of answers) expect(res.statusCode, res.body).toBe(200);
    }
    await writeFile(join(keyDir, 'flood-challenge'), challenge);
    await exec('ssh-keygen', [
      '-Y',
      'sign',
      '-n',
      'peerops',
      '-f',
      join(keyDir, 'key'),
      join(keyDir, 'flood-challenge'),
    ]);
    const signature = await readFile(join(keyDir, 'flood-challenge.sig'), 'utf8');
    const verify = { action: 'verify', asn: ADMIN_ASN, challenge, signature };
    const v = await post(b, verify);
    expect(v.statusCode, v.body).toBe(200);
    for (const app of [a, b])
      expect(problem(await post(app, verify))).toMatchObject({
        code: 'AUTH_FAILED',
        detail: expect.stringMatching(/unknown or already used/),
      });
  });

  it('failed logins count across replicas: the limit holds for the service, not per replica', async () => {
    const verify = (app: FastifyInstance) =>
      app.inject({
        method: 'POST',
        url: '/login',
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify({
          action: 'verify',
          asn: 4242421999,
          challenge: 'not a challenge',
          signature: 'x',
        }),
      });
    const [a, b] = replicas as [FastifyInstance, FastifyInstance];
    // Alternating replicas: shared counting refuses after 10 failures (fewer when the client address
    // already failed above); counting per replica would allow about 20.
    let refusedAt = 0;
    for (let attempt = 1; attempt <= 20 && !refusedAt; attempt++) {
      const res = await verify(attempt % 2 ? a : b);
      if (res.statusCode === 429) refusedAt = attempt;
      else expect(problem(res)).toMatchObject({ code: 'AUTH_FAILED' });
    }
    expect(refusedAt).toBeGreaterThan(0);
    expect(refusedAt).toBeLessThanOrEqual(11);
    for (const app of [a, b]) {
      const res = await verify(app);
      expect(problem(res)).toMatchObject({ status: 429, code: 'RATE_LIMITED' });
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(800); // the 15-minute window
    }
  });

  it('answers 503 STORE_UNAVAILABLE, not an internal error, while Redis is down', async () => {
    redis.kill('SIGKILL');
    await new Promise((resolve) => redis.once('exit', resolve));
    const res = await replicas[0]!.inject({
      method: 'POST',
      url: '/login',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ action: 'challenge', asn: ADMIN_ASN }),
    });
    expect(problem(res)).toMatchObject({ status: 503, code: 'STORE_UNAVAILABLE' });
    expect(res.json().detail).toMatch(/Redis is unreachable/);
  });

  it('counts in each replica memory while Redis is down (the limits hold per replica, the API stays up)', async () => {
    // The user of the first test is over its limit in Redis; each replica now counts it afresh.
    const [a, b] = replicas as [FastifyInstance, FastifyInstance];
    for (let i = 1; i <= 60; i++) {
      const res = await list(a);
      expect(res.statusCode, `request ${i}: ${res.body}`).toBe(200);
      expect(res.headers['x-ratelimit-remaining']).toBe(String(60 - i));
    }
    expect(problem(await list(a))).toMatchObject({ status: 429, code: 'RATE_LIMITED' });
    const other = await list(b);
    expect(other.statusCode).toBe(200);
    expect(other.headers['x-ratelimit-remaining']).toBe('59');
  });
});

describe('a controller whose Redis is down when it starts', () => {
  it('starts at once and counts in memory until Redis is back', async () => {
    const nobody = await freePort();
    const t0 = Date.now();
    const app = await buildApp({
      store: h.store,
      tokens: h.tokens,
      config: {
        ...h.config,
        redisUrl: `redis://127.0.0.1:${nobody}`,
        rateLimit: { perMinute: 60, agentPerMinute: 300 },
      },
      logger: false,
    });
    try {
      expect(Date.now() - t0).toBeLessThan(2000);
      const res = await list(app);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.headers['x-ratelimit-remaining']).toBe('59');
    } finally {
      await app.close();
    }
  });
});
