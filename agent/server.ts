/**
 * The agent's local HTTP server (docs/agent.md): `GET /health` → `{"status":"ok",…}`; 503
 * `{"status":"degraded","checks":{"bird":{"ok":false,"reason":"…"},…}}` when a check fails; `GET /livez`, 200 while the process answers; `GET /metrics`, the agent's Prometheus metrics (metrics.ts). It answers
 * only loopback, the controller's addresses and `server.allowFrom`; everyone else gets the connection
 * closed. Timeouts from `server.*`. Nothing here changes anything on the router.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { lookup } from 'node:dns/promises';
import ipaddr from 'ipaddr.js';
import type { AgentConfig } from './config.ts';
import { parseListen } from './config.ts';
import { createServer } from './node-http.ts';

export interface LocalSource {
  health(): Promise<{ ok: boolean; bird: boolean; controller: boolean; checks?: object }>;
  /** The agent's registry (metrics-registry.ts); prom-client's Registry fits too. */
  metrics: { registry: { metrics(): Promise<string>; contentType: string } };
}

function normalize(addr: string): string {
  try {
    const a = ipaddr.parse(addr);
    return (
      a.kind() === 'ipv6' && (a as ipaddr.IPv6).isIPv4MappedAddress() ? (a as ipaddr.IPv6).toIPv4Address() : a
    ).toString();
  } catch {
    return addr;
  }
}

export async function allowedAddresses(config: AgentConfig): Promise<Set<string>> {
  const allowed = new Set<string>(['127.0.0.1', '::1']);
  const host = new URL(config.controlPlane.url).hostname.replace(/^\[|\]$/g, '');
  try {
    for (const a of await lookup(host, { all: true })) allowed.add(normalize(a.address));
  } catch {
    // unresolvable controller name: loopback only until the next start
  }
  for (const a of config.server.allowFrom ?? []) allowed.add(normalize(a));
  return allowed;
}

export async function startServer(config: AgentConfig, source: LocalSource): Promise<Server> {
  const allowed = await allowedAddresses(config);
  const answer = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const from = normalize(req.socket.remoteAddress ?? '');
    if (!allowed.has(from) && !from.startsWith('127.')) {
      req.socket.destroy();
      return;
    }
    if (req.method === 'GET' && (req.url === '/health' || req.url?.startsWith('/health?'))) {
      const h = await source.health();
      const body = JSON.stringify({ ...h, status: h.ok ? 'ok' : 'degraded' });
      res.writeHead(h.ok ? 200 : 503, { 'content-type': 'application/json' }).end(body);
      return;
    }
    // Liveness (the chart's DaemonSet probe, docs/agent.md): the process answers at all. Unlike /health it
    // asks neither BIRD nor the controller, so a degraded agent, which keeps retrying, is not restarted.
    if (req.method === 'GET' && (req.url === '/livez' || req.url?.startsWith('/livez?'))) {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
      return;
    }
    if (req.method === 'GET' && (req.url === '/metrics' || req.url?.startsWith('/metrics?'))) {
      const { registry } = source.metrics;
      const body = await registry.metrics();
      res.writeHead(200, { 'content-type': registry.contentType }).end(body);
      return;
    }
    res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'not found' }));
  };
  // a check that throws answers 500: a rejection left unhandled would end the agent
  const server = createServer((req, res) => {
    answer(req, res).catch(() => {
      if (res.headersSent) res.destroy();
      else res.writeHead(500, { 'content-type': 'application/json' }).end('{"status":"error"}');
    });
  });
  server.requestTimeout = config.server.readTimeout * 1000;
  server.headersTimeout = Math.min(config.server.readTimeout * 1000, 60_000);
  server.keepAliveTimeout = config.server.idleTimeout * 1000;
  server.setTimeout(config.server.writeTimeout * 1000);
  const { host, port } = parseListen(config.server.listen);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}
