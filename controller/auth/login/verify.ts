/**
 * Does this signature over this challenge come from a key the ASN's maintainers list?
 * SSH signatures (SSHSIG, namespace `peerops`) are checked with node:crypto; OpenPGP signatures
 * (cleartext-signed or detached armored) with openpgp.js against the registry's key-cert keys and
 * the user's pasted key when its fingerprint is listed.
 */
import * as openpgp from 'openpgp';
import { SSH_NAMESPACE } from '../../../common/login-challenge.ts';
import type { AuthMethod } from './auth-methods.ts';
import { checkSshSignature, parseSshSignature, SshSigError } from '../../../common/sshsig.ts';

export type Verdict = { ok: true; method: AuthMethod } | { ok: false; reason: string };

export async function verifyLogin(
  methods: readonly AuthMethod[],
  challenge: string,
  signature: string,
  publicKey: string | undefined,
): Promise<Verdict> {
  try {
    if (signature.includes('-----BEGIN SSH SIGNATURE-----')) return verifySsh(methods, challenge, signature);
    if (
      signature.includes('-----BEGIN PGP SIGNED MESSAGE-----') ||
      signature.includes('-----BEGIN PGP SIGNATURE-----')
    ) {
      return await verifyPgp(methods, challenge, signature, publicKey);
    }
    return { ok: false, reason: 'signature is neither an armored SSH signature nor an OpenPGP signature' };
  } catch (err) {
    return { ok: false, reason: (err as Error).message };
  }
}

function verifySsh(methods: readonly AuthMethod[], challenge: string, armored: string): Verdict {
  const sig = parseSshSignature(armored);
  const method = methods.find(
    (m) =>
      m.type !== 'pgp-fingerprint' &&
      m.type !== 'pgp-key-cert' &&
      Buffer.from(m.key, 'base64').equals(sig.publicKey),
  );
  if (!method)
    return { ok: false, reason: 'the signing SSH key is not listed by any maintainer of this ASN' };
  try {
    checkSshSignature(sig, Buffer.from(challenge, 'utf8'), SSH_NAMESPACE);
  } catch (err) {
    if (err instanceof SshSigError) return { ok: false, reason: err.message };
    throw err;
  }
  return { ok: true, method };
}

/** Keys the user may have signed with, each with the method that allows it. */
async function pgpCandidates(
  methods: readonly AuthMethod[],
  publicKey: string | undefined,
): Promise<Array<{ key: openpgp.PublicKey; method: AuthMethod }>> {
  const out: Array<{ key: openpgp.PublicKey; method: AuthMethod }> = [];
  for (const m of methods) {
    if (m.type !== 'pgp-key-cert') continue;
    const key = await openpgp.readKey({ armoredKey: m.armoredKey }).catch(() => undefined);
    if (!key) continue;
    // PGPKEY-<8 hex> names the key by the end of its fingerprint; a key-cert holding another key is ignored.
    const suffix = m.keyCert.slice('PGPKEY-'.length).toLowerCase();
    if (key.getKeys().some((k) => k.getFingerprint().toLowerCase().endsWith(suffix)))
      out.push({ key, method: m });
  }
  const listed = methods.filter((m) => m.type === 'pgp-fingerprint');
  if (publicKey && listed.length > 0) {
    const key = await openpgp.readKey({ armoredKey: publicKey }).catch(() => {
      throw new Error('publicKey is not an armored OpenPGP public key');
    });
    const fpr = key.getFingerprint().toLowerCase();
    const method = listed.find((m) => m.fingerprint === fpr);
    if (method) out.push({ key, method });
  }
  return out;
}

/** Cleartext signing strips trailing blanks and rewrites line ends; compare on that form. */
/**
 * The text as OpenPGP cleartext signing treats it: CRLF as LF, blanks at line ends and trailing empty
 * lines dropped. By hand, not by regex: `/[ \t]+$/gm` backtracks quadratically on a long run of blanks
 * (15,000 spaces in a signed message held the event loop for 0.6 s).
 */
export function normalizeText(s: string): string {
  const lines = s.split('\n').map((line) => {
    let end = line.length;
    while (end > 0 && ' \t\r'.includes(line[end - 1] ?? '')) end--;
    return line.slice(0, end);
  });
  while (lines.length > 0 && lines.at(-1) === '') lines.pop();
  return lines.join('\n');
}

async function verifyPgp(
  methods: readonly AuthMethod[],
  challenge: string,
  armored: string,
  publicKey: string | undefined,
): Promise<Verdict> {
  const candidates = await pgpCandidates(methods, publicKey);
  if (candidates.length === 0) {
    const wantsKey = methods.some((m) => m.type === 'pgp-fingerprint') && !publicKey;
    return {
      ok: false,
      reason: wantsKey
        ? 'send the armored public key in publicKey: the maintainers list a pgp-fingerprint'
        : 'no OpenPGP key listed by a maintainer of this ASN matches',
    };
  }
  const verificationKeys = candidates.map((c) => c.key);
  let signatures: openpgp.VerifyMessageResult['signatures'];
  if (armored.includes('-----BEGIN PGP SIGNED MESSAGE-----')) {
    const message = await openpgp.readCleartextMessage({ cleartextMessage: armored });
    if (normalizeText(message.getText()) !== normalizeText(challenge)) {
      return { ok: false, reason: 'the signed text is not the challenge' };
    }
    ({ signatures } = await openpgp.verify({ message, verificationKeys, expectSigned: true }));
  } else {
    const signature = await openpgp.readSignature({ armoredSignature: armored });
    const message = await openpgp.createMessage({ binary: Buffer.from(challenge, 'utf8') });
    ({ signatures } = await openpgp.verify({ message, signature, verificationKeys, expectSigned: true }));
  }
  // expectSigned made verify() throw unless a signature verified with one of the keys; find which.
  for (const s of signatures) {
    if (!(await s.verified.catch(() => false))) continue;
    const hit = candidates.find((c) => c.key.getKeys(s.keyID).length > 0);
    if (hit) return { ok: true, method: hit.method };
  }
  return { ok: false, reason: 'the OpenPGP signature does not verify with a listed key' };
}
