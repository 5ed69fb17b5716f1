/**
 * A registry key-cert object (`data/key-cert/PGPKEY-<8 hex>`) read as gpg reads it, and whether its key
 * can verify a login signature (docs/login.md, Which keys count).
 */
import type * as openpgp from 'openpgp';
import { loadOpenpgp } from './openpgp.ts';
import { compactFingerprint } from './auth-methods.ts';
import { parseRpsl, values } from './rpsl.ts';

export type KeyCert =
  | {
      ok: true;
      /** The key's armour in the form openpgp.js reads (normalizeArmor). */
      armoredKey: string;
      /** The primary key's fingerprint, lower-case hex. */
      fingerprint: string;
      /**
       * Set when the copy in the registry is valid except for time (its key or signing subkeys expired):
       * it verifies only merged with the owner's renewed copy of the same primary key (verify.ts).
       */
      expired?: string;
    }
  | { ok: false; reason: string };

const BEGIN = '-----BEGIN PGP PUBLIC KEY BLOCK-----';
const END = '-----END PGP PUBLIC KEY BLOCK-----';

/**
 * The armour as gpg reads it. gpg takes `Comment:`/`Version:` headers and the blank line after them as
 * optional; openpgp.js needs the blank line and refuses some headers, and two key-certs of the DN42
 * registry have none. Headers carry nothing a key needs, so they are dropped: the body starts at the
 * first line without a colon (base64 has none). Undefined when there is no public key block.
 */
export function normalizeArmor(text: string): string | undefined {
  const lines = text.split(/\r?\n/).map((l) => l.trim());
  const begin = lines.indexOf(BEGIN);
  const end = lines.indexOf(END, begin + 1);
  if (begin < 0 || end < 0) return undefined;
  let body = begin + 1;
  while (body < end && (lines[body] === '' || lines[body]!.includes(':'))) body++;
  return [BEGIN, '', ...lines.slice(body, end).filter((l) => l !== ''), END, ''].join('\n');
}

/** The key of the key-cert object `name` (its text), checked as a login will use it at `now`. */
export async function readKeyCert(name: string, text: string, now: Date): Promise<KeyCert> {
  const attrs = parseRpsl(text);
  const certif = values(attrs, 'certif');
  if (certif.length === 0) return { ok: false, reason: 'it has no certif: lines' };
  const armoredKey = normalizeArmor(certif.join('\n'));
  if (armoredKey === undefined)
    return { ok: false, reason: 'its certif: lines hold no PGP public key block' };
  let key: openpgp.PublicKey;
  try {
    key = await (await loadOpenpgp()).readKey({ armoredKey });
  } catch (err) {
    return { ok: false, reason: `its key cannot be read (${(err as Error).message})` };
  }
  const fingerprint = key.getFingerprint().toLowerCase();
  // PGPKEY-<8 hex> names the key by the end of its fingerprint; a key-cert holding another key is not it.
  const suffix = name.slice('PGPKEY-'.length).toLowerCase();
  if (!key.getKeys().some((k) => k.getFingerprint().toLowerCase().endsWith(suffix)))
    return { ok: false, reason: `it holds key ${fingerprint}, whose fingerprint does not end in ${suffix}` };
  const stated = values(attrs, 'fingerpr').map(compactFingerprint);
  if (stated.length > 0 && !stated.includes(fingerprint))
    return { ok: false, reason: `its fingerpr: is not the fingerprint of its key (${fingerprint})` };
  try {
    await key.getSigningKey(undefined, now);
    return { ok: true, armoredKey, fingerprint };
  } catch (current) {
    try {
      // null: openpgp.js checks everything but time. Passing now, the key failed on time alone.
      await key.getSigningKey(undefined, null);
    } catch (err) {
      return { ok: false, reason: `its key cannot verify signatures (${(err as Error).message})` };
    }
    const expiry = await key.getExpirationTime();
    const expired =
      expiry instanceof Date
        ? `expired on ${expiry.toISOString().slice(0, 10)}`
        : `not valid now (${(current as Error).message})`;
    return { ok: true, armoredKey, fingerprint, expired };
  }
}
