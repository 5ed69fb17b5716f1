/**
 * Issue 24, crash safety: bodies nested too deep for any recursive walk, mesh reports naming routers
 * that do not exist, JWTs without the claims that make one, the router's and Node's own answers as
 * problem+json, and the request timeout over a real socket.
 */
import { readFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import { createSigner } from 'fast-jwt';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../controller/app.ts';
import { AUDIENCE, ISSUER } from '../../controller/auth/jwt.ts';
import { newTokenId } from '../../controller/auth/token-id.ts';
import { assertSafeNumbers, MAX_JSON_DEPTH } from '../../controller/api/validation.ts';
import { ProblemError } from '../../common/errors.ts';
import { problem, routerFields, sessionFields, startHarness, USER_ASN, type Harness } from './helpers.ts';

let h: Harness;
let fraToken: string;

beforeAll(async () => {
  // A body limit that holds 100,000 levels (200 KB), so that the depth is what refuses them.
  h = await startHarness({ bodyLimitBytes: 1024 * 1024 });
  fraToken = await h.addRouter('fra1');
  await h.addRouter('ams1');
});
afterAll(async () => h?.close());

/** A raw JSON body, as the client wrote it. */
function postRaw(url: string, token: string | undefined, payload: string) {
  return h.app.inject({
    method: 'POST',
    url,
    headers: {
      'content-type': 'application/json',
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    payload,
  });
}

const nested = (depth: number, inner = '1') => '['.repeat(depth) + inner + ']'.repeat(depth);

describe('bodies nested deeper than the limit', () => {
  const routes = () =>
    [
      ['/session', h.user, (deep: string) => `{"action":"list","x":${deep}}`],
      [
        '/session',
        h.user,
        (deep: string) => JSON.stringify(sessionFields('fra1')).replace(/}$/, `,"x":${deep}}`),
      ],
      ['/admin/policy', h.admin, (deep: string) => `{"action":"set","spec":{"communities":${deep}}}`],
      [
        '/admin/router',
        h.admin,
        (deep: string) =>
          JSON.stringify({ action: 'add', ...routerFields('x1') }).replace(/}$/, `,"loopback":${deep}}`),
      ],
      ['/agent/fra1/heartbeat', fraToken, (deep: string) => `{"version":"1.0.0","uptime":1,"x":${deep}}`],
      ['/agent/fra1/report', fraToken, (deep: string) => `{"sessions":${deep}}`],
      ['/agent/fra1/modify', fraToken, (deep: string) => `{"uuid":${deep}}`],
      [
        '/agent/fra1/mesh/status',
        fraToken,
        (deep: string) => `{"peers":[{"router":"ams1","reachable":${deep}}]}`,
      ],
    ] as const;

  it.each([10_000, 100_000])(
    'depth %i on user, admin and agent routes: 400 naming the limit, nothing stored',
    async (depth) => {
      const before = JSON.stringify([h.store.listSessions(), h.store.listRouters(), h.store.listPolicies()]);
      for (const prefix of ['', '/api/v1'])
        for (const [url, token, body] of routes()) {
          for (const deep of [
            nested(depth),
            nested(depth, '{"a":[9007199254740993]}'),
            '{"a":'.repeat(depth) + '1' + '}'.repeat(depth),
          ]) {
            const res = await postRaw(prefix + url, token, body(deep));
            expect(problem(res), `${prefix}${url}`).toMatchObject({
              status: 400,
              code: 'INVALID_REQUEST',
              detail: `the request body is nested more than ${MAX_JSON_DEPTH} levels deep (objects and arrays)`,
            });
          }
          // never closed: not JSON at all
          const open = await postRaw(prefix + url, token, body('['.repeat(depth)));
          expect(problem(open), `${prefix}${url}`).toMatchObject({
            status: 400,
            code: 'INVALID_REQUEST',
            detail: 'the request body is not valid JSON',
          });
        }
      expect(JSON.stringify([h.store.listSessions(), h.store.listRouters(), h.store.listPolicies()])).toBe(
        before,
      );
    },
  );

  it('with the default 64 KiB body limit: 30,000 levels are refused for their depth too', async () => {
    const plain = await startHarness();
    try {
      const res = await plain.post('/session', plain.user, { action: 'list' });
      expect(res.statusCode).toBe(200);
      const deep = await plain.app.inject({
        method: 'POST',
        url: '/session',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${plain.user}` },
        payload: `{"action":"list","x":${nested(30_000)}}`,
      });
      expect(problem(deep)).toMatchObject({
        status: 400,
        code: 'INVALID_REQUEST',
        detail: expect.stringMatching(/nested more than 64/),
      });
    } finally {
      await plain.close();
    }
  });

  it('the limit itself: 64 levels reach the schema, 65 do not; brackets inside strings do not count', async () => {
    // The body object is level 1.
    const at = await postRaw('/session', h.user, `{"action":"list","x":${nested(MAX_JSON_DEPTH - 1)}}`);
    expect(problem(at)).toMatchObject({
      status: 400,
      code: 'INVALID_REQUEST',
      detail: 'list /x: is not a known field',
    });
    const over = await postRaw('/session', h.user, `{"action":"list","x":${nested(MAX_JSON_DEPTH)}}`);
    expect(problem(over).detail).toMatch(/nested more than 64 levels/);
    const strings = await postRaw(
      '/session',
      h.user,
      `{"action":"list","x":"${'[{'.repeat(5000)}\\"${']'.repeat(100)}"}`,
    );
    expect(problem(strings)).toMatchObject({ detail: 'list /x: is not a known field' });
  });

  it('the guard every body passes first stops at the limit, whatever calls it (admission reviews too)', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = i % 2 ? [deep] : { a: deep };
    const refusal = (() => {
      try {
        assertSafeNumbers(deep);
      } catch (err) {
        return err;
      }
    })();
    expect(refusal).toBeInstanceOf(ProblemError);
    expect(refusal).toMatchObject({
      code: 'INVALID_REQUEST',
      message: expect.stringMatching(/nested more than 64/),
    });
    let ok: unknown = 1;
    for (let i = 0; i < MAX_JSON_DEPTH; i++) ok = [ok];
    expect(() => assertSafeNumbers(ok)).not.toThrow();
  });

  it('an agent route checks the token first: a deep body without the token is 401', async () => {
    const res = await postRaw('/agent/fra1/heartbeat', h.user, `{"x":${nested(10_000)}}`);
    expect(problem(res)).toMatchObject({ status: 401, code: 'INVALID_TOKEN' });
  });
});

describe('mesh status names only the other routers of the network', () => {
  it('an unknown peer, the router itself or a peer twice: 400 naming the peer, nothing stored', async () => {
    await h.post('/agent/fra1/mesh/status', fraToken, { peers: [{ router: 'ams1', reachable: true }] });
    const before = JSON.stringify(h.store.getRouter('fra1')?.status);
    const cases: [unknown[], string, string][] = [
      [
        [
          { router: 'ams1', reachable: true },
          { router: 'nope9', reachable: true },
        ],
        '/peers/1/router',
        'nope9 is not a router of this network',
      ],
      [
        [{ router: 'fra1', reachable: true }],
        '/peers/0/router',
        'fra1 is this router itself, not a mesh peer',
      ],
      [
        [
          { router: 'ams1', reachable: true },
          { router: 'ams1', reachable: false },
        ],
        '/peers/1/router',
        'ams1 is listed twice',
      ],
    ];
    for (const [peers, pointer, message] of cases)
      for (const prefix of ['', '/api/v1']) {
        const res = await h.post(`${prefix}/agent/fra1/mesh/status`, fraToken, { peers });
        expect(problem(res)).toMatchObject({
          status: 400,
          code: 'INVALID_REQUEST',
          detail: `mesh status ${pointer}: ${message}`,
        });
        expect(res.json().errors).toMatchObject([{ pointer, message }]);
      }
    expect(JSON.stringify(h.store.getRouter('fra1')?.status)).toBe(before);
  });

  it('a known peer is stored, and an empty list too', async () => {
    const ok = await h.post('/agent/fra1/mesh/status', fraToken, {
      peers: [{ router: 'ams1', reachable: false, rtt: 2 }],
    });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(h.store.getRouter('fra1')?.status.meshPeers).toEqual([
      { router: 'ams1', reachable: false, rtt: 2 },
    ]);
    expect((await h.post('/agent/fra1/mesh/status', fraToken, { peers: [] })).statusCode).toBe(200);
  });
});

describe('JWTs: signed with the key is not enough', () => {
  let sign: (claims: Record<string, unknown>) => string;
  beforeAll(async () => {
    const key = await readFile(join(h.dir, 'jwt-ed25519.pem'), 'utf8');
    const signer = createSigner({ key, algorithm: 'EdDSA' });
    sign = (claims) => signer(claims);
  });
  const now = () => Math.floor(Date.now() / 1000);
  const good = (asn: number) => {
    const exp = now() + 600;
    return {
      sub: `AS${asn}`,
      asn,
      role: 'user',
      src: 'login',
      jti: newTokenId(asn, exp),
      iss: ISSUER,
      aud: AUDIENCE,
      iat: now(),
      exp,
    };
  };

  it('the claims the controller issues are accepted', async () => {
    const res = await h.post('/session', sign(good(USER_ASN)), { action: 'list' });
    expect(res.statusCode, res.body).toBe(200);
  });

  it.each([
    ['without iss', { iss: undefined }],
    ['another iss', { iss: 'someone-else' }],
    ['without aud', { aud: undefined }],
    ['another aud', { aud: 'peerops-agent' }],
    ['aud as a list', { aud: ['other', 'x'] }],
    ['ASN 0', { asn: 0, sub: 'AS0' }],
    ['ASN -1', { asn: -1, sub: 'AS-1' }],
    ['ASN 2^32', { asn: 4294967296, sub: 'AS4294967296' }],
    ['ASN 1.5', { asn: 1.5, sub: 'AS1.5' }],
    ['ASN as a string', { asn: '4242421234' }],
    ['sub of another ASN', { sub: 'AS4242425678' }],
    ['an unknown role', { role: 'root' }],
    ['without role', { role: undefined }],
    ['without exp', { exp: undefined }],
    ['without jti', { jti: undefined }],
    ['a jti of another ASN', { jti: newTokenId(4242425678, now() + 600) }],
    ['an unknown src', { src: 'forged' }],
  ] as const)('%s: 401 INVALID_TOKEN', async (_name, change) => {
    const claims: Record<string, unknown> = { ...good(USER_ASN), ...change };
    for (const k of Object.keys(claims)) if (claims[k] === undefined) delete claims[k];
    const res = await h.post('/session', sign(claims), { action: 'list' });
    expect(problem(res)).toMatchObject({ status: 401, code: 'INVALID_TOKEN' });
    expect(res.headers['www-authenticate']).toBe('Bearer');
  });

  it('the edges of the ASN range: 1 and 4294967295 are ASNs', async () => {
    for (const asn of [1, 4294967295])
      expect((await h.post('/session', sign(good(asn)), { action: 'list' })).statusCode).toBe(200);
  });
});

/** One exchange over a real connection: what the server wrote until it closed (or 3 s passed). */
function rawExchange(
  port: number,
  request: string,
  drip?: { every: number; text: string },
): Promise<{ text: string; ms: number }> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = connect(port, '127.0.0.1');
    let text = '';
    let timer: NodeJS.Timeout | undefined;
    socket.on('data', (d) => (text += d.toString()));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      clearInterval(timer);
      // A drip written after the server cut the request makes it reset the connection; the answer
      // that came before still counts, and only a reset that cost it is an error (dripReset retries).
      if (err.code === 'ECONNRESET' && text.includes('\r\n\r\n')) resolve({ text, ms: Date.now() - started });
      else reject(err);
    });
    socket.on('close', () => {
      clearInterval(timer);
      resolve({ text, ms: Date.now() - started });
    });
    socket.write(request);
    if (drip) timer = setInterval(() => socket.writable && socket.write(drip.text), drip.every);
    else setTimeout(() => socket.end(), 3000).unref();
  });
}

