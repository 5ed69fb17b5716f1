/**
 * How the routes' schemas check requests: fastify's validator compiler for this API. Bodies go through
 * the project's own ajv (common/validate.ts: its formats, defaults, canonical addresses) and fail as
 * problem details naming the field and the reason (docs/api.md, Errors); fastify's default ajv would strip
 * unknown fields silently and answer in its own words.
 *
 * - every body first passes the number and depth guard (assertSafeNumbers);
 * - a multi-action body (`Actions([...])`, schemas.ts) is checked against its action's schema only:
 *   INVALID_ACTION for a missing or unknown action, then INVALID_REQUEST for its fields;
 * - query strings and path parameters arrive as text: numbers are read from it (`?wait=30`), written in
 *   decimal digits only (docs/api.md, Conventions): ajv would also read `0x10`, `1e1` and ` 5`.
 */
import { Ajv } from 'ajv';
import type { FastifySchemaCompiler, FastifyTypeProvider } from 'fastify';
import type { Static, TSchema } from 'typebox';
import { ProblemError } from '../../common/errors.ts';
import { fieldError, problem } from '../../common/messages.ts';
import { checkOrThrow, toFieldErrors, validateOrThrow, type Checked } from '../../common/validate.ts';

/**
 * The deepest nesting of objects and arrays a request body may have (docs/api.md, Conventions, Bodies).
 * JSON nested thousands deep is small (`[[[[…` fits 30,000 levels in 64 KiB) and parses (JSON.parse and
 * secure-json-parse are iterative), but a recursive walk over it overflows the stack: a 500. The number
 * guard below is the first walk of every body and stops at this depth; the deepest real body (a policy,
 * an admission review with managedFields) is under 20 levels.
 */
export const MAX_JSON_DEPTH = 64;

function tooDeep(): ProblemError {
  return problem('request.tooDeep', { depth: MAX_JSON_DEPTH });
}

/**
 * JSON numbers beyond 2^53 lose precision silently (an ASN or a byte count would change on the way in):
 * they are refused wherever they appear, before any schema sees them.
 */
export function assertSafeNumbers(value: unknown): void {
  const path = unsafeNumberPath(value);
  if (path === undefined) return;
  const pointer = path.map((k) => `/${String(k).replace(/~/g, '~0').replace(/\//g, '~1')}`).join('') || '/';
  const error = fieldError(pointer, 'field.unsafeNumber', { max: Number.MAX_SAFE_INTEGER });
  throw problem('request.invalidField', { what: 'request', pointer, reason: error.message }, [error]);
}

/**
 * The path to the first unsafe number, or undefined; pointers are built only for a refusal. Bounded:
 * a value nested deeper than MAX_JSON_DEPTH is refused as it is reached, before any deeper recursion,
 * so this walk is the depth check of every body too (one walk instead of two on the agents' hot path).
 */
function unsafeNumberPath(value: unknown, depth = 0): (string | number)[] | undefined {
  if (typeof value === 'number')
    return Number.isFinite(value) && Math.abs(value) <= Number.MAX_SAFE_INTEGER ? undefined : [];
  if (value === null || typeof value !== 'object') return undefined;
  if (depth >= MAX_JSON_DEPTH) throw tooDeep();
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const path = unsafeNumberPath(value[i], depth + 1);
      if (path) return [i, ...path];
    }
    return undefined;
  }
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    const path = unsafeNumberPath((value as Record<string, unknown>)[key], depth + 1);
    if (path) return [key, ...path];
  }
  return undefined;
}

/** Only for query strings and path parameters: their values are strings until a schema reads them. */
const textAjv = new Ajv({ allErrors: true, coerceTypes: true, strict: false });

/** A whole number in text: decimal digits, a sign at most; 15 digits stay within 2^53. */
const DECIMAL_INTEGER = /^-?[0-9]{1,15}$/;

/** The names of an object schema's integer properties (`?wait=`), read from text as decimal only. */
function integerFields(schema: TSchema): string[] {
  const properties = (schema as { properties?: Record<string, { type?: unknown }> }).properties ?? {};
  return Object.keys(properties).filter((name) => properties[name]?.type === 'integer');
}

