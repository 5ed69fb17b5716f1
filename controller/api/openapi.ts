/**
 * The OpenAPI 3.1 document, generated from the routes themselves: each route's `config.docs` names the
 * shared schemas (common/schema.ts, common/agent-api.ts, api/schemas.ts) of its bodies.
 */
import type { FastifyInstance } from 'fastify';
import type { TSchema } from 'typebox';
import { ErrorCodes } from '../../common/errors.ts';
import { VERSION } from '../../common/version.ts';
import { Problem } from './schemas.ts';

export interface RouteDocs {
  summary: string;
  auth?: 'user' | 'admin' | 'agent' | 'none';
  /** Multi-action routes: action name → body schema. */
  actions?: Record<string, TSchema>;
  /** Per action (multi-action routes) response schema. */
  responses?: Record<string, TSchema>;
  body?: TSchema;
  response?: TSchema;
  query?: Record<string, string>;
  contentType?: string;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    docs?: RouteDocs;
  }
}

interface Operation {
  method: string;
  url: string;
  docs: RouteDocs;
}

const json = (schema: TSchema) => ({ 'application/json': { schema } });

export function collectRoutes(app: FastifyInstance): Operation[] {
  const operations: Operation[] = [];
  app.addHook('onRoute', (route) => {
    const docs = route.config?.docs;
    if (!docs || route.url.startsWith('/api/v1/')) return;
    for (const method of [route.method].flat())
      if (method !== 'HEAD') operations.push({ method, url: route.url, docs });
  });
  return operations;
}

export function openApiDocument(operations: Operation[]): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const { method, url, docs } of operations) {
    const path = url.replace(/:([A-Za-z]+)/g, '{$1}');
    const parameters: unknown[] = [...url.matchAll(/:([A-Za-z]+)/g)].map((m) => ({
      name: m[1],
      in: 'path',
      required: true,
      schema: { type: 'string' },
    }));
    for (const [name, description] of Object.entries(docs.query ?? {}))
      parameters.push({
        name,
        in: 'query',
        required: false,
        description,
        schema: { type: 'integer', minimum: 0 },
      });
    const op: Record<string, unknown> = {
      summary: docs.summary,
      parameters,
      responses: {
        '200': docs.responses
          ? {
              description: 'by action',
              content: json({ anyOf: Object.values(docs.responses) } as unknown as TSchema),
            }
          : { description: 'OK', ...(docs.response ? { content: json(docs.response) } : {}) },
        default: {
          description: 'problem details',
          content: { 'application/problem+json': { schema: Problem } },
        },
      },
    };
    if (docs.auth && docs.auth !== 'none')
      op.security = [{ [docs.auth === 'agent' ? 'agentToken' : 'jwt']: [] }];
    if (docs.actions)
      op.requestBody = {
        required: true,
        content: json({
          oneOf: Object.values(docs.actions),
          discriminator: { propertyName: 'action' },
        } as unknown as TSchema),
      };
    else if (docs.body) op.requestBody = { required: true, content: json(docs.body) };
    (paths[path] ??= {})[method.toLowerCase()] = op;
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'peerops controller API',
      version: VERSION,
      description: `Every path also answers under /api/v1. Error codes: ${Object.keys(ErrorCodes).join(', ')}.`,
    },
    paths,
    components: {
      securitySchemes: {
        jwt: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
        agentToken: { type: 'http', scheme: 'bearer', description: "the router's own agent token" },
      },
    },
  };
}
