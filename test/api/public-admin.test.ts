/** Health, metrics, routers, OpenAPI; the admin router and policy actions; the /api/v1 prefix. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ajv } from '../../common/validate.ts';
import { RouteHttpMetrics, addMetricsSource, metricsText } from '../../controller/metrics.ts';
import type { Store } from '../../controller/store/store.ts';
import { promtool } from '../support/promtool.ts';
import { ADMIN_ASN, driver, expectOk, problem, routerFields, startHarness, type Harness } from './helpers.ts';

let h: Harness;
let d: ReturnType<typeof driver>;

beforeAll(async () => {
  // no DN42 registry here: auto-approval needs the operator's opt-in (docs/operator-guide.md, 4)
  h = await startHarness({ autoApproveWithoutRegistry: true });
  d = driver(h, 'fra1', await h.addRouter('fra1'));
});
afterAll(async () => h?.close());

describe('public routes', () => {
  it('GET /health and /api/v1/health', async () => {
    for (const url of ['/health', '/api/v1/health'])
      expect((await expectOk(h.get(url))).json()).toEqual({ status: 'ok' });
  });
  it('GET /routers lists what a user needs to peer, without secrets', async () => {
    const res = await expectOk(h.get('/routers'));
    const fra = res.json().routers.find((r: { name: string }) => r.name === 'fra1');
    const spec = h.store.getRouter('fra1')?.spec;
    // the fields of docs/api.md, nothing more (no token hash, no mesh addresses)
    expect(fra).toEqual({
      name: 'fra1',
      uuid: spec?.uuid,
      displayName: 'Router fra1',
      region: 'eu-central',
      location: 'Frankfurt',
      endpointHost: 'fra1.example.net',
      publicKey: spec?.publicKey,
      linkLocal: 'fe80::1',
      accepting: true,
      freeSlots: spec?.maxSessions === undefined ? null : spec.maxSessions,
      networkAsn: h.store.getPolicy('default')?.spec.dn42Asn ?? null,
    });
    expect(res.body).not.toContain('agentTokenSha256');
  });
  it('GET /metrics has the metrics docs/operator-guide.md lists', async () => {
    const uuid = await d.inStatus(1);
    await expectOk(
      h.post('/agent/fra1/report', (await rotate('fra1')) as string, {
        sessions: [{ uuid, rtt: 4.5, rxBytes: 10, txBytes: 20, routesImported: 3 }],
      }),
    );
    const res = await expectOk(h.get('/metrics'));
    expect(res.headers['content-type']).toMatch(/^text\/plain/);
    const text = res.body;
    expect(text).toMatch(/http_requests_total\{route="\/session",method="POST",status="200"\} \d+/);
    expect(text).toMatch(
      /http_request_duration_seconds_bucket\{le="0.005",route="\/session",method="POST"\}/,
    );
    expect(text).toMatch(/active_sessions_total\{status="ACTIVE"\} [1-9]/);
    expect(text).toMatch(/agent_heartbeat_timestamp\{router="fra1"\} 0/);
    expect(text).toContain(`peerops_session_rtt_seconds{session="${uuid}",router="fra1",asn=`);
    expect(text).toMatch(/peerops_session_routes_imported\{[^}]+\} 3/);
    expect(text).toMatch(/peerops_sessions_stuck\{router="fra1"\} 0/);
    // one state series per session, 1 for its current status (docs/kubernetes.md, "Monitoring")
    expect(text).toContain(
      `peerops_session_state{session="${uuid}",router="fra1",asn="${h.store.getSession(uuid)?.spec.asn}",state="ACTIVE"} 1`,
    );
    expect(text).not.toMatch(new RegExp(`peerops_session_state\\{session="${uuid}",[^}]*state="(?!ACTIVE)`));
    expect(text).toMatch(/peerops_agent_offline\{router="fra1"\} 1/);
    expect(text).toContain('# TYPE peerops_login_total counter');
    expect(text).toMatch(
      /peerops_store_operation_duration_seconds_count\{operation="createSession",outcome="ok"\} [1-9]/,
    );
  });
  it('GET /metrics is valid exposition for Prometheus, with each session at its latest report', async () => {
    // the test above rotated the token this file's driver holds
    const token = await rotate('fra1');
    const uuid = await driver(h, 'fra1', token).inStatus(1);
    const report = (routesImported: number, rtt: number | null) =>
      expectOk(
        h.post('/agent/fra1/report', token, {
          sessions: [{ uuid, rtt, rxBytes: 2 ** 40, txBytes: 7, routesImported }],
        }),
      );
    const series = (text: string, name: string) =>
      text.split('\n').filter((line) => line.startsWith(`${name}{session="${uuid}",`));
    await report(3, 4.25);
    const first = (await expectOk(h.get('/metrics'))).body;
    expect(series(first, 'peerops_session_routes_imported')).toEqual([
      `peerops_session_routes_imported{session="${uuid}",router="fra1",asn="${h.store.getSession(uuid)?.spec.asn}"} 3`,
    ]);
    expect(series(first, 'peerops_session_rx_bytes')[0]).toMatch(/ 1099511627776$/);
    expect(series(first, 'peerops_session_rtt_seconds')[0]).toMatch(/ 0\.00425$/);
    await report(5, null);
    const text = (await expectOk(h.get('/metrics'))).body;
    expect(series(text, 'peerops_session_routes_imported')).toEqual([
      `peerops_session_routes_imported{session="${uuid}",router="fra1",asn="${h.store.getSession(uuid)?.spec.asn}"} 5`,
    ]);
    // a null RTT (no reply to the pings) is no series, not a zero
    expect(series(text, 'peerops_session_rtt_seconds')).toEqual([]);
    // Prometheus's own parser and linter read the whole exposition (exit 1 on a format error): its one
    // remark is the gauge named active_sessions_total for compatibility (docs/api.md, /metrics) (exit 3, a lint finding)
    const checked = await promtool(['check', 'metrics'], text);
    expect(checked.output.trim().split('\n')).toEqual([
      'active_sessions_total non-counter metrics should not have "_total" suffix',
    ]);
    expect(checked.code).toBe(3);
  });
  it('escapes label values of the per-session series', async () => {
    // A stand-in store: the schemas admit no quote, backslash or newline in a uuid or router name, so no
    // real store can hold this session; the exposition must stay parseable all the same.
    const session = {
      name: 'odd',
      spec: { uuid: 'a"b\\c\nd', router: 'r1', asn: 64512 },
      status: { code: 5, name: 'ACTIVE', metrics: { rtt: 1, rxBytes: 2, txBytes: 3, routesImported: 4 } },
    };
    const store = { listSessions: () => [session], listRouters: () => [] } as unknown as Store;
    const remove = addMetricsSource(store, { stuckAfterSeconds: 600, offlineAfterSeconds: 300 });
    try {
      const text = await metricsText();
      expect(text).toContain('peerops_session_tx_bytes{session="a\\"b\\\\c\\nd",router="r1",asn="64512"} 3');
      expect(text).toContain(
        'peerops_session_state{session="a\\"b\\\\c\\nd",router="r1",asn="64512",state="QUEUED_FOR_DELETE"} 1',
      );
      expect((await promtool(['check', 'metrics'], text)).output).not.toContain('error');
    } finally {
      remove();
    }
  });
  it('GET /metrics counts requests per route pattern and status, with a cumulative latency histogram', async () => {
    const series = async () => {
      const text = (await expectOk(h.get('/metrics'))).body;
      const value = (re: RegExp) => Number(re.exec(text)?.[1] ?? 0);
      return {
        ok: value(/http_requests_total\{route="\/routers",method="GET",status="200"\} (\d+)/),
        count: value(/http_request_duration_seconds_count\{route="\/routers",method="GET"\} (\d+)/),
        inf: value(/http_request_duration_seconds_bucket\{le="\+Inf",route="\/routers",method="GET"\} (\d+)/),
        buckets: [
          ...text.matchAll(
            /http_request_duration_seconds_bucket\{le="[^"]+",route="\/routers",method="GET"\} (\d+)/g,
          ),
        ].map((m) => Number(m[1])),
        unmatched: value(/http_requests_total\{route="unmatched",method="GET",status="404"\} (\d+)/),
      };
    };
    const before = await series();
    for (let i = 0; i < 3; i++) await expectOk(h.get('/routers'));
    // a URL naming no route is counted under one label, never under its raw path
    const missing = await h.get('/no/such/route/42');
    expect(missing.statusCode).toBe(404);
    const after = await series();
    expect(after.ok - before.ok).toBe(3);
    expect(after.count - before.count).toBe(3);
    expect(after.inf).toBe(after.count);
    expect(after.buckets).toEqual([...after.buckets].sort((a, b) => a - b));
    expect(after.unmatched - before.unmatched).toBe(1);
    expect((await expectOk(h.get('/metrics'))).body).not.toContain('/no/such/route');
  });
  it('GET /openapi.json is generated from the shared schemas', async () => {
    const doc = (await expectOk(h.get('/openapi.json'))).json();
    expect(doc.openapi).toBe('3.1.0');
    for (const p of [
      '/session',
      '/admin/session',
      '/admin/router',
      '/admin/policy',
      '/agent/{router}/sessions',
      '/agent/{router}/heartbeat',
      '/agent/{router}/mesh/status',
      '/health',
      '/metrics',
      '/routers',
    ])
      expect(Object.keys(doc.paths)).toContain(p);
    const create = doc.components.schemas['session-create'];
    expect(create.properties.mtu).toMatchObject({ minimum: 1280, maximum: 9000 });
    const hb = doc.paths['/agent/{router}/heartbeat'].post.requestBody.content['application/json'].schema;
    expect(ajv.validate(hb, { version: '1.0.0', uptime: 5 })).toBe(true);
  });
});

async function rotate(name: string): Promise<string> {
  const res = await expectOk(h.post('/admin/router', h.admin, { action: 'rotate-token', name }));
  return res.json().agentToken;
}

describe('session list', () => {
  it("each record carries the fields of docs/api.md with their types, and only the caller's sessions", async () => {
    // earlier tests rotated fra1's token: a driver with a current one
    const fra = driver(h, 'fra1', await rotate('fra1'));
    const uuid = await fra.inStatus(1);
    const owner = fra.ownerToken(uuid);
    const res = await expectOk(h.post('/session', owner, { action: 'list' }));
    const { sessions } = res.json() as { sessions: Record<string, unknown>[] };
    expect(sessions).toHaveLength(1);
    const record = sessions[0] as Record<string, unknown>;
    const stored = h.store.getSession(uuid);
    expect(record).toMatchObject({
      uuid,
      router: 'fra1',
      routerName: 'Router fra1',
      status: 1,
      statusName: 'ACTIVE',
      ipv6: stored?.spec.ipv6,
      ipv6LinkLocal: stored?.spec.linkLocal,
      mtu: 1420,
      createdAt: stored?.spec.createdAt,
    });
    expect(typeof record.status).toBe('number');
    expect(typeof record.mtu).toBe('number');
    expect(new Date(String(record.createdAt)).toISOString()).toBe(record.createdAt);
  });
});

describe('admin router', () => {
  it('add answers the token once; list hides it; update changes fields; remove', async () => {
    const add = await expectOk(h.post('/admin/router', h.admin, { action: 'add', ...routerFields('tmp1') }));
    expect(add.json().agentToken).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(add.json().router).toMatchObject({ name: 'tmp1', hasAgentToken: true });
    const upd = await expectOk(
      h.post('/api/v1/admin/router', h.admin, {
        action: 'update',
        name: 'tmp1',
        spec: { autoApprove: true, maxSessions: 5 },
      }),
    );
    expect(upd.json().router.spec).toMatchObject({ autoApprove: true, maxSessions: 5 });
    // an update of other fields keeps these (no schema default fills the ones left out)
    await expectOk(
      h.post('/admin/router', h.admin, {
        action: 'update',
        name: 'tmp1',
        spec: { acceptingSessions: false },
      }),
    );
    const later = await expectOk(
      h.post('/admin/router', h.admin, { action: 'update', name: 'tmp1', spec: { displayName: 'Temp One' } }),
    );
    expect(later.json().router.spec).toMatchObject({
      displayName: 'Temp One',
      autoApprove: true,
      maxSessions: 5,
      acceptingSessions: false,
    });
    expect(h.store.getAgentTokenHash('tmp1')).toMatch(/^[0-9a-f]{64}$/);
    const list = await expectOk(h.post('/admin/router', h.admin, { action: 'list' }));
    expect(list.json().routers.map((r: { name: string }) => r.name)).toContain('tmp1');
    await expectOk(h.post('/admin/router', h.admin, { action: 'remove', name: 'tmp1' }));
    expect(h.store.getRouter('tmp1')).toBeUndefined();
  });
  it('add refuses a taken name (CONFLICT) and update/remove an unknown one (ROUTER_NOT_FOUND)', async () => {
    expect(
      problem(await h.post('/admin/router', h.admin, { action: 'add', ...routerFields('fra1') })),
    ).toMatchObject({
      status: 409,
    });
    for (const action of ['remove', 'rotate-token'])
      expect(problem(await h.post('/admin/router', h.admin, { action, name: 'ghost' }))).toMatchObject({
        code: 'ROUTER_NOT_FOUND',
      });
    expect(
      problem(
        await h.post('/admin/router', h.admin, { action: 'update', name: 'ghost', spec: { maxSessions: 1 } }),
      ),
    ).toMatchObject({ code: 'ROUTER_NOT_FOUND' });
  });
  it('remove refuses a router that still has sessions (INVALID_STATE)', async () => {
    await d.inStatus(3);
    expect(problem(await h.post('/admin/router', h.admin, { action: 'remove', name: 'fra1' }))).toMatchObject(
      {
        status: 409,
        code: 'INVALID_STATE',
      },
    );
  });
});

describe('admin policy', () => {
  it('set and get the default policy and a router override; dn42Asn stays a number', async () => {
    const spec = {
      dn42Asn: ADMIN_ASN,
      rpkiServers: [{ host: 'rpki.example.net', port: 8282 }],
      blockedAsns: [64512],
    };
    await expectOk(h.post('/admin/policy', h.admin, { action: 'set', spec }));
    const got = await expectOk(h.post('/admin/policy', h.admin, { action: 'get' }));
    expect(got.json()).toMatchObject({ name: 'default', spec });
    expect(typeof got.json().spec.dn42Asn).toBe('number');
    await expectOk(
      h.post('/admin/policy', h.admin, { action: 'set', name: 'fra1', spec: { maxPendingPerAsn: 2 } }),
    );
    expect(
      (await expectOk(h.post('/admin/policy', h.admin, { action: 'get', name: 'fra1' }))).json().spec,
    ).toMatchObject({
      maxPendingPerAsn: 2,
    });
    expect(problem(await h.post('/admin/policy', h.admin, { action: 'get', name: 'ghost' }))).toMatchObject({
      code: 'ROUTER_NOT_FOUND',
    });
  });
});

describe('admin session list', () => {
  it('filters by router, asn and status', async () => {
    const uuid = await d.inStatus(4);
    const asn = h.store.getSession(uuid)?.spec.asn;
    const res = await expectOk(
      h.post('/admin/session', h.admin, { action: 'list', router: 'fra1', asn, status: 4 }),
    );
    expect(res.json().sessions.map((s: { uuid: string }) => s.uuid)).toEqual([uuid]);
  });
  it('ROUTER_NOT_FOUND for a router filter naming no router, not an empty list', async () => {
    expect(
      problem(await h.post('/admin/session', h.admin, { action: 'list', router: 'nowhere1' })),
    ).toMatchObject({ status: 404, code: 'ROUTER_NOT_FOUND', detail: 'no router nowhere1' });
  });
  it('SESSION_NOT_FOUND for an unknown uuid', async () => {
    expect(problem(await d.admin('approve', '7f3c2a4e-1b2d-4c5e-8f90-123456789abc'))).toMatchObject({
      code: 'SESSION_NOT_FOUND',
    });
  });
});

describe('RouteHttpMetrics', () => {
  it('puts a latency in the first bucket whose bound it does not exceed, above all bounds in the last', () => {
    const m = new RouteHttpMetrics('/x', 'GET');
    for (const seconds of [0.0005, 0.001, 0.0011, 5, 7]) m.record(200, seconds);
    m.record(500, 0.003);
    // bounds 0.001, 0.0025, 0.005, …, 5 and one bucket above: 0.001 is "le 0.001" as Prometheus has it
    expect(m.buckets).toEqual([2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1]);
    expect(m.count).toBe(6);
    expect(m.sum).toBeCloseTo(12.0056, 6);
    expect([...m.statuses]).toEqual([
      [200, 5],
      [500, 1],
    ]);
  });
});
