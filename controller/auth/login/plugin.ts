/**
 * `POST /login` (docs/login.md), an encapsulated fastify plugin: register it under any prefix.
 *
 *   {"action":"challenge","asn":N} → {challenge, host, asn, expiresAt, namespace, methods, skipped}
 *   {"action":"verify","asn":N,"challenge":"…","signature":"…"[,"publicKey":"…"]} → {token, id, expiresAt, role}
 *   … with "cookie":true (the portal) → {id, expiresAt, role}, the token in an HttpOnly cookie instead
 *
 * Errors: AUTH_FAILED 401 (bad signature, or challenge unknown/used/expired/altered/for another host or
 * ASN), ASN_BLOCKED 403, NOT_FOUND 404 (ASN not in the registry), RATE_LIMITED 429 (too many failed
 * attempts from the client address), REGISTRY_UNAVAILABLE 503, INVALID_REQUEST /
 * INVALID_ACTION 400.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest, onErrorHookHandler, onRequestHookHandler } from 'fastify';
import Type, { type Static } from 'typebox';
import { isProblem } from '../../../common/errors.ts';
import { type MessageParams, problem, type RefusalKey } from '../../../common/messages.ts';
import { Asn } from '../../../common/schema.ts';
import { describeMethod } from './auth-methods.ts';
import { SSH_KEY_TYPES } from '../../../common/sshsig.ts';
import { randomBytes } from 'node:crypto';
import {
  CHALLENGE_TTL_MS,
  checkChallenge,
  type FailureLimiter,
  MemoryFailureLimiter,
  MemoryUsedChallenges,
  newChallenge,
  readChallenge,
  type UsedChallenges,
} from './challenges.ts';
import type { AsnAuth, Registry, SkippedLine } from './registry.ts';
import { SSH_NAMESPACE } from '../../../common/login-challenge.ts';
import { verifyLogin } from './verify.ts';
import { Actions } from '../../api/schemas.ts';
import { apiValidatorCompiler } from '../../api/validation.ts';
import { addressKey } from '../../api/rate-limit.ts';

export type Role = 'user' | 'admin';

/** What onOutcome reports, one per request: the label of the controller's login metric. */
export type LoginOutcome =
  | 'challenge_issued'
  | 'success'
  | 'auth_failed'
  | 'asn_blocked'
  | 'rate_limited'
  | 'unknown_asn'
  | 'registry_unavailable'
  | 'invalid_request';

/** A token a login issued, with its id (the `jti` an admin revokes it by; docs/login.md, Tokens). */
export interface IssuedLoginToken {
  token: string;
  id: string;
  expiresAt: string;
}

/** The portal's sign-in cookies (controller/auth/portal-session.ts), as the login sets them. */
export interface CookieSessions {
  start(request: FastifyRequest, reply: FastifyReply, token: string): void;
}

export interface LoginPluginOptions {
  registry: Registry;
  /** The host name users reach this service by; written into every challenge and checked on verify. */
  serviceHost: string;
  /** ASNs that log in with role admin. */
  admins: number[];
  isBlocked: (asn: number) => boolean;
  issueToken: (asn: number, role: Role) => IssuedLoginToken | Promise<IssuedLoginToken>;
  onOutcome?: (outcome: LoginOutcome) => void;
  /** Clock in Unix milliseconds (tests move it). */
  now?: () => number;
  /**
   * The key challenges are MACed with (challenges.ts); default a random one of this registration.
   * Every registration and replica that is to verify another's challenges needs the same key: the
   * controller derives it from its JWT key (TokenIssuer.deriveKey).
   */
  challengeKey?: Buffer;
  /**
   * The challenges verifies have named; default in memory. When the plugin is registered under several
   * prefixes (`/login` and `/api/v1/login`), pass the same key, record and limiter to each registration.
   */
  usedChallenges?: UsedChallenges;
  failureLimiter?: FailureLimiter;
  /** Without failureLimiter: failed verifications allowed per client address (default 10 per 15 min). */
  failureLimit?: { max?: number; windowMs?: number };
  /** Where `cookie: true` puts the token; without it such a verify is refused. */
  sessions?: CookieSessions;
  /** The route's onRequest hooks (the controller's: identify the caller, count it against its limit). */
  onRequest?: onRequestHookHandler[];
}

