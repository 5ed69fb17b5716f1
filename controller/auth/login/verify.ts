/**
 * Does this signature over this challenge come from a key the ASN's maintainers list?
 * SSH signatures (SSHSIG, namespace `peerops`) are checked with node:crypto; OpenPGP signatures
 * (cleartext-signed or detached armored) with openpgp.js against the registry's key-cert keys and
 * the user's pasted key when its primary fingerprint is listed (`pgp-fingerprint`, or a key-cert's).
 */
import type * as openpgp from 'openpgp';
import { loadOpenpgp } from './openpgp.ts';
import { SSH_NAMESPACE } from '../../../common/login-challenge.ts';
import type { AuthMethod } from './auth-methods.ts';
import { checkSshSignature, parseSshSignature, SshSigError } from '../../../common/sshsig.ts';

/** Why a signature is refused: a catalogue key (common/messages.ts), `reason` the library's words. */
export type Refusal =
  | { key: 'login.signatureUnknownForm' | 'login.sshKeyNotListed' | 'login.pgpKeyNeeded' }
  | { key: 'login.pgpNoKey' | 'login.notTheChallenge' }
  | { key: 'login.signatureRefused'; reason: string };

export type Verdict = { ok: true; method: AuthMethod } | { ok: false; refusal: Refusal };

const refused = (refusal: Refusal): Verdict => ({ ok: false, refusal });
const unverified = (reason: string): Verdict => refused({ key: 'login.signatureRefused', reason });

/**
 * When an OpenPGP signature must have been made: from the challenge's issue to now, each widened by the
 * clock skew allowed. openpgp.js judges a key valid or expired at the signature's own creation time,
 * which the signer writes; bounding it makes "valid then" mean "valid now", so an expired key cannot
 * sign a backdated answer.
 */
export interface SignedWithin {
  from: Date;
  to: Date;
}

export async function verifyLogin(
  methods: readonly AuthMethod[],
  challenge: string,
  signature: string,
  publicKey: string | undefined,
  within: SignedWithin,
): Promise<Verdict> {
  try {
    if (signature.includes('-----BEGIN SSH SIGNATURE-----')) return verifySsh(methods, challenge, signature);
    if (
      signature.includes('-----BEGIN PGP SIGNED MESSAGE-----') ||
      signature.includes('-----BEGIN PGP SIGNATURE-----')
    ) {
      return await verifyPgp(methods, challenge, signature, publicKey, within);
    }
    return refused({ key: 'login.signatureUnknownForm' });
  } catch (err) {
    return unverified((err as Error).message);
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
  if (!method) return refused({ key: 'login.sshKeyNotListed' });
  try {
    checkSshSignature(sig, Buffer.from(challenge, 'utf8'), SSH_NAMESPACE);
  } catch (err) {
    if (err instanceof SshSigError) return unverified(err.message);
    throw err;
  }
  return { ok: true, method };
}

/**
 * Keys the user may have signed with, each with the method that allows it. A key-cert's key is merged
 * with the pasted key when both have the same primary key, as gpg merges an import: the owner's renewed
 * expiry or new subkey then counts. openpgp.js takes a merged self-signature or subkey binding only
 * where the primary key made it, and keeps the registry copy's revocations, so the signer still proves
 * possession of the primary key or of a subkey it bound (docs/login.md, Which keys count).
 */
async function pgpCandidates(
  methods: readonly AuthMethod[],
  publicKey: string | undefined,
): Promise<Array<{ key: openpgp.PublicKey; method: AuthMethod }>> {
  const pgp = methods.filter((m) => m.type === 'pgp-fingerprint' || m.type === 'pgp-key-cert');
  const offered =
    publicKey && pgp.length > 0
      ? await (await loadOpenpgp()).readKey({ armoredKey: publicKey }).catch(() => {
          throw new Error('publicKey is not an armored OpenPGP public key');
        })
      : undefined;
  // A secret key pasted by mistake is not used, not even its public half: the user should know.
  if (offered?.isPrivate())
    throw new Error('publicKey is a private key; send the public key (gpg --export --armor KEYID)');
  const offeredFpr = offered?.getFingerprint().toLowerCase();
  const out: Array<{ key: openpgp.PublicKey; method: AuthMethod }> = [];
  for (const m of pgp) {
    if (m.type === 'pgp-key-cert') {
      const key = await (await loadOpenpgp()).readKey({ armoredKey: m.armoredKey });
      out.push({ key: offered && offeredFpr === m.fingerprint ? await key.update(offered) : key, method: m });
    } else if (offered && offeredFpr === m.fingerprint) {
      out.push({ key: offered, method: m });
    }
  }
  return out;
}

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
  within: SignedWithin,
): Promise<Verdict> {
  const candidates = await pgpCandidates(methods, publicKey);
  if (candidates.length === 0) {
    const wantsKey = methods.some((m) => m.type === 'pgp-fingerprint') && !publicKey;
    return refused({ key: wantsKey ? 'login.pgpKeyNeeded' : 'login.pgpNoKey' });
  }
  const verificationKeys = candidates.map((c) => c.key);
  let signatures: openpgp.VerifyMessageResult['signatures'];
  if (armored.includes('-----BEGIN PGP SIGNED MESSAGE-----')) {
    const message = await (await loadOpenpgp()).readCleartextMessage({ cleartextMessage: armored });
    if (normalizeText(message.getText()) !== normalizeText(challenge)) {
      return refused({ key: 'login.notTheChallenge' });
    }
    ({ signatures } = await (await loadOpenpgp()).verify({ message, verificationKeys, date: within.to }));
  } else {
    const signature = await (await loadOpenpgp()).readSignature({ armoredSignature: armored });
    const message = await (await loadOpenpgp()).createMessage({ binary: Buffer.from(challenge, 'utf8') });
    ({ signatures } = await (
      await loadOpenpgp()
    ).verify({ message, signature, verificationKeys, date: within.to }));
  }
  // `date` refused signatures made after within.to; which verified, with which key, made when?
  let why = 'the OpenPGP signature does not verify with a listed key';
  for (const s of signatures) {
    const hit = candidates.find((c) => c.key.getKeys(s.keyID).length > 0);
    if (!hit) continue;
    const verified = await s.verified.catch((err: Error) => err);
    if (verified !== true) {
      why = `the OpenPGP signature does not verify with ${describe(hit.method)}: ${verified.message}`;
      continue;
    }
    const created = (await s.signature).packets[0]?.created;
    if (!created || created < within.from) {
      why = `the OpenPGP signature was made before the challenge was issued (${created?.toISOString() ?? 'no time'}); check your clock`;
      continue;
    }
    return { ok: true, method: hit.method };
  }
  return unverified(why);
}

/** A key-cert or fingerprint as a refusal names it; an expired key-cert says what would make it verify. */
function describe(m: AuthMethod): string {
  if (m.type === 'pgp-key-cert')
    return `key-cert ${m.keyCert}${m.expired ? ` (${m.expired} in the registry; send your renewed key as publicKey)` : ''}`;
  return m.type === 'pgp-fingerprint' ? `pgp-fingerprint ${m.fingerprint}` : m.type;
}
