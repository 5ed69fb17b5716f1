/**
 * GET /openapi.json against what the app really serves: every route is in it with its request and answer
 * schemas, generated from the routes' own fastify schemas (an operationId, a summary and an example on
 * each, no TypeBox internals), and real answers of the session and admin routes validate against the
 * schemas it gives. Redocly's linter runs on it in openapi-lint.test.ts.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ajv } from '../../common/validate.ts';
import { expectOk, routerFields, sessionFields, startHarness, type Harness } from './helpers.ts';

let h: Harness;
type Doc = {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, object> };
};
type Media = { schema: object; example?: unknown; examples?: Record<string, unknown> };
type Operation = {
  operationId?: string;
  summary?: string;
  parameters?: { name: string; in: string; example?: unknown; schema: Record<string, unknown> }[];
  requestBody?: { content: Record<string, Media> };
  responses: Record<string, { content?: Record<string, Media> }>;
};
let doc: Doc;

beforeAll(async () => {
  h = await startHarness();
  await h.post('/admin/policy', h.admin, { action: 'set', spec: { dn42Asn: 4242420000 } });
  await h.addRouter('fra1');
  doc = (await expectOk(h.get('/openapi.json'))).json();
});
afterAll(async () => h?.close());

/** `METHOD /path` of every route the app serves, from fastify's own route tree (HEAD left out). */
function servedRoutes(app: FastifyInstance): string[] {
  const routes: string[] = [];
  const stack: string[] = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    const m = /^(.*?)[├└]── (\S+)(?: \(([^)]+)\))?$/.exec(line);
    if (!m) continue;
    const depth = (m[1] ?? '').length / 4;
    stack.length = depth;
    const path = (stack[depth - 1] ?? '') + m[2];
    stack[depth] = path;
    for (const method of (m[3] ?? '').split(', ').filter((x) => x && x !== 'HEAD'))
      routes.push(`${method} ${path}`);
  }
  return routes;
}

const answerSchema = (path: string, method = 'post') =>
  doc.paths[path]?.[method]?.responses['200']?.content?.['application/json']?.schema as object;

