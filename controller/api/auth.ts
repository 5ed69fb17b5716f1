/**
 * Who is calling. Every route names its checks in its own `onRequest` list, in this order:
 * `app.identify` (or `app.identifyAgent`) resolves the caller without failing, so that `app.rateLimit`
 * (rate-limit.ts) can key on it; then `requireUser`, `requireAdmin` or `requireAgent` refuses a caller
 * that is not what the route needs, before the body is read or validated. An agent token opens only the
 * paths of its own router (`:router`).
 *
 * A token's signature says who it was issued to; what it may do is what is true now (docs/login.md,
 * Tokens and what is true now): a revoked token is refused, a login's admin token is an admin only while
 * its ASN is on the admin list, and a user whose ASN the default policy blocks is refused everything but
 * revoking its own token.
 */
import type {
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  HookHandlerDoneFunction,
  onRequestHookHandler,
} from 'fastify';
import { ProblemError } from '../../common/errors.ts';
import { problem } from '../../common/messages.ts';
import { blockedEverywhere } from '../../common/rules/index.ts';
import type { Identity, TokenClaims, TokenIssuer } from '../auth/jwt.ts';
import { AgentTokenVerifier } from '../auth/agent-token.ts';
import type { PortalSessions } from '../auth/portal-session.ts';
import type { Store } from '../store/store.ts';

declare module 'fastify' {
  interface FastifyRequest {
    identity: Identity | undefined;
    /** The claims of the caller's valid, unrevoked token (its id, for revoking it). */
    tokenClaims: TokenClaims | undefined;
    /**
     * The caller is a user whose ASN the default policy blocks. Admins never are: they decide the block and
     * must be able to undo it.
     */
    callerBlocked: boolean;
    authError: ProblemError | undefined;
    /** The router whose token the caller presented, when it matches the `:router` of the path. */
    agentRouter: string | undefined;
  }
  interface FastifyInstance {
    /**
     * onRequest: reads a Bearer JWT, or else the portal's session cookie, into `request.identity` (or the
     * reason it is not valid).
     */
    identify: onRequestHookHandler;
    /** onRequest: sets `request.agentRouter` when the Bearer token is the agent token of `:router`. */
    identifyAgent: onRequestHookHandler;
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
 * Decorates the instance with `identify` and `identifyAgent` for the routes registered in it. `admins`:
 * the admin list the login grants the admin role from (PEEROPS_ADMIN_ASNS); `sessions`: the portal's
 * sign-in cookies.
 */
export function installAuth(
  app: FastifyInstance,
  deps: {
    store: Store;
    tokens: Pick<TokenIssuer, 'verify'>;
    admins: readonly number[];
    sessions: PortalSessions;
  },
): void {
  const admins = new Set(deps.admins);
  /** The role a token has now: a login's admin token only while its ASN is on the list. */
  const identityNow = (claims: TokenClaims): Identity =>
    claims.role === 'admin' && claims.source === 'login' && !admins.has(claims.asn)
      ? { asn: claims.asn, role: 'user' }
      : claims;
  app.decorateRequest('identity', undefined);
  app.decorateRequest('tokenClaims', undefined);
  app.decorateRequest('callerBlocked', false);
  app.decorateRequest('authError', undefined);
  app.decorateRequest('agentRouter', undefined);
  const agentTokens = new AgentTokenVerifier((router) => deps.store.getAgentTokenHash(router));

  app.decorate('identifyAgent', ((request, _reply, done) => {
    const token = bearer(request);
    const router = (request.params as { router?: string }).router;
    if (token !== undefined && router !== undefined && agentTokens.matches(router, token))
      request.agentRouter = router;
    done();
  }) satisfies onRequestHookHandler);
  app.decorate('identify', ((request, reply, done) => {
    let token = bearer(request);
    try {
      // a Bearer token (the CLI's) wins: a browser's cookie never changes who a script's request is
      token ??= deps.sessions.token(request, reply);
    } catch (err) {
      request.authError = err as ProblemError;
    }
    if (token !== undefined) {
      try {
        const claims = deps.tokens.verify(token);
        if (deps.store.tokenRevoked(claims.id, claims.asn, claims.issuedAt))
          throw problem('auth.tokenRevoked');
        const identity = identityNow(claims);
        request.tokenClaims = claims;
        request.identity = identity;
        request.callerBlocked =
          identity.role !== 'admin' && blockedEverywhere(deps.store.getPolicy('default')?.spec, identity.asn);
      } catch (err) {
        request.authError = err instanceof ProblemError ? err : problem('auth.tokenInvalid');
        // a revoked or expired sign-in's cookie is of no more use to the browser
        if (bearer(request) === undefined) deps.sessions.end(request, reply);
      }
    }
    done();
  }) satisfies onRequestHookHandler);
}

/** A route's own hooks of one kind as a list (fastify takes none, one or several). */
export function hookList<T>(hooks: T | T[] | undefined): T[] {
  return hooks === undefined ? [] : (([hooks] as (T | T[])[]).flat() as T[]);
}

function userOrRefusal(request: FastifyRequest): Identity | ProblemError {
  return request.identity ?? request.authError ?? problem('auth.tokenRequired');
}

/** onRequest, after `identify`: any valid token, of a blocked ASN too (revoking one's own token). */
export function requireToken(
  request: FastifyRequest,
  _reply: FastifyReply,
  done: HookHandlerDoneFunction,
): void {
  const caller = userOrRefusal(request);
  done(caller instanceof ProblemError ? caller : undefined);
}

/**
 * onRequest, after `identify`: a user or admin JWT, and not of a user whose ASN the default policy blocks
 * (ASN_BLOCKED). Callback style, as every hook of a request's path.
 */
export function requireUser(
  request: FastifyRequest,
  _reply: FastifyReply,
  done: HookHandlerDoneFunction,
): void {
  const caller = userOrRefusal(request);
  if (caller instanceof ProblemError) return done(caller);
  if (request.callerBlocked) return done(problem('auth.asnBlocked', { asn: caller.asn }));
  done();
}

/** onRequest, after `identify`: an admin JWT. */
export function requireAdmin(
  request: FastifyRequest,
  _reply: FastifyReply,
  done: HookHandlerDoneFunction,
): void {
  const caller = userOrRefusal(request);
  if (caller instanceof ProblemError) return done(caller);
  done(caller.role === 'admin' ? undefined : problem('auth.adminOnly'));
}

/** onRequest, after `identifyAgent` and the rate limit: the agent token of the router in the path. */
export function requireAgent(
  request: FastifyRequest,
  _reply: FastifyReply,
  done: HookHandlerDoneFunction,
): void {
  if (request.agentRouter === undefined) return done(problem('agent.tokenInvalid'));
  done();
}

/**
 * The caller of a route whose hooks ran `requireUser` or `requireAdmin`: the identity those made sure
 * of (INVALID_TOKEN if a route forgot them, rather than acting for nobody).
 */
export function caller(request: FastifyRequest): Identity {
  const identity = userOrRefusal(request);
  if (identity instanceof ProblemError) throw identity;
  return identity;
}

/** What a route's guard asks of the caller, for the OpenAPI document's `security`. */
export function guardOf(hooks: unknown): 'user' | 'admin' | 'agent' | 'none' {
  const list = hookList(hooks);
  if (list.includes(requireAdmin)) return 'admin';
  if (list.includes(requireUser) || list.includes(requireToken)) return 'user';
  if (list.includes(requireAgent)) return 'agent';
  return 'none';
}
