/**
 * Login challenges: the text the user signs, and the store that hands each one out once.
 * The text names the service host, the ASN, a random nonce and the expiry, so a signature is good
 * for one login, at one service, for one ASN, for five minutes.
 */
import { randomBytes } from 'node:crypto';
import { CHALLENGE_HEADER, challengeText } from '../../../common/login-challenge.ts';

export const CHALLENGE_TTL_MS = 5 * 60_000;

export interface Challenge {
  nonce: string;
  asn: number;
  host: string;
  /** Unix milliseconds. */
  expiresAt: number;
  /** The exact text to sign. */
  text: string;
}

export function newChallenge(asn: number, host: string, now: number): Challenge {
  const fields = {
    nonce: randomBytes(32).toString('base64url'),
    asn,
    host,
    expiresAt: now + CHALLENGE_TTL_MS,
  };
  return { ...fields, text: challengeText(fields) };
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
 * Outstanding challenges. `take` removes and returns in one step, so two verifications racing on one
 * challenge cannot both get it. A store shared between controller replicas implements the same contract.
 */
export interface ChallengeStore {
  put(c: Challenge): void | Promise<void>;
  take(nonce: string): Challenge | undefined | Promise<Challenge | undefined>;
}

/**
 * In this process: at most `perAsn` challenges per ASN and `max` in all, the oldest giving way. A full
 * store never refuses a login (which would let a flood of challenge requests stop every login); a flood
 * only pushes out challenges older than itself, and of one ASN only that ASN's.
 */
export class MemoryChallengeStore implements ChallengeStore {
  /** Insertion order is age order. */
  private readonly byNonce = new Map<string, Challenge>();
  private readonly byAsn = new Map<number, string[]>();
  private readonly max: number;
  private readonly perAsn: number;
  private readonly now: () => number;

  constructor(opts: { max?: number; perAsn?: number; now?: () => number } = {}) {
    this.max = opts.max ?? 10_000;
    this.perAsn = opts.perAsn ?? 5;
    this.now = opts.now ?? Date.now;
  }

  put(c: Challenge): void {
    let mine = this.byAsn.get(c.asn) ?? [];
    while (mine.length >= this.perAsn) {
      this.remove(mine[0] ?? '');
      mine = this.byAsn.get(c.asn) ?? []; // remove() replaced the list
    }
    if (this.byNonce.size >= this.max) this.dropExpired();
    for (const oldest of this.byNonce.keys()) {
      if (this.byNonce.size < this.max) break;
      this.remove(oldest);
    }
    this.byNonce.set(c.nonce, c);
    this.byAsn.set(c.asn, [...(this.byAsn.get(c.asn) ?? []), c.nonce]);
  }

  take(nonce: string): Challenge | undefined {
    const c = this.byNonce.get(nonce);
    this.remove(nonce);
    return c;
  }

  get size(): number {
    return this.byNonce.size;
  }

  private remove(nonce: string): void {
    const c = this.byNonce.get(nonce);
    if (!c) return;
    this.byNonce.delete(nonce);
    const left = (this.byAsn.get(c.asn) ?? []).filter((n) => n !== nonce);
    if (left.length) this.byAsn.set(c.asn, left);
    else this.byAsn.delete(c.asn);
  }

  private dropExpired(): void {
    const now = this.now();
    for (const [nonce, c] of this.byNonce) if (c.expiresAt <= now) this.remove(nonce);
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
