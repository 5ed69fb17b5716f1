import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CRD_DIRS, renderCrds } from '../../scripts/gen-crds.ts';
import { ROOT } from './apiserver.ts';

describe('generated CRDs', () => {
  it('are current in crds/ and the chart (regenerated in memory, compared with the files)', async () => {
    const files = renderCrds();
    expect([...files.keys()].sort()).toEqual([
      'peerops.dev_peeringsessions.yaml',
      'peerops.dev_routers.yaml',
      'peerops.dev_routingpolicies.yaml',
    ]);
    for (const dir of CRD_DIRS) {
      for (const [name, text] of files) {
        const onDisk = await readFile(join(ROOT, dir, name), 'utf8');
        expect(onDisk, `${dir}/${name} is stale: run npm run gen:crds`).toBe(text);
      }
    }
  });

  it('are structural: no anyOf, const, $id, default or boolean additionalProperties', () => {
    for (const text of renderCrds().values()) {
      expect(text).not.toMatch(/anyOf|\bconst\b|\$id|default:|additionalProperties: (true|false)/);
      expect(text).not.toMatch(/\\u[0-9a-f]{4}/);
    }
  });
});