const ChallengeRequest = Type.Object(
  { action: Type.Literal('challenge'), asn: Asn },
  { additionalProperties: false, examples: [{ action: 'challenge', asn: 4242421234 }] },
);
const VerifyRequest = Type.Object(
  {
    action: Type.Literal('verify'),
    asn: Asn,
    challenge: Type.String({ minLength: 1, maxLength: 2048 }),
    signature: Type.String({ minLength: 1, maxLength: 16384 }),
    publicKey: Type.Optional(Type.String({ minLength: 1, maxLength: 32768 })),
    /** The portal's sign-in: the token in an HttpOnly cookie, not in the answer (docs/login.md). */
    cookie: Type.Optional(Type.Boolean()),
  },
  {
    additionalProperties: false,
    examples: [
      {
        action: 'verify',
        asn: 4242421234,
        challenge: '<the challenge text, as received>',
        signature: '-----BEGIN SSH SIGNATURE-----\n…\n-----END SSH SIGNATURE-----',
      },
    ],
  },
);
const ChallengeResponse = Type.Object({
  challenge: Type.String(),
  host: Type.String(),
  asn: Asn,
  expiresAt: Type.String({ format: 'date-time' }),
  namespace: Type.String(),
  /** The maintainers' keys the signature may come from: type, mntner and key, fingerprint or keyCert. */
  methods: Type.Array(Type.Record(Type.String(), Type.String())),
  /** The maintainers' lines no signature can come from, and why (docs/login.md, Which keys count). */
  skipped: Type.Array(Type.Object({ mntner: Type.String(), line: Type.String(), reason: Type.String() })),
});
const TokenResponse = Type.Object({
  token: Type.String(),
  id: Type.String({ description: "The token's id: what `peerops admin token revoke` takes" }),
  expiresAt: Type.String({ format: 'date-time' }),
  role: Type.Union([Type.Literal('user'), Type.Literal('admin')]),
});
const CookieTokenResponse = Type.Object({
  id: TokenResponse.properties.id,
  expiresAt: TokenResponse.properties.expiresAt,
  role: TokenResponse.properties.role,
});
type ChallengeRequest = Static<typeof ChallengeRequest>;

/** How far a signer's clock may be off ours (as `peerops login` allows): OpenPGP signatures carry its time. */
const SIGNATURE_SKEW_MS = 15 * 60_000;

function skippedText(s: SkippedLine): string {
  return `${s.mntner} ${s.line}: ${s.reason}`;
}
type VerifyRequest = Static<typeof VerifyRequest>;

/** The refusals of a verify that count as a failed login. */
type LoginFailure = Extract<RefusalKey, `login.${string}`>;

