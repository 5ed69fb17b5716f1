/** tunnel.publicKeyPath: written from the private key when missing, a stale one reported and kept. */
import { chmod, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { syncPublicKeyFile } from '../../agent/wireguard/public-key.ts';
import { wgKeyPair } from './lab.ts';

let dir: string;
let keys: { privateKey: string; publicKey: string };
let privateKeyPath: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'agpub-'));
  keys = await wgKeyPair(); // the real `wg genkey` / `wg pubkey`
  privateKeyPath = join(dir, 'private.key');
  await writeFile(privateKeyPath, `${keys.privateKey}\n`, { mode: 0o600 });
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

describe('tunnel public key file', () => {
  it('is written when missing, with the key wg pubkey derives, readable by all', async () => {
    const path = join(dir, 'public.key');
    expect(await syncPublicKeyFile(privateKeyPath, path)).toEqual({
      state: 'written',
      publicKey: keys.publicKey,
    });
    expect((await readFile(path, 'utf8')).trim()).toBe(keys.publicKey);
    expect((await stat(path)).mode & 0o777).toBe(0o644);
    expect(await syncPublicKeyFile(privateKeyPath, path)).toEqual({
      state: 'current',
      publicKey: keys.publicKey,
    });
  });

  it('naming another key: reported, not overwritten', async () => {
    const path = join(dir, 'stale.key');
    const other = (await wgKeyPair()).publicKey;
    await writeFile(path, `${other}\n`);
    expect(await syncPublicKeyFile(privateKeyPath, path)).toEqual({
      state: 'mismatch',
      publicKey: keys.publicKey,
      inFile: other,
    });
    expect((await readFile(path, 'utf8')).trim()).toBe(other);
  });

  it('a private key readable by others is refused before anything is written', async () => {
    const loose = join(dir, 'loose.key');
    await writeFile(loose, `${keys.privateKey}\n`);
    await chmod(loose, 0o644);
    await expect(syncPublicKeyFile(loose, join(dir, 'never.key'))).rejects.toThrow(/chmod 600/);
    await expect(stat(join(dir, 'never.key'))).rejects.toMatchObject({ code: 'ENOENT' });
  });
});
