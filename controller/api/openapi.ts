/**
 * The OpenAPI 3.1 document (GET /openapi.json), generated from the routes' own fastify `schema`s: their
 * operationId, summary, description, params, querystring, body and responses, and from their hooks the
 * token each needs (auth.ts, guardOf). A route without an operationId is left out (the login-less
 * controller's /login). Why a generator of our own rather than @fastify/swagger: docs/decisions.md.
 */
import type { FastifyInstance, FastifySchema } from 'fastify';
import { ErrorCodes } from '../../common/errors.ts';
import { VERSION } from '../../common/version.ts';
import { guardOf, hookList } from './auth.ts';
import { Problem } from './schemas.ts';

declare module 'fastify' {
  interface FastifySchema {
    /** Unique per operation: the name clients generated from the document use. */
    operationId?: string;
    summary?: string;
    description?: string;
  }
}

interface Operation {
  method: string;
  url: string;
  schema: FastifySchema;
  guard: ReturnType<typeof guardOf>;
  /** Whether the route lists `app.rateLimit` among its hooks: its answers carry the limit headers. */
  limited: boolean;
}

type Json = Record<string, unknown>;

/** The groups of the reference page, by a path's first segment. */
const TAGS: Record<string, string> = {
  session: "A network's own sessions (user JWT; admins see every session)",
  admin: 'Sessions, routers and the routing policy (admin JWT)',
  agent: "The router agent's endpoints (the router's agent token)",
  login: 'Logging in with a signature of a maintainer of the ASN',
  public: 'Without a token: health, metrics, routers, this document',
};

const tagOf = (url: string): string => {
  const first = url.split('/')[1] ?? '';
  return Object.hasOwn(TAGS, first) ? first : 'public';
};

/** Collects every documented route registered after it (the unprefixed copy of each). */
export function collectRoutes(app: FastifyInstance): Operation[] {
  const operations: Operation[] = [];
  app.addHook('onRoute', (route) => {
    const schema = route.schema;
    if (!schema?.operationId || route.url.startsWith('/api/v1/')) return;
    for (const method of [route.method].flat())
      if (method !== 'HEAD')
        operations.push({
          method,
          url: route.url,
          schema,
          guard: guardOf(route.onRequest),
          limited: hookList(route.onRequest).includes(app.rateLimit),
        });
  });
  return operations;
}

/** A schema as plain JSON: TypeBox's own keys (`~kind`, `~optional`) are not JSON Schema. */
function plain<T>(schema: T): T {
  return JSON.parse(
    JSON.stringify(schema, (key, value: unknown) => (key.startsWith('~') ? undefined : value)),
  ) as T;
}

const firstExample = (schema: unknown): unknown =>
  (schema as { examples?: unknown[] } | undefined)?.examples?.[0];

function parameters(schema: FastifySchema): Json[] {
  const of = (part: unknown, where: 'path' | 'query'): Json[] => {
    const s = part as { properties?: Record<string, Json>; required?: string[] } | undefined;
    return Object.entries(s?.properties ?? {}).map(([name, property]) => {
      const { description, ...rest } = plain(property);
      const example = firstExample(property);
      return {
        name,
        in: where,
        required: where === 'path' || (s?.required ?? []).includes(name),
        ...(description !== undefined ? { description } : {}),
        schema: rest,
        ...(example !== undefined ? { example } : {}),
      };
    });
  };
  return [...of(schema.params, 'path'), ...of(schema.querystring, 'query')];
}

/**
 * A JSON body: one named example per action of a multi-action body, else the schema's own. A
 * multi-action body's variants go to components.schemas as `<operationId>-<action>`: a discriminator
 * selects named schemas only.
 */
function jsonContent(schema: unknown, components: Json, operationId: string): Json {
  const { oneOf: variants, discriminator } = schema as { oneOf?: unknown[]; discriminator?: unknown };
  if (!variants || !discriminator) {
    const example = firstExample(schema);
    return { schema: plain(schema), ...(example !== undefined ? { example } : {}) };
  }
  const examples: Json = {};
  const refs: Json[] = [];
  const mapping: Record<string, string> = {};
  for (const variant of variants) {
    const action = (variant as { properties?: { action?: { const?: string } } }).properties?.action?.const;
    if (action === undefined) continue;
    const ref = `#/components/schemas/${operationId}-${action}`;
    components[`${operationId}-${action}`] = plain(variant);
    refs.push({ $ref: ref });
    mapping[action] = ref;
    const value = firstExample(variant);
    if (value !== undefined) examples[action] = { summary: action, value };
  }
  return { schema: { oneOf: refs, discriminator: { propertyName: 'action', mapping } }, examples };
}

