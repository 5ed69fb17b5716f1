/** Unauthenticated routes: health, metrics, the router list and the OpenAPI document. */
import type { FastifyInstance } from 'fastify';
import { mergedPolicy } from '../store/rules.ts';
import type { Store } from '../store/store.ts';
import { metricsText, register } from '../metrics.ts';
import { RoutersResponse } from './schemas.ts';
import { publicRouter } from './views.ts';
import Type from 'typebox';

export async function publicRoutes(
  app: FastifyInstance,
  opts: { store: Store; openapi: () => Record<string, unknown> },
): Promise<void> {
  const { store } = opts;
  // `ok`, or 503 `degraded` with the reason while the store cannot write (a full or read-only disk):
  // reads still work, writes answer 503 STORE_UNAVAILABLE until the disk takes them again.
  app.get(
    '/health',
    {
      config: {
        rateLimit: false,
        docs: {
          summary: 'Liveness: ok, or degraded with the reason while the store cannot write',
          auth: 'none',
          response: Type.Union([
            Type.Object({ status: Type.Literal('ok') }),
            Type.Object({ status: Type.Literal('degraded'), reason: Type.String() }),
          ]),
        },
      },
    },
    async (_request, reply) => {
      const reason = store.writeProblem?.();
      if (reason === undefined) return { status: 'ok' };
      return reply.code(503).send({ status: 'degraded', reason });
    },
  );
  // The probes' endpoint: the process serves requests. A full disk makes /health degraded but must not
  // restart the controller or take it out of service: reads and agents' polls still work (docs/api.md).
  app.get(
    '/livez',
    {
      config: {
        rateLimit: false,
        docs: {
          summary: 'Liveness for probes: the process serves requests (/health also judges the store)',
          auth: 'none',
          response: Type.Object({ status: Type.Literal('ok') }),
        },
      },
    },
    async () => ({ status: 'ok' }),
  );
  app.get(
    '/metrics',
    { config: { rateLimit: false, docs: { summary: 'Prometheus metrics (text format)', auth: 'none' } } },
    async (_request, reply) => reply.type(register.contentType).send(await metricsText()),
  );
  app.get(
    '/routers',
    {
      config: { docs: { summary: 'Routers a user can peer with', auth: 'none', response: RoutersResponse } },
    },
    async () => {
      const counts = new Map<string, number>();
      for (const s of store.listSessions()) counts.set(s.spec.router, (counts.get(s.spec.router) ?? 0) + 1);
      return {
        routers: store
          .listRouters()
          .sort((a, b) => a.name.localeCompare(b.name))
          .map((r) => publicRouter(r, counts.get(r.name) ?? 0, mergedPolicy(store, r.name).dn42Asn ?? null)),
      };
    },
  );
  app.get('/openapi.json', { config: { docs: { summary: 'This document', auth: 'none' } } }, async () =>
    opts.openapi(),
  );
}
