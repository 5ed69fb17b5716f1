/**
 * What holds for every answer fastify sends (docs/api.md, Conventions), in one onSend hook:
 * - `X-Content-Type-Options: nosniff`: a browser takes a JSON or problem+json answer for what its
 *   Content-Type says, never for a script or a page it guessed from the bytes;
 * - an answer sent before the request's body has arrived (a refusal by the onRequest checks: 401, 403,
 *   429, a 404, a 413 while the body still streams) ends the connection. Node would otherwise read and
 *   drop the rest of the body to keep the connection alive, however long it is: a client without a token
 *   could make the controller read gigabytes (docs/api.md, Errors).
 */
import type { FastifyInstance, onSendHookHandler } from 'fastify';

const closeUnread: onSendHookHandler = (request, reply, payload, done) => {
  reply.header('x-content-type-options', 'nosniff');
  // `complete` is false until the parser has seen the end of the request (only on real sockets: fastify's
  // inject has no such property). Connection: close tells the client; destroying the socket once the
  // answer is written keeps Node from draining the body, which it does before it would close.
  if (request.raw.complete === false) {
    reply.header('connection', 'close');
    reply.raw.once('finish', () => request.raw.socket.destroy());
  }
  done(null, payload);
};

/** Adds the hook to the instance; routes registered after this call have it. */
export function installAnswerRules(app: FastifyInstance): void {
  app.addHook('onSend', closeUnread);
}
