/**
 * How the login page words the keys of a challenge (docs/login.md, Which keys count): fingerprints as
 * gpg prints them, when a key-cert's registry copy expired, and why a line was skipped, in the reader's
 * language where the controller's reason is one the page knows, otherwise in the controller's words.
 */
import { t } from '../i18n/index.ts';

/** `0123 4567 … 89AB  CDEF …`: groups of four, upper case, two blanks in the middle of a v4 fingerprint. */
export function gpgFingerprint(hex: string): string {
  const groups = hex.toUpperCase().match(/.{1,4}/g) ?? [];
  if (groups.length !== 10) return groups.join(' ');
  return `${groups.slice(0, 5).join(' ')}  ${groups.slice(5).join(' ')}`;
}

/** A key-cert's `expired` (`expired on 2020-12-31 in the registry: …`) as the reader's words. */
export function expiredText(expired: string): string {
  const date = /^expired on (\d{4}-\d{2}-\d{2})\b/.exec(expired)?.[1];
  return date ? t('login.keyCertExpired', { date }) : expired;
}

/**
 * The controller's reasons (controller/auth/login: auth-methods.ts, key-cert.ts, registry.ts) that the
 * page words itself. Matched on the text: the answer carries no reason code, and an unknown text is
 * shown as it is, so a reason the controller adds later still reaches the reader.
 */
const KNOWN: [RegExp, (m: RegExpExecArray) => string][] = [
  // ssh keys (common/sshsig.ts) and OpenPGP keys (openpgp.js) word the same refusal differently
  [/RSA keys (?:under|shorter than) (\d+) bits/, (m) => t('login.reason.rsaShort', { bits: m[1]! })],
  [/^auth method '([^']*)' is not supported$/, (m) => t('login.reason.unsupported', { method: m[1]! })],
  [/^mntner (\S+) is not in the registry$/, (m) => t('login.reason.noMntner', { name: m[1]! })],
  [/^not a valid maintainer name$/, () => t('login.reason.badMntnerName')],
  [/^it is not in the registry$/, () => t('login.reason.missing')],
  [/^its key cannot be read\b/, () => t('login.reason.unreadable')],
  [
    /^it has no certif: lines$|^its certif: lines hold no PGP public key block$/,
    () => t('login.reason.noKey'),
  ],
  [/^it holds key ([0-9a-f]+),/, (m) => t('login.reason.otherKey', { fingerprint: gpgFingerprint(m[1]!) })],
  [/^its fingerpr: is not the fingerprint of its key\b/, () => t('login.reason.wrongFingerpr')],
  [/^its key cannot verify signatures \(.*\brevoked\b/i, () => t('login.reason.revoked')],
  [/^the line says (\S+), its key is (\S+)$/, (m) => t('login.reason.mismatch', { said: m[1]!, is: m[2]! })],
  [/^\S+ key is not base64$/, () => t('login.reason.notBase64')],
  [/^pgp-fingerprint must be\b/, () => t('login.reason.badFingerprint')],
];

/** Why a skipped line cannot log in, short; a key-cert's reason names the key-cert first. */
export function skippedReason(reason: string): string {
  const cert = /^key-cert (PGPKEY-[0-9A-F]{8}): ([\s\S]*)$/.exec(reason);
  const core = cert ? cert[2]! : reason;
  for (const [pattern, say] of KNOWN) {
    const m = pattern.exec(core);
    if (m) return cert ? t('login.reason.keyCert', { keyCert: cert[1]!, reason: say(m) }) : say(m);
  }
  return reason;
}
