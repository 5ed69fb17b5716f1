/**
 * User and admin JWTs (docs/login.md): EdDSA over one Ed25519 key kept in the data dir (mode 0600,
 * created on first start) or named by PEEROPS_JWT_KEY_FILE so that several replicas share it.
 * Claims: sub `AS<asn>`, asn, role, src (`login`: a signed challenge; `operator`: minted with the key by
 * `peerops admin token`), jti (the token's id, token-id.ts), iss `peerops`, aud `peerops-api`, iat, exp.
 * A token is accepted only with every one of them and each in range (docs/api.md, Conventions,
 * Authentication): the key's signature alone does not make a token, so nothing else that key might ever
 * sign passes for one. What a token may do is decided again at each request (api/auth.ts).
 */
import { generateKeyPairSync, createPrivateKey, createPublicKey, hkdfSync } from 'node:crypto';
import { chmod, mkdir, readFile, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { createSigner, createVerifier } from 'fast-jwt';
import { atomicWriteFile } from '../../common/atomic-write.ts';
import { isAsn, MAX_TOKEN_TTL_SECONDS, newTokenId, parseTokenId } from './token-id.ts';
import { problem } from '../../common/messages.ts';

export type Role = 'user' | 'admin';

export interface Identity {
  asn: number;
  role: Role;
}

/** Who vouched for a token: the login (a maintainer's signature) or the operator (the key itself). */
export type TokenSource = 'login' | 'operator';

/** What a valid token says. */
export interface TokenClaims extends Identity {
  /** The token's id (`jti`), which revokes it. */
  id: string;
  source: TokenSource;
  /** Unix seconds. */
  issuedAt: number;
}

export interface IssuedToken {
  token: string;
  /** The token's id, which revokes it (`peerops admin token revoke ID`). */
  id: string;
  expiresAt: string;
}

export const ISSUER = 'peerops';
/** Who a token is for: the user and admin API. */
export const AUDIENCE = 'peerops-api';
/** Issue 4: tokens live 12 h unless configured otherwise. */
export const DEFAULT_TTL_SECONDS = 12 * 3600;
/** Tokens whose verification is remembered: as many as fast-jwt's cache held. */
const VERIFIED_CACHE_SIZE = 10_000;

async function writeKeyFile(path: string, pem: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  await atomicWriteFile(path, pem, { mode: 0o600 });
}

/**
 * Reads the Ed25519 private key PEM at `path`; never creates one. A key made up where the controller's
 * was expected (a wrong --data, an unmounted Secret) would sign tokens that fail everywhere else.
 */
export async function loadKey(path: string): Promise<string> {
  let pem: string;
  try {
    pem = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT')
      throw new Error(`no JWT key at ${path} (the controller creates it in its data dir on first start)`, {
        cause: err,
      });
    throw err;
  }
  if (createPrivateKey(pem).asymmetricKeyType !== 'ed25519')
    throw new Error(`${path}: the JWT key must be an Ed25519 private key`);
  // Only a key of our own that others may read is tightened. A Secret mount is another owner's: with
  // the chart's fsGroup the kubelet makes it 0440 on a read-only mount, where a chmod fails with EROFS
  // (docs/kubernetes.md, "Tested on a real node").
  const info = await stat(path);
  if (info.mode & 0o077 && info.uid === process.getuid?.()) await chmod(path, 0o600);
  return pem;
}

/** Reads the Ed25519 private key PEM at `path`, creating it when absent (the data dir's default key). */
export async function loadOrCreateKey(path: string): Promise<string> {
  try {
    return await loadKey(path);
  } catch (err) {
    if (((err as Error).cause as NodeJS.ErrnoException | undefined)?.code !== 'ENOENT') throw err;
  }
  const { privateKey } = generateKeyPairSync('ed25519');
  const pem = privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
  try {
    await writeKeyFile(path, pem);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // A read-only data dir is served read-only (docs/store.md), but not without the key its tokens need.
    if (code === 'EROFS' || code === 'EACCES')
      throw new Error(
        `no JWT key at ${path}, and its directory is read-only (${code}): start once with the data dir writable, or name a key with PEEROPS_JWT_KEY_FILE`,
        { cause: err },
      );
    // Another replica or process won the race: use its key.
    if (code !== 'EEXIST') throw err;
  }
  return readFile(path, 'utf8');
}

export function defaultKeyPath(dataDir: string): string {
  return join(dataDir, 'jwt-ed25519.pem');
}

/** Issues and verifies tokens with one key. The login plugin and `peerops admin token` call issueToken. */
export class TokenIssuer {
  private readonly privatePem: string;
  private readonly verifier: (token: string) => Record<string, unknown>;
  /**
   * Tokens verified, by their text, until their `exp` (in ms). fast-jwt's own cache keys on a SHA-512 of
   * the token, which cost more than the rest of a cached verification; a Map of the text needs none. Only
   * valid tokens are kept: nothing but time can make one invalid, and `exp` is checked on every hit.
   */
  private readonly verified = new Map<string, { claims: TokenClaims; expiresMs: number }>();

  constructor(privatePem: string) {
    this.privatePem = privatePem;
    const publicPem = createPublicKey(privatePem).export({ format: 'pem', type: 'spki' }).toString();
    this.verifier = createVerifier({
      key: publicPem,
      algorithms: ['EdDSA'],
      allowedIss: ISSUER,
      allowedAud: AUDIENCE,
      requiredClaims: ['iss', 'aud', 'iat', 'exp', 'sub', 'asn', 'role', 'src', 'jti'],
    }) as (token: string) => Record<string, unknown>;
  }

  /** With the key at `path`, created when absent. */
  static async fromFile(path: string): Promise<TokenIssuer> {
    return new TokenIssuer(await loadOrCreateKey(path));
  }

  /** With the key at `path`, which must exist. */
  static async fromExistingFile(path: string): Promise<TokenIssuer> {
    return new TokenIssuer(await loadKey(path));
  }

  /**
   * A 32-byte secret for another purpose, named by `label`, derived (HKDF-SHA256) from the JWT key: every
   * replica that shares the key (PEEROPS_JWT_KEY_FILE) derives the same, and it reveals nothing of the key.
   * The login challenges' MAC key (docs/login.md, Several replicas).
   */
  deriveKey(label: string): Buffer {
    const secret = createPrivateKey(this.privatePem).export({ format: 'der', type: 'pkcs8' });
    return Buffer.from(hkdfSync('sha256', secret, 'peerops', label, 32));
  }

  /** A token for `asn`; `source` is `login` for the login's tokens, whose admin role the admin list rules. */
  issueToken(
    asn: number,
    role: Role,
    ttlSeconds: number = DEFAULT_TTL_SECONDS,
    source: TokenSource = 'operator',
  ): IssuedToken {
    if (!isAsn(asn)) throw new Error(`not an ASN: ${String(asn)}`);
    if (role !== 'user' && role !== 'admin') throw new Error(`not a role: ${String(role)}`);
    if (!Number.isInteger(ttlSeconds) || ttlSeconds < 1 || ttlSeconds > MAX_TOKEN_TTL_SECONDS)
      throw new Error(`ttl must be 1..${MAX_TOKEN_TTL_SECONDS} seconds`);
    const now = Math.floor(Date.now() / 1000);
    const exp = now + ttlSeconds;
    const jti = newTokenId(asn, exp);
    const sign = createSigner({ key: this.privatePem, algorithm: 'EdDSA' });
    const token = sign({
      sub: `AS${asn}`,
      asn,
      role,
      src: source,
      jti,
      iss: ISSUER,
      aud: AUDIENCE,
      iat: now,
      exp,
    });
    return { token, id: jti, expiresAt: new Date(exp * 1000).toISOString() };
  }

  /** The claims of a valid token; INVALID_TOKEN otherwise (never says which check failed beyond a word). */
  verify(token: string): TokenClaims {
    const known = this.verified.get(token);
    // fast-jwt's rule: valid up to and including the `exp` second's first millisecond
    if (known !== undefined && Date.now() <= known.expiresMs) return known.claims;
    if (known !== undefined) this.verified.delete(token);
    const verified = this.verifyClaims(token);
    if (this.verified.size >= VERIFIED_CACHE_SIZE) {
      // the oldest entry (a Map iterates in insertion order)
      for (const oldest of this.verified.keys()) {
        this.verified.delete(oldest);
        break;
      }
    }
    this.verified.set(token, verified);
    return verified.claims;
  }

  /** fast-jwt's verification (signature, iss, aud, exp, nbf) and the claims' own checks. */
  private verifyClaims(token: string): { claims: TokenClaims; expiresMs: number } {
    let claims: Record<string, unknown>;
    try {
      claims = this.verifier(token);
    } catch (err) {
      const code = (err as { code?: string }).code;
      throw problem(
        code === 'FAST_JWT_EXPIRED'
          ? 'auth.tokenExpired'
          : code === 'FAST_JWT_MISSING_REQUIRED_CLAIM'
            ? 'auth.tokenNoId'
            : 'auth.tokenInvalid',
      );
    }
    const { asn, role, sub, src, jti, iss, aud, iat, exp } = claims;
    // the id names the token's ASN and expiry (token-id.ts): a revocation by id relies on both
    const id = typeof jti === 'string' ? parseTokenId(jti) : undefined;
    // fast-jwt checked iss and aud already; again here so that a change of its options cannot drop them.
    if (
      !isAsn(asn) ||
      (role !== 'user' && role !== 'admin') ||
      (src !== 'login' && src !== 'operator') ||
      sub !== `AS${asn}` ||
      iss !== ISSUER ||
      aud !== AUDIENCE ||
      typeof iat !== 'number' ||
      typeof exp !== 'number' ||
      id?.asn !== asn ||
      id.expiresAt !== exp
    )
      throw problem('auth.claimsInvalid');
    return {
      claims: { asn, role, source: src, id: jti as string, issuedAt: iat },
      expiresMs: exp * 1000,
    };
  }
}
