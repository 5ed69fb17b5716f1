/**
 * SSH signatures as `ssh-keygen -Y sign` writes them (OpenSSH PROTOCOL.sshsig), checked with node:crypto:
 * the controller's logins (controller/auth/login/verify.ts) and the agent's release check
 * (agent/update/signature.ts) both use them.
 *
 * Blob: "SSHSIG" · uint32 version (1) · string publickey · string namespace · string reserved ·
 * string hash_algorithm · string signature. The key signed "SSHSIG" · string namespace ·
 * string reserved · string hash_algorithm · string H(message).
 * Keys: ssh-ed25519, ssh-rsa (signature rsa-sha2-256 or rsa-sha2-512; SHA-1 refused), ecdsa-sha2-nistp256,
 * -nistp384 and -nistp521 (each with the hash RFC 5656 gives its curve).
 */
import { createHash, createPublicKey, verify, type JsonWebKey, type KeyObject } from 'node:crypto';

export const SSH_KEY_TYPES = [
  'ssh-ed25519',
  'ssh-rsa',
  'ecdsa-sha2-nistp256',
  'ecdsa-sha2-nistp384',
  'ecdsa-sha2-nistp521',
] as const;
export type SshKeyType = (typeof SSH_KEY_TYPES)[number];

type EcdsaType = Extract<SshKeyType, `ecdsa-${string}`>;

/** The NIST curves of ECDSA keys (RFC 5656 §6.2.1): the JWK curve, the coordinate size, the hash. */
const ECDSA_CURVES: Record<EcdsaType, { name: string; crv: string; bytes: number; hash: string }> = {
  'ecdsa-sha2-nistp256': { name: 'nistp256', crv: 'P-256', bytes: 32, hash: 'sha256' },
  'ecdsa-sha2-nistp384': { name: 'nistp384', crv: 'P-384', bytes: 48, hash: 'sha384' },
  'ecdsa-sha2-nistp521': { name: 'nistp521', crv: 'P-521', bytes: 66, hash: 'sha512' },
};

function isEcdsa(type: string): type is EcdsaType {
  return Object.hasOwn(ECDSA_CURVES, type);
}

const MAGIC = Buffer.from('SSHSIG');
const ARMOR = /-----BEGIN SSH SIGNATURE-----([\s\S]*?)-----END SSH SIGNATURE-----/;
const MIN_RSA_BITS = 2048;

export class SshSigError extends Error {
  override name = 'SshSigError';
}

/** Reads the SSH wire encoding (RFC 4251): uint32, string, mpint. */
class WireReader {
  private offset = 0;
  private readonly buf: Buffer;

  constructor(buf: Buffer) {
    this.buf = buf;
  }

  uint32(): number {
    if (this.offset + 4 > this.buf.length) throw new SshSigError('truncated SSH wire data');
    const v = this.buf.readUInt32BE(this.offset);
    this.offset += 4;
    return v;
  }

  bytes(): Buffer {
    const len = this.uint32();
    if (this.offset + len > this.buf.length) throw new SshSigError('truncated SSH wire data');
    const v = this.buf.subarray(this.offset, this.offset + len);
    this.offset += len;
    return v;
  }

  text(): string {
    return this.bytes().toString('utf8');
  }

  /** An unsigned mpint without its sign byte. */
  mpint(): Buffer {
    const v = this.bytes();
    let i = 0;
    while (i < v.length - 1 && v[i] === 0) i++;
    return v.subarray(i);
  }

  take(n: number): Buffer {
    if (this.offset + n > this.buf.length) throw new SshSigError('truncated SSH wire data');
    const v = this.buf.subarray(this.offset, this.offset + n);
    this.offset += n;
    return v;
  }

  get done(): boolean {
    return this.offset === this.buf.length;
  }
}

function wireString(b: Buffer | string): Buffer {
  const data = typeof b === 'string' ? Buffer.from(b) : b;
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  return Buffer.concat([len, data]);
}

const b64url = (b: Buffer): string => b.toString('base64url');

function leftPad(b: Buffer, size: number): Buffer {
  if (b.length > size) throw new SshSigError('ECDSA signature component too long');
  return Buffer.concat([Buffer.alloc(size - b.length), b]);
}