describe('GET /openapi.json', () => {
  it('documents every route the app serves (under /api/v1 too), each POST with its body', () => {
    const served = servedRoutes(h.app)
      .filter((r) => !r.includes(' /api/v1/'))
      // the login-less controller's /login only says why there is none (errors.test.ts)
      .filter((r) => r !== 'POST /login')
      // the web portal's page and assets are not the API (controller/portal)
      .filter((r) => r !== 'GET /' && r !== 'GET /assets/:file');
    expect(served.length).toBeGreaterThan(15);
    const documented = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${path.replace(/\{([A-Za-z]+)\}/g, ':$1')}`),
    );
    expect(documented.sort()).toEqual(served.sort());
    for (const route of served.filter((r) => r.startsWith('POST ')))
      expect(
        doc.paths[route.slice(5).replace(/:([A-Za-z]+)/g, '{$1}')]?.post?.requestBody,
        route,
      ).toBeDefined();
    const all = servedRoutes(h.app);
    for (const route of served) expect(all).toContain(route.replace(' /', ' /api/v1/'));
  });

  it('names, sums up and shows an example of every operation; no TypeBox internals', () => {
    const ids = new Set<string>();
    for (const [path, ops] of Object.entries(doc.paths))
      for (const [method, op] of Object.entries(ops)) {
        const name = `${method} ${path}`;
        expect(op.operationId, name).toMatch(/^[A-Za-z][A-Za-z0-9]*$/);
        expect(ids.has(op.operationId ?? ''), `${name}: operationId twice`).toBe(false);
        ids.add(op.operationId ?? '');
        expect(op.summary, name).toBeTruthy();
        const media = [
          ...Object.values(op.requestBody?.content ?? {}),
          ...Object.values(op.responses).flatMap((r) => Object.values(r.content ?? {})),
        ];
        const examples =
          media.filter((m) => m.example !== undefined || Object.keys(m.examples ?? {}).length > 0).length +
          (op.parameters ?? []).filter((p) => p.example !== undefined).length;
        expect(examples, `${name}: no example`).toBeGreaterThan(0);
      }
    expect(JSON.stringify(doc)).not.toMatch(/"~[a-z]+"/);
  });

  it("reads each route's token from the hooks it lists: every /admin route an admin JWT, every /agent one the router's token", () => {
    // a route that forgot its onRequest guard (or kept one in preHandler) shows up here as `security: []`
    const expected = (path: string) =>
      path.startsWith('/admin/') || path === '/session'
        ? [{ jwt: [] }]
        : path.startsWith('/agent/')
          ? [{ agentToken: [] }]
          : undefined;
    for (const [path, ops] of Object.entries(doc.paths))
      for (const [method, op] of Object.entries(ops)) {
        const security = (op as { security?: unknown }).security;
        const want = expected(path);
        if (want) expect(security, `${method} ${path}`).toEqual(want);
        else expect(security, `${method} ${path}`).toBeDefined();
      }
  });

  it('says which answers carry the rate-limit headers: every route but the probes and the scrape', () => {
    for (const [path, ops] of Object.entries(doc.paths))
      for (const [method, op] of Object.entries(ops)) {
        const headers = Object.keys((op.responses['200'] as { headers?: object }).headers ?? {});
        const unlimited = ['/health', '/livez', '/metrics'].includes(path);
        expect(headers, `${method} ${path}`).toEqual(
          unlimited ? [] : ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset'],
        );
      }
  });

  it('says what the handlers check beyond types: modify needs a field to change, wait is 0..300', () => {
    expect(JSON.stringify(doc.components.schemas['session-modify'])).toMatch(/at least one field to change/);
    const wait = doc.paths['/agent/{router}/sessions']?.get?.parameters?.find((p) => p.name === 'wait');
    expect(wait).toMatchObject({
      in: 'query',
      required: false,
      schema: { type: 'integer', minimum: 0, maximum: 300 },
    });
    // every action of a multi-action body is a named schema the discriminator maps to, with an example
    const session = doc.paths['/session']?.post?.requestBody?.content['application/json'];
    expect(Object.keys(session?.examples ?? {}).sort()).toEqual([
      'config',
      'create',
      'delete',
      'list',
      'modify',
      'restart',
    ]);
    expect(session?.schema).toMatchObject({ discriminator: { propertyName: 'action' } });
  });

  it('gives an answer schema for every route, and real answers validate against it', async () => {
    for (const [path, ops] of Object.entries(doc.paths))
      for (const [method, op] of Object.entries(ops))
        expect(Object.keys(op.responses['200']?.content ?? {}), `${method} ${path}`).not.toEqual([]);
    const session = answerSchema('/session');
    const created = await h.post('/session', h.user, sessionFields('fra1'));
    for (const res of [created, await h.post('/session', h.user, { action: 'list' })]) {
      expect(res.statusCode, res.body).toBe(200);
      expect(ajv.validate(session, res.json()), `${res.body} ${ajv.errorsText()}`).toBe(true);
    }
    const routers = await expectOk(h.get('/routers'));
    expect(ajv.validate(answerSchema('/routers', 'get'), routers.json()), ajv.errorsText()).toBe(true);
    const router = answerSchema('/admin/router');
    const answers = [
      await h.post('/admin/router', h.admin, { action: 'add', ...routerFields('doc1') }),
      await h.post('/admin/router', h.admin, { action: 'list' }),
      await h.post('/admin/router', h.admin, {
        action: 'update',
        name: 'doc1',
        spec: { displayName: 'Docs' },
      }),
      await h.post('/admin/router', h.admin, { action: 'rotate-token', name: 'doc1' }),
      await h.post('/admin/router', h.admin, { action: 'remove', name: 'doc1' }),
    ];
    for (const res of answers) {
      expect(res.statusCode, res.body).toBe(200);
      expect(ajv.validate(router, res.json()), `${res.body} ${ajv.errorsText()}`).toBe(true);
    }
    const policy = answerSchema('/admin/policy');
    for (const body of [
      { action: 'set', spec: { dn42Asn: 4242420000, blockedAsns: [4242429999] } },
      { action: 'get' },
    ]) {
      const res = await expectOk(h.post('/admin/policy', h.admin, body));
      expect(ajv.validate(policy, res.json()), ajv.errorsText()).toBe(true);
    }
    // a wrong answer does not pass: the schemas say something
    expect(ajv.validate(router, { routers: [{ name: 'x' }] })).toBe(false);
  });
});
