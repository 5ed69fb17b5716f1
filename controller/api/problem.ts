/**
 * Every failure as RFC 9457 problem details with a machine `code` (docs/api.md, Errors). fastify's own
 * errors (bad JSON, wrong content type, oversized body, rate limit) are mapped onto the same codes; an
 * unexpected error is logged and answered 500 INTERNAL without its message or stack.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ServerResponse, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { DomainError, ProblemError, type ErrorCode, type FieldError } from '../../common/errors.ts';
import { problem, type MessageKey, type MessageParams, type RefusalKey } from '../../common/messages.ts';
import { rateLimitHeadersOf } from './rate-limit.ts';

export interface ProblemBody {
  type: 'about:blank';
  title: string;
  status: number;
  code: ErrorCode;
  detail: string;
  /** The catalogue key of `detail` and its parameters (docs/api.md, Errors, Message keys). */
  key?: MessageKey;
  params?: MessageParams;
  errors?: FieldError[];
}

export function problemBody(err: ProblemError): ProblemBody {
  const body: ProblemBody = {
    type: 'about:blank',
    title: STATUS_CODES[err.status] ?? 'Error',
    status: err.status,
    code: err.code,
    detail: err.message,
  };
  if (err.keyed) {
    body.key = err.keyed.key;
    body.params = err.keyed.params;
  }
  if (err.errors?.length) body.errors = err.errors;
  return body;
}

export function sendProblem(reply: FastifyReply, err: ProblemError): FastifyReply {
  if (err.code === 'INVALID_TOKEN') reply.header('www-authenticate', 'Bearer');
  return reply.code(err.status).type('application/problem+json').send(problemBody(err));
}

/**
 * The one mapping of errors to answers: a DomainError (the store's and the rules' refusals) gets the
 * status of its code; fastify and plugin errors get our codes. Only client errors keep a (fastify-written)
 * message.
 */
