/**
 * The controller's HTTP application. buildApp wires store, token issuer, config and logger into a
 * fastify instance without listening, so tests and the lab start it in-process. Every route answers at
 * `/<path>` and at `/api/v1/<path>`.
 */
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyRequest,
  type onResponseHookHandler,
} from 'fastify';
import type { Server as HttpsServer } from 'node:https';
import { ProblemError } from '../common/errors.ts';
import type { Config } from './config.ts';
import type { TokenIssuer } from './auth/jwt.ts';
import type { Store } from './store/store.ts';
import { clientErrorHandler, installErrorHandling } from './api/problem.ts';
import { hookList, installAuth } from './api/auth.ts';
import { installRateLimit } from './api/rate-limit.ts';
import { connectRedis } from './redis.ts';
import { collectRoutes, openApiDocument } from './api/openapi.ts';
import { publicRoutes } from './api/public.ts';
import { sessionRoutes } from './api/session.ts';
import { adminRoutes } from './api/admin.ts';
import { agentRoutes } from './api/agent.ts';
import { admissionRoutes } from './api/admission.ts';
import { addMetricsSource, loginTotal, routeHttpMetrics, type RouteHttpMetrics } from './metrics.ts';
import loginPlugin from './auth/login/plugin.ts';
import { MemoryChallengeStore, MemoryFailureLimiter } from './auth/login/challenges.ts';
import { RedisChallengeStore, RedisFailureLimiter } from './auth/login/redis-state.ts';
import type { Registry } from './auth/login/registry.ts';
import { mergedPolicy } from './store/rules.ts';

export interface AppOptions {
  store: Store;
  tokens: TokenIssuer;
  config: Config;
  /** A pino logger, or false for none (benchmarks). */
  logger: FastifyBaseLogger | false;
  /** `/login` (challenge signing, DESIGN.md section 6); without it the route does not exist. */
  login?: { registry: Registry; serviceHost: string; admins: number[] };
}

const REQUEST_TIMEOUT_MS = 30_000;

/** A request's HTTP metrics and its log line. */
function recordResponse(
  request: FastifyRequest,
  route: string,
  metrics: RouteHttpMetrics,
  status: number,
  ms: number,
): void {
  metrics.record(status, ms / 1000);
  const line = { reqId: request.id, route, method: request.method, status, ms: Math.round(ms * 10) / 10 };
  // An agent's routine traffic (every router's heartbeat, polls and reports) is debug: at info it would
  // be most of the log, and writing it cost 10-15 µs of each such request in bench:api.
  if (status < 400 && request.agentRouter !== undefined) request.log.debug(line, 'request');
  else request.log.info(line, 'request');
}

/** A route's onResponse hook, recordResponse. Callback style: no promise per request. */
function responseRecorder(route: string, metrics: RouteHttpMetrics): onResponseHookHandler {
  return (request, reply, done) => {
    recordResponse(request, route, metrics, reply.statusCode, reply.elapsedTime);
    done();
  };
}

