/**
 * The JWT key file's mode: a key of the controller's own that others may read is tightened to 0600; a
 * key another user owns (the kubelet's Secret mount, 0440 with the chart's fsGroup, read-only) is read
 * as it is (docs/kubernetes.md, "Tested on a real node"). Runs as root here, so ownership by uid 10001
 * stands in for the kubelet's root-owned file seen by the controller's uid 10001.
 */
import { generateKeyPairSync } from 'node:crypto';
import { chmod, chown, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadKey } from '../../controller/auth/jwt.ts';

const pem = generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-jwt-mode-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('loadKey and the key file mode', () => {
  it('tightens a group-readable key of its own to 0600', async () => {
    const path = join(dir, 'jwt.pem');
    await writeFile(path, pem, { mode: 0o640 });
    await chmod(path, 0o640);
    expect(await loadKey(path)).toBe(pem);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
  });

  it.runIf(process.getuid?.() === 0)('reads a 0440 key another user owns without changing it', async () => {
    const path = join(dir, 'jwt.pem');
    await writeFile(path, pem);
    await chmod(path, 0o440);
    await chown(path, 10001, 10001);
    expect(await loadKey(path)).toBe(pem);
    expect((await stat(path)).mode & 0o777).toBe(0o440);
  });
});
