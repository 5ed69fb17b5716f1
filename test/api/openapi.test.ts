/**
 * GET /openapi.json against what the app really serves: every route is in it with its request and answer
 * schemas, and real answers of the admin and login routes validate against the schemas it gives.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ajv } from '../../common/validate.ts';
import { expectOk, routerFields, startHarness, type Harness } from './helpers.ts';

let h: Harness;
type Doc = { paths: Record<string, Record<string, Operation>> };
type Operation = {
  requestBody?: { content: Record<string, { schema: object }> };
  responses: Record<string, { content?: Record<string, { schema: object }> }>;
};
let doc: Doc;

beforeAll(async () => {
  h = await startHarness();
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
      .filter((r) => r !== 'POST /login');
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

  it('gives an answer schema for every JSON route, and real admin answers validate against it', async () => {
    for (const [path, ops] of Object.entries(doc.paths))
      for (const [method, op] of Object.entries(ops))
        // /metrics is Prometheus text; /openapi.json is this document
        if (path !== '/metrics' && path !== '/openapi.json')
          expect(op.responses['200']?.content?.['application/json'], `${method} ${path}`).toBeDefined();
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
