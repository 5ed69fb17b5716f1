/** Unauthenticated routes: health, metrics, the router list, the OpenAPI document and its reference page. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type from 'typebox';
import { isTerminal } from '../../common/status.ts';
import type { Store } from '../store/store.ts';
import { metricsText, register } from '../metrics.ts';
import { RoutersResponse } from './schemas.ts';
import { publicRouter } from './views.ts';

const Health = Type.Union(
  [
    Type.Object({ status: Type.Literal('ok') }),
    Type.Object({ status: Type.Literal('degraded'), reason: Type.String() }),
  ],
  { examples: [{ status: 'ok' }] },
);
const Alive = Type.Object({ status: Type.Literal('ok') }, { examples: [{ status: 'ok' }] });
const MetricsText = Type.String({
  description: 'Prometheus text exposition format 0.0.4',
  examples: ['# HELP active_sessions_total BGP sessions by status\n# TYPE active_sessions_total gauge\n'],
});
const OpenApiDocument = Type.Record(Type.String(), Type.Unknown(), {
  description: 'OpenAPI 3.1',
  examples: [{ openapi: '3.1.0', info: { title: 'peerops controller API', version: '0.1.0' }, paths: {} }],
});

export const publicRoutes: FastifyPluginAsyncTypebox<{
  store: Store;
  openapi: () => Record<string, unknown>;
}> = async (app, opts) => {
  const { store } = opts;
  // `ok`, or 503 `degraded` with the reason while the store cannot write (a full or read-only disk, a
  // read-only data directory at start): reads and agents' polls still work, writes answer 503
  // STORE_UNAVAILABLE until the disk takes them again. 503 so that a check of /health alerts; probes and
  // load balancers use /livez, which stays 200 (docs/api.md). Not rate limited, as /livez and /metrics:
  // probes and scrapers must get an answer whatever the load.
  app.get(
    '/health',
    {
      schema: {
        operationId: 'health',
        summary: 'Liveness: ok, or degraded with the reason while the store cannot write',
        response: { 200: Health, 503: Health },
      },
    },
    async (_request, reply) => {
      const problem = store.writeState?.().problem;
      if (problem === undefined) return { status: 'ok' as const };
      return reply.code(503).send({ status: 'degraded', reason: problem.message });
    },
  );
  // The probes' endpoint: the process serves requests. A full disk makes /health degraded but must not
  // restart the controller or take it out of service: reads and agents' polls still work (docs/api.md).
  app.get(
    '/livez',
    {
      schema: {
        operationId: 'livez',
        summary: 'Liveness for probes: the process serves requests (/health also judges the store)',
        response: { 200: Alive },
      },
    },
    async () => ({ status: 'ok' as const }),
  );
  app.get(
    '/metrics',
    {
      schema: {
        operationId: 'metrics',
        summary: 'Prometheus metrics (text format)',
        response: { 200: { content: { 'text/plain': { schema: MetricsText } } } },
      },
    },
    async (_request, reply) => reply.type(register.contentType).send(await metricsText()),
  );
  app.get(
    '/routers',
    {
      onRequest: [app.identify, app.rateLimit],
      schema: {
        operationId: 'listRouters',
        summary: 'Routers a user can peer with',
        response: { 200: RoutersResponse },
      },
    },
    // each router's sessions from the store's per-router index, not a walk over every session; a
    // REJECTED or PURGED record takes no slot (docs/api.md, Decisions)
    async () => ({
      routers: store
        .listRouters()
        .sort((a, b) => a.name.localeCompare(b.name))
        .map((r) =>
          publicRouter(
            r,
            store.listSessions({ router: r.name }).filter((s) => !isTerminal(s.status.code)).length,
            store.policyFor(r.name).dn42Asn ?? null,
          ),
        ),
    }),
  );
  app.get(
    '/openapi.json',
    {
      onRequest: [app.identify, app.rateLimit],
      schema: {
        operationId: 'openapi',
        summary: 'This document (OpenAPI 3.1)',
        response: { 200: OpenApiDocument },
      },
    },
    async () => opts.openapi(),
  );
};
