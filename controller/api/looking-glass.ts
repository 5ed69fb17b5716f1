/**
 * The looking glass (docs/api.md, Looking glass): `POST /lg` for users and admins, and the two agent
 * routes through which the router's agent takes queries (a long poll beside its sessions poll) and
 * answers them. A peer asks about addresses in DN42's ranges and about its own sessions only; an admin
 * about anything. Every query is logged with its caller, router, operation and arguments.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type from 'typebox';
import { Ack } from '../../common/agent-api.ts';
import {
  LG_OUTPUT_LIMIT_BYTES,
  LG_PAGE_DEFAULT,
  LgAnswer,
  LgQueries,
  LgRequest,
  type LgQuery,
} from '../../common/looking-glass.ts';
import { lgTargetProblem } from '../../common/looking-glass-target.ts';
import { fieldError, problem, saidText } from '../../common/messages.ts';
import { RouterName } from '../../common/schema.ts';
import type { LookingGlassBroker } from '../looking-glass/broker.ts';
import type { Store } from '../store/store.ts';
import { findOwned } from './actions.ts';
import { caller, requireAgent, requireUser } from './auth.ts';

/** The longest an agent's looking-glass poll is held (its client asks for less). */
const LG_POLL_MAX_S = 55;

/**
 * An answer carries up to LG_OUTPUT_LIMIT_BYTES of output, which JSON escaping may grow (control
 * characters become six bytes each): the agent route takes bodies above the API's default limit.
 */
const ANSWER_BODY_LIMIT = LG_OUTPUT_LIMIT_BYTES * 6 + 4096;

const RouterParams = Type.Object({ router: RouterName });

export const lookingGlassRoutes: FastifyPluginAsyncTypebox<{
  store: Store;
  broker: LookingGlassBroker;
  /** Aborted when the server shuts down: releases every poll. */
  shutdown: AbortSignal;
}> = async (app, { store, broker, shutdown }) => {
  app.post(
    '/lg',
    {
      onRequest: [app.identify, app.rateLimit, requireUser],
      schema: {
        operationId: 'lookingGlass',
        summary: 'Run a looking-glass query on a router through its agent (ping, traceroute, BIRD routes)',
        description:
          'One body per operation, chosen by `op`. A peer may ask about addresses in DN42’s ranges and its own sessions; an admin about anything. Bounded on the router to 10 s and 256 KiB of output.',
        body: LgRequest,
        response: { 200: LgAnswer },
      },
    },
    async (request) => {
      const identity = caller(request);
      const admin = identity.role === 'admin';
      const { body } = request;
      let router: string;
      let query: Omit<LgQuery, 'id'>;
      const checkTarget = (target: string, op: 'ping' | 'traceroute' | 'route') => {
        const why = lgTargetProblem(target, op, admin);
        if (why)
          throw problem('lg.invalidTarget', { target, reason: saidText(why) }, [
            fieldError('/target', why.key, why.params),
          ]);
      };
      const knownRouter = (name: string) => {
        if (!store.getRouter(name)) throw problem('router.notFound', { name });
        return name;
      };
      switch (body.op) {
        case 'ping':
        case 'traceroute':
          checkTarget(body.target, body.op);
          router = knownRouter(body.router);
          query = { op: body.op, target: body.target };
          break;
        case 'route': {
          checkTarget(body.target, 'route');
          router = knownRouter(body.router);
          query = { op: 'route', target: body.target };
          if (body.session !== undefined) {
            const session = findOwned(store, identity, body.session);
            if (session.spec.router !== router)
              throw problem('lg.foreignSession', { router: session.spec.router }, [
                fieldError('/session', 'field.lgOtherRouter', { router: session.spec.router, asked: router }),
              ]);
            query.listenPort = session.spec.listenPort;
          }
          break;
        }
        case 'protocol': {
          const session = findOwned(store, identity, body.session);
          router = session.spec.router;
          query = { op: 'protocol', listenPort: session.spec.listenPort };
          break;
        }
        case 'routes': {
          const session = findOwned(store, identity, body.session);
          router = session.spec.router;
          query = {
            op: 'routes',
            listenPort: session.spec.listenPort,
            direction: body.direction,
            offset: body.offset ?? 0,
            limit: body.limit ?? LG_PAGE_DEFAULT,
          };
          break;
        }
      }
      request.log.info(
        { lg: { caller: admin ? 'admin' : `AS${identity.asn}`, router, ...body } },
        'looking-glass query',
      );
      return broker.ask(router, query);
    },
  );

  app.get(
    '/agent/:router/lg',
    {
      onRequest: [app.identifyAgent, app.rateLimit, requireAgent],
      schema: {
        operationId: 'agentLookingGlassQueries',
        summary:
          "Looking-glass queries waiting for the router's agent; ?wait=<s> holds the request until one comes",
        params: RouterParams,
        querystring: Type.Object({
          wait: Type.Optional(Type.Integer({ minimum: 0, maximum: LG_POLL_MAX_S, examples: [25] })),
        }),
        response: { 200: LgQueries },
      },
    },
    async (request, reply) => {
      const gone = new AbortController();
      const release = () => gone.abort();
      reply.raw.once('close', release);
      shutdown.addEventListener('abort', release, { once: true });
      try {
        const queries = await broker.take(
          request.params.router,
          (request.query.wait ?? 0) * 1000,
          gone.signal,
        );
        return { queries };
      } finally {
        reply.raw.off('close', release);
        shutdown.removeEventListener('abort', release);
      }
    },
  );

  app.post(
    '/agent/:router/lg/:id',
    {
      onRequest: [app.identifyAgent, app.rateLimit, requireAgent],
      bodyLimit: ANSWER_BODY_LIMIT,
      schema: {
        operationId: 'agentLookingGlassAnswer',
        summary: 'The agent’s answer to one looking-glass query',
        params: Type.Object({ router: RouterName, id: Type.String({ pattern: '^[A-Za-z0-9_-]{8,32}$' }) }),
        body: LgAnswer,
        response: { 200: Ack },
      },
    },
    async (request) => ({
      ok: true as const,
      // false: the caller stopped waiting (its time ran out); the answer is dropped
      delivered: await broker.answer(request.params.router, request.params.id, request.body),
    }),
  );
};
