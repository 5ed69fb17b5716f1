/**
 * The router rules of common/rules/ on routers merged in git: a router whose port range has
 * min > max, or with another router's loopback, is skipped and reported like any invalid manifest.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { GROUP_VERSION, type RouterSpec } from '../../common/schema.ts';
import { createGitStore, type GitStore } from '../../controller/store/git/index.ts';
import { admin, routerSpec } from './fixtures.ts';
import { eventually, git, put } from './git-helpers.ts';

let dir: string;
let store: GitStore;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-store-rules-'));
  store = createGitStore({
    dir: join(dir, 'store.git'),
    logger: pino({ level: 'silent' }),
    pollIntervalMs: 100,
  });
  await store.start();
  await store.createRouter(
    'fra1',
    routerSpec(1, { loopback: { ipv4: '172.20.0.1', ipv6: 'fd00::1' } }),
    admin,
  );
  await git(dir, 'clone', '-q', join(dir, 'store.git'), join(dir, 'work'));
});
afterEach(async () => {
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

const manifest = (name: string, spec: RouterSpec) => ({
  apiVersion: GROUP_VERSION,
  kind: 'Router',
  metadata: { name },
  spec,
});

it("skips merged routers with a port range min > max or another router's loopback; takes the rest", async () => {
  const work = join(dir, 'work');
  await put(work, 'routers/ams1.yaml', manifest('ams1', routerSpec(2, { loopback: { ipv4: '172.20.0.1' } })));
  await put(
    work,
    'routers/lon1.yaml',
    manifest('lon1', routerSpec(3, { portRange: { min: 31000, max: 30000 } })),
  );
  await put(
    work,
    'routers/par1.yaml',
    manifest('par1', routerSpec(4, { portRange: { min: 33000, max: 34000 } })),
  );
  await put(work, 'routers/ok1.yaml', manifest('ok1', routerSpec(5)));
  await git(work, 'add', '.');
  await git(work, 'commit', '-q', '-m', 'Merge pull request #1: four routers');
  await git(work, 'push', '-q', 'origin', 'main');

  await eventually(() => store.getRouter('ok1'));
  expect(store.listRouters().map((r) => r.name)).toEqual(['fra1', 'ok1']);
  expect(store.storage.rejectedManifests()).toEqual([
    'routers/ams1.yaml',
    'routers/lon1.yaml',
    'routers/par1.yaml',
  ]);
});
