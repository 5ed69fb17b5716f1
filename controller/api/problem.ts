/**
 * Every failure as RFC 9457 problem details with a machine `code` (DESIGN.md section 3). fastify's own
 * errors (bad JSON, wrong content type, oversized body, rate limit) are mapped onto the same codes; an
 * unexpected error is logged and answered 500 INTERNAL without its message or stack.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { STATUS_CODES } from 'node:http';
import { ErrorCodes, ProblemError, type ErrorCode, type FieldError } from '../../common/errors.ts';

export interface ProblemBody {
  type: 'about:blank';
  title: string;
  status: number;
  code: ErrorCode;
  detail: string;
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
  if (err.errors?.length) body.errors = err.errors;
  return body;
}

export function sendProblem(reply: FastifyReply, err: ProblemError): FastifyReply {
  if (err.code === 'INVALID_TOKEN') reply.header('www-authenticate', 'Bearer');
  return reply.code(err.status).type('application/problem+json').send(problemBody(err));
}

/** fastify and plugin errors → our codes. Only client errors keep a (fastify-written) message. */
function toProblem(err: FastifyError | ProblemError | Error): ProblemError | undefined {
  if (err instanceof ProblemError) return err;
  const status = (err as FastifyError).statusCode;
  const code = (err as FastifyError).code;
  if (status === 429)
    return new ProblemError('RATE_LIMITED', 'too many requests; wait for X-RateLimit-Reset');
  if (status === 413 || code === 'FST_ERR_CTP_BODY_TOO_LARGE')
    return new ProblemError('PAYLOAD_TOO_LARGE', 'the request body is larger than the limit (64 KiB)');
  if (status === 415 || code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE')
    return new ProblemError('UNSUPPORTED_MEDIA_TYPE', 'the request body must be application/json');
  if (code === 'FST_ERR_CTP_EMPTY_JSON_BODY')
    return new ProblemError('INVALID_REQUEST', 'the request body is empty; a JSON object is expected');
  if (err instanceof SyntaxError || code === 'FST_ERR_CTP_INVALID_JSON_BODY')
    return new ProblemError('INVALID_REQUEST', 'the request body is not valid JSON');
  if (typeof status === 'number' && status >= 400 && status < 500) {
    const known = Object.entries(ErrorCodes).find(([, s]) => s === status)?.[0] as ErrorCode | undefined;
    return new ProblemError(status === 400 || !known ? 'INVALID_REQUEST' : known, 'the request is not valid');
  }
  return undefined;
}

/**
 * The error handler and the 404 answer. `onNotFound` runs as a request that matched no route is answered
 * (routes' own hooks do not run for it): the app's metrics and log line.
 */
export function installErrorHandling(
  app: FastifyInstance,
  onNotFound: (request: FastifyRequest, reply: FastifyReply) => void = () => {},
): void {
  app.setErrorHandler((err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const problem = toProblem(err);
    if (problem) {
      if (problem.status >= 500)
        request.log.error(
          { reqId: request.id, code: problem.code, detail: problem.message },
          'request failed',
        );
      return sendProblem(reply, problem);
    }
    request.log.error({ reqId: request.id, err }, 'unexpected error');
    return sendProblem(
      reply,
      new ProblemError('INTERNAL', 'internal error; the operator can find it in the log'),
    );
  });
  app.setNotFoundHandler((request, reply) => {
    onNotFound(request, reply);
    return sendProblem(
      reply,
      new ProblemError('NOT_FOUND', `no route ${request.method} ${request.url.split('?')[0]}`),
    );
  });
}
