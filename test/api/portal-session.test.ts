/**
 * The portal's sign-in cookies (docs/login.md, The portal's sign-in), against a real controller over
 * loopback HTTP: a login signed by ssh-keygen with `cookie: true` answers no token and sets an HttpOnly,
 * SameSite=Strict cookie (Secure and `__Host-` unless the browser came to a loopback name); the cookie
 * authenticates only with its CSRF header; an altered cookie is refused and cleared; logout revokes the
 * token, so the old cookie is refused; a Bearer token works as before. The idle timeout is checked on a
 * small fastify server whose clock the test moves.
 */
import { rm } from 'node:fs/promises';
import path from 'node:path';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DirectoryRegistry } from '../../controller/auth/login/registry.ts';
import { CSRF_HEADER, PortalSessions } from '../../controller/auth/portal-session.ts';
import { ProblemError } from '../../common/errors.ts';
import { startHarness, USER_ASN, type Harness } from './helpers.ts';
import { sshKey, sshSign, tempDir, writeRegistry, type SshKey } from '../login/support.ts';

let dir: string;
let h: Harness;
let base: string;
let key: SshKey;

beforeAll(async () => {
  dir = await tempDir('portal-session');
  key = await sshKey(dir, 'ed25519', 'peer');
  await writeRegistry(path.join(dir, 'registry'), {
    autNums: { [USER_ASN]: ['PEER-MNT'] },
    mntners: { 'PEER-MNT': [key.publicLine] },
  });
  h = await startHarness(
    {},
    { registry: new DirectoryRegistry(path.join(dir, 'registry')), serviceHost: '127.0.0.1', admins: [] },
  );
  base = await h.app.listen({ host: '127.0.0.1', port: 0 });
});

