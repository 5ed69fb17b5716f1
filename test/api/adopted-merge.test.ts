/**
 * Adoption manifests merged into the store's repository (docs/gitops.md, "Adopted sessions by pull
 * request") on a real `peerops serve` with a DN42 registry checkout (test/fixtures/dn42-registry): as
 * through `POST /admin/adoptions`, one arrives awaiting review, marked adopted by the merge, and one
 * whose address the registry gives to another network is DISABLED with the keyed reason (the
 * reconciler's judgement), never set up by its agent.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sessionManifest } from '../../agent/adopt/manifests.ts';
import type { ControllerProcess } from '../support/controller-process.ts';
import { startWithRegistry } from '../support/controller-process.ts';
import { plannedSession, routerFields } from './helpers.ts';

const run = promisify(execFile);
const FIXTURE = join(import.meta.dirname, '..', 'fixtures', 'dn42-registry');
const A = 4242420101; // fd00:abcd:e::/48
const C = 4242420103; // no route object: fd00:abcd:e:100::/56 is AS4242420102's

let dir: string;
let controller: ControllerProcess;
let admin: string;

const planned = (asn: number, port: number, iface: string, ipv6: string) =>
  plannedSession(asn, port, iface, { ipv6 });

const git = async (cwd: string, ...args: string[]) =>
  (
    await run('git', args, {
      cwd,
      env: {
        ...process.env,
        GIT_AUTHOR_NAME: 'Reviewer',
        GIT_AUTHOR_EMAIL: 'reviewer@example.org',
        GIT_COMMITTER_NAME: 'Reviewer',
        GIT_COMMITTER_EMAIL: 'reviewer@example.org',
      },
    })
  ).stdout.trim();

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-adopted-merge-api-'));
  controller = await startWithRegistry(dir, FIXTURE);
  admin = await controller.token(4242420000, 'admin');
  const added = await controller.post(admin, '/admin/router', { action: 'add', ...routerFields('fra1') });
  expect(added.status, JSON.stringify(added.body)).toBe(200);
}, 60_000);

afterAll(async () => {
  await controller?.kill();
  await rm(dir, { recursive: true, force: true });
});

it('a merged adoption awaits review; one the registry refuses is DISABLED with the reason', async () => {
  const work = join(dir, 'work');
  await git(dir, 'clone', '-q', join(dir, 'data', 'store.git'), work);
  for (const { path, text } of [
    planned(A, 31001, 'wg_alice', 'fd00:abcd:e::5'),
    planned(C, 31003, 'wg_carol', 'fd00:abcd:e:100::7'),
  ].map(sessionManifest)) {
    await mkdir(dirname(join(work, path)), { recursive: true });
    await writeFile(join(work, path), text);
  }
  await git(work, 'add', '.');
  await git(work, 'commit', '-q', '-m', 'Merge pull request #3: adopt 2 sessions of fra1');
  // through the store's pre-receive hook, which judges the push as `peerops validate` does
  await git(work, 'push', '-q', 'origin', 'main');
  const merge = (await git(work, 'rev-parse', 'HEAD')).slice(0, 12);

  type Listed = {
    asn: number;
    statusName: string;
    adopted: { by: string } | null;
    lastError?: { key?: string };
  };
  const settled = async () => {
    const list = await controller.post(admin, '/admin/session', { action: 'list' });
    const sessions = list.body.sessions as Listed[];
    const carol = sessions.find((s) => s.asn === C);
    return sessions.length === 2 && carol?.statusName === 'DISABLED' ? sessions : undefined;
  };
  let sessions: Listed[] | undefined;
  const deadline = Date.now() + 20_000;
  while (!(sessions = await settled()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  expect(sessions, 'both sessions, the refused one DISABLED').toBeDefined();
  expect(sessions?.find((s) => s.asn === A)).toMatchObject({
    statusName: 'PENDING_REVIEW',
    adopted: { by: `merge ${merge}` },
  });
  expect(sessions?.find((s) => s.asn === C)).toMatchObject({
    statusName: 'DISABLED',
    adopted: { by: `merge ${merge}` },
    lastError: { key: 'lastError.registryRefused' },
  });
}, 60_000);
