/**
 * Who is calling. Every route names its checks in its own `onRequest` list, in this order:
 * `app.identify` (or `app.identifyAgent`) resolves the caller without failing, so that `app.rateLimit`
 * (rate-limit.ts) can key on it; then `requireUser`, `requireAdmin` or `requireAgent` refuses a caller
 * that is not what the route needs, before the body is read or validated. An agent token opens only the
 * paths of its own router (`:router`).
 */
import type {
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  HookHandlerDoneFunction,
  onRequestHookHandler,
} from 'fastify';
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
  interface FastifyInstance {
    /** onRequest: reads a Bearer JWT into `request.identity` (or the reason it is not valid). */
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

/** Decorates the instance with `identify` and `identifyAgent` for the routes registered in it. */
export function installAuth(
  app: FastifyInstance,
  deps: { store: Store; tokens: Pick<TokenIssuer, 'verify'> },
): void {
  app.decorateRequest('identity', undefined);
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
  app.decorate('identify', ((request, _reply, done) => {
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
  }) satisfies onRequestHookHandler);
}

/** A route's own hooks of one kind as a list (fastify takes none, one or several). */
export function hookList<T>(hooks: T | T[] | undefined): T[] {
  return hooks === undefined ? [] : (([hooks] as (T | T[])[]).flat() as T[]);
}

function userOrRefusal(request: FastifyRequest): Identity | ProblemError {
  return (
    request.identity ??
    request.authError ??
    new ProblemError('INVALID_TOKEN', 'a Bearer JWT is required; log in first')
  );
}

/** onRequest, after `identify`: a user or admin JWT. Callback style, as every hook of a request's path. */
export function requireUser(
  request: FastifyRequest,
  _reply: FastifyReply,
  done: HookHandlerDoneFunction,
): void {
  const caller = userOrRefusal(request);
  done(caller instanceof ProblemError ? caller : undefined);
}

/** onRequest, after `identify`: an admin JWT. */
export function requireAdmin(
  request: FastifyRequest,
  _reply: FastifyReply,
  done: HookHandlerDoneFunction,
): void {
  const caller = userOrRefusal(request);
  if (caller instanceof ProblemError) return done(caller);
  done(
    caller.role === 'admin' ? undefined : new ProblemError('FORBIDDEN', 'this action needs an admin token'),
  );
}

/** onRequest, after `identifyAgent` and the rate limit: the agent token of the router in the path. */
export function requireAgent(
  request: FastifyRequest,
  _reply: FastifyReply,
  done: HookHandlerDoneFunction,
): void {
  if (request.agentRouter === undefined)
    return done(
      new ProblemError('INVALID_TOKEN', "the agent token is missing or is not this router's token"),
    );
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
  if (list.includes(requireUser)) return 'user';
  if (list.includes(requireAgent)) return 'agent';
  return 'none';
}

/**
 * The users' rate-limit keys, made once per ASN: one string fewer to build on every user request. Only
 * ASNs of valid tokens get here, so the map grows no further than the users of this controller.
 */
const userKeys = new Map<number, string>();

/** Rate-limit key: the user, the router (agent routes), or before authentication the client address. */
export function rateLimitKey(request: FastifyRequest): string {
  if (request.agentRouter !== undefined) return `agent:${request.agentRouter}`;
  if (request.identity) {
    const { asn } = request.identity;
    let key = userKeys.get(asn);
    if (key === undefined) userKeys.set(asn, (key = `asn:${asn}`));
    return key;
  }
  return `ip:${request.ip}`;
}
