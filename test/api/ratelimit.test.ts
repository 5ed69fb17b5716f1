/** docs/api.md, Rate limits: 60/min per user (or address), 300/min per router on /agent/*, none on /health and /metrics. */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ADMIN_ASN, USER_ASN, problem, startHarness, type Harness } from './helpers.ts';

let h: Harness;
let fraToken: string;

beforeAll(async () => {
  h = await startHarness({ rateLimit: { perMinute: 60, agentPerMinute: 300 } });
  // Adding a router costs the admin one request of its 60.
  fraToken = await h.addRouter('fra1');
  // written to the store directly, not through the API: the admin's requests stay counted as above
  await h.store.putPolicy('default', { dn42Asn: ADMIN_ASN }, { name: 'operator', role: 'controller' });
});
afterAll(async () => h?.close());

describe('rate limits', () => {
  it('the 61st request of a user within a minute is 429 RATE_LIMITED with headers', async () => {
    const before = Math.floor(Date.now() / 1000);
    for (let i = 1; i <= 60; i++) {
      const res = await h.post('/session', h.user, { action: 'list' });
      expect(res.statusCode, `request ${i}`).toBe(200);
      expect(res.headers['x-ratelimit-limit']).toBe('60');
      expect(res.headers['x-ratelimit-remaining']).toBe(String(60 - i));
      const reset = Number(res.headers['x-ratelimit-reset']);
      expect(reset).toBeGreaterThanOrEqual(before);
      // The window ends before `before + 61`; the header rounds up twice (the limiter's remaining seconds,
      // then the current second), so it may name a second up to one later, never an earlier one.
      expect(reset).toBeLessThanOrEqual(before + 62);
    }
    const res = await h.post('/session', h.user, { action: 'list' });
    expect(problem(res)).toMatchObject({ status: 429, code: 'RATE_LIMITED' });
    expect(res.headers['x-ratelimit-limit']).toBe('60');
    expect(res.headers['x-ratelimit-remaining']).toBe('0');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(60);
    expect(Number(res.headers['x-ratelimit-reset'])).toBeGreaterThan(1_700_000_000);
  });
  it('the limit is per user: another ASN still gets through', async () => {
    const res = await h.post('/session', h.tokens.issueToken(USER_ASN + 1, 'user').token, { action: 'list' });
    expect(res.statusCode).toBe(200);
  });
  it('before login the client address is limited', async () => {
    let last = 0;
    for (let i = 0; i < 61; i++) last = (await h.get('/routers')).statusCode;
    expect(last).toBe(429);
  });
  it('unknown URLs count against the address too: headers on the 404s, the 61st is 429', async () => {
    // an address of its own (inject, no network): 127.0.0.1's minute is spent by the test above
    const get = (i: number) =>
      h.app.inject({ method: 'GET', url: `/no/such/${i}`, remoteAddress: '127.0.0.2' });
    for (let i = 1; i <= 60; i++) {
      const res = await get(i);
      expect(problem(res), `request ${i}`).toMatchObject({ status: 404, code: 'NOT_FOUND' });
      expect(res.headers['x-ratelimit-remaining']).toBe(String(60 - i));
    }
    const res = await get(61);
    expect(problem(res)).toMatchObject({ status: 429, code: 'RATE_LIMITED' });
    expect(res.headers['x-ratelimit-limit']).toBe('60');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    const metrics = (await h.get('/metrics')).body;
    expect(metrics).toMatch(/^http_requests_total\{[^}]*route="unmatched"[^}]*status="429"[^}]*\} 1$/m);
  });
  it('/health and /metrics are not limited', async () => {
    for (let i = 0; i < 70; i++) {
      expect((await h.get('/health')).statusCode).toBe(200);
    }
    const m = await h.get('/metrics');
    expect(m.statusCode).toBe(200);
    expect(m.headers['x-ratelimit-limit']).toBeUndefined();
  });
  it('/agent/* allows 300 a minute per router, counted across its routes and both prefixes', async () => {
    const paths = ['/agent/fra1/sessions', '/api/v1/agent/fra1/sessions', '/agent/fra1/config'];
    for (let i = 1; i <= 300; i++) {
      const res = await h.get(paths[i % 3] as string, fraToken);
      if (res.statusCode !== 200) throw new Error(`request ${i}: ${res.statusCode}`);
      if (i === 1) expect(res.headers['x-ratelimit-limit']).toBe('300');
    }
    const res = await h.post('/agent/fra1/heartbeat', fraToken, { version: '1.0.0', uptime: 1 });
    expect(problem(res)).toMatchObject({ status: 429, code: 'RATE_LIMITED' });
    expect(res.headers['x-ratelimit-limit']).toBe('300');
    expect(res.headers['x-ratelimit-remaining']).toBe('0');
    const retryAfter = Number(res.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(Number(res.headers['x-ratelimit-reset'])).toBeGreaterThanOrEqual(
      Math.floor(Date.now() / 1000) + retryAfter - 1,
    );
    expect(h.store.getRouter('fra1')?.status.lastHeartbeat).toBeUndefined();
  });
  it('the user limit is shared across /session and the admin API', async () => {
    const token = h.tokens.issueToken(USER_ASN + 2, 'admin').token;
    for (let i = 0; i < 30; i++)
      expect((await h.post('/session', token, { action: 'list' })).statusCode).toBe(200);
    for (let i = 0; i < 30; i++)
      expect((await h.post('/admin/router', token, { action: 'list' })).statusCode).toBe(200);
    expect((await h.post('/api/v1/admin/policy', token, { action: 'get' })).statusCode).toBe(429);
  });
});

describe('the window', () => {
  it('a new minute begins when the last one is over: full count again, reset a minute on', async () => {
    const token = h.tokens.issueToken(USER_ASN + 3, 'user').token;
    for (let i = 1; i <= 60; i++)
      expect((await h.post('/session', token, { action: 'list' })).statusCode, `request ${i}`).toBe(200);
    expect((await h.post('/session', token, { action: 'list' })).statusCode).toBe(429);
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 61_000 });
    try {
      const now = Math.floor(Date.now() / 1000);
      const res = await h.post('/session', token, { action: 'list' });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.headers['x-ratelimit-remaining']).toBe('59');
      expect(Number(res.headers['x-ratelimit-reset'])).toBeGreaterThanOrEqual(now + 60);
      expect(Number(res.headers['x-ratelimit-reset'])).toBeLessThanOrEqual(now + 61);
    } finally {
      vi.useRealTimers();
    }
  });
});
