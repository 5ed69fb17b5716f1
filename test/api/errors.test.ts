/** Every error code of docs/api.md's Errors table, answered as problem details; the user-side checks of create. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fault } from '../../common/messages.ts';
import { buildApp } from '../../controller/app.ts';
import { TokenIssuer } from '../../controller/auth/jwt.ts';
import type { Store } from '../../controller/store/store.ts';
import { generateKeyPairSync } from 'node:crypto';
import { connect, createServer, type AddressInfo } from 'node:net';
import Fastify from 'fastify';
import { clientErrorHandler, installErrorHandling } from '../../controller/api/problem.ts';
import {
  ADMIN_ASN,
  OTHER_ASN,
  USER_ASN,
  driver,
  expectOk,
  problem,
  sessionFields,
  startHarness,
  type Harness,
} from './helpers.ts';

let h: Harness;
let d: ReturnType<typeof driver>;

beforeAll(async () => {
  h = await startHarness();
  d = driver(h, 'fra1', await h.addRouter('fra1'));
  await h.addRouter('full1', { maxSessions: 1 });
  await h.addRouter('closed1', { acceptingSessions: false });
  await h.addRouter('ranged1');
  await expectOk(
    h.post('/admin/policy', h.admin, {
      action: 'set',
      spec: { dn42Asn: ADMIN_ASN, blockedAsns: [4242429999], maxPendingPerAsn: 3 },
    }),
  );
  await expectOk(
    h.post('/admin/policy', h.admin, {
      action: 'set',
      name: 'ranged1',
      spec: { peerAddressRanges: { ipv6: ['fd00::/8'], ipv4: ['172.20.0.0/14'] } },
    }),
  );
});
afterAll(async () => h?.close());

const newUser = () => d.freshUser();

describe('request errors', () => {
  it('INVALID_REQUEST: malformed JSON', async () => {
    const res = await h.app.inject({
      method: 'POST',
      url: '/session',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${h.user}` },
      payload: '{"action": "list",',
    });
    expect(problem(res)).toMatchObject({ status: 400, code: 'INVALID_REQUEST' });
  });
  it('INVALID_REQUEST: schema failure names the field', async () => {
    const res = await h.post('/session', h.user, sessionFields('fra1', { mtu: 99999 }));
    expect(problem(res)).toMatchObject({ status: 400, code: 'INVALID_REQUEST' });
    expect(res.json().errors).toContainEqual(expect.objectContaining({ pointer: '/mtu' }));
  });
  it('INVALID_REQUEST: a JSON array or string body', async () => {
    expect(problem(await h.post('/session', h.user, [1, 2]))).toMatchObject({ code: 'INVALID_REQUEST' });
    expect(problem(await h.post('/session', h.user, 'list'))).toMatchObject({ code: 'INVALID_REQUEST' });
  });
  it('INVALID_ACTION: missing and unknown action', async () => {
    expect(problem(await h.post('/session', h.user, {}))).toMatchObject({
      status: 400,
      code: 'INVALID_ACTION',
    });
    expect(problem(await h.post('/session', h.user, { action: 'frobnicate' }))).toMatchObject({
      code: 'INVALID_ACTION',
    });
    expect(problem(await h.post('/session', h.user, { action: 'constructor' }))).toMatchObject({
      code: 'INVALID_ACTION',
    });
    expect(problem(await h.post('/admin/router', h.admin, { action: 42 }))).toMatchObject({
      code: 'INVALID_ACTION',
    });
  });
  it('UNSUPPORTED_MEDIA_TYPE: text/plain and form bodies', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
      const res = await h.app.inject({
        method: 'POST',
        url: '/session',
        headers: { 'content-type': type, authorization: `Bearer ${h.user}` },
        payload: 'action=list',
      });
      expect(problem(res)).toMatchObject({ status: 415, code: 'UNSUPPORTED_MEDIA_TYPE' });
    }
  });
  it('PAYLOAD_TOO_LARGE: a 1 MiB body', async () => {
    const res = await h.post('/session', h.user, { action: 'list', pad: 'x'.repeat(1024 * 1024) });
    expect(problem(res)).toMatchObject({ status: 413, code: 'PAYLOAD_TOO_LARGE' });
  });
  it('a request must arrive within 30 s (Node answers 408 and closes; the wait of a long poll is not counted)', () => {
    // Node checks this every 30 s, so a test of the 408 itself would take a minute: the server's setting.
    expect(h.app.server.requestTimeout).toBe(30_000);
  });
  it('requests Node refuses before fastify: problem+json 400 INVALID_REQUEST, then the connection closes', async () => {
    const address = await h.app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = new URL(address);
    const cases: [string, RegExp][] = [
      [`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20 * 1024)}\r\n\r\n`, /larger than 16 KiB/],
      ['GET /health HTP/1.1\r\nHost: x\r\n\r\n', /not valid HTTP/],
      ['POST /session HTTP/1.1\r\nHost: x\r\nContent-Length: 12abc\r\n\r\n{}', /not valid HTTP/],
      ['GET /health HTTP/1.1\r\nHo st: x\r\n\r\n', /not valid HTTP/],
    ];
    for (const [request, detail] of cases) {
      const answer = await rawExchange(Number(port), request);
      expect(answer.head, request.slice(0, 40)).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
      expect(answer.head).toMatch(/\r\nContent-Type: application\/problem\+json\r\n/);
      expect(answer.head).toMatch(/\r\nConnection: close\r\n/);
      expect(JSON.parse(answer.body)).toMatchObject({
        status: 400,
        code: 'INVALID_REQUEST',
        detail: expect.stringMatching(detail),
      });
    }
  });
  it("another client error of fastify's is mapped by its status, never to a code of another meaning", async () => {
    const app = Fastify({ logger: false });
    installErrorHandling(app);
    app.get('/:status', async (request) => {
      const status = Number((request.params as { status: string }).status);
      throw Object.assign(new Error('fastify words'), { statusCode: status, code: 'FST_ERR_SOMETHING' });
    });
    try {
      for (const [status, code, answered] of [
        [400, 'INVALID_REQUEST', 400],
        [404, 'NOT_FOUND', 404],
        [409, 'CONFLICT', 409],
        [401, 'INVALID_TOKEN', 401],
        [418, 'INVALID_REQUEST', 400],
      ] as const) {
        const res = await app.inject({ method: 'GET', url: `/${status}` });
        expect(problem(res), String(status)).toMatchObject({
          status: answered,
          code,
          detail: 'the request is not valid (FST_ERR_SOMETHING)',
        });
      }
      expect(problem(await app.inject({ method: 'GET', url: '/500' }))).toMatchObject({ code: 'INTERNAL' });
    } finally {
      await app.close();
    }
  });
  it('a request not complete within the request timeout gets the same problem+json answer', async () => {
    // Node raises this error only after its 30 s check; the handler is given it on a real connection here
    const server = createServer((socket) =>
      clientErrorHandler(Object.assign(new Error('timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' }), socket),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const answer = await rawExchange((server.address() as AddressInfo).port, 'POST / HTTP/1.1\r\n');
      expect(answer.head).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
      expect(JSON.parse(answer.body)).toMatchObject({
        code: 'INVALID_REQUEST',
        detail: 'the request did not arrive in full in time',
      });
    } finally {
      server.close();
    }
  });
  it('NOT_FOUND: unknown route, also under /api/v1', async () => {
    expect(problem(await h.get('/nope'))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
    expect(problem(await h.get('/api/v1/nope'))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
    expect(problem(await h.get('/session'))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
  });
  it('NOT_FOUND: /login on a controller without a login registry says why', async () => {
    for (const url of ['/login', '/api/v1/login']) {
      const res = await h.post(url, undefined, { asn: 4242420001 });
      expect(problem(res)).toMatchObject({ status: 404, code: 'NOT_FOUND' });
      expect(problem(res).detail).toMatch(/no PEEROPS_REGISTRY/);
    }
    expect(JSON.stringify((await expectOk(h.get('/openapi.json'))).json().paths)).not.toContain('/login');
  });
});

describe('authentication', () => {
  it('INVALID_TOKEN: missing, garbage, expired, foreign key, with WWW-Authenticate', async () => {
    const expired = h.tokens.issueToken(USER_ASN, 'user', 1).token;
    const foreign = new TokenIssuer(
      generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
    ).issueToken(USER_ASN, 'admin').token;
    await new Promise((r) => setTimeout(r, 2100));
    for (const token of [undefined, 'garbage', expired, foreign, `${h.user}x`]) {
      const res = await h.post('/session', token, { action: 'list' });
      expect(problem(res)).toMatchObject({ status: 401, code: 'INVALID_TOKEN' });
      expect(res.headers['www-authenticate']).toBe('Bearer');
    }
    const res = await h.post('/session', expired, { action: 'list' });
    expect(problem(res).detail).toMatch(/expired/);
  });
  it('FORBIDDEN: a user token on the admin API', async () => {
    for (const path of ['/admin/session', '/admin/router', '/admin/policy'])
      expect(problem(await h.post(path, h.user, { action: 'list' }))).toMatchObject({
        status: 403,
        code: 'FORBIDDEN',
      });
  });
});

describe('session errors', () => {
  it('SESSION_NOT_FOUND: unknown uuid, and another ASN’s session', async () => {
    const unknown = '7f3c2a4e-1b2d-4c5e-8f90-123456789abc';
    expect(problem(await h.post('/session', h.user, { action: 'delete', uuid: unknown }))).toMatchObject({
      status: 404,
      code: 'SESSION_NOT_FOUND',
    });
    const mine = await d.create(h.user);
    for (const action of ['modify', 'delete', 'restart']) {
      const res = await h.post('/session', h.other, {
        action,
        uuid: mine,
        ...(action === 'modify' ? { mtu: 1400 } : {}),
      });
      expect(problem(res)).toMatchObject({ code: 'SESSION_NOT_FOUND' });
    }
    expect(d.status(mine)).toBe(3);
    const list = await expectOk(h.post('/session', h.other, { action: 'list' }));
    expect(list.json().sessions.map((s: { uuid: string }) => s.uuid)).not.toContain(mine);
    const all = await expectOk(h.post('/session', h.admin, { action: 'list' }));
    expect(all.json().sessions.map((s: { uuid: string }) => s.uuid)).toContain(mine);
    expect(OTHER_ASN).not.toBe(USER_ASN);
  });
  it('ROUTER_NOT_FOUND', async () => {
    expect(problem(await h.post('/session', newUser(), sessionFields('nowhere')))).toMatchObject({
      status: 404,
      code: 'ROUTER_NOT_FOUND',
    });
  });
  it('SESSION_EXISTS: a second session of one ASN on one router', async () => {
    const token = newUser();
    await d.create(token);
    expect(problem(await h.post('/session', token, sessionFields('fra1')))).toMatchObject({
      status: 409,
      code: 'SESSION_EXISTS',
    });
  });
  it('ROUTER_FULL: at maxSessions, and not accepting', async () => {
    await expectOk(h.post('/session', newUser(), sessionFields('full1')));
    expect(problem(await h.post('/session', newUser(), sessionFields('full1')))).toMatchObject({
      status: 409,
      code: 'ROUTER_FULL',
    });
    expect(problem(await h.post('/session', newUser(), sessionFields('closed1')))).toMatchObject({
      code: 'ROUTER_FULL',
    });
    const routers = (await expectOk(h.get('/routers'))).json().routers as {
      name: string;
      accepting: boolean;
    }[];
    expect(routers.filter((r) => !r.accepting).map((r) => r.name)).toEqual(['closed1', 'full1']);
  });
  it('ROUTER_FULL: of 20 creates sent at once to a router capped at 5, exactly 5 are stored', async () => {
    await h.addRouter('cap5', { maxSessions: 5 });
    const responses = await Promise.all(
      Array.from({ length: 20 }, () => h.post('/session', newUser(), sessionFields('cap5'))),
    );
    const refused = responses.filter((r) => r.statusCode !== 200);
    expect(responses.length - refused.length).toBe(5);
    for (const res of refused)
      expect(problem(res)).toMatchObject({
        status: 409,
        code: 'ROUTER_FULL',
        detail: 'router cap5 has reached its maximum of 5 sessions',
      });
    expect(h.store.listSessions({ router: 'cap5' })).toHaveLength(5);
  });
  it('CONFLICT: of 6 creates by one ASN sent at once, maxPendingPerAsn (3) are stored', async () => {
    const routers = ['burst1', 'burst2', 'burst3', 'burst4', 'burst5', 'burst6'];
    for (const r of routers) await h.addRouter(r);
    const token = newUser();
    const responses = await Promise.all(routers.map((r) => h.post('/session', token, sessionFields(r))));
    const refused = responses.filter((r) => r.statusCode !== 200);
    expect(refused).toHaveLength(3);
    for (const res of refused)
      expect(problem(res)).toMatchObject({
        status: 409,
        code: 'CONFLICT',
        detail: expect.stringMatching(
          /already has 3 session\(s\) awaiting review \(limit 3\); wait for a review$/,
        ),
      });
    const stored = routers.flatMap((r) => h.store.listSessions({ router: r }));
    expect(stored).toHaveLength(3);
  });
  it('ASN_BLOCKED', async () => {
    const blocked = h.tokens.issueToken(4242429999, 'user').token;
    const res = await h.post('/session', blocked, sessionFields('fra1'));
    expect(problem(res)).toMatchObject({ status: 403, code: 'ASN_BLOCKED' });
  });
  it("INVALID_REQUEST: peer addresses that would pull others' traffic into the tunnel", async () => {
    await h.addRouter('own1');
    await expectOk(
      h.post('/admin/policy', h.admin, {
        action: 'set',
        name: 'own1',
        spec: { ownPrefixes: { ipv6: ['fd00:4242::/48'] } },
      }),
    );
    const loopback = h.store.getRouter('fra1')?.spec.loopback;
    const taken = h.store.listSessions()[0];
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ ipv6: loopback?.ipv6 }, '/ipv6', /is the loopback of router fra1/],
      [
        { ipv4: loopback?.ipv4, mpbgp: true, extendedNextHop: false },
        '/ipv4',
        /is the loopback of router fra1/,
      ],
      [{ ipv6: 'fd00:4242::7' }, '/ipv6', /this network's own prefixes \(fd00:4242::\/48\)/],
      [{ ipv6: taken?.spec.ipv6 }, '/ipv6', new RegExp(`is the address of AS${taken?.spec.asn}'s session`)],
    ];
    for (const [extra, pointer, message] of cases) {
      const res = await h.post('/session', newUser(), sessionFields('own1', extra));
      expect(problem(res), JSON.stringify(extra)).toMatchObject({ status: 400, code: 'INVALID_REQUEST' });
      expect(res.json().errors, JSON.stringify(extra)).toContainEqual(
        expect.objectContaining({ pointer, message: expect.stringMatching(message) }),
      );
    }
    expect(h.store.listSessions({ router: 'own1' })).toEqual([]);
    // the same ASN may use its address on another router
    const owner = h.tokens.issueToken(taken?.spec.asn ?? 0, 'user').token;
    await expectOk(h.post('/session', owner, sessionFields('own1', { ipv6: taken?.spec.ipv6 })));
  });
  it('INVALID_REQUEST: of creates from different ASNs sent at once for one address, only one is stored', async () => {
    await h.addRouter('race1');
    await h.addRouter('race2');
    const ipv6 = 'fd42:1234:ace::1';
    const responses = await Promise.all(
      ['race1', 'race1', 'race2', 'race2'].map((router) =>
        h.post('/session', newUser(), sessionFields(router, { ipv6 })),
      ),
    );
    expect(responses.map((r) => r.statusCode).sort()).toEqual([200, 400, 400, 400]);
    for (const res of responses.filter((r) => r.statusCode === 400))
      expect(res.json().errors).toContainEqual(
        expect.objectContaining({
          pointer: '/ipv6',
          message: expect.stringMatching(/is the address of AS[0-9]+'s session/),
        }),
      );
    expect(h.store.listSessions().filter((s) => s.spec.ipv6 === ipv6)).toHaveLength(1);
  });
  it("ASN_BLOCKED: a router's own block list adds to the network's, never unblocks", async () => {
    await h.addRouter('blk1');
    await expectOk(
      h.post('/admin/policy', h.admin, { action: 'set', name: 'blk1', spec: { blockedAsns: [4242420777] } }),
    );
    for (const asn of [4242429999, 4242420777]) {
      const res = await h.post('/session', h.tokens.issueToken(asn, 'user').token, sessionFields('blk1'));
      expect(problem(res), `AS${asn}`).toMatchObject({ status: 403, code: 'ASN_BLOCKED' });
    }
    const elsewhere = h.tokens.issueToken(4242420777, 'user').token;
    await expectOk(h.post('/session', elsewhere, sessionFields('fra1')));
  });
  it('CONFLICT: more pending sessions than maxPendingPerAsn', async () => {
    const token = newUser();
    for (const r of ['pend1', 'pend2', 'pend3', 'pend4']) await h.addRouter(r);
    for (const r of ['pend1', 'pend2', 'pend3']) await expectOk(h.post('/session', token, sessionFields(r)));
    expect(problem(await h.post('/session', token, sessionFields('pend4')))).toMatchObject({
      status: 409,
      code: 'CONFLICT',
    });
  });
  it('INVALID_STATE', async () => {
    const uuid = await d.inStatus(3);
    expect(problem(await d.user('restart', uuid))).toMatchObject({ status: 409, code: 'INVALID_STATE' });
  });
});

describe('policy checks at create', () => {
  it('peer addresses outside peerAddressRanges', async () => {
    const res = await h.post(
      '/session',
      newUser(),
      sessionFields('ranged1', { ipv6: '2606:4700:4700::1111', ipv4: '10.0.0.1' }),
    );
    expect(problem(res)).toMatchObject({ code: 'INVALID_REQUEST' });
    const pointers = res.json().errors.map((e: { pointer: string }) => e.pointer);
    expect(pointers).toEqual(expect.arrayContaining(['/ipv6', '/ipv4']));
    await expectOk(
      h.post('/session', newUser(), sessionFields('ranged1', { ipv6: 'fd42::1', ipv4: '172.20.1.1' })),
    );
  });
  it("link-local collision with the router's own", async () => {
    const res = await h.post('/session', newUser(), sessionFields('fra1', { linkLocal: 'FE80:0::1' }));
    expect(res.json().errors).toContainEqual(expect.objectContaining({ pointer: '/linkLocal' }));
  });
  it('MP-BGP / extended next hop consistency', async () => {
    const cases = [
      { mpbgp: false },
      { mpbgp: false, extendedNextHop: true, ipv4: '172.20.1.2' },
      { mpbgp: true, extendedNextHop: false },
    ];
    for (const extra of cases) {
      const res = await h.post('/session', newUser(), sessionFields('fra1', extra));
      expect(problem(res), JSON.stringify(extra)).toMatchObject({ code: 'INVALID_REQUEST' });
    }
    const withoutMpbgp = await expectOk(
      h.post(
        '/session',
        newUser(),
        sessionFields('fra1', { mpbgp: false, extendedNextHop: false, ipv4: '172.20.1.3' }),
      ),
    );
    // the answer names the far end of the peer's tunnel IPv4: the router's IPv4 loopback
    expect(withoutMpbgp.json().serverIpv4).toBe(h.store.getRouter('fra1')?.spec.loopback.ipv4);
    const ipv6Only = await expectOk(h.post('/session', newUser(), sessionFields('fra1')));
    expect(ipv6Only.json()).not.toHaveProperty('serverIpv4');
  });
  it('create accepts the router name as well as its UUID', async () => {
    const uuid = h.store.getRouter('fra1')?.spec.uuid;
    await expectOk(h.post('/session', newUser(), sessionFields(String(uuid))));
    await expectOk(h.post('/session', newUser(), sessionFields('fra1')));
  });
});

describe('server errors', () => {
  it('INTERNAL: an unexpected store failure is a 500 without message or stack', async () => {
    // A store that fails in a way the real one cannot be made to on demand (a broken disk): a Proxy over
    // the real git store whose createSession throws a plain Error.
    const broken = new Proxy(h.store, {
      get(target, prop, receiver) {
        if (prop === 'createSession')
          return async () => {
            throw new Error('EIO /var/secret/path');
          };
        const v = Reflect.get(target, prop, receiver);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    }) as Store;
    const app = await buildApp({ store: broken, tokens: h.tokens, config: h.config, logger: false });
    try {
      const res = await app.inject({
        method: 'POST',
        url: '/session',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${newUser()}` },
        payload: JSON.stringify(sessionFields('fra1')),
      });
      expect(problem(res)).toMatchObject({ status: 500, code: 'INTERNAL' });
      expect(res.body).not.toMatch(/secret|EIO/);
    } finally {
      await app.close();
    }
  });
  it('STORE_UNAVAILABLE from the store is passed on as 503', async () => {
    const down = new Proxy(h.store, {
      get(target, prop, receiver) {
        if (prop === 'createSession')
          return async () => {
            throw fault('store.closed');
          };
        const v = Reflect.get(target, prop, receiver);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    }) as Store;
    const app = await buildApp({ store: down, tokens: h.tokens, config: h.config, logger: false });
    try {
      const res = await app.inject({
        method: 'POST',
        url: '/session',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${newUser()}` },
        payload: JSON.stringify(sessionFields('fra1')),
      });
      expect(problem(res)).toMatchObject({ status: 503, code: 'STORE_UNAVAILABLE' });
    } finally {
      await app.close();
    }
  });
});

/** Writes raw bytes to the port and reads the whole answer, up to the server closing the connection. */
async function rawExchange(port: number, request: string): Promise<{ head: string; body: string }> {
  const socket = connect(port, '127.0.0.1');
  let answer = '';
  socket.on('data', (b: Buffer) => (answer += b.toString()));
  socket.on('error', () => undefined); // the server may reset after its answer
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.write(request);
  await new Promise((resolve) => socket.once('close', resolve));
  const split = answer.indexOf('\r\n\r\n');
  return { head: answer.slice(0, split + 2), body: answer.slice(split + 4) };
}
