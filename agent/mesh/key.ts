/**
 * The node's own mesh WireGuard key: one private key file for every mesh tunnel, separate from the
 * session key, created on first use (0600, written atomically). Its public half goes into every
 * heartbeat as `meshPublicKey`, which is how the other routers learn it.
 */
import { generateKeyPairSync } from 'node:crypto';
import { mkdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { publicKeyOfPrivateKeyFile } from '../wireguard/interface.ts';
import { atomicWriteFile } from '../../common/atomic-write.ts';

export const MESH_KEY_FILE = 'mesh.key';

export function meshKeyPath(tunnelConfigDir: string): string {
  return path.join(tunnelConfigDir, MESH_KEY_FILE);
}

/** Creates `<tunnelConfigDir>/mesh.key` if it is missing; resolves with its path and public key. */
export async function ensureMeshKey(
  tunnelConfigDir: string,
): Promise<{ privateKeyPath: string; publicKey: string }> {
  const privateKeyPath = meshKeyPath(tunnelConfigDir);
  const exists = await stat(privateKeyPath).then(
    () => true,
    (err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return false;
      throw err;
    },
  );
  if (!exists) {
    await mkdir(tunnelConfigDir, { recursive: true, mode: 0o700 });
    await writeNewKey(privateKeyPath);
  }
  return { privateKeyPath, publicKey: await publicKeyOfPrivateKeyFile(privateKeyPath, 'mesh') };
}

/** The heartbeat's `meshPublicKey`: the public half of the node's mesh key (created if missing). */
export async function meshPublicKey(tunnelConfigDir: string): Promise<string> {
  return (await ensureMeshKey(tunnelConfigDir)).publicKey;
}

async function writeNewKey(target: string): Promise<void> {
  const { privateKey } = generateKeyPairSync('x25519');
  const d = privateKey.export({ format: 'jwk' }).d;
  if (!d) throw new Error('X25519 key generation returned no private key');
  const text = `${Buffer.from(d, 'base64url').toString('base64')}\n`;
  await atomicWriteFile(target, text, { mode: 0o600 });
}
