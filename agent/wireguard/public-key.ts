/**
 * `tunnel.publicKeyPath` (docs/agent.md, Config): the public key of the session tunnels' private key, where the
 * operator reads it to register the router (`peerops admin router add --public-key`). Written when it is
 * missing; a file naming another key is reported and left alone: one of the two files is wrong, and only
 * the operator knows which.
 */
import { readFile } from 'node:fs/promises';
import { atomicWriteFile } from '../../common/atomic-write.ts';
import { publicKeyOfPrivateKeyFile } from './interface.ts';

export type PublicKeyFile =
  | { state: 'written' | 'current'; publicKey: string }
  | { state: 'mismatch'; publicKey: string; inFile: string };

export async function syncPublicKeyFile(
  privateKeyPath: string,
  publicKeyPath: string,
): Promise<PublicKeyFile> {
  const publicKey = await publicKeyOfPrivateKeyFile(privateKeyPath);
  const inFile = await readFile(publicKeyPath, 'utf8').then(
    (text) => text.trim(),
    (err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return undefined;
      throw err;
    },
  );
  if (inFile === undefined) {
    await atomicWriteFile(publicKeyPath, `${publicKey}\n`);
    return { state: 'written', publicKey };
  }
  return inFile === publicKey ? { state: 'current', publicKey } : { state: 'mismatch', publicKey, inFile };
}
