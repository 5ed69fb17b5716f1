/**
 * Property-based hostile input over every route of GET /openapi.json (issue 24): for each operation and
 * each action of the multi-action bodies, schema-valid and hostile bodies, path parameters, query strings
 * and content types, each sent as a user, an admin, the router's agent and with no token. Every answer
 * is below 500; every refusal is problem+json with a documented code and a detail (docs/api.md, Errors)
 * and stores nothing. Valid requests may succeed and change the store; a refusal is compared with the
 * store as it was just before it.
 *
 * FUZZ_SEED and FUZZ_RUNS (runs per operation; each run sends one request per identity) change the
 * defaults; FUZZ_KEEP_GOING=1 prints every failing request instead of stopping to shrink the first. A
 * failure names the request and the answer; the store it met is the one the earlier runs left.
 */
import type { LightMyRequestResponse } from 'fastify';
import fc, { type Arbitrary } from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../common/errors.ts';
import { interfaceName } from '../../common/naming.ts';
import { ajv } from '../../common/validate.ts';
import { topics } from '../../controller/store/change-feed.ts';
import { hostile, toJson, valid, type Hints, type Schema } from '../support/schema-arbitrary.ts';
import { driver, startHarness, USER_ASN, type Harness } from './helpers.ts';

const SEED = Number(process.env.FUZZ_SEED || 24);
const RUNS = Number(process.env.FUZZ_RUNS || 100);
const KEEP_GOING = process.env.FUZZ_KEEP_GOING === '1';

const IDENTITIES = ['user', 'admin', 'agent', 'none'] as const;
type Identity = (typeof IDENTITIES)[number];

/** What exists only at send time (the store changes): a router's name, a session's uuid or interface. */
class Known {
  readonly kind: 'router' | 'session' | 'interface';
  readonly i: number;
  constructor(kind: 'router' | 'session' | 'interface', i: number) {
    this.kind = kind;
    this.i = i;
  }
}
const knownRouter = fc.nat(50).map((i) => new Known('router', i));
const knownSession = fc.nat(50).map((i) => new Known('session', i));
const knownInterface = fc.nat(50).map((i) => new Known('interface', i));
// `name` is a router's on /admin/router, a policy's on /admin/policy: a router's name is both
const HINTS: Hints = {
  router: knownRouter,
  name: knownRouter,
  uuid: knownSession,
  interface: knownInterface,
};

interface Operation {
  method: 'GET' | 'POST';
  path: string;
  params: string[];
  query: string[];
  body: Schema | undefined;
}

interface FuzzRequest {
  /** Every route answers under /api/v1 too (docs/api.md, Conventions). */
  prefix: '' | '/api/v1';
  /** Mostly the operation's own; sometimes one no route takes. */
  method: string;
  params: Record<string, unknown>;
  query: Record<string, string>;
  contentType: string | undefined;
  /** Conditional and content negotiation headers, never `*` (which would hold a long poll for `wait` s). */
  headers: Record<string, string>;
  /** The body as a value, or as text that need not be JSON. */
  body: { value: unknown } | { raw: string } | undefined;
}

const agentTokens = new Map<string, string>();
let requests = 0;
const failures: string[] = [];
/** Answers by status or problem code: shows that requests got past validation to lookups and writes. */
const answers = new Map<string, number>();

const FIXTURE_POLICY = { dn42Asn: 4242420000 };

// Built at load, not in beforeAll: the operations name the tests. The harness raises the rate limits
// (60/min per user, docs/api.md) so that every request reaches its handler.
const h: Harness = await startHarness();
// The live update stream lasts as long as its token, so inject would wait on it for ever:
// session-events.test.ts checks its answers and refusals over a real connection.
const operations: Operation[] = readOperations(
  withoutRefs((await h.get('/openapi.json')).json() as OpenApi),
).filter((op) => op.path !== '/session/events');

interface OpenApi {
  paths: Record<
    string,
    Record<
      string,
      {
        parameters?: { name: string; in: string }[];
        requestBody?: { content: Record<string, { schema: Schema }> };
      }
    >
  >;
}

/** The document with every local `$ref` (the actions of multi-action bodies) replaced by its target. */
function withoutRefs(doc: OpenApi): OpenApi {
  const resolve = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(resolve);
    if (node === null || typeof node !== 'object') return node;
    const ref = (node as { $ref?: unknown }).$ref;
    if (typeof ref === 'string')
      return resolve(
        ref
          .slice(2)
          .split('/')
          .reduce<unknown>((at, key) => (at as Record<string, unknown>)[key], doc),
      );
    return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, resolve(v)]));
  };
  return resolve(doc) as OpenApi;
}

