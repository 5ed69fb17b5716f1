/**
 * Tokens checked against what is true now (docs/login.md, Tokens and what is true now; Revoking tokens):
 * a real controller in-process on the real git store, restarted on the same data where a test needs the
 * admin list changed or the revocations read back.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildApp } from '../../controller/app.ts';
import { loadConfig, type Config } from '../../controller/config.ts';
import { TokenIssuer, loadOrCreateKey } from '../../controller/auth/jwt.ts';
import { openRegistry } from '../../controller/auth/login/registry.ts';
import { createGitStore } from '../../controller/store/git/index.ts';
import type { Store } from '../../controller/store/store.ts';
import { ADMIN_ASN, OTHER_ASN, USER_ASN, problem, routerFields, sessionFields } from './helpers.ts';

interface Controller {
  app: FastifyInstance;
  store: Store;
  tokens: TokenIssuer;
  post(url: string, token: string, body: unknown): Promise<LightMyRequestResponse>;
  close(): Promise<void>;
}

let dir: string;
const running: Controller[] = [];

/** `peerops serve` on `dir` as main.ts wires it, with login and this admin list (PEEROPS_ADMIN_ASNS). */
async function start(admins: number[]): Promise<Controller> {
  const store = createGitStore({
    dir: join(dir, 'store.git'),
    logger: pino({ level: 'silent' }),
    observationFlushMs: 600_000,
  });
  await store.start();
  const tokens = new TokenIssuer(await loadOrCreateKey(join(dir, 'jwt-ed25519.pem')));
  const config: Config = {
    ...loadConfig({ data: dir, listen: '127.0.0.1:0' }, {}),
    rateLimit: { perMinute: 100_000, agentPerMinute: 100_000 },
  };
  const registry = await openRegistry({ source: join(dir, 'users') });
  const app = await buildApp({
    store,
    tokens,
    config,
    logger: false,
    login: { registry, serviceHost: 'peering.example.net', admins },
  });
  await app.ready();
  const c: Controller = {
    app,
    store,
    tokens,
    post: (url, token, body) =>
      app.inject({
        method: 'POST',
        url,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        payload: JSON.stringify(body),
      }),
    async close() {
      await app.close();
      await store.close();
      running.splice(running.indexOf(c), 1);
    },
  };
  running.push(c);
  return c;
}

/** A token as the login issues it (the login plugin's issueToken, app.ts). */
const loginToken = (c: Controller, asn: number, role: 'user' | 'admin') =>
  c.tokens.issueToken(asn, role, 3600, 'login');

const listRouters = (c: Controller, token: string) => c.post('/admin/router', token, { action: 'list' });
const listSessions = (c: Controller, token: string) => c.post('/session', token, { action: 'list' });

/** The next whole second: a token issued then is newer than a revocation of its ASN made now. */
const nextSecond = () => new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 5));

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-tokens-'));
  await writeFile(join(dir, 'users'), '');
});
afterEach(async () => {
  for (const c of [...running]) await c.close();
  await rm(dir, { recursive: true, force: true });
});

describe('the admin role is what the admin list says now', () => {
  it('an ASN removed from the admin list is a plain user at its next request', async () => {
    let c = await start([ADMIN_ASN]);
    const { token } = loginToken(c, ADMIN_ASN, 'admin');
    expect((await listRouters(c, token)).statusCode).toBe(200);
    await c.close();

    // PEEROPS_ADMIN_ASNS without it; the token (same key, not expired) is still valid
    c = await start([]);
    const refused = problem(await listRouters(c, token));
    expect(refused).toMatchObject({ status: 403, code: 'FORBIDDEN' });
    // a user still: its own sessions answer
    expect((await listSessions(c, token)).statusCode).toBe(200);
    await c.close();

    // back on the list: admin again, with the same token
    c = await start([ADMIN_ASN]);
    expect((await listRouters(c, token)).statusCode).toBe(200);
  });

  it("a login's user token is not raised to admin by the list; an operator's admin token is not bound to it", async () => {
    const c = await start([USER_ASN]);
    expect(problem(await listRouters(c, loginToken(c, OTHER_ASN, 'admin').token)).code).toBe('FORBIDDEN');
    expect(problem(await listRouters(c, loginToken(c, USER_ASN, 'user').token)).code).toBe('FORBIDDEN');
    // `peerops admin token --admin`: the operator's key vouches for it; revoking is how it ends
    expect((await listRouters(c, c.tokens.issueToken(ADMIN_ASN, 'admin').token)).statusCode).toBe(200);
  });
});

