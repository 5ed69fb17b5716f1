/** common/atomic-write.ts on the real file system: content, mode, and no temp file left behind. */
import { mkdir, mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { atomicWriteFile, gitTempName } from '../../common/atomic-write.ts';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-atomic-'));
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

describe('atomicWriteFile', () => {
  it('replaces the content whole, with the requested mode, leaving only the target', async () => {
    const file = join(dir, 'secret');
    await atomicWriteFile(file, 'old\n', { mode: 0o600 });
    await atomicWriteFile(file, Buffer.from('new\n'), { mode: 0o600 });
    expect(await readFile(file, 'utf8')).toBe('new\n');
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(await readdir(dir)).toEqual(['secret']);
  });

  it('leaves the old file and no temp file when the rename fails', async () => {
    const sub = join(dir, 'fail');
    await mkdir(join(sub, 'target'), { recursive: true });
    // a directory in the way: the rename is refused after the temp file was written
    await expect(atomicWriteFile(join(sub, 'target'), 'x')).rejects.toThrow();
    expect(await readdir(sub)).toEqual(['target']);
  });

  it('writes content given in pieces, in their order', async () => {
    const file = join(dir, 'pieces');
    function* pieces() {
      for (let i = 0; i < 3; i++) yield `piece ${i}\n`;
    }
    await atomicWriteFile(file, pieces());
    expect(await readFile(file, 'utf8')).toBe('piece 0\npiece 1\npiece 2\n');
  });

  it('names temp files the way git does for objects, when asked', async () => {
    expect(gitTempName()).toMatch(/^tmp_obj_peerops_[0-9a-f]{12}$/);
    const file = join(dir, 'object');
    await atomicWriteFile(file, 'blob', { tempName: gitTempName });
    expect(await readFile(file, 'utf8')).toBe('blob');
  });
});
