/** peerops validate applies the router rules of common/rules/: port ranges and loopbacks. */
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { main } from '../../cli/validate.ts';

const good = resolve(import.meta.dirname, '../fixtures/validate/good');

describe('peerops validate: router rules', () => {
  afterEach(() => vi.restoreAllMocks());

  it("reports a port range with min > max and a loopback another router has, in each router's file", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'peerops-validate-'));
    const out: string[] = [];
    vi.spyOn(console, 'log').mockImplementation((...a: unknown[]) => void out.push(a.join(' ')));
    vi.spyOn(console, 'error').mockImplementation(() => undefined);
    try {
      await cp(good, dir, { recursive: true });
      const file = join(dir, 'routers/ams1.yaml');
      const text = (await readFile(file, 'utf8'))
        .replace('ipv6: fd00::2', 'ipv6: fd00::1')
        .replace(/^spec:\n/m, 'spec:\n  portRange:\n    min: 31000\n    max: 30999\n');
      await writeFile(file, text);
      expect(await main([dir])).toBe(1);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    // (other lines, such as a per-file summary, may follow)
    expect(out).toEqual(
      expect.arrayContaining([
        'routers/ams1.yaml: /spec/portRange/min: must be at most max (30999)',
        'routers/ams1.yaml: /spec/loopback/ipv6: fd00::1 is already the loopback of router fra1',
        'routers/fra1.yaml: /spec/loopback/ipv6: fd00::1 is already the loopback of router ams1',
      ]),
    );
  });
});