describe('a blocked ASN', () => {
  it('is refused modify, config and webhook create (403 ASN_BLOCKED); it can still log out', async () => {
    const c = await start([]);
    const admin = c.tokens.issueToken(ADMIN_ASN, 'admin').token;
    const user = loginToken(c, USER_ASN, 'user').token;
    expect(
      (await c.post('/admin/policy', admin, { action: 'set', spec: { dn42Asn: ADMIN_ASN } })).statusCode,
    ).toBe(200);
    expect(
      (await c.post('/admin/router', admin, { action: 'add', ...routerFields('fra1') })).statusCode,
    ).toBe(200);
    const created = await c.post('/session', user, sessionFields('fra1'));
    expect(created.statusCode).toBe(200);
    const { uuid } = created.json() as { uuid: string };

    const block = await c.post('/admin/policy', admin, {
      action: 'patch',
      spec: { blockedAsns: [USER_ASN] },
    });
    expect(block.statusCode).toBe(200);
    const attempts = {
      modify: await c.post('/session', user, { action: 'modify', uuid, mtu: 1400 }),
      config: await c.post('/session', user, { action: 'config', uuid, format: 'wg-quick' }),
      webhook: await c.post('/webhooks', user, { action: 'create', url: 'https://hooks.example.net/x' }),
      list: await listSessions(c, user),
    };
    for (const [what, res] of Object.entries(attempts)) {
      const p = problem(res);
      expect(p, what).toMatchObject({ status: 403, code: 'ASN_BLOCKED' });
      expect(p.detail, what).toContain(`AS${USER_ASN} is blocked`);
    }
    expect(c.store.getSession(uuid)?.spec.mtu).toBe(1420);
    // another network is not touched by the block
    expect((await listSessions(c, loginToken(c, OTHER_ASN, 'user').token)).statusCode).toBe(200);
    // logging out is never refused
    expect((await c.post('/token', user, { action: 'revoke' })).statusCode).toBe(200);

    // unblocked: a token of the ASN works again at once
    expect(
      (await c.post('/admin/policy', admin, { action: 'patch', spec: { blockedAsns: null } })).statusCode,
    ).toBe(200);
    const fresh = loginToken(c, USER_ASN, 'user').token;
    expect((await c.post('/session', fresh, { action: 'modify', uuid, mtu: 1400 })).statusCode).toBe(200);
  });

  it('that is an admin now is not refused: admins decide the block and can undo it', async () => {
    const c = await start([ADMIN_ASN]);
    const admin = loginToken(c, ADMIN_ASN, 'admin').token;
    const set = await c.post('/admin/policy', admin, {
      action: 'set',
      spec: { dn42Asn: ADMIN_ASN, blockedAsns: [ADMIN_ASN] },
    });
    expect(set.statusCode).toBe(200);
    expect((await listSessions(c, admin)).statusCode).toBe(200);
    expect(
      (await c.post('/admin/policy', admin, { action: 'patch', spec: { blockedAsns: null } })).statusCode,
    ).toBe(200);
  });
});

