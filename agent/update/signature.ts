/**
 * Release signatures. `SHA256SUMS.sig` is an SSH signature (`ssh-keygen -Y sign -n peerops-release`,
 * OpenSSH's SSHSIG format) of the release's SHA256SUMS by one of the keys in `autoUpdate.publicKeys`
 * (SSH public key lines, `ssh-ed25519 AAAA… [comment]`). Operators check the same file with
 * `ssh-keygen -Y verify` (docs/release.md). A matching SHA256 only shows that the artifact is the one
 * the checksum list names, and both come from the same mirror; the signature shows that the list is
 * the publisher's, so a tampered mirror or a man in the middle cannot get its code run on the routers.
 */
import { checkSshSignature, parseSshSignature, SshSigError } from '../../common/sshsig.ts';

export const SIGNATURE_NAME = 'SHA256SUMS.sig';
/** The SSHSIG namespace of release signatures: a login signature (namespace `peerops`) is no release's. */
export const RELEASE_NAMESPACE = 'peerops-release';
/** An SSH public key line as `ssh-keygen` writes it (`<type> <base64 wire blob> [comment]`). */
export const SSH_PUBLIC_KEY_PATTERN =
  '^(ssh-ed25519|ecdsa-sha2-nistp256|ssh-rsa) [A-Za-z0-9+/]+={0,2}( .*)?$';

/** The base64 wire blob of an SSH public key line (the second field). */
function keyBlob(line: string): Buffer {
  return Buffer.from(line.trim().split(/\s+/)[1] ?? '', 'base64');
}

/**
 * Why `signature` (armored SSHSIG) is not a release signature of `checksums` by one of `publicKeys`,
 * or undefined when it is.
 */
export function checksumsSignatureProblem(
  checksums: Buffer,
  signature: string,
  publicKeys: readonly string[],
): string | undefined {
  try {
    const sig = parseSshSignature(signature);
    if (!publicKeys.some((line) => keyBlob(line).equals(sig.publicKey)))
      return 'it is signed by a key that is not in autoUpdate.publicKeys';
    checkSshSignature(sig, checksums, RELEASE_NAMESPACE);
    return undefined;
  } catch (err) {
    if (err instanceof SshSigError) return err.message;
    throw err;
  }
}
