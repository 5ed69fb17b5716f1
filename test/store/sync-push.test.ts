/**
 * The git store's synchronous push mode (docs/gitops.md, "Push modes"; controller/store/git/sync-push.ts)
 * against a real forge, `git http-backend` on loopback:
 * - concurrent writes share pushes (a group commit): fewer pushes than writes, each answered once the
 *   forge holds it;
 * - a write the forge does not take within the wait is FORGE_UNAVAILABLE and taken out of both refs,
 *   while an agent's report committed on top of it meanwhile (not waited for) stays and reaches the forge
 *   once it answers.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isProblem } from '../../common/errors.ts';
import { createGitStore, type GitStore } from '../../controller/store/git/index.ts';
import type { Actor } from '../../controller/store/store.ts';
import { serveGit, type GitHttpServer } from '../support/git-http.ts';
import { admin, newSession, pending, routerSpec, user } from './fixtures.ts';

const run = promisify(execFile);
const quiet = pino({ level: process.env.STORE_TEST_LOG ?? 'silent' });
const agent: Actor = { name: 'agent fra1', role: 'agent' };

let dir: string;
let forge: GitHttpServer;
let store: GitStore;
/** receive-pack POSTs: one per pushed branch. */
let pushes = 0;

const upstream = () => join(dir, 'forge', 'upstream.git');
const onForge = (path: string, ref = 'main') =>
  run('git', ['--git-dir', upstream(), 'show', `${ref}:${path}`]).then(
    (r) => r.stdout,
    () => undefined,
  );

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-sync-push-'));
  await mkdir(join(dir, 'forge'));
  await run('git', ['init', '-q', '--bare', '-b', 'main', upstream()]);
  await run('git', ['--git-dir', upstream(), 'config', 'http.receivepack', 'true']);
  forge = await serveGit(join(dir, 'forge'));
  pushes = 0;
  forge.before = async (req) => {
    if (req.method === 'POST' && req.url?.includes('git-receive-pack')) pushes++;
  };
});

/** The store following the forge, synchronous push with this wait, and router fra1. */
async function open(pushTimeoutMs: number): Promise<void> {
  store = createGitStore({
    dir: join(dir, 'store.git'),
    logger: quiet,
    pollIntervalMs: 100,
    remote: { url: `${forge.url}/upstream.git`, intervalMs: 60_000, pushTimeoutMs },
  });
  await store.start();
  await store.createRouter('fra1', routerSpec(1), admin);
}

afterEach(async () => {
  forge.hanging = false;
  await store?.close();
  await forge.close();
  await rm(dir, { recursive: true, force: true });
});

describe('git store, synchronous push', () => {
  it('answers concurrent writes once the forge holds them, sharing pushes', async () => {
    await open(5000);
    const before = pushes;
    const created = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        store
          .createSession(newSession(64900 + i, 'fra1'), pending, user(64900 + i), 'create')
          .then(async (s) => ({ s, onForge: await onForge(`sessions/fra1/as${64900 + i}.yaml`) })),
      ),
    );
    // each on the forge the moment it was answered
    for (const { s, onForge: text } of created) expect(text).toContain(s.spec.uuid);
    const used = pushes - before;
    console.log(
      `sync push: 20 concurrent creates answered after ${used} pushes (status and spec branch each)`,
    );
    expect(used).toBeLessThan(2 * 20);
  });

  it('takes out a write the forge did not take, keeping an agent report committed on top of it', async () => {
    await open(1000);
    const a = await store.createSession(newSession(64801, 'fra1'), pending, user(64801), 'create a');
    const b = await store.createSession(newSession(64802, 'fra1'), pending, user(64802), 'create b');
    forge.hanging = true;
    const t0 = Date.now();
    const modify = store
      .updateSession(a.spec.uuid, (s) => ({ spec: { ...s.spec, mtu: 1300 } }), user(64801), 'modify a')
      .catch((err: unknown) => err);
    // an agent's report on another session, answered at once, committed after the modify
    await new Promise((r) => setTimeout(r, 100));
    await store.updateSession(
      b.spec.uuid,
      (s) => ({ status: { ...s.status, lastError: { code: 'BGP_DOWN', message: 'reported by the agent' } } }),
      agent,
      'report b',
    );
    const err = await modify;
    expect(isProblem(err, 'FORGE_UNAVAILABLE'), String(err)).toBe(true);
    expect(Date.now() - t0).toBeLessThan(1000 + 1000);
    // nothing of the modify, in memory or on either ref; the report stays
    expect(store.getSession(a.spec.uuid)?.spec.mtu).toBe(1420);
    expect(store.getSession(b.spec.uuid)?.status.lastError?.message).toBe('reported by the agent');
    const gitdir = join(dir, 'store.git');
    const local = (ref: string, path: string) => run('git', ['--git-dir', gitdir, 'show', `${ref}:${path}`]);
    expect((await local('main', 'sessions/fra1/as64801.yaml')).stdout).toContain('mtu: 1420');
    expect((await local('peerops-status', 'sessions/fra1/as64802.yaml')).stdout).toContain(
      'reported by the agent',
    );
    // back up: the report reaches the forge, the modify never does, and a retry goes through
    forge.hanging = false;
    const again = await store.updateSession(
      a.spec.uuid,
      (s) => ({ spec: { ...s.spec, mtu: 1300 } }),
      user(64801),
      'modify a again',
    );
    expect(again?.spec.mtu).toBe(1300);
    expect(await onForge('sessions/fra1/as64801.yaml')).toContain('mtu: 1300');
    expect(await onForge('sessions/fra1/as64802.yaml', 'peerops-status')).toContain('reported by the agent');
    const log = await run('git', ['--git-dir', upstream(), 'log', '--format=%s', 'main']);
    expect(log.stdout.split('\n').filter((s) => s === 'modify a')).toEqual([]);
  });
});
