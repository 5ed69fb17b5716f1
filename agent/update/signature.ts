/**
 * Release signatures. `SHA256SUMS.sig` is the base64 Ed25519 signature of the release's SHA256SUMS by
 * one of the keys in `autoUpdate.publicKeys` (base64 of the raw 32-byte public key). A matching SHA256
 * only shows that the artifact is the one the checksum list names, and both come from the same mirror;
 * the signature shows that the list is the publisher's, so a tampered mirror or a man in the middle
 * cannot get its code run as root on the routers.
 */
import { createPrivateKey, createPublicKey, sign, verify } from 'node:crypto';

export const SIGNATURE_NAME = 'SHA256SUMS.sig';
/** DER header of an Ed25519 SubjectPublicKeyInfo; the raw key follows. */
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

/** Does `signature` (base64) sign `checksums` with one of `publicKeys`? */
export function checksumsSigned(
  checksums: Buffer,
  signature: string,
  publicKeys: readonly string[],
): boolean {
  const sig = Buffer.from(signature.trim(), 'base64');
  if (sig.length !== 64) return false;
  return publicKeys.some((raw) => {
    const key = createPublicKey({
      key: Buffer.concat([SPKI_PREFIX, Buffer.from(raw, 'base64')]),
      format: 'der',
      type: 'spki',
    });
    return verify(null, checksums, key, sig);
  });
}

/** The signature build-release writes, and the public key that checks it (for autoUpdate.publicKeys). */
export function signChecksums(
  checksums: Buffer,
  privateKeyPem: string,
): { signature: string; publicKey: string } {
  const key = createPrivateKey(privateKeyPem);
  if (key.asymmetricKeyType !== 'ed25519')
    throw new Error('the release signing key must be an Ed25519 private key');
  const spki = createPublicKey(key).export({ format: 'der', type: 'spki' });
  return {
    signature: sign(null, checksums, key).toString('base64'),
    publicKey: spki.subarray(SPKI_PREFIX.length).toString('base64'),
  };
}
