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
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { Config } from './config.ts';
import type { TokenIssuer } from './auth/jwt.ts';
import type { Store } from './store/store.ts';
import type { Socket } from 'node:net';
import {
  answerOnSocket,
  clientErrorHandler,
  frameworkErrorHandler,
  installErrorHandling,
  problemBody,
  type Unrouted,
} from './api/problem.ts';
import { hookList, installAuth } from './api/auth.ts';
import { installRateLimit } from './api/rate-limit.ts';
import { installAnswerRules } from './api/answers.ts';
import { connectRedis } from './redis.ts';
import { collectRoutes, openApiDocument } from './api/openapi.ts';
import { publicRoutes } from './api/public.ts';
import { sessionRoutes } from './api/session.ts';
import { storeStatusRoutes } from './api/store-status.ts';
import { adminRoutes } from './api/admin.ts';
import { adoptionRoutes } from './api/adoptions.ts';
import { agentRoutes } from './api/agent.ts';
import { lookingGlassRoutes } from './api/looking-glass.ts';
import { networkRoutes } from './api/network.ts';
import { MemoryLookingGlassBroker, type LookingGlassBroker } from './looking-glass/broker.ts';
import { SessionHistory } from './history/session-history.ts';
import { historyRoutes } from './api/history.ts';
import { PrometheusHistory } from './history/prometheus-history.ts';
import { NearestRouters } from './looking-glass/nearest.ts';
import { nearestRouterRoutes } from './api/nearest-routers.ts';
import { RegistryFilter } from './registry/filter.ts';
import { admissionRoutes } from './api/admission.ts';
import { addMetricsSource, loginTotal, routeHttpMetrics, type RouteHttpMetrics } from './metrics.ts';
import loginPlugin from './auth/login/plugin.ts';
import { PortalSessions } from './auth/portal-session.ts';
import { MemoryFailureLimiter, MemoryUsedChallenges } from './auth/login/challenges.ts';
import { RedisFailureLimiter, RedisUsedChallenges } from './auth/login/redis-state.ts';
import type { Registry } from './auth/login/registry.ts';
import { blockedEverywhere } from '../common/rules/index.ts';
import { forgeEventRoutes } from './api/forge-events.ts';
import portalPlugin from './portal/plugin.ts';
import { webhookRoutes } from './api/webhooks.ts';
import { tokenRoutes } from './api/tokens.ts';
import { Notifier } from './notify/notifier.ts';
import { FileWebhooks } from './notify/webhooks.ts';
import { referenceRoutes } from './api/reference.ts';
import { apiValidatorCompiler } from './api/validation.ts';
import { problem } from '../common/messages.ts';

export interface AppOptions {
  store: Store;
  tokens: TokenIssuer;
  config: Config;
  /** A pino logger, or false for none (benchmarks). */
  logger: FastifyBaseLogger | false;
  /** `/login` (challenge signing, docs/login.md); without it the route only says why there is none. */
  login?: { registry: Registry; serviceHost: string; admins: number[] };
  /**
   * Webhooks (docs/notifications.md); default: webhooks in `<dataDir>/webhooks.json`. The caller starts its
   * leader part with the reconciler; the app closes it.
   */
  notifier?: Notifier;
  /**
   * Where looking-glass queries wait for agents; default: in memory (one controller). The app closes it.
   * Replicas of the Kubernetes store share one (controller/looking-glass/kubernetes-broker.ts).
   */
  lookingGlass?: LookingGlassBroker;
  /** Internal, for tests: the request timeout instead of the documented 30 s. */
  requestTimeoutMs?: number;
}

/**
 * Whether a router's autoApprove may take effect (common/rules/sessions.ts, autoApproves): where the DN42
 * registry's route objects check every session's addresses, or where the operator set
 * PEEROPS_AUTO_APPROVE_WITHOUT_REGISTRY (docs/operator-guide.md, section 4).
 */
export function autoApprovalAllowed(registry: Registry | undefined, config: Config): boolean {
  return registry?.files !== undefined || config.autoApproveWithoutRegistry;
}

/** docs/api.md, Errors: a request (headers and body) not complete within 30 s is refused. */
const REQUEST_TIMEOUT_MS = 30_000;
/**
 * The listening socket's queue of connections not yet accepted. After a controller restart a fleet's agents
 * reconnect within a second or two, while the new controller's event loop is busy answering them; past
 * Node's default queue of 511 the kernel drops a connection's handshake, and that agent waits out a SYN
 * retransmission (1 s, then 3 s). The kernel caps it at net.core.somaxconn (4096 on current kernels).
 */