const LIMIT_HEADERS = Object.fromEntries(
  ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset'].map((name) => [
    name,
    { $ref: `#/components/headers/${name}` },
  ]),
);

function responses(schema: FastifySchema, components: Json, operationId: string, limited: boolean): Json {
  const out: Json = {};
  for (const [status, response] of Object.entries((schema.response ?? {}) as Record<string, Json>)) {
    const given = response['content'] as Record<string, Json> | undefined;
    // a schema of no value (`Type.Unsafe<void>`) is an answer without a body, such as 304
    const bodyless = !given && !['type', 'anyOf', 'oneOf', 'allOf', '$ref'].some((k) => k in response);
    const content = given
      ? Object.fromEntries(
          Object.entries(given).map(([type, media]) => [
            type,
            jsonContent(media['schema'], components, operationId),
          ]),
        )
      : { 'application/json': jsonContent(response, components, operationId) };
    out[status] = {
      description: status === '200' ? 'OK' : (response['description'] ?? status),
      ...(limited && Number(status) < 400 ? { headers: LIMIT_HEADERS } : {}),
      ...(bodyless ? {} : { content }),
    };
  }
  out['4XX'] = { $ref: '#/components/responses/Problem' };
  out['5XX'] = { $ref: '#/components/responses/Problem' };
  return out;
}

const SECURITY = { user: 'jwt', admin: 'jwt', agent: 'agentToken' } as const;

export function openApiDocument(operations: Operation[]): Json {
  const paths: Record<string, Json> = {};
  const schemas: Json = {};
  for (const { method, url, schema, guard, limited } of operations) {
    const id = schema.operationId ?? '';
    const op: Json = {
      operationId: id,
      summary: schema.summary,
      ...(schema.description ? { description: schema.description } : {}),
      tags: [tagOf(url)],
      parameters: parameters(schema),
      responses: responses(schema, schemas, id, limited),
    };
    // `[]`: the route asks for no token (said explicitly, not inherited)
    op['security'] = guard === 'none' ? [] : [{ [SECURITY[guard]]: [] }];
    if (schema.body)
      op['requestBody'] = {
        required: true,
        content: { 'application/json': jsonContent(schema.body, schemas, id) },
      };
    (paths[url.replace(/:([A-Za-z]+)/g, '{$1}')] ??= {})[method.toLowerCase()] = op;
  }
  const tags = [...new Set(operations.map((o) => tagOf(o.url)))].map((name) => ({
    name,
    description: TAGS[name],
  }));
  return {
    openapi: '3.1.0',
    info: {
      title: 'peerops controller API',
      version: VERSION,
      description:
        'The REST API of a peerops controller (docs/api.md). Every failure is problem details ' +
        `(RFC 9457) with a machine \`code\`: ${Object.keys(ErrorCodes).join(', ')}.`,
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: [
      { url: '/', description: 'this controller' },
      { url: '/api/v1', description: 'the same routes under the versioned prefix' },
    ],
    tags,
    paths,
    components: {
      schemas,
      securitySchemes: {
        jwt: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'from POST /login' },
        agentToken: { type: 'http', scheme: 'bearer', description: "the router's own agent token" },
      },
      headers: {
        'X-RateLimit-Limit': {
          description: "Requests a minute the caller's limit allows (docs/api.md, Rate limits)",
          schema: { type: 'integer', minimum: 1 },
        },
        'X-RateLimit-Remaining': {
          description: "Requests left in the caller's current minute",
          schema: { type: 'integer', minimum: 0 },
        },
        'X-RateLimit-Reset': {
          description: 'When the current minute ends, Unix epoch seconds',
          schema: { type: 'integer', minimum: 0 },
        },
      },
      responses: {
        Problem: {
          description: 'Problem details: the code, and the fields at fault with the reason',
          content: {
            'application/problem+json': {
              schema: plain(Problem),
              example: {
                type: 'about:blank',
                title: 'Bad Request',
                status: 400,
                code: 'INVALID_REQUEST',
                detail: 'create /mtu: must be <= 9000',
                errors: [{ pointer: '/mtu', message: 'must be <= 9000' }],
              },
            },
          },
        },
      },
    },
  };
}
