import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { createGitStore } from '../../controller/store/git/index.ts';
import { storeConformance } from './conformance.ts';

const quiet = pino({ level: 'silent' });

storeConformance('git', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'peerops-store-'));
  const open = async () => {
    const store = createGitStore({ dir: join(dir, 'store.git'), logger: quiet, pollIntervalMs: 200 });
    await store.start();
    return store;
  };
  return { store: await open(), reopen: open, cleanup: () => rm(dir, { recursive: true, force: true }) };
});
