/**
 * Who is calling. An onRequest hook resolves the caller without failing (so the rate limiter can key
 * on it); then each route demands what it needs: a user or admin JWT (preHandlers requireUser,
 * requireAdmin), or the agent token of the router named in the path (requireAgent, the agent routes' last
 * onRequest hook; a token opens no other router's paths).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import { ProblemError } from '../../common/errors.ts';
import type { Identity, TokenIssuer } from '../auth/jwt.ts';
import { AgentTokenVerifier } from '../auth/agent-token.ts';
import type { Store } from '../store/store.ts';

declare module 'fastify' {
  interface FastifyRequest {
    identity: Identity | undefined;
    authError: ProblemError | undefined;
    /** The router whose token the caller presented, when it matches the `:router` of the path. */
    agentRouter: string | undefined;
  }
  interface FastifyContextConfig {
    /** Route authenticated by a router's agent token. */
    agent?: boolean;
  }
}

/** The token of `Authorization: Bearer <token>`, or undefined. */
export function bearer(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (typeof header !== 'string') return undefined;
  const match = /^Bearer[ ]+([A-Za-z0-9._~+/=-]{1,4096})$/i.exec(header.trim());
  return match?.[1];
}

/**
 * Adds to every route registered after it, as the route's first onRequest hook, the check its kind
 * needs: agent routes compare the router's token, the others verify a JWT. Decided once per route, so
 * the request path does not look the route up again.
 */
export function installAuth(
  app: FastifyInstance,
  deps: { store: Store; tokens: Pick<TokenIssuer, 'verify'> },
): void {
  app.decorateRequest('identity', undefined);
  app.decorateRequest('authError', undefined);
  app.decorateRequest('agentRouter', undefined);
  const agentTokens = new AgentTokenVerifier((router) => deps.store.getAgentTokenHash(router));

  const agentAuth: onRequestHookHandler = (request, _reply, done) => {
    const token = bearer(request);
    const router = (request.params as { router?: string }).router;
    if (token !== undefined && router !== undefined && agentTokens.matches(router, token))
      request.agentRouter = router;
    done();
  };
  const userAuth: onRequestHookHandler = (request, _reply, done) => {
    const token = bearer(request);
    if (token !== undefined) {
      try {
        request.identity = deps.tokens.verify(token);
      } catch (err) {
        request.authError =
          err instanceof ProblemError ? err : new ProblemError('INVALID_TOKEN', 'the token is not valid');
      }
    }
    done();
  };

  app.addHook('onRoute', (route) => {
    route.onRequest = [route.config?.agent ? agentAuth : userAuth, ...hookList(route.onRequest)];
  });
}

/** A route's own hooks of one kind as a list (fastify takes none, one or several). */
export function hookList<T>(hooks: T | T[] | undefined): T[] {
  return hooks === undefined ? [] : (([hooks] as (T | T[])[]).flat() as T[]);
}

export async function requireUser(request: FastifyRequest): Promise<void> {
  if (request.identity) return;
  throw request.authError ?? new ProblemError('INVALID_TOKEN', 'a Bearer JWT is required; log in first');
}

export async function requireAdmin(request: FastifyRequest): Promise<void> {
  await requireUser(request);
  if (request.identity?.role !== 'admin')
    throw new ProblemError('FORBIDDEN', 'this action needs an admin token');
}

/** Callback style: it runs before every agent request, and an async hook costs a promise each time. */
export function requireAgent(
  request: FastifyRequest,
  _reply: FastifyReply,
  done: (err?: Error) => void,
): void {
  if (request.agentRouter === undefined)
    return done(
      new ProblemError('INVALID_TOKEN', "the agent token is missing or is not this router's token"),
    );
  done();
}

/** Rate-limit key: the user, the router (agent routes), or before authentication the client address. */
export function rateLimitKey(request: FastifyRequest): string {
  if (request.agentRouter !== undefined) return `agent:${request.agentRouter}`;
  if (request.identity) return `asn:${request.identity.asn}`;
  return `ip:${request.ip}`;
}
