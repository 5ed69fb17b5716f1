/**
 * `GET /routers/near?endpoint=host:port` (docs/api.md, Nearest router): the routers accepting sessions,
 * sorted by the RTT each one measured to the peer's endpoint (controller/looking-glass/nearest.ts). For
 * signed-in callers: each measurement is a ping from every router.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type from 'typebox';
import { fieldAtFault, fieldError, problem } from '../../common/messages.ts';
import { endpointProblem, parseEndpoint } from '../../common/net.ts';
import { isTerminal } from '../../common/status.ts';
import type { NearestRouters } from '../looking-glass/nearest.ts';
import type { Store } from '../store/store.ts';
import { caller, requireUser } from './auth.ts';
import { NearRoutersResponse } from './responses.ts';
import { routerAccepting } from './views.ts';

export const nearestRouterRoutes: FastifyPluginAsyncTypebox<{
  store: Store;
  nearest: NearestRouters;
}> = async (app, { store, nearest }) => {
  app.get(
    '/routers/near',
    {
      onRequest: [app.identify, app.rateLimit, requireUser],
      schema: {
        operationId: 'nearRouters',
        summary: "The routers accepting sessions, sorted by each one's measured RTT to an endpoint",
        description:
          'Each router pings the endpoint’s host through its agent (a host name is resolved by the controller; every address must pass the endpoint rule). A measurement is shared for 5 minutes; a caller starts at most 6 new ones a minute.',
        querystring: Type.Object({
          endpoint: Type.String({
            minLength: 3,
            maxLength: 261,
            description: 'the peer’s WireGuard endpoint, host:port ([v6]:port)',
            examples: ['peer.example.org:51820'],
          }),
        }),
        response: { 200: NearRoutersResponse },
      },
    },
    async (request) => {
      const identity = caller(request);
      const { endpoint } = request.query;
      if (!parseEndpoint(endpoint)) {
        const error = fieldError('/endpoint', 'field.format.endpoint');
        throw problem(
          'request.invalidField',
          { what: 'query', pointer: '/endpoint', reason: error.message },
          [error],
        );
      }
      // refused whatever a router's policy says (loopback, link-local, …); private ranges per router
      const why = endpointProblem(endpoint, true);
      if (why !== undefined) {
        const errors = [fieldError('/endpoint', why.key, why.params)];
        throw problem('request.fieldRefused', fieldAtFault(errors), errors);
      }
      const accepting = store
        .listRouters()
        .filter((r) =>
          routerAccepting(
            r,
            store.listSessions({ router: r.name }).filter((s) => !isTerminal(s.status.code)).length,
          ),
        );
      return nearest.near(endpoint, identity.role === 'admin' ? 'admin' : `AS${identity.asn}`, accepting);
    },
  );
};
