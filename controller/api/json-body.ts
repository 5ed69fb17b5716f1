/**
 * The one JSON body parser of the controller's servers: fastify's own (secure-json-parse, refusing
 * `__proto__` and `constructor.prototype`), after a check of the nesting depth on the raw text.
 *
 * A body nested thousands deep is small (`[[[[…` fits 30,000 levels in 64 KiB) but every recursive walk
 * over it (the number guard, ajv's validators, freezing) overflows the stack: a 500 for any caller. The
 * depth is therefore counted once, here, by a loop over the text before anything parses or walks it, and
 * a body deeper than MAX_JSON_DEPTH is 400 INVALID_REQUEST (docs/api.md, Conventions, Bodies).
 */
import type { FastifyInstance } from 'fastify';
import { ProblemError } from '../../common/errors.ts';

/**
 * The deepest nesting of objects and arrays a body may have. The deepest real body (a policy, an
 * admission review with managedFields) is under 20 levels; 64 leaves room and keeps every walk shallow.
 */
export const MAX_JSON_DEPTH = 64;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;

/**
 * The nesting depth of JSON text, counted without parsing: brackets and braces outside strings. Text that
 * is not JSON gets some number; JSON.parse refuses it afterwards. Stops counting once past `max`.
 */
export function jsonDepth(text: string, max: number = Number.MAX_SAFE_INTEGER): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) inString = true;
    else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > deepest) {
        deepest = depth;
        if (deepest > max) return deepest;
      }
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) depth--;
  }
  return deepest;
}

/** The refusal of a body nested deeper than MAX_JSON_DEPTH. */
export function tooDeep(): ProblemError {
  return new ProblemError(
    'INVALID_REQUEST',
    `the request body is nested more than ${MAX_JSON_DEPTH} levels deep (objects and arrays)`,
  );
}

/** Replaces fastify's application/json parser by the same parser behind the depth check. */
export function installJsonParser(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    // parseAs 'string': always a string. Text shorter than the limit cannot nest deeper than it.
    const text = body as string;
    if (text.length > MAX_JSON_DEPTH && jsonDepth(text, MAX_JSON_DEPTH) > MAX_JSON_DEPTH)
      return done(tooDeep(), undefined);
    parse(request, text, done);
  });
}
