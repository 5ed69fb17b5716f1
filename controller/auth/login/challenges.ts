/**
 * Login challenges: the text the user signs, and the record that lets each one log in once.
 * The text names the service host, the ASN, a nonce and the expiry, so a signature is good for one
 * login, at one service, for one ASN, for five minutes.
 *
 * A challenge is stateless until it is used (docs/decisions.md, Login challenges): its nonce is 16
 * random bytes and an HMAC, under a key of this service, of those bytes with the host, the ASN and the
 * expiry. Handing one out stores nothing, so no number of challenge requests, from any number of
 * addresses, can push out one already handed out; a pending challenge of one ASN is never at the mercy
 * of another client. A challenge is recorded only when a login succeeds with it (UsedChallenges),
 * which makes it single use; the record lives until the challenge expires.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import {
  CHALLENGE_HEADER,
  challengeText,
  parseChallengeText,
  type ChallengeFields,
} from '../../../common/login-challenge.ts';

export const CHALLENGE_TTL_MS = 5 * 60_000;

export interface Challenge extends ChallengeFields {
  /** The exact text to sign. */
  text: string;
}

/** The random half of a nonce and its MAC: 16 + 16 bytes, 43 characters of base64url (the CLI's form). */
const RANDOM_BYTES = 16;
const MAC_BYTES = 16;

function mac(key: Buffer, f: Omit<ChallengeFields, 'nonce'>, random: Buffer): Buffer {
  return createHmac('sha256', key)
    .update(`${CHALLENGE_HEADER}\n${f.host}\n${f.asn}\n${f.expiresAt}\n`)
    .update(random)
    .digest()
    .subarray(0, MAC_BYTES);
}

/** A new challenge for `asn` at `host`, good until now + 5 minutes, its nonce bound to `key`. */
export function newChallenge(asn: number, host: string, now: number, key: Buffer): Challenge {
  const fields = { asn, host, expiresAt: now + CHALLENGE_TTL_MS };
  const random = randomBytes(RANDOM_BYTES);
  const nonce = Buffer.concat([random, mac(key, fields, random)]).toString('base64url');
  const challenge = { ...fields, nonce };
  return { ...challenge, text: challengeText(challenge) };
}

/** The fields of a challenge text as the client sent it back (possibly altered); undefined if not one. */
export function readChallenge(text: string): { nonce: string; asn: number; host: string } | undefined {
  const lines = text.replace(/\r\n/g, '\n').split('\n');
  if (lines[0] !== CHALLENGE_HEADER) return undefined;
  const field = (name: string) => lines.find((l) => l.startsWith(`${name}: `))?.slice(name.length + 2);
  const nonce = field('nonce');
  const host = field('host');
  const asn = Number(field('asn'));
  if (!nonce || !host || !Number.isInteger(asn)) return undefined;
  return { nonce, asn, host };
}

/**
 * The challenge a text is, if this service (holder of `key`) issued it exactly so: `altered` when the
 * text is not byte for byte in the form challenges are written, `forged` when its nonce is not this
 * service's MAC over its fields (made up, changed, or issued by another service).
 */
export function checkChallenge(
  text: string,
  key: Buffer,
): { ok: true; challenge: Challenge } | { ok: false; why: 'altered' | 'forged' } {
  const fields = parseChallengeText(text);
  if (!fields || !Number.isFinite(fields.expiresAt)) return { ok: false, why: 'altered' };
  const nonce = Buffer.from(fields.nonce, 'base64url');
  if (nonce.length !== RANDOM_BYTES + MAC_BYTES) return { ok: false, why: 'forged' };
  // The last of 43 characters carries 2 bits and 4 that decoding drops: only the one spelling this
  // service wrote counts, so that one challenge is one nonce in the record of used ones.
  if (nonce.toString('base64url') !== fields.nonce) return { ok: false, why: 'altered' };
  const random = nonce.subarray(0, RANDOM_BYTES);
  if (!timingSafeEqual(nonce.subarray(RANDOM_BYTES), mac(key, fields, random)))
    return { ok: false, why: 'forged' };
  return { ok: true, challenge: { ...fields, text } };
}

