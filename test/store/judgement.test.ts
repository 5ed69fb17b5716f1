/**
 * The judgement kept in the parse cache (controller/store/git/parse-cache.ts, follow.ts): a start on the
 * two trees the last run judged takes that run's verdicts (which manifests the rules rejected, and why)
 * instead of comparing every session with the others again; a start on trees that moved since, or
 * without a kept judgement, judges every manifest. Real git, real repository, real restarts.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { GROUP_VERSION } from '../../common/schema.ts';
import { createGitStore, type GitStore } from '../../controller/store/git/index.ts';
import { admin, newSession, queued, routerSpec, user, wgKey } from './fixtures.ts';
import { git, put } from './git-helpers.ts';

const SHARED = 'fd42:77::1';
const CLASH = 'sessions/fra1/as4242420402.yaml';

let dir: string;
let bare: string;
let work: string;
let store: GitStore | undefined;
let lines: { msg?: string; path?: string; errors?: string[] }[];
/** What a start that judged every manifest reported. */
let judgedReport: unknown[];

/** A start, its log lines gathered in `lines`. */
const open = async () => {
  lines = [];
  const logger = pino(
    { level: 'warn' },
    { write: (line: string) => void lines.push(JSON.parse(line) as (typeof lines)[number]) },
  );
  const s = createGitStore({ dir: bare, logger, pollIntervalMs: 60_000 });
  await s.start();
  return s;
};
const restart = async () => {
  await store?.close();
  store = await open();
  return store;
};
const cacheFile = () => join(bare, 'peerops', 'parsed.json');
const cacheDoc = async () =>
  JSON.parse(await readFile(cacheFile(), 'utf8')) as {
    mirrors: { spec: [string]; status: [string] };
    judgement: { spec: string; status: string; rejected: [string, string, unknown[]][] } | null;
  };
const reported = () => lines.filter((l) => l.msg === 'store: invalid manifest in git skipped');

const manifest = (asn: number, ipv6: string) => ({
  apiVersion: GROUP_VERSION,
  kind: 'PeeringSession',
  metadata: { name: `as${asn}-fra1` },
  spec: { asn, router: 'fra1', ipv6, linkLocal: 'fe80::abcd', publicKey: wgKey(), mtu: 1420 },
});
const push = async (message: string) => {
  await git(work, 'add', '-A');
  await git(work, 'commit', '-q', '-m', message);
  await git(work, 'push', '-q', 'origin', 'main');
};

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-judgement-'));
  bare = join(dir, 'store.git');
  work = join(dir, 'work');
  store = await open();
  await store.createRouter('fra1', routerSpec(1), admin);
  await store.createSession(newSession(4242420401, 'fra1', { ipv6: SHARED }), queued, user(4242420401), 'a');
  await git(dir, 'clone', '-q', bare, work);
  // another ASN's session with the same peer address: the rules reject it (it would capture the traffic)
  await put(work, CLASH, manifest(4242420402, SHARED));
  await push('Merge pull request #1');
  await store.close();
  store = await open();
  expect(store.storage.rejectedManifests()).toEqual([CLASH]);
  judgedReport = reported().map((l) => [l.path, l.errors]);
  expect(judgedReport).toEqual([[CLASH, [expect.stringContaining('as4242420401-fra1')]]]);
  await store.close();
  store = undefined;
});
afterEach(async () => {
  await store?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('the judgement in the parse cache', () => {
  it('is saved with the trees it judged and taken by a start on the same trees', async () => {
    const doc = await cacheDoc();
    expect(doc.judgement?.spec).toBe(doc.mirrors.spec[0]);
    expect(doc.judgement?.status).toBe(doc.mirrors.status[0]);
    expect(doc.judgement?.rejected.map(([path]) => path)).toEqual([CLASH]);

    const s = await restart();
    expect(s.storage.rejectedManifests()).toEqual([CLASH]);
    expect(s.listSessions().map((x) => x.name)).toEqual(['as4242420401-fra1']);
    // reported again at the start, as a start that judges it reports it
    expect(reported().map((l) => [l.path, l.errors])).toEqual(judgedReport);

    // Taken, not judged again: a judgement of the same trees that rejected nothing lets the clash in. (The
    // file is the controller's own, 0600 beside the repository, trusted as the repository itself is.)
    await s.close();
    store = undefined;
    await writeFile(cacheFile(), JSON.stringify({ ...doc, judgement: { ...doc.judgement, rejected: [] } }));
    const trusting = await restart();
    expect(trusting.storage.rejectedManifests()).toEqual([]);
    expect(trusting.listSessions().map((x) => x.name)).toEqual(['as4242420401-fra1', 'as4242420402-fra1']);
  });

  it('is not taken when the trees moved while the controller was stopped: every manifest is judged', async () => {
    // the first session leaves while no controller runs: its address is free, the clash is gone
    await git(work, 'pull', '-q', '--ff-only');
    await git(work, 'rm', '-q', 'sessions/fra1/as4242420401.yaml');
    await push('Merge pull request #2: AS4242420401 leaves');
    const s = await restart();
    expect(s.storage.rejectedManifests()).toEqual([]);
    expect(s.listSessions().map((x) => x.name)).toEqual(['as4242420402-fra1']);
    // and the judgement of the new trees is what the file now holds
    const doc = await cacheDoc();
    expect(doc.judgement).toMatchObject({ spec: doc.mirrors.spec[0], rejected: [] });
  });

  it('judges every manifest when the file holds no judgement, and saves one', async () => {
    const doc = await cacheDoc();
    await writeFile(cacheFile(), JSON.stringify({ ...doc, judgement: null }));
    const s = await restart();
    expect(s.storage.rejectedManifests()).toEqual([CLASH]);
    expect(reported().map((l) => l.path)).toEqual([CLASH]);
    expect((await cacheDoc()).judgement?.rejected.map(([path]) => path)).toEqual([CLASH]);
  });
});
