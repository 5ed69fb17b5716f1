/**
 * readTextIfExists and readTextsIfExist (many at once): only a missing file reads as undefined; any other
 * failure (EISDIR here; EACCES as a non-root user) is an error.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readTextIfExists, readTextsIfExist } from '../../common/read-file.ts';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-read-file-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('readTextIfExists', () => {
  it('reads a file, and a missing one as undefined', async () => {
    await writeFile(join(dir, 'a.conf'), 'protocol bgp {}\n');
    expect(await readTextIfExists(join(dir, 'a.conf'))).toBe('protocol bgp {}\n');
    expect(await readTextIfExists(join(dir, 'missing.conf'))).toBeUndefined();
  });

  it('throws for any other failure: a directory in the file\'s place is not "no file"', async () => {
    await mkdir(join(dir, 'dir.conf'));
    await expect(readTextIfExists(join(dir, 'dir.conf'))).rejects.toMatchObject({ code: 'EISDIR' });
  });
});

describe('readTextsIfExist', () => {
  it('reads every file by name, a missing one as undefined, and throws for any other failure', async () => {
    await writeFile(join(dir, 'a.conf'), 'a\n');
    await writeFile(join(dir, 'b.conf'), 'b\n');
    expect([...readTextsIfExist(dir, ['a.conf', 'missing.conf', 'b.conf'])]).toEqual([
      ['a.conf', 'a\n'],
      ['missing.conf', undefined],
      ['b.conf', 'b\n'],
    ]);
    await mkdir(join(dir, 'dir.conf'));
    expect(() => readTextsIfExist(dir, ['dir.conf'])).toThrow(/EISDIR/);
  });
});