/** The first integer field whose text is not plain decimal, as the problem that names it. */
function notDecimal(value: unknown, fields: string[], part: string): ProblemError | undefined {
  for (const name of fields) {
    const text = (value as Record<string, unknown> | null)?.[name];
    if (typeof text !== 'string' || DECIMAL_INTEGER.test(text)) continue;
    const error = fieldError(`/${name}`, 'field.notDecimal');
    return problem('request.invalidField', { what: part, pointer: error.pointer, reason: error.message }, [
      error,
    ]);
  }
  return undefined;
}

/** The action → schema table of an `Actions([...])` body, or undefined for any other schema. */
export function actionTable(schema: TSchema): Record<string, TSchema> | undefined {
  const s = schema as { oneOf?: TSchema[]; discriminator?: { propertyName?: string } };
  if (!s.oneOf || s.discriminator?.propertyName !== 'action') return undefined;
  const table: Record<string, TSchema> = {};
  for (const variant of s.oneOf) {
    const action = (variant as { properties?: { action?: { const?: unknown } } }).properties?.action?.const;
    if (typeof action !== 'string') throw new Error('every variant of Actions() needs a literal action');
    table[action] = variant;
  }
  return table;
}

/** A body's name in problem details: the last static segments of its route (`/agent/:router/mesh/status` → `mesh status`). */
function bodyName(url: string): string {
  const segments = url.split('/');
  const tail = segments.slice(segments.findLastIndex((s) => s.startsWith(':')) + 1).filter(Boolean);
  return tail.join(' ') || 'request';
}

/** The variant of a multi-action body by its `action`: INVALID_ACTION before any field is looked at. */
function actionSchema(body: unknown, table: Record<string, TSchema>): { action: string; schema: TSchema } {
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw problem('request.notActionObject');
  const action = (body as { action?: unknown }).action;
  if (typeof action === 'string' && Object.hasOwn(table, action))
    return { action, schema: table[action] as TSchema };
  const names = Object.keys(table).join(', ');
  if (action === undefined) throw problem('action.missing', { allowed: names });
  throw problem('action.unknown', { allowed: names }, [
    fieldError('/action', 'field.oneOf', { allowed: names }),
  ]);
}

type Result = { value: unknown } | { error: Error };

function outcome(read: () => unknown): Result {
  try {
    return { value: read() };
  } catch (err) {
    if (err instanceof ProblemError) return { error: err };
    throw err;
  }
}

/**
 * The validator compiler. `check` is for the agents' hot path (heartbeats, reports): the body is checked
 * as it is, without the copy and canonical forms of `validate` (common/validate.ts, checkOrThrow).
 */
export function apiValidatorCompiler(
  mode: 'validate' | 'check' = 'validate',
): FastifySchemaCompiler<TSchema> {
  return ({ schema, httpPart, url }) => {
    if (httpPart === 'body') {
      const actions = actionTable(schema);
      const what = bodyName(url);
      const read = mode === 'check' ? checkOrThrow : validateOrThrow;
      return (body) =>
        outcome(() => {
          assertSafeNumbers(body);
          if (!actions) return read(schema, body, what);
          const chosen = actionSchema(body, actions);
          return read(chosen.schema, body, chosen.action);
        });
    }
    const fn = textAjv.compile(schema);
    const part = httpPart === 'querystring' ? 'query' : (httpPart ?? 'request');
    const integers = integerFields(schema);
    return (value) => {
      const error = notDecimal(value, integers, part);
      if (error) return { error };
      if (fn(value)) return { value };
      const errors = toFieldErrors(fn.errors, '', value);
      const first = { what: part, pointer: errors[0]?.pointer ?? '/', reason: errors[0]?.message ?? '' };
      return { error: problem('request.invalidField', first, errors) };
    };
  };
}

/**
 * TypeBox's type provider with the brand of common/validate.ts: a body the route's schema checked is
 * `Checked<T>`, which the store's agent-facing methods (recordHeartbeat) take without checking again.
 */
export interface CheckedTypeProvider extends FastifyTypeProvider {
  validator: this['schema'] extends TSchema ? Checked<Static<this['schema']>> : unknown;
  serializer: this['schema'] extends TSchema ? Static<this['schema']> : unknown;
}
