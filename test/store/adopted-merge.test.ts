/**
 * An adoption that arrives by a merged pull request (docs/gitops.md, "Adopted sessions by pull request"):
 * the manifests `peerops adopt --out` / `--pull-request` write pass `peerops validate`, and the git store
 * takes them as `POST /admin/adoptions` does: marked adopted (by the merge, at its time), awaiting review
 * even where a merge is an approval, and the completed manifest written back with who and when.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { load } from 'js-yaml';
import pino from 'pino';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { sessionManifest } from '../../agent/adopt/manifests.ts';
import type { PlannedSession } from '../../agent/adopt/plan.ts';
import { createGitStore, type GitStore } from '../../controller/store/git/index.ts';
import { admin, routerSpec, wgKey } from './fixtures.ts';
import { eventually, git, put } from './git-helpers.ts';

const run = promisify(execFile);
const quiet = pino({ level: 'silent' });
let dir: string;
let bare: string;
let work: string;
let store: GitStore;

function planned(asn: number, port: number, iface: string): PlannedSession {
  return {
    asn,
    router: 'fra1',
    listenPort: port,
    publicKey: wgKey(),
    endpoint: `peer${asn % 100}.example.net:2${port % 10000}`,
    linkLocal: `fe80::${(asn % 0x10000).toString(16)}`,
    ipv6: `fd42:7:${(asn % 0x10000).toString(16)}::1`,
    mpbgp: true,
    extendedNextHop: true,
    adopted: {
      interface: iface,
      protocols: [`dn42_${asn % 10000}`],
      files: [`/etc/wireguard/${iface}.conf`, `/etc/bird/peers/as${asn}.conf`],
    },
  };
}

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-adopted-merge-'));
  bare = join(dir, 'store.git');
  work = join(dir, 'work');
  store = createGitStore({ dir: bare, logger: quiet, pollIntervalMs: 100 });
  await store.start();
  await store.createRouter('fra1', routerSpec(1), admin);
  // a merge is an approval here: an adopted session must wait for review all the same
  await store.putPolicy('default', { dn42Asn: 4242420000, mergeIsApproval: true }, admin);
  await git(dir, 'clone', '-q', bare, work);
});
afterEach(async () => {
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

it('takes merged adoption manifests awaiting review, marked adopted by the merge', async () => {
  const plan = [planned(4242420101, 31001, 'wg_101'), planned(4242420102, 31002, 'dn42-alice')];
  for (const { path, text } of plan.map(sessionManifest)) await put(work, path, text);
  // what CI runs on the pull request: the real `peerops validate` against the base branch
  await git(work, 'add', '.');
  await git(work, 'commit', '-q', '-m', 'adopt 2 sessions of fra1');
  const validate = await run(
    process.execPath,
    ['bin/peerops.ts', 'validate', '--base', 'origin/main', work],
    {
      cwd: process.cwd(),
    },
  );
  expect(validate.stdout).toContain('sessions/fra1/as4242420101.yaml: ok');
  await git(work, 'push', '-q', 'origin', 'main');
  const merge = (await git(work, 'rev-parse', 'HEAD')).trim();

  const sessions = await eventually(() => {
    const found = store.listSessions({ router: 'fra1' });
    return found.length === 2 && found;
  });
  for (const p of plan) {
    const s = sessions.find((x) => x.spec.asn === p.asn)!;
    expect(s.status).toMatchObject({ code: 3, name: 'PENDING_REVIEW' });
    expect(s.spec).toMatchObject({
      listenPort: p.listenPort,
      adopted: { ...p.adopted, by: `merge ${merge.slice(0, 12)}` },
    });
    expect(Date.parse(s.spec.adopted!.at)).toBeGreaterThan(Date.now() - 60_000);
  }

  // the controller writes who and when back into the manifest, as it does the uuid
  await eventually(async () => (await git(bare, 'log', '-1', '--format=%an', 'main')) === 'controller\n');
  await git(work, 'pull', '-q', '--ff-only');
  const file = load(await readFile(join(work, 'sessions/fra1/as4242420102.yaml'), 'utf8')) as {
    spec: { adopted: Record<string, unknown> };
  };
  const stored = sessions.find((x) => x.spec.asn === 4242420102)!;
  expect(file.spec.adopted).toEqual(stored.spec.adopted);
});