/** The SSH wire public key as a node KeyObject, via JWK. */
export function sshPublicKey(wire: Buffer): { type: SshKeyType; key: KeyObject } {
  const r = new WireReader(wire);
  const type = r.text();
  let jwk: JsonWebKey;
  switch (type) {
    case 'ssh-ed25519': {
      const x = r.bytes();
      if (x.length !== 32) throw new SshSigError('ssh-ed25519 key is not 32 bytes');
      jwk = { kty: 'OKP', crv: 'Ed25519', x: b64url(x) };
      break;
    }
    case 'ssh-rsa': {
      const e = r.mpint();
      const n = r.mpint();
      if (n.length * 8 < MIN_RSA_BITS)
        throw new SshSigError(`RSA keys under ${MIN_RSA_BITS} bits are refused`);
      jwk = { kty: 'RSA', n: b64url(n), e: b64url(e) };
      break;
    }
    default: {
      if (!isEcdsa(type)) throw new SshSigError(`SSH key type '${type}' is not supported`);
      const curve = ECDSA_CURVES[type];
      if (r.text() !== curve.name) throw new SshSigError(`${type} key is not on ${curve.name}`);
      const q = r.bytes();
      if (q.length !== 1 + 2 * curve.bytes || q[0] !== 4)
        throw new SshSigError(`ecdsa point is not an uncompressed ${curve.crv} point`);
      const x = q.subarray(1, 1 + curve.bytes);
      jwk = { kty: 'EC', crv: curve.crv, x: b64url(x), y: b64url(q.subarray(1 + curve.bytes)) };
    }
  }
  if (!r.done) throw new SshSigError('trailing bytes after the SSH public key');
  return { type, key: createPublicKey({ key: jwk, format: 'jwk' }) };
}

export interface SshSignature {
  /** The signer's public key in SSH wire form. */
  publicKey: Buffer;
  namespace: string;
  reserved: Buffer;
  hashAlgorithm: 'sha256' | 'sha512';
  sigType: string;
  sig: Buffer;
}

export function parseSshSignature(armored: string): SshSignature {
  const m = ARMOR.exec(armored);
  if (!m) throw new SshSigError('not an armored SSH signature (-----BEGIN SSH SIGNATURE-----)');
  const blob = Buffer.from(m[1]!.replace(/\s+/g, ''), 'base64');
  const r = new WireReader(blob);
  if (!r.take(MAGIC.length).equals(MAGIC)) throw new SshSigError('SSH signature magic is not SSHSIG');
  const version = r.uint32();
  if (version !== 1) throw new SshSigError(`SSH signature version ${version} is not supported`);
  const publicKey = r.bytes();
  const namespace = r.text();
  const reserved = r.bytes();
  const hashAlgorithm = r.text();
  if (hashAlgorithm !== 'sha256' && hashAlgorithm !== 'sha512') {
    throw new SshSigError(`hash algorithm '${hashAlgorithm}' is not supported`);
  }
  const inner = new WireReader(r.bytes());
  if (!r.done) throw new SshSigError('trailing bytes after the SSH signature');
  const sigType = inner.text();
  const sig = inner.bytes();
  return { publicKey, namespace, reserved, hashAlgorithm, sigType, sig };
}

/** The bytes the key signed for this message. */
function signedData(s: SshSignature, message: Buffer): Buffer {
  const digest = createHash(s.hashAlgorithm).update(message).digest();
  return Buffer.concat([
    MAGIC,
    wireString(s.namespace),
    wireString(s.reserved),
    wireString(s.hashAlgorithm),
    wireString(digest),
  ]);
}

/** Check the signature itself (not whose key it is). Throws SshSigError with the reason. */
export function checkSshSignature(s: SshSignature, message: Buffer, namespace: string): SshKeyType {
  if (s.namespace !== namespace)
    throw new SshSigError(`signature namespace is '${s.namespace}', not '${namespace}'`);
  const { type, key } = sshPublicKey(s.publicKey);
  const data = signedData(s, message);
  let ok: boolean;
  switch (type) {
    case 'ssh-ed25519':
      if (s.sigType !== 'ssh-ed25519')
        throw new SshSigError(`signature type ${s.sigType} does not fit an ${type} key`);
      ok = verify(null, data, key, s.sig);
      break;
    case 'ssh-rsa':
      if (s.sigType !== 'rsa-sha2-256' && s.sigType !== 'rsa-sha2-512') {
        throw new SshSigError(
          `RSA signature type ${s.sigType} is refused (use rsa-sha2-256 or rsa-sha2-512)`,
        );
      }
      ok = verify(s.sigType === 'rsa-sha2-256' ? 'sha256' : 'sha512', data, key, s.sig);
      break;
    default: {
      if (s.sigType !== type)
        throw new SshSigError(`signature type ${s.sigType} does not fit an ${type} key`);
      const { bytes, hash } = ECDSA_CURVES[type];
      const rs = new WireReader(s.sig);
      const p1363 = Buffer.concat([leftPad(rs.mpint(), bytes), leftPad(rs.mpint(), bytes)]);
      ok = verify(hash, data, { key, dsaEncoding: 'ieee-p1363' }, p1363);
    }
  }
  if (!ok) throw new SshSigError('the SSH signature does not verify over the signed message');
  return type;
}