describe('revoking tokens', () => {
  it("revokes one token by its id; the ASN's other tokens still work", async () => {
    const c = await start([]);
    const admin = c.tokens.issueToken(ADMIN_ASN, 'admin').token;
    const first = loginToken(c, USER_ASN, 'user');
    const second = loginToken(c, USER_ASN, 'user');
    expect(first.id).toMatch(new RegExp(`^${USER_ASN}\\.\\d+\\.[A-Za-z0-9_-]{16}$`));

    const res = await c.post('/admin/token', admin, { action: 'revoke', id: first.id });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      revoked: { id: first.id, asn: USER_ASN, expiresAt: first.expiresAt },
    });
    expect(problem(await listSessions(c, first.token))).toMatchObject({
      status: 401,
      code: 'INVALID_TOKEN',
      detail: 'the token was revoked; log in again',
    });
    expect((await listSessions(c, second.token)).statusCode).toBe(200);
    const list = await c.post('/admin/token', admin, { action: 'list' });
    expect(list.json()).toEqual({
      tokens: [{ id: first.id, asn: USER_ASN, expiresAt: first.expiresAt }],
      asns: [],
    });
  });

  it('refuses an id that is no token id, naming the field', async () => {
    const c = await start([]);
    const admin = c.tokens.issueToken(ADMIN_ASN, 'admin').token;
    for (const id of [
      'not-an-id',
      '0.1795000000.q8Xv2LmK0pR7sT1w',
      '4242421234.99999999999.q8Xv2LmK0pR7sT1w',
    ]) {
      const p = problem(await c.post('/admin/token', admin, { action: 'revoke', id }));
      expect(p, id).toMatchObject({ status: 400, code: 'INVALID_REQUEST' });
      expect(p.detail, id).toMatch(/\/id/);
    }
    // and users cannot revoke others' tokens
    const user = loginToken(c, USER_ASN, 'user').token;
    const other = loginToken(c, OTHER_ASN, 'user');
    expect(problem(await c.post('/admin/token', user, { action: 'revoke', id: other.id })).code).toBe(
      'FORBIDDEN',
    );
    expect((await listSessions(c, other.token)).statusCode).toBe(200);
  });

  it('revokes every token of an ASN at once; tokens issued after it work', async () => {
    const c = await start([]);
    const admin = c.tokens.issueToken(ADMIN_ASN, 'admin').token;
    const held = [loginToken(c, USER_ASN, 'user'), c.tokens.issueToken(USER_ASN, 'user', 86_400)];
    const other = loginToken(c, OTHER_ASN, 'user').token;

    const res = await c.post('/admin/token', admin, { action: 'revoke-asn', asn: USER_ASN });
    expect(res.statusCode).toBe(200);
    expect((res.json() as { revoked: { asn: number } }).revoked.asn).toBe(USER_ASN);
    for (const t of held) expect(problem(await listSessions(c, t.token)).code).toBe('INVALID_TOKEN');
    expect((await listSessions(c, other)).statusCode).toBe(200);

    await nextSecond();
    expect((await listSessions(c, loginToken(c, USER_ASN, 'user').token)).statusCode).toBe(200);
  });

  it("logout revokes the caller's own token, and only it", async () => {
    const c = await start([]);
    const mine = loginToken(c, USER_ASN, 'user');
    const again = loginToken(c, USER_ASN, 'user');
    const res = await c.post('/api/v1/token', mine.token, { action: 'revoke' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ revoked: { id: mine.id, asn: USER_ASN, expiresAt: mine.expiresAt } });
    expect(problem(await listSessions(c, mine.token)).code).toBe('INVALID_TOKEN');
    expect(problem(await c.post('/token', mine.token, { action: 'revoke' })).code).toBe('INVALID_TOKEN');
    expect((await listSessions(c, again.token)).statusCode).toBe(200);
  });

  it('survives a restart: the revocations are in the store, read back on start', async () => {
    let c = await start([]);
    const admin = c.tokens.issueToken(ADMIN_ASN, 'admin').token;
    const byId = loginToken(c, OTHER_ASN, 'user');
    const ofAsn = loginToken(c, USER_ASN, 'user');
    const loggedOut = loginToken(c, 4242429999, 'user');
    expect((await c.post('/admin/token', admin, { action: 'revoke', id: byId.id })).statusCode).toBe(200);
    expect((await c.post('/admin/token', admin, { action: 'revoke-asn', asn: USER_ASN })).statusCode).toBe(
      200,
    );
    expect((await c.post('/token', loggedOut.token, { action: 'revoke' })).statusCode).toBe(200);
    const before = (await c.post('/admin/token', admin, { action: 'list' })).json() as unknown;
    await c.close();

    c = await start([]);
    for (const t of [byId, ofAsn, loggedOut])
      expect(problem(await listSessions(c, t.token))).toMatchObject({ status: 401, code: 'INVALID_TOKEN' });
    expect((await c.post('/admin/token', admin, { action: 'list' })).json()).toEqual(before);
  });
});
