/** The control-plane client against the real controller: schemas, ETag/304, long poll, 429 handling. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlaneClient, ControlPlaneError, rateLimitWait } from '../../agent/sync/client.ts';
import { expectOk, startHarness, type Harness } from '../api/helpers.ts';

let h: Harness;
let url: string;
let token: string;
const opts = () => ({
  url,
  token,
  router: 'cl1',
  requestTimeout: 5,
  maxRetries: 2,
  retryInitialDelay: 50,
  retryMaxDelay: 60_000,
});

beforeAll(async () => {
  h = await startHarness();
  await h.app.listen({ host: '127.0.0.1', port: 0 });
  const a = h.app.server.address();
  url = `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`;
  token = await h.addRouter('cl1');
  await expectOk(h.post('/admin/policy', h.admin, { action: 'set', spec: { dn42Asn: 4242420001 } }));
});
afterAll(async () => {
  await h?.close();
});

describe('control-plane client', () => {
  it('fetches and validates sessions, bird-config, mesh and the bootstrap config', async () => {
    const c = new ControlPlaneClient(opts());
    const s = await c.sessions();
    expect(s.body?.sessions).toEqual([]);
    expect(s.etag).toBeTruthy();
    expect((await c.birdConfig()).dn42Asn).toBe(4242420001);
    expect((await c.mesh()).peers).toEqual([]);
    expect((await c.bootstrap()).node.name).toBe('cl1');
  });

  it('asks for bird-config and mesh with the last ETag and keeps the answer a 304 confirms', async () => {
    const c = new ControlPlaneClient(opts());
    const config = await c.birdConfig();
    const mesh = await c.mesh();
    // unchanged: the same answer, not a new one parsed from a body
    expect(await c.birdConfig()).toBe(config);
    expect(await c.mesh()).toBe(mesh);
    const policy = h.store.getPolicy('default')?.spec;
    await expectOk(
      h.post('/admin/policy', h.admin, { action: 'set', spec: { ...policy, dn42Asn: 4242420002 } }),
    );
    const changed = await c.birdConfig();
    expect(changed).not.toBe(config);
    expect(changed.dn42Asn).toBe(4242420002);
    expect(await c.mesh()).toBe(mesh);
    // another client (an agent restarted) gets the whole answer
    expect(await new ControlPlaneClient(opts()).birdConfig()).toEqual(changed);
    await expectOk(h.post('/admin/policy', h.admin, { action: 'set', spec: policy }));
  });

  it('answers 304 with the ETag, and a long poll returns when the revision changes', async () => {
    const c = new ControlPlaneClient(opts());
    const first = await c.sessions();
    const again = await c.sessions({ etag: first.etag! });
    expect(again.body).toBeUndefined();
    const t0 = Date.now();
    const poll = c.sessions({ etag: first.etag!, waitSeconds: 20 });
    setTimeout(() => {
      const routerUuid = h.store.getRouter('cl1')?.spec.uuid;
      void h
        .post('/session', h.user, {
          action: 'create',
          router: routerUuid,
          ipv6: 'fd42:1234::1',
          linkLocal: 'fe80::1234',
          endpoint: 'peer.example.org:51820',
          publicKey: Buffer.alloc(32, 7).toString('base64'),
          mtu: 1420,
        })
        .then(async (r) =>
          expectOk(h.post('/admin/session', h.admin, { action: 'approve', uuid: r.json().uuid })),
        );
    }, 500);
    const changed = await poll;
    expect(Date.now() - t0).toBeLessThan(15_000);
    expect(changed.body?.sessions).toHaveLength(1);
    expect(changed.etag).not.toBe(first.etag);
  });

  it('a wrong token is a non-transient 401; an unreachable controller a transient error after the retries', async () => {
    await expect(
      new ControlPlaneClient({ ...opts(), token: 'wrong-token-wrong-token' }).sessions(),
    ).rejects.toMatchObject({
      status: 401,
      transient: false,
    });
    const dead = new ControlPlaneClient({ ...opts(), url: 'http://127.0.0.1:1' });
    const t0 = Date.now();
    const err = await dead.sessions().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ControlPlaneError);
    expect((err as ControlPlaneError).transient).toBe(true);
    expect((err as Error).message).not.toContain(token);
    // two retries: ~50 ms + ~100 ms of backoff (±25 %)
    expect(Date.now() - t0).toBeGreaterThanOrEqual(100);
  });

  it('backs off exponentially with jitter and honours Retry-After / X-RateLimit-Reset', () => {
    const c = new ControlPlaneClient({ ...opts(), retryInitialDelay: 1000 });
    for (let i = 0; i < 5; i++) {
      const d = c.backoff(i);
      expect(d).toBeGreaterThanOrEqual(750 * 2 ** i);
      expect(d).toBeLessThanOrEqual(1250 * 2 ** i);
    }
    const now = 1_700_000_000_000;
    // at most retryMaxDelay ± 25 %, however many failures: how soon an agent is back after an outage
    const capped = new ControlPlaneClient({ ...opts(), retryInitialDelay: 1000, retryMaxDelay: 2000 });
    for (const failures of [2, 5, 10, 50, 2000]) {
      const d = capped.failureDelay(failures);
      expect(d).toBeGreaterThanOrEqual(1500);
      expect(d).toBeLessThanOrEqual(2500);
    }
    expect(rateLimitWait(new Headers({ 'retry-after': '7' }), now)).toBe(7000);
    expect(rateLimitWait(new Headers({ 'x-ratelimit-reset': '3' }), now)).toBe(3000);
    expect(rateLimitWait(new Headers({ 'x-ratelimit-reset': String(now / 1000 + 9) }), now)).toBe(9000);
  });
});

describe('rate limited by the real controller', () => {
  let limited: Harness;
  let lurl: string;
  let ltoken: string;
  beforeAll(async () => {
    limited = await startHarness({ rateLimit: { perMinute: 100_000, agentPerMinute: 2 } });
    await limited.app.listen({ host: '127.0.0.1', port: 0 });
    const a = limited.app.server.address();
    lurl = `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`;
    ltoken = await limited.addRouter('rl1');
  });
  afterAll(async () => {
    await limited?.close();
  });

  it('waits for the reset the 429 names instead of hammering', async () => {
    const c = new ControlPlaneClient({
      url: lurl,
      token: ltoken,
      router: 'rl1',
      requestTimeout: 5,
      maxRetries: 1,
      retryInitialDelay: 10,
      retryMaxDelay: 2000,
    });
    await c.mesh();
    await c.mesh();
    const t0 = Date.now();
    const res = await fetch(`${lurl}/agent/rl1/mesh`, { headers: { authorization: `Bearer ${ltoken}` } });
    expect(res.status).toBe(429);
    const wait = rateLimitWait(res.headers);
    expect(wait).toBeGreaterThan(100);
    const err = await Promise.race([
      c.mesh().catch((e: unknown) => e),
      new Promise((r) => setTimeout(() => r('still waiting'), 300)),
    ]);
    // With retryInitialDelay 10 ms a client ignoring the header would have failed within 300 ms.
    expect(err).toBe('still waiting');
    expect(Date.now() - t0).toBeLessThan(5000);
  });
});
