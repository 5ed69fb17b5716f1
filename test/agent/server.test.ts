/** The agent's local server: /health 200/503 with the reason, /livez, /metrics, who may ask, timeouts from the config. */
import type { AddressInfo } from 'node:net';
import { Counter, Registry } from 'prom-client';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../agent/config.ts';
import { allowedAddresses, startServer } from '../../agent/server.ts';

const config = parseConfig(
  {
    server: { listen: '127.0.0.1:0', readTimeout: 7, idleTimeout: 9, allowFrom: ['192.0.2.10'] },
    node: { name: 'fra1' },
    controlPlane: { url: 'http://[::1]:8080', token: 'a-very-secret-agent-token' },
  },
  'agent.json',
);
let health = { ok: true, bird: true, controller: true };
/** Set: the health check throws it, as a check whose own code fails would. */
let healthFails: Error | undefined;
const registry = new Registry();
const passes = new Counter({ name: 'test_passes_total', help: 'a counter', registers: [registry] });
const server = await startServer(config, {
  health: async () => {
    if (healthFails) throw healthFails;
    return health;
  },
  metrics: { registry },
});
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
afterAll(() => new Promise<void>((r) => server.close(() => r())));

describe('agent local server', () => {
  it('GET /health: 200 {"status":"ok"} when BIRD and the controller answer, 503 naming what is down', async () => {
    let res = await fetch(`${base}/health`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: 'ok', bird: true, controller: true });
    health = { ok: false, bird: false, controller: true };
    res = await fetch(`${base}/health`);
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ status: 'degraded', bird: false });
    expect((await fetch(`${base}/other`)).status).toBe(404);
  });

  it('GET /livez: 200 while the process answers, even when BIRD and the controller are down', async () => {
    health = { ok: false, bird: false, controller: false };
    const res = await fetch(`${base}/livez`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ok' });
    expect((await fetch(`${base}/health`)).status).toBe(503);
  });

  it('a health check that throws answers 500, and the server goes on answering', async () => {
    healthFails = new Error('the check broke');
    try {
      const res = await fetch(`${base}/health`);
      expect(res.status).toBe(500);
      expect(await res.json()).toEqual({ status: 'error' });
    } finally {
      healthFails = undefined;
    }
    expect((await fetch(`${base}/livez`)).status).toBe(200);
  });

  it('GET /metrics: the Prometheus text format of the agent registry', async () => {
    passes.inc(3);
    const res = await fetch(`${base}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(await res.text()).toMatch(/^test_passes_total 3$/m);
  });

  it('answers loopback, the controller and allowFrom only; timeouts from the config', async () => {
    const allowed = await allowedAddresses(config);
    expect([...allowed].sort()).toEqual(['127.0.0.1', '192.0.2.10', '::1']);
    expect(server.requestTimeout).toBe(7000);
    expect(server.keepAliveTimeout).toBe(9000);
  });
});
