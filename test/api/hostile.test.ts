/**
 * Hostile input in every string field of every body: BIRD config syntax, shell metacharacters, newlines,
 * odd unicode, out-of-range numbers, wrong types, huge bodies. Always 4xx, never 5xx, nothing stored.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  driver,
  expectOk,
  problem,
  routerFields,
  sessionFields,
  startHarness,
  type Harness,
} from './helpers.ts';

const STRINGS = [
  '"; }',
  'x"; protocol bgp evil { neighbor fe80::1 as 1; }; #',
  '$(reboot)',
  '`id`',
  'a; rm -rf /',
  'a|b&c',
  'line\nbreak',
  'cr\rlf',
  'nul\u0000byte',
  '\u202eevil\u202c',
  'ｆｅ８０::１',
  '🙂',
  '../../etc/passwd',
  '%s%n',
  ' fe80::1',
  'fe80::1%eth0',
  'A'.repeat(5000),
  '',
];
const NUMBERS = [-1, 0, 1.5, 1e308, Number.MAX_SAFE_INTEGER + 2, '1420', true, null, [], {}];

let h: Harness;
let fraToken: string;
let snapshot: () => string;

beforeAll(async () => {
  h = await startHarness();
  fraToken = await h.addRouter('fra1');
  const d = driver(h, 'fra1', fraToken);
  await d.inStatus(1);
  snapshot = () =>
    JSON.stringify({
      sessions: h.store
        .listSessions()
        .map((s) => ({ spec: s.spec, code: s.status.code, metrics: s.status.metrics })),
      routers: h.store.listRouters().map((r) => ({ spec: r.spec, hb: r.status.lastHeartbeat })),
      policies: h.store.listPolicies(),
    });
});
afterAll(async () => h?.close());

/** Each body with one field replaced by each hostile value. */
function variants(
  body: Record<string, unknown>,
  fields: string[],
  values: unknown[],
): Record<string, unknown>[] {
  return fields.flatMap((f) => values.map((v) => ({ ...body, [f]: v })));
}

async function expectRefusedAll(url: string, token: string, bodies: unknown[]): Promise<void> {
  const before = snapshot();
  for (const body of bodies) {
    const res = await h.post(url, token, body);
    expect(
      res.statusCode,
      `${url} ${JSON.stringify(body).slice(0, 200)} → ${res.body}`,
    ).toBeGreaterThanOrEqual(400);
    expect(res.statusCode).toBeLessThan(500);
    problem(res);
  }
  expect(snapshot()).toBe(before);
}