export async function buildApp(opts: AppOptions): Promise<FastifyInstance> {
  const { store, tokens, config } = opts;
  const app = Fastify({
    ...(opts.logger ? { loggerInstance: opts.logger } : { logger: false }),
    bodyLimit: config.bodyLimitBytes,
    // One log line per request comes from our onResponse hook (route pattern, status, duration).
    logController: new LogController({ disableRequestLogging: true }),
    // A request that arrives on a kept-alive connection while the server drains is served as any other
    // (the store closes only after the server), with Connection: close; fastify's 503 for it had a
    // body of its own, not problem+json, and a client would have had to retry it elsewhere.
    return503OnClosing: false,
    clientErrorHandler,
    // A request (headers and body) must arrive within this; without it a client dripping a body holds
    // its socket for ever. It does not cover the answer, so long polls are unaffected.
    requestTimeout: REQUEST_TIMEOUT_MS,
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    // No child logger per request (it cost 2-3 µs of each): the request's lines carry its id themselves.
    childLoggerFactory: (logger) => logger,
  });
  // Only JSON bodies: fastify's built-in text/plain parser would let other types through as strings.
  app.removeContentTypeParser('text/plain');

  installAuth(app, { store, tokens });
  const redis = config.redisUrl ? await connectRedis(app, config.redisUrl) : undefined;
  const countRequest = installRateLimit(app, config, redis);
  installErrorHandling(app, {
    countRequest,
    onNotFound: (request, reply, status) =>
      recordResponse(
        request,
        'unmatched',
        routeHttpMetrics('unmatched', request.method),
        status,
        reply.elapsedTime,
      ),
  });
  const operations = collectRoutes(app);

  // One request log line and the HTTP metrics per request, keyed by route pattern (never the raw URL):
  // each route gets a hook of its own that knows its route; unmatched requests are told by the 404 handler.
  app.addHook('onRoute', (route) => {
    const metrics = routeHttpMetrics(route.url, [route.method].flat().join(','));
    route.onResponse = [...hookList(route.onResponse), responseRecorder(route.url, metrics)];
  });

  const shutdown = new AbortController();
  // Node closes the idle keep-alive connections once, when close() begins; a request in flight then
  // leaves its connection idle only after its answer, and one client that keeps it open would hold the
  // shutdown for the keep-alive timeout (72 s). So they are closed as they turn idle until the server is.
  let closeIdle: NodeJS.Timeout | undefined;
  app.addHook('preClose', async () => {
    shutdown.abort();
    closeIdle = setInterval(() => app.server.closeIdleConnections(), 100).unref();
  });
  const removeSource = addMetricsSource(store, config);
  app.addHook('onClose', async () => {
    clearInterval(closeIdle);
    removeSource();
  });

  let document: Record<string, unknown> | undefined;
  const openapi = () => (document ??= openApiDocument(operations));
  // One challenge store and failure limiter for both prefixes: a challenge from /login verifies at
  // /api/v1/login. With Redis both are shared by every replica too.
  const loginState = {
    challengeStore: redis ? new RedisChallengeStore(redis) : new MemoryChallengeStore(),
    failureLimiter: redis ? new RedisFailureLimiter(redis) : new MemoryFailureLimiter(),
  };
  const routes = async (scope: FastifyInstance) => {
    if (opts.login)
      await scope.register(loginPlugin, {
        ...opts.login,
        ...loginState,
        isBlocked: (asn: number) => mergedPolicy(store, undefined).blockedAsns?.includes(asn) ?? false,
        issueToken: (asn, role) => tokens.issueToken(asn, role, config.tokenTtlSeconds),
        onOutcome: (outcome) => loginTotal.inc({ outcome }),
      });
    else
      // Undocumented on purpose (no docs: not in openapi.json): it only says why there is no login.
      scope.post('/login', async () => {
        throw new ProblemError(
          'NOT_FOUND',
          'login is not set up on this controller (no PEEROPS_REGISTRY); ask its operator for a token (`peerops admin token`)',
        );
      });
    await scope.register(publicRoutes, { store, openapi });
    await scope.register(sessionRoutes, { store });
    await scope.register(adminRoutes, { store });
    await scope.register(agentRoutes, { store, config, shutdown: shutdown.signal });
  };
  await app.register(routes);
  await app.register(routes, { prefix: '/api/v1' });
  return app;
}

/** Two objects at etcd's size limit (1.5 MiB each): an update's review carries the old object too. */
const ADMISSION_BODY_LIMIT = 3 * 1024 * 1024;

/**
 * The admission webhook's own server (Kubernetes store): HTTPS, because the API server calls webhooks only
 * over TLS, on a port of its own, so the API's authentication and rate limits stay out of the API server's
 * path. It writes nothing and answers only on the object it is shown.
 */
export async function buildAdmissionApp(opts: {
  store: Store;
  logger: FastifyBaseLogger;
  tls: { key: Buffer; cert: Buffer };
}): Promise<FastifyInstance<HttpsServer>> {
  const app = Fastify({
    https: opts.tls,
    loggerInstance: opts.logger,
    bodyLimit: ADMISSION_BODY_LIMIT,
    requestTimeout: REQUEST_TIMEOUT_MS,
    return503OnClosing: true,
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
  });
  app.removeContentTypeParser('text/plain');
  installErrorHandling(app);
  await app.register(admissionRoutes, { store: opts.store });
  return app;
}