function readOperations(doc: OpenApi): Operation[] {
  return Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.entries(ops).map(([method, op]) => ({
      method: method.toUpperCase() as 'GET' | 'POST',
      path,
      params: (op.parameters ?? []).filter((p) => p.in === 'path').map((p) => p.name),
      query: (op.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name),
      body: op.requestBody?.content['application/json']?.schema,
    })),
  );
}

beforeAll(async () => {
  await replenish();
  console.log(`fuzz: seed ${SEED}, ${RUNS} runs per operation`);
}, 120_000);

afterAll(async () => {
  if (failures.length) console.log(`fuzz: ${failures.length} failing requests\n${failures.join('\n')}`);
  const tally = [...answers].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k} ${n}`);
  console.log(`fuzz: answers ${tally.join(', ')}`);
  console.log(`fuzz: ${requests} requests, ${operations.length} operations, seed ${SEED}`);
  await h.close();
});

let replenishFailed = false;

/**
 * Routers fra1 and ams1 with their agent tokens, and on fra1 a session in every status and one of the
 * user's: what the fuzzer's hints point at. Valid requests delete, reject, rotate and remove; this puts
 * back what is gone before the next run.
 */
async function replenish(): Promise<void> {
  for (const name of ['fra1', 'ams1'])
    if (!h.store.getRouter(name)) {
      // a fuzzed add may have taken the next node id: try a few
      for (let i = 0; i < 5 && !h.store.getRouter(name); i++)
        await h.addRouter(name).then(
          (token) => agentTokens.set(name, token),
          () => undefined,
        );
    }
  const token = agentTokens.get('fra1') ?? '';
  const sessions = h.store.listSessions({ router: 'fra1' });
  const missing = [0, 1, 2, 3, 4, 5, 6].filter((c) => !sessions.some((s) => s.status.code === c));
  const userMissing = !sessions.some((s) => s.spec.asn === USER_ASN);
  if (missing.length === 0 && !userMissing) return;
  // a fuzzed policy or router update may refuse new sessions: the fixture's own first
  await h.post('/admin/policy', h.admin, { action: 'set', spec: FIXTURE_POLICY });
  await h.post('/admin/router', h.admin, {
    action: 'update',
    name: 'fra1',
    spec: { acceptingSessions: true, autoApprove: false, maxSessions: 100_000, linkLocal: 'fe80::1' },
  });
  const d = driver(h, 'fra1', token);
  try {
    if (userMissing) await d.create(h.user);
    for (const code of missing) await d.inStatus(code);
  } catch (err) {
    // seen only if a fuzzed change got in the way; the runs go on with what exists (said once)
    if (!replenishFailed) console.log(`fuzz: replenish: ${String(err).slice(0, 300)}`);
    replenishFailed = true;
  }
}

function resolve(v: unknown): unknown {
  if (!(v instanceof Known)) return v;
  // sessions sorted by uuid: a session's uuid and its interface share an index
  const sessions = h.store.listSessions().sort((a, b) => (a.spec.uuid < b.spec.uuid ? -1 : 1));
  const values = {
    router: () =>
      h.store
        .listRouters()
        .map((r) => r.name)
        .sort(),
    session: () => sessions.map((s) => s.spec.uuid),
    interface: () => sessions.map((s) => interfaceName(s.spec.listenPort)),
  }[v.kind]();
  return values[v.i % Math.max(1, values.length)] ?? 'none';
}

/** Everything a request could change: specs, whole statuses, policies, agent token hashes, revisions. */
function snapshot(): string {
  return JSON.stringify({
    sessions: h.store.listSessions().map((s) => ({ name: s.name, spec: s.spec, status: s.status })),
    routers: h.store.listRouters().map((r) => ({
      name: r.name,
      spec: r.spec,
      status: r.status,
      token: h.store.getAgentTokenHash(r.name),
      // what the agent's long poll waits on: a refusal must not wake it
      revision: h.store.revision(topics.routerSessions(r.name)),
    })),
    policies: h.store.listPolicies(),
  });
}

const hostileParam: Arbitrary<unknown> = fc.oneof(
  { arbitrary: knownRouter, weight: 4 },
  fc.stringMatching(/^[a-z][a-z0-9-]{0,30}$/),
  fc.string({ unit: 'binary', maxLength: 20 }),
  // fastify's maxParamLength is 100
  fc.integer({ min: 95, max: 400 }).map((n) => 'a'.repeat(n)),
  fc.constantFrom('..', '.', '%', 'fra1/../ams1', 'FRA1', 'fra1\n', '"; }'),
);

const contentType: Arbitrary<string | undefined> = fc.oneof(
  { arbitrary: fc.constant('application/json'), weight: 10 },
  fc.constantFrom(
    undefined,
    '',
    'text/plain',
    'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=x',
    'application/json; charset=utf-16',
    'APPLICATION/JSON',
    'application/json-patch+json',
    'application/problem+json',
  ),
);

const headerValue: Arbitrary<string> = fc
  .oneof(
    fc.constantFrom(
      'W/"x"',
      '"abc"',
      '',
      'W/',
      ',,,',
      `"${'a'.repeat(5000)}"`,
      'application/xml',
      'text/*;q=x',
    ),
    fc.string({ unit: 'grapheme-ascii', maxLength: 40 }),
  )
  .filter((v) => !v.includes('*') || v.startsWith('text/'));
const extraHeaders = fc.record(
  { 'if-none-match': headerValue, accept: headerValue, 'accept-encoding': headerValue },
  { requiredKeys: [] },
) as Arbitrary<Record<string, string>>;

/** Bodies that are not the JSON of any value, or are JSON of the wrong shape entirely. */
const rawBody: Arbitrary<{ raw: string }> = fc
  .oneof(
    fc.constantFrom(
      '',
      '{',
      'null',
      '"x"',
      '[]',
      '1e999',
      'NaN',
      '\ufeff{}',
      '{"action":"list"',
      '{"a":1,"a":2}',
    ),
    fc.string({ unit: 'binary', maxLength: 60 }),
  )
  .map((raw) => ({ raw }));

function requestArbitrary(op: Operation): Arbitrary<FuzzRequest> {
  const params = Object.fromEntries(op.params.map((p) => [p, hostileParam]));
  const query = Object.fromEntries(
    op.query.map((q) => [
      q,
      fc.oneof(fc.integer({ min: 0, max: 3 }).map(String), fc.string({ unit: 'binary', maxLength: 12 })),
    ]),
  );
  const body = op.body;
  return fc.record({
    prefix: fc.constantFrom('', '/api/v1'),
    method: fc.oneof(
      { arbitrary: fc.constant(op.method), weight: 20 },
      fc.constantFrom('PUT', 'DELETE', 'PATCH', 'OPTIONS', op.method === 'GET' ? 'POST' : 'GET'),
    ),
    params: fc.record(params),
    query: fc.record(query, { requiredKeys: [] }) as Arbitrary<Record<string, string>>,
    contentType: op.method === 'POST' ? contentType : fc.constant(undefined),
    headers: extraHeaders,
    body: body
      ? fc.oneof(
          { arbitrary: valid(body, HINTS).map((value) => ({ value })), weight: 3 },
          { arbitrary: hostile(body, HINTS).map((value) => ({ value })), weight: 6 },
          { arbitrary: rawBody, weight: 1 },
        )
      : fc.constant(undefined),
  });
}

function authorization(who: Identity): Record<string, string> {
  const token = { user: h.user, admin: h.admin, agent: agentTokens.get('fra1'), none: undefined }[who];
  return token === undefined ? {} : { authorization: `Bearer ${token}` };
}

async function send(op: Operation, req: FuzzRequest, who: Identity): Promise<LightMyRequestResponse> {
  let path = op.path;
  for (const [name, v] of Object.entries(req.params))
    path = path.replace(`{${name}}`, encodeURIComponent(String(resolve(v))));
  const query = new URLSearchParams(req.query).toString();
  const payload =
    req.body === undefined ? undefined : 'raw' in req.body ? req.body.raw : toJson(req.body.value, resolve);
  requests++;
  return h.app.inject({
    method: req.method as 'GET',
    url: req.prefix + path + (query ? `?${query}` : ''),
    headers: {
      ...req.headers,
      ...authorization(who),
      ...(req.contentType === undefined ? {} : { 'content-type': req.contentType }),
    },
    ...(payload === undefined ? {} : { payload }),
  });
}

/** What each answer must be; a refusal leaves the store as it was. */
function violation(res: LightMyRequestResponse, before: string): string | undefined {
  if (res.statusCode >= 500) return 'a 5xx';
  if (res.statusCode < 400) {
    answers.set(String(res.statusCode), (answers.get(String(res.statusCode)) ?? 0) + 1);
    return undefined;
  }
  if (!String(res.headers['content-type']).startsWith('application/problem+json'))
    return `not problem+json (${String(res.headers['content-type'])})`;
  let body: { code?: unknown; detail?: unknown };
  try {
    body = JSON.parse(res.body) as typeof body;
  } catch {
    return 'a problem that is not JSON';
  }
  const code = String(body.code);
  answers.set(code, (answers.get(code) ?? 0) + 1);
  if (!Object.hasOwn(ErrorCodes, code)) return `undocumented code ${code}`;
  if (ErrorCodes[code as keyof typeof ErrorCodes] !== res.statusCode)
    return `code ${code} on HTTP ${res.statusCode}`;
  if (typeof body.detail !== 'string' || body.detail === '') return 'no detail';
  if (/\bat .*\.ts:\d+/.test(res.body)) return 'a stack trace';
  const after = snapshot();
  if (after !== before) {
    let i = 0;
    while (before[i] === after[i]) i++;
    const around = (t: string) => short(t.slice(Math.max(0, i - 80), i + 80), 200);
    return `refused, but the store changed: ${around(before)} → ${around(after)}`;
  }
  return undefined;
}

/** A 2xx that hands out an agent token (add, rotate-token): the fixture's routers keep working. */
function noteToken(res: LightMyRequestResponse): void {
  if (res.statusCode !== 200 || !String(res.headers['content-type']).startsWith('application/json')) return;
  const body = res.json() as { agentToken?: string; name?: string; router?: { name?: string } };
  const name = body.name ?? body.router?.name;
  if (body.agentToken && name) agentTokens.set(name, body.agentToken);
}

/** Long runs (deep nesting, huge strings) written as ⟨unit×count⟩, then cut: a report stays readable. */
function short(s: string, max = 400): string {
  const runs = s
    .replace(/(\{"a":|\[|\]|\})\1{9,}/g, (m, unit: string) => `⟨${unit}×${m.length / unit.length}⟩`)
    .replace(/(.)\1{19,}/gu, (m, unit: string) => `⟨${unit}×${[...m].length}⟩`);
  return runs.length > max ? `${runs.slice(0, max)}… (${s.length} chars)` : runs;
}

function describeRequest(op: Operation, req: FuzzRequest, who: Identity): string {
  const body =
    req.body === undefined ? '' : 'raw' in req.body ? req.body.raw : toJson(req.body.value, resolve);
  const params = JSON.stringify(req.params, (_k, v: unknown) =>
    typeof v === 'string' ? short(v, 60) : resolve(v),
  );
  return (
    `${req.method} ${req.prefix}${op.path} as ${who}, params ${params}, query ${JSON.stringify(req.query)}, ` +
    `content-type ${String(req.contentType)}, headers ${short(JSON.stringify(req.headers))}, body ${short(body)}`
  );
}

const opName = (op: Operation) => `${op.method} ${op.path}`;

describe('fuzz: every route of /openapi.json', () => {
  it('the generator is sound: its valid bodies pass the route schema', () => {
    for (const op of operations.filter((o) => o.body)) {
      const schema = op.body as Schema;
      for (const value of fc.sample(valid(schema, HINTS), { seed: SEED, numRuns: 50 })) {
        const body = JSON.parse(toJson(value, resolve)) as unknown;
        expect(ajv.validate(schema, body), `${opName(op)} ${JSON.stringify(body)} ${ajv.errorsText()}`).toBe(
          true,
        );
      }
    }
  });

  for (const [index, op] of operations.entries())
    it(`${opName(op)}: never 5xx; a refusal is problem+json with a documented code, nothing stored`, async () => {
      const hasInput = op.body !== undefined || op.params.length > 0 || op.query.length > 0;
      const property = fc
        .asyncProperty(requestArbitrary(op), async (req) => {
          for (const who of IDENTITIES) {
            const before = snapshot();
            const res = await send(op, req, who);
            noteToken(res);
            const wrong = violation(res, before);
            if (wrong === undefined) continue;
            const report = `${wrong}: ${describeRequest(op, req, who)} → ${res.statusCode} ${short(res.body)}`;
            if (!KEEP_GOING) throw new Error(report);
            failures.push(report);
          }
        })
        .beforeEach(replenish);
      await fc.assert(property, {
        seed: SEED + index,
        numRuns: hasInput ? RUNS : Math.max(5, Math.floor(RUNS / 10)),
      });
    });
});