const loginPlugin: FastifyPluginAsyncTypebox<LoginPluginOptions> = async (app, opts) => {
  // The API's validation (problem details naming the field) wherever the plugin is registered.
  app.setValidatorCompiler(apiValidatorCompiler());
  const now = opts.now ?? Date.now;
  const key = opts.challengeKey ?? randomBytes(32);
  const used = opts.usedChallenges ?? new MemoryUsedChallenges({ now });
  const limiter = opts.failureLimiter ?? new MemoryFailureLimiter({ ...opts.failureLimit, now });
  const admins = new Set(opts.admins);
  const outcome = (o: LoginOutcome) => opts.onOutcome?.(o);

  async function refuseLimitedOrBlocked(
    req: FastifyRequest,
    reply: FastifyReply,
    asn: number,
  ): Promise<void> {
    // Failures count per client address only (an IPv6 client by its /64, as the rate limits count it): a
    // signature cannot be guessed, so a per-ASN count would guard nothing and let anyone lock an ASN (its
    // admins too) out with a few bad attempts.
    const wait = await limiter.retryAfter(addressKey(req.ip));
    if (wait > 0) {
      outcome('rate_limited');
      reply.header('Retry-After', String(wait));
      throw problem('login.tooManyFailures', { seconds: wait });
    }
    if (opts.isBlocked(asn)) {
      outcome('asn_blocked');
      throw problem('login.asnBlocked', { asn });
    }
  }

  async function lookup(asn: number): Promise<AsnAuth> {
    let auth: AsnAuth | undefined;
    try {
      auth = await opts.registry.lookup(asn);
    } catch (err) {
      if (isProblem(err, 'REGISTRY_UNAVAILABLE')) outcome('registry_unavailable');
      throw err;
    }
    if (!auth) {
      outcome('unknown_asn');
      throw problem('login.asnUnknown', { asn });
    }
    return auth;
  }

  async function challenge(req: FastifyRequest, reply: FastifyReply, body: ChallengeRequest) {
    await refuseLimitedOrBlocked(req, reply, body.asn);
    const auth = await lookup(body.asn);
    if (auth.methods.length === 0) {
      outcome('auth_failed');
      const why = auth.skipped.length ? `; skipped: ${auth.skipped.map(skippedText).join('; ')}` : '';
      throw problem('login.noUsableKey', { asn: body.asn, types: SSH_KEY_TYPES.join(', '), skipped: why });
    }
    // Nothing is stored: the challenge proves itself when it comes back (challenges.ts).
    const c = newChallenge(body.asn, opts.serviceHost, now(), key);
    outcome('challenge_issued');
    return {
      challenge: c.text,
      host: c.host,
      asn: c.asn,
      expiresAt: new Date(c.expiresAt).toISOString(),
      namespace: SSH_NAMESPACE,
      methods: auth.methods.map(describeMethod),
      skipped: auth.skipped,
    };
  }

  async function verify(req: FastifyRequest, reply: FastifyReply, body: VerifyRequest) {
    await refuseLimitedOrBlocked(req, reply, body.asn);
    const sessions = opts.sessions;
    // before the challenge is spent: a refused request must leave it good for a retry
    if (body.cookie === true && sessions === undefined) throw problem('login.noCookies');
    const fail = async (key: LoginFailure, params: MessageParams = {}): Promise<never> => {
      await limiter.fail(addressKey(req.ip));
      outcome('auth_failed');
      const refusal = problem(key, { asn: body.asn, ...params });
      req.log.info({ reqId: req.id, asn: body.asn, reason: refusal.message }, 'login failed');
      throw refusal;
    };
    if (!readChallenge(body.challenge)) return fail('login.notChallenge');
    const checked = checkChallenge(body.challenge, key);
    if (!checked.ok)
      return fail(checked.why === 'altered' ? 'login.challengeAltered' : 'login.challengeUnknown');
    const issued = checked.challenge;
    if (issued.host !== opts.serviceHost) return fail('login.challengeHost', { host: issued.host });
    if (issued.asn !== body.asn) return fail('login.challengeAsn', { issuedAsn: issued.asn });
    if (issued.expiresAt <= now()) return fail('login.challengeExpired');
    const auth = await lookup(body.asn);
    const verdict = await verifyLogin(auth.methods, issued.text, body.signature, body.publicKey, {
      from: new Date(issued.expiresAt - CHALLENGE_TTL_MS - SIGNATURE_SKEW_MS),
      to: new Date(now() + SIGNATURE_SKEW_MS),
    });
    if (!verdict.ok) {
      const { key: refusal, ...params } = verdict.refusal;
      return fail(refusal, params);
    }
    // Used up by the login it makes, in one atomic step: a replay, or the loser of two verifications
    // racing on it, is refused. A failed attempt does not use it, so nobody without the key can spend
    // the challenge its owner is signing, and only logins fill the record (docs/login.md).
    if (!(await used.spend(issued))) return fail('login.challengeUsed');
    const role: Role = admins.has(body.asn) ? 'admin' : 'user';
    const { token, id, expiresAt } = await opts.issueToken(body.asn, role);
    outcome('success');
    req.log.info(
      {
        reqId: req.id,
        asn: body.asn,
        role,
        tokenId: id,
        mntner: verdict.method.mntner,
        method: verdict.method.type,
      },
      'login',
    );
    if (body.cookie === true && sessions !== undefined) {
      sessions.start(req, reply, token);
      return { id, expiresAt, role };
    }
    return { token, id, expiresAt, role };
  }

  // A refused body is the metric's invalid_request, whether the schema or the handler refused it.
  const countInvalid: onErrorHookHandler = (_request, _reply, err, done) => {
    if (isProblem(err, 'INVALID_REQUEST') || isProblem(err, 'INVALID_ACTION')) outcome('invalid_request');
    done();
  };
  app.post(
    '/login',
    {
      onRequest: opts.onRequest ?? [],
      onError: countInvalid,
      schema: {
        operationId: 'login',
        summary: 'Log in with a signature of a maintainer of the ASN (challenge, then verify)',
        description:
          'First `challenge` for the ASN, then `verify` with the challenge signed by a key of one of its maintainers ' +
          '(docs/login.md). The token answers every other route as `Authorization: Bearer`.',
        body: Actions([ChallengeRequest, VerifyRequest]),
        response: { 200: Type.Union([ChallengeResponse, TokenResponse, CookieTokenResponse]) },
      },
    },
    async (req, reply) => {
      const { body } = req;
      return body.action === 'challenge' ? challenge(req, reply, body) : verify(req, reply, body);
    },
  );
};

export default loginPlugin;
