/**
 * The `auth:` lines of a DN42 mntner that peerops can check, parsed into typed methods. The same
 * syntax is used by the users file for networks without a DN42 registry.
 */

import { SSH_KEY_TYPES, type SshKeyType, sshPublicKey } from '../../../common/sshsig.ts';

export type AuthMethod =
  /** An SSH public key; `key` is the base64 wire blob exactly as in the registry. */
  | { type: SshKeyType; mntner: string; key: string }
  /** A PGP primary key fingerprint (lower-case hex, no spaces); the user sends the armored key. */
  | { type: 'pgp-fingerprint'; mntner: string; fingerprint: string }
  /**
   * `PGPKEY-<8 hex>`: the armored key is taken from the registry's key-cert object (key-cert.ts);
   * `fingerprint` is its primary key's, `expired` says why the registry's copy alone cannot verify now.
   */
  | {
      type: 'pgp-key-cert';
      mntner: string;
      keyCert: string;
      armoredKey: string;
      fingerprint: string;
      expired?: string;
    };

export type AuthLine =
  { ok: true; method: AuthMethod } | { ok: true; keyCert: string } | { ok: false; reason: string };

/** A fingerprint as `auth: pgp-fingerprint` or a key-cert's `fingerpr:` writes it: lower-case hex, no blanks. */
export function compactFingerprint(value: string): string {
  return value.replace(/\s+/g, '').toLowerCase();
}

export const KEY_CERT_NAME = /^PGPKEY-[0-9A-Fa-f]{8}$/;

/**
 * One `auth:` value. `PGPKEY-…` comes back as `{keyCert}` because its key lives in another object;
 * methods peerops does not check (crypt, x509, …) and keys that cannot verify a signature (RSA under
 * 2048 bits, a blob of another type or curve) come back as not ok with the reason.
 */
export function parseAuthLine(line: string, mntner: string): AuthLine {
  const [kind = '', arg = ''] = line.trim().split(/\s+/);
  if ((SSH_KEY_TYPES as readonly string[]).includes(kind)) {
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(arg)) return { ok: false, reason: `${kind} key is not base64` };
    let type: string;
    try {
      ({ type } = sshPublicKey(Buffer.from(arg, 'base64')));
    } catch (err) {
      return { ok: false, reason: `${kind} key cannot verify signatures: ${(err as Error).message}` };
    }
    if (type !== kind) return { ok: false, reason: `the line says ${kind}, its key is ${type}` };
    return { ok: true, method: { type: kind as SshKeyType, mntner, key: arg } };
  }
  if (kind.toLowerCase() === 'pgp-fingerprint') {
    const fingerprint = compactFingerprint(line.trim().slice(kind.length));
    if (!/^[0-9a-f]{40}$|^[0-9a-f]{64}$/.test(fingerprint)) {
      return { ok: false, reason: 'pgp-fingerprint must be 40 (v4) or 64 (v6) hex digits' };
    }
    return { ok: true, method: { type: 'pgp-fingerprint', mntner, fingerprint } };
  }
  if (KEY_CERT_NAME.test(kind)) return { ok: true, keyCert: kind.toUpperCase() };
  return { ok: false, reason: `auth method '${kind}' is not supported` };
}

/** What the challenge answer tells the user about a method (no key material beyond the public registry). */
export function describeMethod(m: AuthMethod): Record<string, string> {
  switch (m.type) {
    case 'pgp-fingerprint':
      return { type: m.type, mntner: m.mntner, fingerprint: m.fingerprint };
    case 'pgp-key-cert':
      return {
        type: m.type,
        mntner: m.mntner,
        keyCert: m.keyCert,
        fingerprint: m.fingerprint,
        // The owner's renewed key, sent as publicKey, makes it verify (docs/login.md, Which keys count).
        ...(m.expired ? { expired: `${m.expired} in the registry: send your renewed key as publicKey` } : {}),
      };
    default:
      return { type: m.type, mntner: m.mntner, key: m.key };
  }
}
