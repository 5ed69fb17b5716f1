/**
 * The Dockerfile builds what `npm run build:image` builds (scripts/build-image.ts): for each image, the
 * same Debian packages, user, entrypoint and command. Parses the Dockerfile's stages; needs no build.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { IMAGE_NAMES, IMAGE_SPECS, PACKAGES } from '../../scripts/build-image.ts';

const ROOT = join(import.meta.dirname, '..', '..');

/** The Dockerfile's stages by name, continuation lines joined. */
async function stages(): Promise<Map<string, string[]>> {
  const text = (await readFile(join(ROOT, 'Dockerfile'), 'utf8')).replace(/\\\n/g, ' ');
  const result = new Map<string, string[]>();
  let current: string[] | undefined;
  for (const line of text.split('\n')) {
    const from = /^FROM\s+\S+\s+AS\s+(\S+)/i.exec(line);
    if (from?.[1]) result.set(from[1], (current = []));
    else if (current && line.trim() && !line.startsWith('#')) current.push(line.trim());
  }
  return result;
}

describe('Dockerfile', () => {
  it('installs the same Debian packages as the build script, image by image', async () => {
    const all = await stages();
    for (const name of IMAGE_NAMES) {
      const stage = all.get(name);
      expect(stage, `a stage '${name}'`).toBeDefined();
      const install = stage!
        .join(' ')
        .match(/apt-get install -y --no-install-recommends ((?:[a-z0-9][a-z0-9.+-]*\s+)+)/);
      expect(install, `${name}: apt-get install`).not.toBeNull();
      expect(install![1]!.trim().split(/\s+/).sort(), name).toEqual([...PACKAGES[name]].sort());
    }
  });

  it('runs the same user, entrypoint and command as the build script', async () => {
    const all = await stages();
    for (const name of IMAGE_NAMES) {
      const stage = all.get(name)!;
      const value = (instruction: string) =>
        stage.find((l) => l.startsWith(`${instruction} `))?.slice(instruction.length + 1);
      expect(value('USER'), name).toBe(IMAGE_SPECS[name].user);
      expect(JSON.parse(value('ENTRYPOINT') ?? 'null'), name).toEqual([
        '/usr/local/bin/node',
        '/opt/peerops/peerops.mjs',
      ]);
      expect(JSON.parse(value('CMD') ?? 'null'), name).toEqual(IMAGE_SPECS[name].cmd);
    }
  });
});
