/**
 * The portal's sign-in (docs/login.md, The portal's sign-in): the login's JWT in an HttpOnly,
 * SameSite=Strict cookie no script can read, beside a readable CSRF cookie whose value every request the
 * cookie authenticates must repeat in the `x-peerops-csrf` header. The session cookie carries the time of
 * its last use and the CSRF value, bound to the token by a MAC under a key derived from the JWT key: the
 * idle timeout and the binding hold on every replica with nothing stored. Logging out revokes the token's
 * id through the revocation list (api/tokens.ts), so an old copy of the cookie is refused everywhere.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { problem, type MessageParams } from '../../common/messages.ts';

/** The header a cookie-authenticated request carries the CSRF value in. */
export const CSRF_HEADER = 'x-peerops-csrf';
/** The cookies' names: with `__Host-` (Secure, path /, no Domain: no sibling host can set them) over TLS. */
const SESSION = 'peerops_session';
const CSRF = 'peerops_csrf';
/** The last-use time is written again at most this often (seconds), not with every answer. */
const REFRESH_AFTER_S = 60;
/** Default idle timeout (docs/login.md): a portal left alone this long asks for a new login. */
export const DEFAULT_IDLE_SECONDS = 30 * 60;

const LOOPBACK_HOST = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/i;

/** The value of cookie `name` in the request's Cookie header (the first, as browsers send the most specific first). */
function cookie(request: FastifyRequest, name: string): string | undefined {
  const header = request.headers.cookie;
  if (typeof header !== 'string') return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export class PortalSessions {
  /** The MAC key (TokenIssuer.deriveKey). */
  private readonly key: Buffer;
  readonly idleSeconds: number;
  /** Clock in Unix milliseconds (tests move it). */
  private readonly nowMs: () => number;

  constructor(key: Buffer, idleSeconds: number = DEFAULT_IDLE_SECONDS, nowMs: () => number = Date.now) {
    this.key = key;
    this.idleSeconds = idleSeconds;
    this.nowMs = nowMs;
  }

  /**
   * Cookies are Secure unless the browser came by plain HTTP to a loopback name: a development
   * controller on 127.0.0.1 (docs/login.md). Behind a TLS proxy the request may look like plain HTTP,
   * and the browser's https still takes a Secure cookie.
   */
  private secure(request: FastifyRequest): boolean {
    return request.protocol === 'https' || !LOOPBACK_HOST.test(request.hostname);
  }

  private names(request: FastifyRequest): { session: string; csrf: string } {
    const prefix = this.secure(request) ? '__Host-' : '';
    return { session: prefix + SESSION, csrf: prefix + CSRF };
  }

  private attributes(request: FastifyRequest, httpOnly: boolean): string {
    // no Max-Age: the cookie ends with the browser; the token's expiry and the idle timeout bound it before
    return `; Path=/; SameSite=Strict${httpOnly ? '; HttpOnly' : ''}${this.secure(request) ? '; Secure' : ''}`;
  }

  private mac(lastUsed: number, csrf: string, token: string): string {
    return createHmac('sha256', this.key).update(`${lastUsed}.${csrf}.${token}`).digest('base64url');
  }

  private sessionCookie(request: FastifyRequest, csrf: string, token: string): string {
    const lastUsed = Math.floor(this.nowMs() / 1000);
    const value = `${lastUsed}.${csrf}.${this.mac(lastUsed, csrf, token)}.${token}`;
    return `${this.names(request).session}=${value}${this.attributes(request, true)}`;
  }

  /** Sets the cookies of a new login's token (the login's `cookie: true`). */
  start(request: FastifyRequest, reply: FastifyReply, token: string): void {
    const csrf = randomBytes(16).toString('base64url');
    reply.header('set-cookie', [
      this.sessionCookie(request, csrf, token),
      `${this.names(request).csrf}=${csrf}${this.attributes(request, false)}`,
    ]);
  }

  /** Whether the request carries a session cookie at all. */
  present(request: FastifyRequest): boolean {
    return cookie(request, this.names(request).session) !== undefined;
  }

  /**
   * The token of the request's session cookie, or undefined without one. A cookie that may not be used
   * (no or another CSRF header, idle too long, altered) is INVALID_TOKEN, and the answer clears it. A
   * cookie last used over REFRESH_AFTER_S ago is written again with the time of this use.
   */
  token(request: FastifyRequest, reply: FastifyReply): string | undefined {
    const raw = cookie(request, this.names(request).session);
    if (raw === undefined) return undefined;
    const [lastUsedText, csrf, mac, ...rest] = raw.split('.');
    const token = rest.join('.');
    const lastUsed = Number(lastUsedText);
    if (
      csrf === undefined ||
      mac === undefined ||
      !Number.isInteger(lastUsed) ||
      !sameText(mac, this.mac(lastUsed, csrf, token))
    )
      return this.refuse(request, reply, 'auth.cookieInvalid');
    const header = request.headers[CSRF_HEADER];
    // SameSite=Strict keeps other sites' requests from carrying the cookie; the header, which only a
    // script of this origin can read the value for, keeps them out where a browser would send it anyway
    if (typeof header !== 'string' || !sameText(header, csrf)) throw problem('auth.cookieNeedsCsrf');
    const now = Math.floor(this.nowMs() / 1000);
    if (now - lastUsed > this.idleSeconds)
      return this.refuse(request, reply, 'auth.cookieIdle', { minutes: Math.round(this.idleSeconds / 60) });
    if (now - lastUsed >= REFRESH_AFTER_S)
      reply.header('set-cookie', this.sessionCookie(request, csrf, token));
    return token;
  }

  /** Clears both cookies (logout, or a cookie refused). */
  end(request: FastifyRequest, reply: FastifyReply): void {
    const { session, csrf } = this.names(request);
    reply.removeHeader('set-cookie');
    reply.header('set-cookie', [
      `${session}=${this.attributes(request, true)}; Max-Age=0`,
      `${csrf}=${this.attributes(request, false)}; Max-Age=0`,
    ]);
  }

  private refuse(
    request: FastifyRequest,
    reply: FastifyReply,
    key: 'auth.cookieInvalid' | 'auth.cookieIdle',
    params: MessageParams = {},
  ): never {
    this.end(request, reply);
    throw problem(key, params);
  }
}