function toProblem(err: FastifyError | DomainError | Error): ProblemError | undefined {
  if (err instanceof DomainError) return ProblemError.of(err);
  const status = (err as FastifyError).statusCode;
  const code = (err as FastifyError).code;
  if (status === 429) return problem('request.rateLimited');
  if (status === 413 || code === 'FST_ERR_CTP_BODY_TOO_LARGE') return problem('request.tooLarge');
  if (status === 415 || code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return problem('request.mediaType');
  if (code === 'FST_ERR_CTP_EMPTY_JSON_BODY') return problem('request.emptyBody');
  if (err instanceof SyntaxError || code === 'FST_ERR_CTP_INVALID_JSON_BODY')
    return problem('request.notJson');
  if (typeof status === 'number' && status >= 400 && status < 500)
    return problem(GENERIC_REFUSALS[status] ?? 'request.invalid', { reason: code ?? String(status) });
  return undefined;
}

/**
 * Any other client error fastify raises (a Content-Length that does not match the body, a malformed
 * URL, …) by its status: the refusal whose code in docs/api.md's Errors table means just that status,
 * else 400.
 */
const GENERIC_REFUSALS: Partial<Record<number, RefusalKey>> = {
  400: 'request.invalid',
  401: 'request.unauthenticated',
  403: 'request.forbidden',
  404: 'request.notFound',
  409: 'request.conflict',
};

/**
 * Requests Node's HTTP parser refuses before fastify sees them (headers over 16 KiB, malformed request
 * line or headers, a request not complete within the request timeout) get a problem+json answer too,
 * written to the socket, which is then closed: the rest of what the client sent cannot be trusted.
 */
export function clientErrorHandler(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  // The request a route was reading (its body too slow): Node's own in-flight response. Once that has
  // begun, a second answer would garble the first; else the answer carries the request's limit headers.
  const inFlight = (socket as Socket & { _httpMessage?: unknown })._httpMessage;
  const response: ServerResponse | undefined = inFlight instanceof ServerResponse ? inFlight : undefined;
  if (response?.headersSent) {
    socket.destroy();
    return;
  }
  const refusal =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? 'request.headersTooLarge'
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? 'request.timeout'
        : 'request.notHttp';
  const limits = response ? rateLimitHeadersOf(response.req) : undefined;
  answerOnSocket(socket, problem(refusal), limits);
}

/** A problem written straight to a connection, which is then closed. */
export function answerOnSocket(
  socket: Socket,
  problem: ProblemError,
  headers: Record<string, number> = {},
): void {
  if (socket.writable) {
    const body = JSON.stringify(problemBody(problem));
    const extra = Object.entries(headers)
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('');
    socket.write(
      `HTTP/1.1 ${problem.status} ${STATUS_CODES[problem.status] ?? 'Error'}\r\n${extra}` +
        `Content-Type: application/problem+json\r\nX-Content-Type-Options: nosniff\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

/**
 * What the router itself refuses before any route is chosen (fastify's `frameworkErrors`): a path
 * parameter over fastify's 100 characters (its own answer was a non-problem 414) and a URL whose
 * percent-encoding does not decode. Both 400 INVALID_REQUEST, the fastify code in the detail, as any
 * other client error of fastify's (docs/api.md, Errors).
 */
function frameworkProblem(err: FastifyError): ProblemError {
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') return problem('request.pathSegmentTooLong');
  if (err.code === 'FST_ERR_BAD_URL') return problem('request.badUrl');
  return toProblem(err) ?? problem('internal');
}

/** The answers of requests that reached no route: 404s and the router's own refusals. */
export interface Unrouted {
  /** Counts the request against the caller's limit: sets the limit headers, throws RATE_LIMITED. */
  countRequest?: (request: FastifyRequest, reply: FastifyReply) => Promise<void>;
  /** Records the answer (metrics and log line); routes' own hooks do not run for these requests. */
  onNotFound?: (request: FastifyRequest, reply: FastifyReply, status: number) => void;
}

/** Answers `problem` for a request no route took, after counting it (a 429 wins). */
async function answerUnrouted(
  request: FastifyRequest,
  reply: FastifyReply,
  problem: ProblemError,
  unrouted: Unrouted,
): Promise<FastifyReply> {
  try {
    await unrouted.countRequest?.(request, reply);
  } catch (err) {
    if (!(err instanceof DomainError)) throw err;
    problem = ProblemError.of(err);
  }
  unrouted.onNotFound?.(request, reply, problem.status);
  return sendProblem(reply, problem);
}

/**
 * fastify's `frameworkErrors` option: the router's refusals as problems, counted and recorded like
 * 404s. `unrouted` is read when a request comes, so the rate limiter may be installed after the
 * instance that takes this handler is created.
 */
export function frameworkErrorHandler(
  unrouted: () => Unrouted,
): (err: FastifyError, request: FastifyRequest, reply: FastifyReply) => void {
  return (err, request, reply) => {
    answerUnrouted(request, reply, frameworkProblem(err), unrouted()).catch((failure: unknown) => {
      request.log.error({ reqId: request.id, err: failure }, 'unexpected error');
      if (!reply.sent) sendProblem(reply, problem('internal'));
    });
  };
}

/**
 * The error handler and the 404 answer. A request that matched no route is counted against the caller's
 * rate limit like any other (`countRequest`, which sets the limit headers and throws RATE_LIMITED), and
 * `onNotFound` records it as it is answered (routes' own hooks do not run for it): metrics and log line.
 */
export function installErrorHandling(app: FastifyInstance, notFound: Unrouted = {}): void {
  app.setErrorHandler((err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const answer = toProblem(err);
    if (answer) {
      if (answer.status >= 500)
        request.log.error({ reqId: request.id, code: answer.code, detail: answer.message }, 'request failed');
      return sendProblem(reply, answer);
    }
    request.log.error({ reqId: request.id, err }, 'unexpected error');
    return sendProblem(reply, problem('internal'));
  });
  app.setNotFoundHandler(async (request, reply) =>
    answerUnrouted(
      request,
      reply,
      problem('route.notFound', { method: request.method, path: request.url.split('?')[0] ?? '/' }),
      notFound,
    ),
  );
}