export const LISTEN_BACKLOG = 4096;

/** fastify's default, which a server of our own must set itself: idle kept-alive connections close after it. */
const KEEP_ALIVE_TIMEOUT_MS = 72_000;

/**
 * Node's request timeouts, given when the server is made: the checking interval can be set only then, and
 * a requestTimeout set afterwards (as fastify's option does) left the 60 s headersTimeout and the 30 s
 * check in charge, so a slow body was cut after 60-90 s. Headers and the whole request now both have `ms`,
 * checked every second (at most a quarter of it), so a request is cut between `ms` and `ms` + 1 s.
 */
function requestTimeouts(ms: number) {
  return {
    requestTimeout: ms,
    headersTimeout: ms,
    connectionsCheckingInterval: Math.max(10, Math.min(1000, Math.floor(ms / 4))),
  };
}

/**
 * The API's HTTP server. Node's own answers that are not problem+json are kept from the client:
 * - an HTTP/1.1 request without Host (Node answered an empty 400) gets the problem answer of a request
 *   Node's parser refuses, with Connection: close (docs/api.md, Errors);
 * - an `Expect` other than 100-continue (Node answered an empty 417) is served as if it were absent,
 *   which RFC 9110 (10.1.1) allows, so its answer is the route's own, rate-limit headers and all;
 * - CONNECT (Node closed the connection without a word) is 404 NOT_FOUND, as any method no route has.
 */
function apiServer(requestTimeoutMs: number) {
  return (handler: (req: IncomingMessage, res: ServerResponse) => void): Server => {
    const server = createServer(
      { ...requestTimeouts(requestTimeoutMs), requireHostHeader: false },
      (req, res) => {
        if (req.headers.host === undefined && req.httpVersion === '1.1') return refuseWithoutHost(res);
        handler(req, res);
      },
    );
    server.on('checkExpectation', handler);
    server.on('connect', (req: IncomingMessage, socket: Socket) =>
      answerOnSocket(socket, problem('route.notFound', { method: 'CONNECT', path: req.url ?? '' })),
    );
    server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
    return server;
  };
}

function refuseWithoutHost(res: ServerResponse): void {
  const body = JSON.stringify(problemBody(problem('request.noHost')));
  res.writeHead(400, {
    'content-type': 'application/problem+json',
    'x-content-type-options': 'nosniff',
    'content-length': Buffer.byteLength(body),
    connection: 'close',
  });
  res.end(body);
}

/**
 * The logger of a route's request lines: the app's, with the route pattern bound once (pino serializes a
 * child's bindings when it is made, not per line). Without redaction: a request line holds only the
 * route, method, request id, status and duration, never a token, and the redaction paths' wildcards
 * cost more than the rest of the line (docs/benchmarks.md, user-list).
 */
function requestLogger(log: FastifyBaseLogger, route: string): FastifyBaseLogger {
  return log.child({ route }, { redact: [] });
}

/** A request's HTTP metrics and its log line (`log`: its route's requestLogger). */
function recordResponse(
  request: FastifyRequest,
  log: FastifyBaseLogger,
  metrics: RouteHttpMetrics,
  status: number,
  ms: number,
): void {
  metrics.record(status, ms / 1000);
  const line = { reqId: request.id, method: request.method, status, ms: Math.round(ms * 10) / 10 };
  // An agent's routine traffic (every router's heartbeat, polls and reports) is debug: at info it would
  // be most of the log, and writing it a good part of each such request's time (docs/benchmarks.md).
  if (status < 400 && request.agentRouter !== undefined) log.debug(line, 'request');
  else log.info(line, 'request');
}

/**
 * A route's onResponse hook: recordResponse under the route's pattern (never the raw URL), its metrics
 * and logger made once, when the route is added. Callback style: no promise per request.
 */
function responseRecorder(log: FastifyBaseLogger, metrics: RouteHttpMetrics): onResponseHookHandler {
  return (request, reply, done) => {
    recordResponse(request, log, metrics, reply.statusCode, reply.elapsedTime);
    done();
  };
}

