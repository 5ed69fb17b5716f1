/**
 * Hostile input in every string field of every body: BIRD config syntax, shell metacharacters, newlines,
 * odd unicode, out-of-range numbers, wrong types, huge bodies. Always 4xx, never 5xx, nothing stored.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCodes, type ErrorCode } from '../../common/errors.ts';
import { interfaceName } from '../../common/naming.ts';
import { UNPRINTABLE_CLASS } from '../../common/text.ts';
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
  'next\u0085line',
  'para\u2029graph',
  'iso\u2066late\u2069',
  'zero\u200bwidth',
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

/** What the free-text rule refuses (common/text.ts): empty, over-long, control and bidi characters. */
const unprintable = new RegExp(`[${UNPRINTABLE_CLASS}]`, 'u');
const unsafeLine = (max: number) => STRINGS.filter((t) => t === '' || t.length > max || unprintable.test(t));

let h: Harness;
let fraToken: string;
let snapshot: () => string;
/** A session of fra1 in status 1 (ACTIVE), and its interface. */
let active: { uuid: string; interface: string };

beforeAll(async () => {
  h = await startHarness();
  fraToken = await h.addRouter('fra1');
  const d = driver(h, 'fra1', fraToken);
  const uuid = await d.inStatus(1);
  active = { uuid, interface: interfaceName(h.store.getSession(uuid)?.spec.listenPort ?? 0) };
  // everything a request could change: specs and whole statuses (last error, interface, heartbeat,
  // agent version, mesh key and peers, metrics), policies, and the agent token hashes
  snapshot = () =>
    JSON.stringify({
      sessions: h.store.listSessions().map((s) => ({ name: s.name, spec: s.spec, status: s.status })),
      routers: h.store.listRouters().map((r) => ({
        name: r.name,
        spec: r.spec,
        status: r.status,
        token: h.store.getAgentTokenHash(r.name),
      })),
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
    const unsafeText = STRINGS.filter((t) => unsafeLine(64).includes(t) || /["\\]/.test(t));
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
    const m = { uuid: active.uuid, rtt: 1, rxBytes: 1, txBytes: 1, routesImported: 1 };
    const modify = { uuid: active.uuid, status: 1, interface: active.interface };
    const bodies: [string, unknown][] = [
      ...variants({ version: '1.0.0', uptime: 1 }, ['version', 'meshPublicKey'], STRINGS).map(
        (b) => ['heartbeat', b] as [string, unknown],
      ),
      ...variants(
        { version: '1.0.0', uptime: 1 },
        ['uptime'],
        NUMBERS.filter((n) => n !== 0),
      ).map((b) => ['heartbeat', b] as [string, unknown]),
      ...variants(modify, ['uuid', 'interface'], STRINGS).map((b) => ['modify', b] as [string, unknown]),
      ...variants(modify, ['status'], [...NUMBERS, 7, 99]).map((b) => ['modify', b] as [string, unknown]),
      // the message is stored and shown to the session's owner: one printable line, at most 4096
      ...[6, 2].flatMap((status) =>
        variants({ ...modify, status }, ['message'], [...unsafeLine(4096), 1, null, ['x']]).map(
          (b) => ['modify', b] as [string, unknown],
        ),
      ),
      ...variants(m, ['uuid'], STRINGS).map((b) => ['report', { sessions: [b] }] as [string, unknown]),
      ...variants(m, ['rtt', 'rxBytes'], [-1, '1', null, [], 'NaN'])
        .filter((b) => !(b.rtt === null))
        .map((b) => ['report', { sessions: [b] }] as [string, unknown]),
      ...STRINGS.map(
        (s) => ['mesh/status', { peers: [{ router: s, reachable: true }] }] as [string, unknown],
      ),
    ];
    const before = snapshot();
    for (const [path, body] of bodies) {
      const res = await h.post(`/agent/fra1/${path}`, fraToken, body);
      const what = `${path} ${JSON.stringify(body).slice(0, 120)} → ${res.body}`;
      // a malformed body is INVALID_REQUEST; a well-formed uuid of no session of this router
      // SESSION_NOT_FOUND; a well-formed status the session cannot take (0 from an agent) INVALID_STATE
      const { code, status } = problem(res);
      expect(code, what).toMatch(/^(INVALID_REQUEST|SESSION_NOT_FOUND|INVALID_STATE)$/);
      expect(status, what).toBe(ErrorCodes[code as ErrorCode]);
    }
    expect(snapshot()).toBe(before);
    expect(h.store.getRouter('fra1')?.status.lastHeartbeat).toBeUndefined();
  });
  it('agent modify names the message field and its reason', async () => {
    const res = await h.post('/agent/fra1/modify', fraToken, {
      uuid: active.uuid,
      status: 6,
      interface: active.interface,
      message: 'bird: line 1\nprotocol bgp evil { }',
    });
    expect(problem(res)).toMatchObject({ status: 400, code: 'INVALID_REQUEST' });
    expect(res.json().errors).toEqual([
      {
        pointer: '/message',
        key: 'field.printable',
        message:
          'must be one line of printable text: no control, format (zero-width, bidi) or private-use characters, no line breaks',
      },
    ]);
  });
  it('admin session actions: the reason, the uuid', async () => {
    const bodies = ['reject', 'disable', 'enable', 'approve'].flatMap((action) => [
      ...variants({ action, uuid: active.uuid }, ['reason'], [...unsafeLine(500), 1, null]),
      ...variants({ action, uuid: active.uuid }, ['uuid'], [...STRINGS, ...NUMBERS]),
    ]);
    await expectRefusedAll('/admin/session', h.admin, bodies);
  });
  it('admin router remove and rotate-token: the router name', async () => {
    await expectRefusedAll('/admin/router', h.admin, [
      ...variants({ action: 'remove' }, ['name'], [...STRINGS, ...NUMBERS]),
      ...variants({ action: 'rotate-token' }, ['name'], [...STRINGS, ...NUMBERS]),
      ...variants({ action: 'update', spec: { displayName: 'x' } }, ['name'], [...STRINGS, ...NUMBERS]),
    ]);
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
      expect(problem(res).status, url).toBe(res.statusCode);
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
      expect(problem(res), authorization.slice(0, 30)).toMatchObject({ status: 401, code: 'INVALID_TOKEN' });
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
