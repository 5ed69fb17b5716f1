import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const node = process.execPath;

describe('peerops executable', () => {
  it('runs on Node 24', () => {
    expect(Number(process.versions.node.split('.')[0])).toBeGreaterThanOrEqual(24);
  });

  it('lists its commands', async () => {
    const { stdout } = await run(node, ['bin/peerops.ts', '--help']);
    expect(stdout).toMatch(/serve/);
    expect(stdout).toMatch(/agent/);
  });

  it('refuses an unknown command with exit status 2', async () => {
    await expect(run(node, ['bin/peerops.ts', 'frobnicate'])).rejects.toMatchObject({ code: 2 });
  });
});