/**
 * rawExchange with a drip, again when the connection was reset before the answer could be read: on a
 * loaded machine a drip can cross the server's close, and the reset may discard the unread answer.
 */
async function dripReset(...args: Parameters<typeof rawExchange>): ReturnType<typeof rawExchange> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await rawExchange(...args);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ECONNRESET' || attempt >= 3) throw err;
    }
  }
}

function parseAnswer(text: string) {
  const [head = '', body = ''] = text.split('\r\n\r\n');
  return { head, body, json: () => JSON.parse(body) as Record<string, unknown> };
}

describe("the router's and Node's own answers are problem+json", () => {
  let port: number;
  beforeAll(async () => {
    port = Number(new URL(await h.app.listen({ host: '127.0.0.1', port: 0 })).port);
  });

  it('a path parameter over 100 characters: 400 INVALID_REQUEST with the rate-limit headers, not a bare 414', async () => {
    for (const url of [`/agent/${'a'.repeat(101)}/heartbeat`, `/api/v1/agent/${'a'.repeat(5000)}/sessions`]) {
      const res = await h.app.inject({
        method: url.endsWith('heartbeat') ? 'POST' : 'GET',
        url,
        headers: { 'content-type': 'application/json' },
        payload: url.endsWith('heartbeat') ? '{}' : undefined,
      });
      expect(problem(res)).toMatchObject({
        status: 400,
        code: 'INVALID_REQUEST',
        detail: expect.stringMatching(/longer than 100 characters.*FST_ERR_MAX_PARAM_LENGTH/),
      });
      expect(res.headers['x-ratelimit-limit']).toBe('100000');
      expect(res.headers['x-ratelimit-remaining']).toMatch(/^\d+$/);
      expect(res.headers['x-ratelimit-reset']).toMatch(/^\d{10}$/);
    }
  });

  it('a URL that does not decode: 400 INVALID_REQUEST with the rate-limit headers', async () => {
    const res = await h.app.inject({ method: 'GET', url: '/agent/%E0%A4%A/sessions' });
    expect(problem(res)).toMatchObject({
      status: 400,
      code: 'INVALID_REQUEST',
      detail: expect.stringMatching(/FST_ERR_BAD_URL/),
    });
    expect(res.headers['x-ratelimit-limit']).toBe('100000');
  });

  it('these count against the caller like a 404: the 61st in a minute is 429 RATE_LIMITED', async () => {
    const limited = await startHarness({ rateLimit: { perMinute: 60, agentPerMinute: 300 } });
    try {
      const long = `/agent/${'b'.repeat(200)}/heartbeat`;
      for (let i = 0; i < 60; i++) {
        const res = await limited.app.inject({ method: 'GET', url: long, remoteAddress: '192.0.2.7' });
        expect(res.statusCode).toBe(400);
      }
      const res = await limited.app.inject({
        method: 'GET',
        url: '/session/%zz',
        remoteAddress: '192.0.2.7',
      });
      expect(problem(res)).toMatchObject({ status: 429, code: 'RATE_LIMITED' });
      expect(res.headers['retry-after']).toMatch(/^\d+$/);
      expect(res.headers['x-ratelimit-remaining']).toBe('0');
    } finally {
      await limited.close();
    }
  });

  it('over a socket too, and an HTTP/1.1 request without Host, an Expect Node does not know, CONNECT', async () => {
    const long = parseAnswer(
      (
        await rawExchange(
          port,
          `GET /agent/${'a'.repeat(120)}/sessions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
        )
      ).text,
    );
    expect(long.head).toMatch(/^HTTP\/1\.1 400 /);
    expect(long.head).toMatch(/\r\ncontent-type: application\/problem\+json/i);
    expect(long.head).toMatch(/\r\nx-ratelimit-limit: 100000\r\n/i);
    expect(long.json()).toMatchObject({ code: 'INVALID_REQUEST' });

    const noHost = parseAnswer((await rawExchange(port, 'GET /routers HTTP/1.1\r\n\r\n')).text);
    expect(noHost.head).toMatch(/^HTTP\/1\.1 400 /);
    expect(noHost.head).toMatch(/\r\ncontent-type: application\/problem\+json/i);
    expect(noHost.head).toMatch(/\r\nconnection: close/i);
    expect(noHost.json()).toMatchObject({
      code: 'INVALID_REQUEST',
      detail: 'an HTTP/1.1 request must have a Host header',
    });

    // HTTP/1.0 has no Host requirement
    expect(parseAnswer((await rawExchange(port, 'GET /routers HTTP/1.0\r\n\r\n')).text).head).toMatch(
      /^HTTP\/1\.1 200 /,
    );

    const expectation = parseAnswer(
      (
        await rawExchange(
          port,
          'GET /nowhere HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\nConnection: close\r\n\r\n',
        )
      ).text,
    );
    expect(expectation.head).toMatch(/^HTTP\/1\.1 404 /);
    expect(expectation.head).toMatch(/\r\nx-ratelimit-limit: 100000\r\n/i);
    expect(expectation.json()).toMatchObject({ code: 'NOT_FOUND' });

    // CONNECT: Node closed the connection without an answer
    const tunnel = parseAnswer(
      (await rawExchange(port, 'CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n')).text,
    );
    expect(tunnel.head).toMatch(/^HTTP\/1\.1 404 Not Found\r\n/);
    expect(tunnel.head).toMatch(/\r\nContent-Type: application\/problem\+json\r\n/);
    expect(tunnel.json()).toMatchObject({ code: 'NOT_FOUND', detail: 'no route CONNECT x:443' });
  });
});

describe('the request timeout', () => {
  it('is the documented 30 s by default, for headers and body alike, checked every second', () => {
    expect(h.app.server.requestTimeout).toBe(30_000);
    expect(h.app.server.headersTimeout).toBe(30_000);
    expect(h.app.server.keepAliveTimeout).toBe(72_000);
  });

  it('cuts a body that drips, over a real socket, at the configured time (1 s here), with a problem answer and its limit headers', async () => {
    const app: FastifyInstance = await buildApp({
      store: h.store,
      tokens: h.tokens,
      config: h.config,
      logger: false,
      requestTimeoutMs: 1000,
    });
    try {
      const port = Number(new URL(await app.listen({ host: '127.0.0.1', port: 0 })).port);
      // a byte every 100 ms: the connection is never idle, only slow
      const body = await dripReset(
        port,
        `POST /session HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${h.user}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"action":`,
        { every: 100, text: ' ' },
      );
      expect(body.ms).toBeGreaterThanOrEqual(950);
      expect(body.ms).toBeLessThan(2500);
      const answer = parseAnswer(body.text);
      expect(answer.head).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
      expect(answer.head).toMatch(/\r\nContent-Type: application\/problem\+json\r\n/);
      // it reached its route, which counted it: the limit headers it was given
      expect(answer.head).toMatch(
        /\r\nx-ratelimit-limit: 100000\r\nx-ratelimit-remaining: \d+\r\nx-ratelimit-reset: \d{10}\r\n/,
      );
      expect(answer.json()).toMatchObject({
        code: 'INVALID_REQUEST',
        detail: 'the request did not arrive in full in time',
      });
      // headers that drip are cut the same way
      const headers = await dripReset(port, 'GET /routers HTTP/1.1\r\nHost: x\r\n', {
        every: 100,
        text: 'X-Slow: 1\r\n',
      });
      expect(headers.ms).toBeLessThan(2500);
      expect(parseAnswer(headers.text).json()).toMatchObject({ code: 'INVALID_REQUEST' });
      expect(parseAnswer(headers.text).head).not.toMatch(/x-ratelimit/i);
    } finally {
      await app.close();
    }
  });
});