export async function buildApp(opts: AppOptions): Promise<FastifyInstance> {
  const { store, tokens, config } = opts;
  const requestTimeoutMs = opts.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
  // The rate limiter and the request recorder exist only once the instance does.
  let unrouted: Unrouted = {};
  const app = Fastify({
    serverFactory: apiServer(requestTimeoutMs),
    ...(opts.logger ? { loggerInstance: opts.logger } : { logger: false }),
    bodyLimit: config.bodyLimitBytes,
    // request.ip (rate limits) is the client a trusted proxy names (docs/operator-guide.md)
    trustProxy: config.trustProxy,
    // One log line per request comes from our onResponse hook (route pattern, status, duration).
    logController: new LogController({ disableRequestLogging: true }),
    // A request that arrives on a kept-alive connection while the server drains is served as any other
    // (the store closes only after the server), with Connection: close; fastify's 503 for it had a
    // body of its own, not problem+json, and a client would have had to retry it elsewhere.
    return503OnClosing: false,
    clientErrorHandler,
    frameworkErrors: frameworkErrorHandler(() => unrouted),
    // A request (headers and body) must arrive within this; without it a client dripping a body holds
    // its socket for ever. It does not cover the answer, so long polls are unaffected. The server has
    // it from apiServer already; fastify sets it again.
    requestTimeout: requestTimeoutMs,
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    // No child logger per request (docs/benchmarks.md): the request's lines carry its id themselves.
    childLoggerFactory: (logger) => logger,
  });
  // Only JSON bodies: fastify's built-in text/plain parser would let other types through as strings.
  app.removeContentTypeParser('text/plain');
  // Requests are checked against the routes' schemas by the project's rules (validation.ts); answers are
  // written as they are, not through fast-json-stringify (docs/decisions.md, Route schemas).
  app.setValidatorCompiler(apiValidatorCompiler());
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));

  installAnswerRules(app);
  // the portal's sign-in cookies (docs/login.md); their MAC key is the same on every replica sharing the JWT key
  const sessions = new PortalSessions(tokens.deriveKey('peerops portal session'), config.portalIdleSeconds);
  installAuth(app, { store, tokens, admins: opts.login?.admins ?? [], sessions });
  const redis = config.redisUrl ? await connectRedis(app, config.redisUrl) : undefined;
  const countRequest = installRateLimit(app, config, redis);
  const unmatchedLog = requestLogger(app.log, 'unmatched');
  unrouted = {
    countRequest,
    onNotFound: (request, reply, status) =>
      recordResponse(
        request,
        unmatchedLog,
        routeHttpMetrics('unmatched', request.method),
        status,
        reply.elapsedTime,
      ),
  };
  installErrorHandling(app, unrouted);
  const operations = collectRoutes(app);
  // Observability, the same for every route (not one of its checks, which each route lists itself): one
  // log line and the HTTP metrics per request, keyed by route pattern. The hook is made per route so that
  // a request does not look its route up (fastify's request.routeOptions builds an object per call);
  // requests no route took are recorded by the 404 answer.
  app.addHook('onRoute', (route) => {
    const metrics = routeHttpMetrics(route.url, [route.method].flat().join(','));
    route.onResponse = [
      ...hookList(route.onResponse),
      responseRecorder(requestLogger(app.log, route.url), metrics),
    ];
  });

  const shutdown = new AbortController();
  // Node closes the idle keep-alive connections once, when close() begins; a request in flight then
  // leaves its connection idle only after its answer, and one client that keeps it open would hold the
  // shutdown for the keep-alive timeout (72 s). So they are closed as they turn idle until the server is.
  let closeIdle: NodeJS.Timeout | undefined;
  // looking-glass queries wait here for their router's agent, one broker for both route prefixes
  const lookingGlass = opts.lookingGlass ?? new MemoryLookingGlassBroker();
  // one cache of measurements for both route prefixes
  const nearest = new NearestRouters(store, lookingGlass);
  app.addHook('preClose', async () => {
    shutdown.abort();
    await lookingGlass.close();
    closeIdle = setInterval(() => app.server.closeIdleConnections(), 100).unref();
  });
  const removeSource = addMetricsSource(store, config);
  // the sessions' graphs: each replica keeps the reports it receives (docs/store.md, Session history)
  const history = new SessionHistory({
    dataDir: config.dataDir,
    ...(opts.logger ? { log: opts.logger } : {}),
  });
  history.start();
  const notifier =
    opts.notifier ??
    new Notifier({
      store,
      webhooks: new FileWebhooks(config.dataDir),
      ...(opts.logger ? { logger: opts.logger } : {}),
    });
  app.addHook('onClose', async () => {
    clearInterval(closeIdle);
    removeSource();
    await notifier.close();
    await history.close();
  });

  let document: Record<string, unknown> | undefined;
  const openapi = () => (document ??= openApiDocument(operations));
  // One challenge key, record of used challenges and failure limiter for both prefixes: a challenge
  // from /login verifies at /api/v1/login. With Redis the record and the limiter are shared by every
  // replica, and so is the key (from the JWT key, which replicas share). Without, each replica records
  // only its own logins, so its key is its own too: a challenge used at one replica cannot log in
  // again at another (docs/login.md, Several replicas).
  const loginState = {
    challengeKey: redis ? tokens.deriveKey('peerops login challenge') : randomBytes(32),
    usedChallenges: redis ? new RedisUsedChallenges(redis) : new MemoryUsedChallenges(),
    failureLimiter: redis ? new RedisFailureLimiter(redis) : new MemoryFailureLimiter(),
  };
  // one for both prefixes: the registry's filter is read once a minute, not once per prefix
  const registryFilter = new RegistryFilter(opts.login?.registry, app.log);
  const autoApproveAllowed = autoApprovalAllowed(opts.login?.registry, config);
  const routes = async (scope: FastifyInstance) => {
    if (opts.login)
      await scope.register(loginPlugin, {
        ...opts.login,
        ...loginState,
        isBlocked: (asn: number) => blockedEverywhere(store.getPolicy('default')?.spec, asn),
        issueToken: (asn, role) => tokens.issueToken(asn, role, config.tokenTtlSeconds, 'login'),
        sessions,
        onOutcome: (outcome) => loginTotal.inc({ outcome }),
        onRequest: [scope.identify, scope.rateLimit],
      });
    else
      // Undocumented on purpose (no operationId: not in openapi.json): it only says why there is no login.
      scope.post('/login', { onRequest: [scope.identify, scope.rateLimit] }, async () => {
        throw problem('login.notSetUp');
      });
    await scope.register(publicRoutes, { store, openapi });
    await scope.register(storeStatusRoutes, { store });
    await scope.register(sessionRoutes, { store, registry: opts.login?.registry, autoApproveAllowed });
    await scope.register(adminRoutes, { store, registry: opts.login?.registry, autoApproveAllowed });
    await scope.register(adoptionRoutes, { store, registry: opts.login?.registry });
    await scope.register(webhookRoutes, { webhooks: notifier.webhooks, targets: notifier });
    await scope.register(tokenRoutes, { store, sessions });
    await scope.register(agentRoutes, {
      store,
      config,
      shutdown: shutdown.signal,
      filter: registryFilter,
      history,
    });
    // with several replicas each keeps only the reports it receives: Prometheus, scraping them all, has
    // every one (docs/kubernetes.md, Session history)
    const historySource = config.historyPrometheus
      ? new PrometheusHistory({ url: config.historyPrometheus })
      : history;
    await scope.register(historyRoutes, { store, history: historySource });
    await scope.register(nearestRouterRoutes, { store, nearest });
    await scope.register(lookingGlassRoutes, { store, broker: lookingGlass, shutdown: shutdown.signal });
    await scope.register(networkRoutes, { store });
    await scope.register(forgeEventRoutes, { store, secret: config.git?.webhookSecret });
    await scope.register(referenceRoutes);
  };
  await app.register(routes);
  await app.register(routes, { prefix: '/api/v1' });
  await app.register(portalPlugin);
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
    https: { ...opts.tls, ...requestTimeouts(REQUEST_TIMEOUT_MS) },
    loggerInstance: opts.logger,
    bodyLimit: ADMISSION_BODY_LIMIT,
    requestTimeout: REQUEST_TIMEOUT_MS,
    return503OnClosing: true,
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
  });
  app.removeContentTypeParser('text/plain');
  app.setValidatorCompiler(apiValidatorCompiler());
  installAnswerRules(app);
  installErrorHandling(app);
  await app.register(admissionRoutes, { store: opts.store });
  return app;
}