describe('hostile input', () => {
  it('session create: every string field', async () => {
    const base = sessionFields('fra1');
    const fields = ['router', 'ipv6', 'linkLocal', 'endpoint', 'publicKey', 'ipv4'];
    await expectRefusedAll('/session', h.other, variants(base, fields, STRINGS));
  });
  it('session create: numbers and types', async () => {
    const base = sessionFields('fra1');
    await expectRefusedAll('/session', h.other, [
      ...variants(base, ['mtu'], [...NUMBERS, 1279, 9001, 65536]),
      ...variants(base, ['mpbgp', 'extendedNextHop'], ['true', 1, null]),
      ...variants(base, ['router', 'ipv6', 'publicKey'], [1, true, null, ['fra1'], { $ne: 1 }]),
      JSON.parse('{"action":"create","__proto__":{"x":1}}'),
      { ...base, constructor: { prototype: { x: 1 } } },
      { ...base, extra: 'field' },
    ]);
  });
  it('session modify, delete, restart', async () => {
    const uuid = h.store.listSessions()[0]?.spec.uuid as string;
    await expectRefusedAll('/session', h.admin, [
      ...variants({ action: 'modify', uuid, mtu: 1400 }, ['uuid', 'endpoint'], STRINGS),
      ...variants({ action: 'modify', uuid }, ['mtu'], NUMBERS),
      ...variants({ action: 'delete', uuid }, ['uuid'], [...STRINGS, ...NUMBERS]),
      ...variants({ action: 'restart', uuid }, ['uuid'], [...STRINGS, ...NUMBERS]),
      ...variants({ action: 'list' }, ['action'], STRINGS),
    ]);
  });
  it('admin router add and update', async () => {
    const base = { action: 'add', ...routerFields('evil1') };
    const strict = ['name', 'region', 'endpointHost', 'publicKey', 'linkLocal'];
    // Free text (displayName, location, provider) may hold '$(x)' or unicode: it is never pasted anywhere.
    // Quotes, backslashes, control characters, empty and over-long text are refused.
    const unsafeText = STRINGS.filter(
      (t) =>
        t === '' ||
        t.length > 64 ||
        /["\\]/.test(t) ||
        [...t].some((c) => c.charCodeAt(0) < 32 || c.charCodeAt(0) === 127),
    );
    await expectRefusedAll('/admin/router', h.admin, [
      ...variants(base, strict, STRINGS),
      ...variants(base, ['displayName', 'location', 'provider'], unsafeText),
      ...variants(base, ['nodeId'], NUMBERS),
      ...variants(
        base,
        ['maxSessions'],
        NUMBERS.filter((n) => n !== 0),
      ),
      { ...base, agentTokenSha256: 'a'.repeat(64) },
      ...variants(
        { action: 'update', name: 'fra1', spec: {} },
        ['spec'],
        [{ publicKey: '"; }' }, { nodeId: -1 }, { endpointHost: '$(id)' }, 'x', null],
      ),
    ]);
  });
  it('admin router free-text fields hold only safe text (quotes, backslashes, control characters refused)', async () => {
    await expectRefusedAll('/admin/router', h.admin, [
      { action: 'add', ...routerFields('evil2', { displayName: 'a"; }' }) },
      { action: 'add', ...routerFields('evil3', { location: 'a\\b' }) },
      { action: 'add', ...routerFields('evil4', { provider: 'x\ny' }) },
    ]);
  });
  it('admin policy set', async () => {
    const base = { action: 'set', spec: { dn42Asn: 4242420000 } };
    await expectRefusedAll('/admin/policy', h.admin, [
      ...NUMBERS.map((n) => ({ ...base, spec: { dn42Asn: n } })),
      { ...base, spec: { dn42Asn: '4242420000' } },
      { ...base, spec: { dn42Asn: 4294967296 } },
      ...STRINGS.map((s) => ({ ...base, spec: { rpkiServers: [{ host: s, port: 8282 }] } })),
      ...STRINGS.map((s) => ({ ...base, spec: { ownPrefixes: { ipv6: [s] } } })),
      ...STRINGS.map((s) => ({ ...base, name: s })),
      { ...base, spec: { blockedAsns: ['1; DROP'] } },
    ]);
  });
  it('agent bodies', async () => {
    const uuid = h.store.listSessions()[0]?.spec.uuid as string;
    const m = { uuid, rtt: 1, rxBytes: 1, txBytes: 1, routesImported: 1 };
    const before = snapshot();
    const bodies: [string, unknown][] = [
      ...variants({ version: '1.0.0', uptime: 1 }, ['version', 'meshPublicKey'], STRINGS).map(
        (b) => ['heartbeat', b] as [string, unknown],
      ),
      ...variants(
        { version: '1.0.0', uptime: 1 },
        ['uptime'],
        NUMBERS.filter((n) => n !== 0),
      ).map((b) => ['heartbeat', b] as [string, unknown]),
      ...variants({ uuid, status: 1, interface: 'wg_1' }, ['uuid', 'interface'], STRINGS).map(
        (b) => ['modify', b] as [string, unknown],
      ),
      ...variants({ uuid, status: 1, interface: 'wg_1' }, ['status'], [...NUMBERS, 7, 99]).map(
        (b) => ['modify', b] as [string, unknown],
      ),
      ...variants(m, ['uuid'], STRINGS).map((b) => ['report', { sessions: [b] }] as [string, unknown]),
      ...variants(m, ['rtt', 'rxBytes'], [-1, '1', null, [], 'NaN'])
        .filter((b) => !(b.rtt === null))
        .map((b) => ['report', { sessions: [b] }] as [string, unknown]),
      ...STRINGS.map(
        (s) => ['mesh/status', { peers: [{ router: s, reachable: true }] }] as [string, unknown],
      ),
    ];
    for (const [path, body] of bodies) {
      const res = await h.post(`/agent/fra1/${path}`, fraToken, body);
      expect(
        res.statusCode,
        `${path} ${JSON.stringify(body).slice(0, 120)} → ${res.body}`,
      ).toBeGreaterThanOrEqual(400);
      expect(res.statusCode).toBeLessThan(500);
    }
    expect(snapshot()).toBe(before);
    expect(h.store.getRouter('fra1')?.status.lastHeartbeat).toBeUndefined();
  });
  it('hostile paths, headers and query strings', async () => {
    const before = snapshot();
    const paths = [
      '/agent/%22%3B%20%7D/sessions',
      '/agent/fra1%0a/sessions',
      '/agent/../admin/router',
      '/agent/fra1/sessions?wait=-1',
      '/agent/fra1/sessions?wait=1e9',
      '/session/%00',
      '/%F0%9F%99%82',
    ];
    for (const url of paths) {
      const res = await h.app.inject({
        method: 'GET',
        url,
        headers: { authorization: `Bearer ${fraToken}` },
      });
      expect(res.statusCode, url).toBeGreaterThanOrEqual(400);
      expect(res.statusCode, url).toBeLessThan(500);
    }
    for (const authorization of [
      'Bearer "; }',
      'Bearer $(id)',
      'Basic abc',
      'Bearer ' + 'a'.repeat(10000),
      'Bearer \u00e9',
    ]) {
      const res = await h.app.inject({
        method: 'POST',
        url: '/session',
        headers: { authorization, 'content-type': 'application/json' },
        payload: '{"action":"list"}',
      });
      expect(res.statusCode, authorization.slice(0, 30)).toBe(401);
    }
    expect(snapshot()).toBe(before);
  });
  it('1 MiB bodies on every POST route are 413', async () => {
    const big = { action: 'list', pad: 'x'.repeat(1 << 20) };
    for (const url of [
      '/session',
      '/admin/session',
      '/admin/router',
      '/admin/policy',
      '/agent/fra1/heartbeat',
      '/agent/fra1/report',
      '/api/v1/session',
    ])
      expect(problem(await h.post(url, url.includes('agent') ? fraToken : h.admin, big))).toMatchObject({
        status: 413,
        code: 'PAYLOAD_TOO_LARGE',
      });
  });
  it('deeply nested JSON is refused without a crash', async () => {
    const deep = '['.repeat(5000) + ']'.repeat(5000);
    const res = await h.app.inject({
      method: 'POST',
      url: '/session',
      headers: { authorization: `Bearer ${h.user}`, 'content-type': 'application/json' },
      payload: deep,
    });
    expect(res.statusCode).toBe(400);
  });
  it('the store still works afterwards', async () => {
    await expectOk(h.post('/session', h.user, { action: 'list' }));
  });
});