afterAll(async () => {
  await h?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

type Headers = Record<string, string>;

async function post(url: string, body: unknown, headers: Headers = {}) {
  if (headers.host !== undefined) {
    // fetch does not send a Host of the caller's choice; inject does
    const res = await h.app.inject({
      method: 'POST',
      url,
      headers: { 'content-type': 'application/json', ...headers },
      payload: JSON.stringify(body),
    });
    const setCookie = res.headers['set-cookie'] ?? [];
    return {
      status: res.statusCode,
      json: res.json() as Record<string, unknown>,
      cookies: [setCookie].flat(),
    };
  }
  const res = await fetch(base + url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return {
    status: res.status,
    json: (await res.json()) as Record<string, unknown>,
    cookies: res.headers.getSetCookie(),
  };
}

/** A signed login with `cookie: true`, as the portal sends it, with `host` as the browser's Host. */
async function cookieLogin(host?: string) {
  const hostHeader: Headers = host ? { host } : {};
  const c = await post('/login', { action: 'challenge', asn: USER_ASN }, hostHeader);
  const challenge = c.json.challenge as string;
  const signature = await sshSign(key, challenge);
  return post('/login', { action: 'verify', asn: USER_ASN, challenge, signature, cookie: true }, hostHeader);
}

/** The `name=value` of each Set-Cookie, by name. */
function jar(setCookies: string[]): Map<string, { value: string; line: string }> {
  return new Map(
    setCookies.map((line) => {
      const [pair = ''] = line.split(';');
      const eq = pair.indexOf('=');
      return [pair.slice(0, eq), { value: pair.slice(eq + 1), line }];
    }),
  );
}

describe('the portal sign-in cookie', () => {
  it('answers no token, sets an HttpOnly SameSite=Strict cookie, and authenticates only with its CSRF header', async () => {
    const login = await cookieLogin();
    expect(login.status, JSON.stringify(login.json)).toBe(200);
    expect(login.json).toEqual({ id: expect.any(String), expiresAt: expect.any(String), role: 'user' });
    const cookies = jar(login.cookies);
    const session = cookies.get('peerops_session')!;
    const csrf = cookies.get('peerops_csrf')!;
    // plain HTTP to a loopback name: development, so not Secure (the browser would drop it)
    expect(session.line).toMatch(/; Path=\/; SameSite=Strict; HttpOnly$/);
    expect(csrf.line).toMatch(/; Path=\/; SameSite=Strict$/);
    const cookie = `peerops_session=${session.value}; peerops_csrf=${csrf.value}`;

    const list = await post('/session', { action: 'list' }, { cookie, [CSRF_HEADER]: csrf.value });
    expect(list.status).toBe(200);
    const current = await post('/token', { action: 'current' }, { cookie, [CSRF_HEADER]: csrf.value });
    expect(current.json).toMatchObject({ asn: USER_ASN, role: 'user', id: login.json.id });

    // another site's form or fetch carries no header; a guessed one does not match
    for (const headers of [{ cookie }, { cookie, [CSRF_HEADER]: 'guess' }] as Headers[]) {
      const refused = await post('/session', { action: 'list' }, headers);
      expect(refused.status).toBe(401);
      expect(refused.json.detail).toBe(
        `the portal sign-in cookie is used only with its ${CSRF_HEADER} header; a Bearer token needs neither`,
      );
    }
    // the cookie's parts are bound by its MAC: a changed last-use time is refused, and the cookie cleared
    const altered = session.value.replace(/^\d+/, (s) => String(Number(s) + 3600));
    const forged = await post(
      '/session',
      { action: 'list' },
      { cookie: `peerops_session=${altered}`, [CSRF_HEADER]: csrf.value },
    );
    expect(forged.status).toBe(401);
    expect(forged.json.detail).toBe('the portal sign-in cookie is not valid; log in again');
    expect(jar(forged.cookies).get('peerops_session')?.line).toMatch(/Max-Age=0/);
    // a Bearer token needs neither cookie nor header
    expect((await h.post('/session', h.user, { action: 'list' })).statusCode).toBe(200);
  });

  it('is Secure and __Host- named when the browser came by another name than loopback', async () => {
    const login = await cookieLogin('peering.example.net');
    // the challenge names the service host (127.0.0.1 here), so the verify with it still logs in
    expect(login.status, JSON.stringify(login.json)).toBe(200);
    const cookies = jar(login.cookies);
    expect(cookies.get('__Host-peerops_session')?.line).toMatch(
      /; Path=\/; SameSite=Strict; HttpOnly; Secure$/,
    );
    expect(cookies.get('__Host-peerops_csrf')?.line).toMatch(/; Path=\/; SameSite=Strict; Secure$/);
  });

  it('logout revokes the token and clears the cookies; the old cookie is refused from then on', async () => {
    const cookies = jar((await cookieLogin()).cookies);
    const csrf = cookies.get('peerops_csrf')!.value;
    const headers = {
      cookie: `peerops_session=${cookies.get('peerops_session')!.value}`,
      [CSRF_HEADER]: csrf,
    };
    const out = await post('/token', { action: 'revoke' }, headers);
    expect(out.status).toBe(200);
    const cleared = jar(out.cookies);
    expect(cleared.get('peerops_session')?.line).toMatch(/^peerops_session=; .*HttpOnly.*Max-Age=0$/);
    expect(cleared.get('peerops_csrf')?.line).toMatch(/Max-Age=0$/);
    const after = await post('/session', { action: 'list' }, headers);
    expect(after.status).toBe(401);
    expect(after.json.detail).toBe('the token was revoked; log in again');
  });
});

describe('the idle timeout', () => {
  it('refuses a cookie unused for longer than the timeout, and a use writes the cookie again', async () => {
    let now = Date.parse('2026-11-28T00:00:00Z');
    const sessions = new PortalSessions(Buffer.alloc(32, 7), 600, () => now);
    const app = Fastify();
    app.post('/start', async (request, reply) => {
      sessions.start(request, reply, 'a.b.c');
      return {};
    });
    app.post('/use', async (request, reply) => {
      try {
        return { token: sessions.token(request, reply) ?? null };
      } catch (err) {
        if (!(err instanceof ProblemError)) throw err;
        reply.code(err.status);
        return { detail: err.message };
      }
    });
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const call = async (path: string, cookie = '', csrf = '') => {
        const res = await fetch(url + path, { method: 'POST', headers: { cookie, [CSRF_HEADER]: csrf } });
        return {
          status: res.status,
          json: (await res.json()) as Record<string, unknown>,
          cookies: jar(res.headers.getSetCookie()),
        };
      };
      const started = (await call('/start')).cookies;
      const csrf = started.get('peerops_csrf')!.value;
      let cookie = `peerops_session=${started.get('peerops_session')!.value}`;
      expect((await call('/use', '', csrf)).json).toEqual({ token: null });
      now += 30_000;
      const early = await call('/use', cookie, csrf);
      // used within a minute: not written again
      expect(early.json).toEqual({ token: 'a.b.c' });
      expect(early.cookies.size).toBe(0);
      now += 540_000;
      const refreshed = await call('/use', cookie, csrf);
      expect(refreshed.json).toEqual({ token: 'a.b.c' });
      cookie = `peerops_session=${refreshed.cookies.get('peerops_session')!.value}`;
      // 10 min after the first use, but 1 min after the last: still signed in
      now += 60_000;
      expect((await call('/use', cookie, csrf)).status).toBe(200);
      now += 601_000;
      const idle = await call('/use', cookie, csrf);
      expect(idle.status).toBe(401);
      expect(idle.json.detail).toBe('the portal sign-in was idle for more than 10 min; log in again');
      expect(idle.cookies.get('peerops_session')?.line).toMatch(/Max-Age=0$/);
    } finally {
      await app.close();
    }
  });
});