/**
 * The challenges logins have used, until they expire: `spend` records one and says whether it was the
 * first to (true) or the challenge was used before (false). Atomic, so that of two verifications racing
 * on one challenge only one gets true. A store shared between replicas keeps the same contract.
 */
export interface UsedChallenges {
  spend(c: Challenge): boolean | Promise<boolean>;
}

/**
 * In this process: at most `max` records. Records leave as their challenges expire. Only successful
 * logins are recorded (a signature by a key the registry lists), so strangers cannot fill it; 100,000
 * logins within five minutes would. Should it fill anyway, the oldest record gives way and every
 * challenge that expires no later than it is refused from then on (`floor`): some unused challenges
 * are lost, a used one is never taken again.
 */
export class MemoryUsedChallenges implements UsedChallenges {
  /** nonce → expiry; insertion order is the order verifies came in. */
  private readonly used = new Map<string, number>();
  private floor = 0;
  private readonly max: number;
  private readonly now: () => number;

  constructor(opts: { max?: number; now?: () => number } = {}) {
    this.max = opts.max ?? 100_000;
    this.now = opts.now ?? Date.now;
  }

  spend(c: Challenge): boolean {
    const now = this.now();
    // Amortised: the oldest records leave once expired (verified first, they mostly expire first).
    for (const [nonce, expiresAt] of this.used) {
      if (expiresAt > now) break;
      this.used.delete(nonce);
    }
    if (c.expiresAt <= this.floor || this.used.has(c.nonce)) return false;
    // An expired challenge is refused anyway and can never be accepted: no record needed.
    if (c.expiresAt <= now) return true;
    for (const [nonce, expiresAt] of this.used) {
      if (this.used.size < this.max) break;
      this.used.delete(nonce);
      this.floor = Math.max(this.floor, expiresAt);
    }
    this.used.set(c.nonce, c.expiresAt);
    return true;
  }

  get size(): number {
    return this.used.size;
  }
}

/** Failed login attempts per key (an ASN, a client address) in a sliding window. */
export interface FailureLimiter {
  /** Seconds until the key may try again, or 0 when it may now. */
  retryAfter(key: string): Promise<number>;
  fail(key: string): Promise<void>;
}

/** The default limit of both implementations: 10 failed logins per key within 15 minutes. */
export const FAILURE_LIMIT = { max: 10, windowMs: 15 * 60_000 };

/** In this process only; with several replicas each counts its own (RedisFailureLimiter shares them). */
export class MemoryFailureLimiter implements FailureLimiter {
  private readonly failures = new Map<string, number[]>();
  readonly max: number;
  readonly windowMs: number;
  private readonly now: () => number;

  constructor(opts: { max?: number; windowMs?: number; now?: () => number } = {}) {
    this.max = opts.max ?? FAILURE_LIMIT.max;
    this.windowMs = opts.windowMs ?? FAILURE_LIMIT.windowMs;
    this.now = opts.now ?? Date.now;
  }

  async retryAfter(key: string): Promise<number> {
    const recent = this.recent(key);
    if (recent.length < this.max) return 0;
    return Math.max(1, Math.ceil((recent[recent.length - this.max]! + this.windowMs - this.now()) / 1000));
  }

  async fail(key: string): Promise<void> {
    const recent = this.recent(key);
    recent.push(this.now());
    this.failures.set(key, recent);
    if (this.failures.size > 50_000) this.sweep();
  }

  private recent(key: string): number[] {
    const since = this.now() - this.windowMs;
    const list = (this.failures.get(key) ?? []).filter((t) => t > since);
    if (list.length === 0) this.failures.delete(key);
    else this.failures.set(key, list);
    return list;
  }

  private sweep(): void {
    for (const key of [...this.failures.keys()]) this.recent(key);
  }
}
