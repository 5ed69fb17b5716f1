/**
 * `GET /network` (docs/api.md, Network): every router of the network with what its Ready condition
 * says, for anyone logged in: the portal's network page, beside its looking glass over DN42's ranges.
 * Read from the store's index; nothing here is written.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { routerReadiness } from '../../common/conditions.ts';
import { SessionStatus, isTerminal } from '../../common/status.ts';
import type { Store } from '../store/store.ts';
import { requireUser } from './auth.ts';
import { NetworkResponse } from './responses.ts';
import { routerAccepting } from './views.ts';

export const networkRoutes: FastifyPluginAsyncTypebox<{ store: Store }> = async (app, { store }) => {
  app.get(
    '/network',
    {
      onRequest: [app.identify, app.rateLimit, requireUser],
      schema: {
        operationId: 'network',
        summary:
          "The network's routers with their state (ready, not ready, never reported), for anyone logged in",
        response: { 200: NetworkResponse },
      },
    },
    async () => ({
      routers: store
        .listRouters()
        .sort((a, b) => a.name.localeCompare(b.name))
        .map((r) => {
          const sessions = store.listSessions({ router: r.name });
          return {
            name: r.name,
            displayName: r.spec.displayName,
            region: r.spec.region,
            location: r.spec.location ?? null,
            // a REJECTED or PURGED record takes no slot, as in GET /routers
            accepting: routerAccepting(r, sessions.filter((s) => !isTerminal(s.status.code)).length),
            ...routerReadiness(r.status?.conditions),
            lastHeartbeat: r.status?.lastHeartbeat ?? null,
            activeSessions: sessions.filter((s) => s.status.code === SessionStatus.ACTIVE).length,
          };
        }),
    }),
  );
};
