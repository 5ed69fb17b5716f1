/**
 * The git store: the conformance suite on it, and what only it does (the repository's files and refs,
 * merges from outside, rejected manifests, the status ref, observations, housekeeping, recovery).
 * Over 500 lines: one back end's own behaviour, each part on the same real repository fixture.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { load } from 'js-yaml';
import pino from 'pino';
import { register } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isProblem } from '../../common/errors.ts';
import { GROUP_VERSION } from '../../common/schema.ts';
import {
  createGitStore,
  STATUS_REF,
  type GitStore,
  type GitStoreOptions,
} from '../../controller/store/git/index.ts';
import { storeConformance } from './conformance.ts';
import { admin, newSession, pending, queued, routerSpec, user, wgKey } from './fixtures.ts';
import { serveGit } from '../support/git-http.ts';
import { eventually, git, put } from './git-helpers.ts';

const quiet = pino({ level: process.env.STORE_TEST_LOG ?? 'silent' });
const execNode = promisify(execFile);

storeConformance('git', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'peerops-store-'));
  const open = async () => {
    const store = createGitStore({ dir: join(dir, 'store.git'), logger: quiet, pollIntervalMs: 200 });
    await store.start();
    return store;
  };
  return { store: await open(), reopen: open, cleanup: () => rm(dir, { recursive: true, force: true }) };
});

async function invalidCount(): Promise<number> {
  const metric = register.getSingleMetric('peerops_store_invalid_manifests_total');
  const values = (await metric?.get())?.values ?? [];
  return values.reduce((sum, v) => sum + v.value, 0);
}

function sessionManifest(asn: number, router: string, spec: Record<string, unknown> = {}) {
  return {
    apiVersion: GROUP_VERSION,
    kind: 'PeeringSession',
    metadata: { name: `as${asn}-${router}` },
    spec: {
      asn,
      router,
      ipv6: `fd42:2:${(asn % 0x10000).toString(16)}::1`,
      linkLocal: 'fe80::abcd',
      publicKey: wgKey(),
      mtu: 1420,
      ...spec,
    },
  };
}

describe('git store: the repository', () => {
  let dir: string;
  let bare: string;
  let work: string;
  let store: GitStore;

  const open = async (extra: Partial<GitStoreOptions> = {}) => {
    const s = createGitStore({ dir: bare, logger: quiet, pollIntervalMs: 100, ...extra });
    await s.start();
    return s;
  };
  /** Reopens the store with a logger whose warnings the test reads. */
  const reopenLogging = async (): Promise<string[]> => {
    const lines: string[] = [];
    await store.close();
    store = createGitStore({
      dir: bare,
      logger: pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) }),
      pollIntervalMs: 100,
    });
    await store.start();
    return lines;
  };

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'peerops-store-git-'));
    bare = join(dir, 'store.git');
    work = join(dir, 'work');
    store = await open();
    await store.createRouter('fra1', routerSpec(1), admin);
    await store.putPolicy(
      'default',
      { dn42Asn: 4242420000, mergeIsApproval: true, blockedAsns: [4242429999] },
      admin,
    );
    await git(dir, 'clone', '-q', bare, work);
  });
  afterEach(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('picks up a merged pull request pushed with git, completes it as the controller, and follows edits', async () => {
    await put(work, 'sessions/fra1/as4242420100.yaml', sessionManifest(4242420100, 'fra1'));
    await git(work, 'add', '.');
    await git(work, 'commit', '-q', '-m', 'Merge pull request #1: AS4242420100 on fra1');
    await git(work, 'push', '-q', 'origin', 'main');

    const [session] = await eventually(() => {
      const found = store.listSessions({ asn: 4242420100 });
      return found.length > 0 && found;
    });
    expect(session?.spec).toMatchObject({ listenPort: 20100, router: 'fra1', linkLocal: 'fe80::abcd' });
    expect(session?.spec.uuid).toMatch(/^[0-9a-f-]{36}$/);
    // policy default says a merge is an approval
    expect(session?.status).toMatchObject({ code: 4, name: 'QUEUED_FOR_SETUP' });

    // the allocated fields are committed into the spec file by the controller
    await eventually(async () => (await git(bare, 'log', '-1', '--format=%an', 'main')) === 'controller\n');
    await git(work, 'pull', '-q', '--ff-only');
    const file = load(await readFile(join(work, 'sessions/fra1/as4242420100.yaml'), 'utf8')) as {
      spec: Record<string, unknown>;
    };
    expect(file.spec).toMatchObject({ uuid: session?.spec.uuid, listenPort: 20100 });
    expect(await git(bare, 'log', '-1', '--format=%an', 'main')).toBe('controller\n');

    // an edit in a later pull request is applied to the same session
    await put(work, 'sessions/fra1/as4242420100.yaml', { ...file, spec: { ...file.spec, mtu: 1380 } });
    await git(work, 'commit', '-q', '-am', 'Merge pull request #2: lower mtu');
    await git(work, 'push', '-q', 'origin', 'main');
    await eventually(() => store.getSession(session?.spec.uuid ?? '')?.spec.mtu === 1380);
    expect(store.getSession(session?.spec.uuid ?? '')?.status.code).toBe(4);

    // and a removal too
    await git(work, 'rm', '-q', 'sessions/fra1/as4242420100.yaml');
    await git(work, 'commit', '-q', '-m', 'Merge pull request #3: remove');
    await git(work, 'push', '-q', 'origin', 'main');
    await eventually(() => store.listSessions().length === 0);
  });

  it('reports and skips malformed manifests while everything else keeps working', async () => {
    const before = await invalidCount();
    // fra1's own policy blocks one more ASN, added to the default's list (which still applies)
    await store.putPolicy('fra1', { blockedAsns: [4242420207] }, admin);
    await git(work, 'pull', '-q', '--ff-only');
    await put(work, 'sessions/fra1/as4242420207.yaml', sessionManifest(4242420207, 'fra1'));
    await put(work, 'sessions/fra1/as4242420201.yaml', 'spec: [unclosed\n  : :');
    await put(work, 'sessions/fra1/as4242420202.yaml', sessionManifest(4242420202, 'fra1', { mtu: 99999 }));
    await put(work, 'sessions/fra1/as4242420203.yaml', sessionManifest(4242420299, 'fra1'));
    await put(work, 'sessions/nope/as4242420204.yaml', sessionManifest(4242420204, 'nope'));
    await put(work, 'sessions/fra1/as4242429999.yaml', sessionManifest(4242429999, 'fra1'));
    await put(work, 'sessions/fra1/as4242420205.yaml', sessionManifest(4242420205, 'fra1'));
    await put(work, 'README.md', '# not a manifest\n');
    await git(work, 'add', '.');
    await git(work, 'commit', '-q', '-m', 'Merge a bad pull request');
    await git(work, 'push', '-q', 'origin', 'main');

    await eventually(() => store.listSessions({ asn: 4242420205 }).length === 1);
    expect(store.listSessions()).toHaveLength(1);
    expect(await invalidCount()).toBe(before + 6);
    expect(store.storage.rejectedManifests()).toEqual([
      'sessions/fra1/as4242420201.yaml',
      'sessions/fra1/as4242420202.yaml',
      'sessions/fra1/as4242420203.yaml',
      'sessions/fra1/as4242420207.yaml',
      'sessions/fra1/as4242429999.yaml',
      'sessions/nope/as4242420204.yaml',
    ]);
    // the store goes on working, and does not report the same files again on the next change
    const s = await store.createSession(newSession(4242420206, 'fra1'), pending, user(4242420206), 'create');
    expect(store.getSession(s.spec.uuid)).toBeDefined();
    await store.createRouter('nope', routerSpec(7), admin);
    // the session for router nope now validates
    await eventually(() => store.listSessions({ asn: 4242420204 }).length === 1);
    expect(await invalidCount()).toBe(before + 6);
  });

  it('refuses merged sessions whose addresses the API refuses at create, and applies them once the conflict is gone', async () => {
    await store.createRouter('ams1', routerSpec(2, { loopback: { ipv4: '172.20.0.2' } }), admin);
    await store.putPolicy(
      'default',
      {
        dn42Asn: 4242420000,
        mergeIsApproval: true,
        peerAddressRanges: { ipv6: ['fd00::/8'] },
        ownPrefixes: { ipv6: ['fd42:4242::/48'] },
      },
      admin,
    );
    await git(work, 'pull', '-q', '--ff-only');
    const shared = 'fd42:77::1';
    const before = await invalidCount();
    await put(work, 'sessions/fra1/as4242420401.yaml', sessionManifest(4242420401, 'fra1', { ipv6: shared }));
    // the same ASN may use its address on another router
    await put(work, 'sessions/ams1/as4242420401.yaml', sessionManifest(4242420401, 'ams1', { ipv6: shared }));
    // another ASN with that address would capture AS4242420401's traffic
    await put(work, 'sessions/fra1/as4242420402.yaml', sessionManifest(4242420402, 'fra1', { ipv6: shared }));
    // a router's loopback (the iBGP mesh), the network's own prefix, outside the peer ranges
    await put(
      work,
      'sessions/fra1/as4242420403.yaml',
      sessionManifest(4242420403, 'fra1', { ipv6: 'fd00::1' }),
    );
    const ipv4 = { ipv4: '172.20.0.2', mpbgp: false, extendedNextHop: false };
    await put(work, 'sessions/fra1/as4242420404.yaml', sessionManifest(4242420404, 'fra1', ipv4));
    await put(
      work,
      'sessions/fra1/as4242420405.yaml',
      sessionManifest(4242420405, 'fra1', { ipv6: 'fd42:4242::5' }),
    );
    await put(
      work,
      'sessions/fra1/as4242420406.yaml',
      sessionManifest(4242420406, 'fra1', { ipv6: '2001:db8::6' }),
    );
    // fra1's own link-local
    await put(
      work,
      'sessions/fra1/as4242420407.yaml',
      sessionManifest(4242420407, 'fra1', { linkLocal: 'fe80::1' }),
    );
    await git(work, 'add', '.');
    await git(work, 'commit', '-q', '-m', 'Merge pull requests #10-#16');
    await git(work, 'push', '-q', 'origin', 'main');

    await eventually(() => store.listSessions({ asn: 4242420401 }).length === 2);
    expect(store.listSessions().map((s) => s.name)).toEqual(['as4242420401-ams1', 'as4242420401-fra1']);
    expect(store.storage.rejectedManifests()).toEqual([
      'sessions/fra1/as4242420402.yaml',
      'sessions/fra1/as4242420403.yaml',
      'sessions/fra1/as4242420404.yaml',
      'sessions/fra1/as4242420405.yaml',
      'sessions/fra1/as4242420406.yaml',
      'sessions/fra1/as4242420407.yaml',
    ]);
    expect(await invalidCount()).toBe(before + 6);

    // a restart judges the same files the same way
    await store.close();
    store = await open();
    expect(store.listSessions().map((s) => s.name)).toEqual(['as4242420401-ams1', 'as4242420401-fra1']);
    expect(store.storage.rejectedManifests()).toHaveLength(6);

    // once AS4242420401 leaves fra1, the address is free there and AS4242420402's session applies
    await git(work, 'pull', '-q', '--ff-only');
    await git(work, 'rm', '-q', 'sessions/fra1/as4242420401.yaml', 'sessions/ams1/as4242420401.yaml');
    await git(work, 'commit', '-q', '-m', 'Merge pull request #17: AS4242420401 leaves');
    await git(work, 'push', '-q', 'origin', 'main');
    await eventually(() => store.listSessions({ asn: 4242420402 }).length === 1);
    expect(store.listSessions({ asn: 4242420402 })[0]?.spec.ipv6).toBe(shared);
  });

  it('keeps the audit log: author and message of each write', async () => {
    const s = await store.createSession(
      newSession(4242420300, 'fra1'),
      pending,
      user(4242420300),
      'create session AS4242420300 on fra1',
    );
    await store.updateSession(
      s.spec.uuid,
      () => ({ status: queued }),
      admin,
      'approve as4242420300-fra1: looks good',
    );
    const log = await git(bare, 'log', '--format=%an <%ae>|%s', 'main');
    expect(log.split('\n').slice(0, 3)).toEqual([
      'AS4242420300 <as4242420300@peerops.invalid>|create session AS4242420300 on fra1',
      'admin AS4242420000 <admin-as4242420000@peerops.invalid>|set policy default',
      'admin AS4242420000 <admin-as4242420000@peerops.invalid>|add router fra1',
    ]);
    const statusLog = await git(bare, 'log', '--format=%an|%s|%b', STATUS_REF);
    expect(statusLog).toContain(
      'admin AS4242420000|approve as4242420300-fra1: looks good|Peerops-Actor: admin AS4242420000',
    );
    // a message cannot forge trailers or lines of its own: control characters are flattened
    await store.updateSession(
      s.spec.uuid,
      (c) => ({ spec: { ...c.spec, mtu: 1400 } }),
      user(4242420300),
      'x\u0000y\u001b[31m',
    );
    expect(await git(bare, 'log', '-1', '--format=%s', 'main')).toBe('x y [31m\n');
    await store.updateSession(
      s.spec.uuid,
      (c) => ({ spec: { ...c.spec, mtu: 1410 } }),
      user(4242420300),
      'modify\n\nPeerops-Actor: admin AS1\nPeerops-Role: admin',
    );
    const trailers = await git(bare, 'log', '-1', '--format=%(trailers:key=Peerops-Actor,valueonly)', 'main');
    expect(trailers.trim()).toBe('AS4242420300');
    expect(await git(bare, 'log', '-1', '--format=%s', 'main')).toBe(
      'modify  Peerops-Actor: admin AS1 Peerops-Role: admin\n',
    );
  });

  it('writes status on the status ref only, and observations to the observation file, not into git', async () => {
    const s = await store.createSession(newSession(4242420400, 'fra1'), queued, admin, 'c');
    const specHead = await git(bare, 'rev-parse', 'main');
    const statusCommits = Number(await git(bare, 'rev-list', '--count', STATUS_REF));
    await store.updateSession(
      s.spec.uuid,
      (c) => ({ status: { ...c.status, code: 1, name: 'ACTIVE' } }),
      admin,
      'up',
    );
    const objects = await git(bare, 'count-objects');
    for (let i = 0; i < 100; i++) {
      store.recordSessionMetrics(s.spec.uuid, {
        rtt: i,
        rxBytes: i,
        txBytes: i,
        routesImported: 1,
        at: new Date().toISOString(),
      });
      store.recordRouterStatus('fra1', { uptime: i, lastHeartbeat: new Date().toISOString() });
      await store.flushObservations();
    }
    // 100 flushes of observations: not one commit, not one object more in the repository
    expect(await git(bare, 'rev-parse', 'main')).toBe(specHead);
    expect(Number(await git(bare, 'rev-list', '--count', STATUS_REF))).toBe(statusCommits + 1);
    expect(await git(bare, 'count-objects')).toBe(objects);
    const statusFile = load(
      await git(bare, 'show', `${STATUS_REF}:sessions/fra1/as4242420400.yaml`),
    ) as Record<string, unknown>;
    expect(Object.keys(statusFile).sort()).toEqual(['status', 'uuid']);
    expect(statusFile.status).toMatchObject({ code: 1, name: 'ACTIVE' });
    expect(statusFile.status).not.toHaveProperty('metrics');
    const specFile = load(await git(bare, 'show', 'main:sessions/fra1/as4242420400.yaml')) as Record<
      string,
      unknown
    >;
    expect(specFile.status).toBeUndefined();
    // every status commit touches only status files, never the spec branch's history
    const shared = await git(bare, 'merge-base', '--all', 'main', STATUS_REF).catch(() => '');
    expect(shared).toBe('');

    const file = join(bare, 'peerops', 'observations.json');
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    const observed = JSON.parse(await readFile(file, 'utf8')) as {
      sessions: Record<string, { rtt: number }>;
      routers: Record<string, { uptime: number }>;
    };
    expect(observed.sessions[s.spec.uuid]?.rtt).toBe(99);
    expect(observed.routers.fra1?.uptime).toBe(99);
    // a restart restores them
    await store.close();
    store = await open();
    expect(store.getSession(s.spec.uuid)?.status).toMatchObject({ code: 1, metrics: { rtt: 99 } });
    expect(store.getRouter('fra1')?.status.uptime).toBe(99);
  });

  it('commits a changed mesh key to the status ref, alone, at the next flush', async () => {
    const key = wgKey();
    for (let i = 0; i < 3; i++) {
      store.recordRouterStatus('fra1', { meshPublicKey: key, uptime: i, agentVersion: '1.2.3' });
      await store.flushObservations();
    }
    expect(Number(await git(bare, 'rev-list', '--count', STATUS_REF))).toBe(1);
    const file = load(await git(bare, 'show', `${STATUS_REF}:routers/fra1.yaml`)) as { status: unknown };
    expect(file.status).toEqual({ meshPublicKey: key });
    await store.close();
    store = await open();
    expect(store.getRouter('fra1')?.status).toEqual({ meshPublicKey: key, uptime: 2, agentVersion: '1.2.3' });
  });

  it("commits many routers' new mesh keys in one commit, their files made over several turns", async () => {
    const names = Array.from({ length: 120 }, (_, i) => `r${i + 2}`);
    for (const [i, name] of names.entries())
      await store.createRouter(name, routerSpec(i + 2, { loopback: { ipv6: `fd00::1:${i + 2}` } }), admin);
    const keys = new Map(names.map((name) => [name, wgKey()]));
    for (const [name, key] of keys) store.recordRouterStatus(name, { meshPublicKey: key });
    // the status ref exists once something was committed to it
    const commits = () => git(bare, 'rev-list', '--count', STATUS_REF).then(Number, () => 0);
    const before = await commits();
    await store.flushObservations();
    expect(await commits()).toBe(before + 1);
    await store.close();
    store = await open();
    for (const [name, key] of keys) expect(store.getRouter(name)?.status.meshPublicKey).toBe(key);
  });

  it('flushes observations on its own timer', async () => {
    await store.close();
    store = await open({ observationFlushMs: 100 });
    store.recordRouterStatus('fra1', { uptime: 1 });
    store.recordRouterStatus('fra1', { uptime: 2 });
    const file = join(bare, 'peerops', 'observations.json');
    const observed = await eventually(async () =>
      readFile(file, 'utf8').then(
        (text) => JSON.parse(text) as { routers: Record<string, unknown> },
        () => undefined,
      ),
    );
    expect(observed.routers.fra1).toEqual({ uptime: 2 });
  });

  it('reads observations an older release committed to the status ref, and keeps them', async () => {
    const s = await store.createSession(newSession(4242420410, 'fra1'), queued, admin, 'c');
    await store.close();
    const metrics = { rtt: 7, rxBytes: 1, txBytes: 2, routesImported: 3, at: '2026-01-01T00:00:00.000Z' };
    await git(dir, 'clone', '-q', '-b', 'peerops-status', bare, join(dir, 'status'));
    const sessionFile = join(dir, 'status', 'sessions', 'fra1', 'as4242420410.yaml');
    const old = load(await readFile(sessionFile, 'utf8')) as { uuid: string; status: object };
    await put(join(dir, 'status'), 'sessions/fra1/as4242420410.yaml', {
      uuid: old.uuid,
      status: { ...old.status, metrics },
    });
    await put(join(dir, 'status'), 'routers/fra1.yaml', { status: { uptime: 5, agentVersion: '0.9.0' } });
    await git(join(dir, 'status'), 'add', '.');
    await git(join(dir, 'status'), 'commit', '-q', '-m', 'observations: 1 session(s), 1 router(s)');
    await git(join(dir, 'status'), 'push', '-q', 'origin', 'peerops-status');
    store = await open();
    expect(store.getSession(s.spec.uuid)?.status.metrics).toEqual(metrics);
    expect(store.getRouter('fra1')?.status).toEqual({ uptime: 5, agentVersion: '0.9.0' });
    store.recordRouterStatus('fra1', { uptime: 6 });
    await store.close();
    // the router's file, which held nothing else, is gone from the status ref after the first flush
    expect(await git(bare, 'ls-tree', '-r', '--name-only', STATUS_REF, 'routers')).toBe('');
    store = await open();
    expect(store.getRouter('fra1')?.status).toEqual({ uptime: 6, agentVersion: '0.9.0' });
    expect(store.getSession(s.spec.uuid)?.status.metrics).toEqual(metrics);
  });

  it('starts without observations when their file is damaged, and writes a good one at the next flush', async () => {
    store.recordRouterStatus('fra1', { uptime: 3 });
    await store.close();
    const file = join(bare, 'peerops', 'observations.json');
    await writeFile(file, '{"format":1,"routers":{"fra1":{"uptime":-1}},"sessions":');
    store = await open();
    expect(store.getRouter('fra1')?.status).toEqual({});
    await writeFile(
      file,
      JSON.stringify({ format: 1, routers: { fra1: { uptime: -1 }, ams9: { uptime: 1 } } }),
    );
    await store.close();
    store = await open();
    // the invalid entry is left out; a router that no longer exists is ignored
    expect(store.getRouter('fra1')?.status).toEqual({});
    store.recordRouterStatus('fra1', { uptime: 4 });
    await store.flushObservations();
    expect(JSON.parse(await readFile(file, 'utf8'))).toEqual({
      format: 1,
      sessions: {},
      routers: { fra1: { uptime: 4 } },
    });
  });

  it('packs its loose objects with git gc --auto beside its writes, and reads everything back from the packs', async () => {
    // git estimates the loose objects from the directory objects/17 alone: with gc.auto 1, two files there
    // are enough (git's default is 6,700 objects)
    await git(bare, 'config', 'gc.auto', '1');
    const loose17 = () =>
      readdir(join(bare, 'objects', '17')).then(
        (f) => f.length,
        () => 0,
      );
    for (let i = 0; i < 400 && (await loose17()) < 2; i++)
      await store.createSession(newSession(64000 + i, 'fra1'), pending, user(64000 + i), `create ${i}`);
    const counts = async () =>
      Object.fromEntries(
        (await git(bare, 'count-objects', '-v'))
          .trim()
          .split('\n')
          .map((l) => l.split(': ')),
      ) as Record<string, string>;
    const loose = Number((await counts()).count);
    expect(loose).toBeGreaterThan(2);
    /** The ids of the loose objects (objects/<2 hex>/<38 hex>). */
    const looseIds = async () => {
      const dirs = (await readdir(join(bare, 'objects'))).filter((d) => /^[0-9a-f]{2}$/.test(d));
      const ids = await Promise.all(
        dirs.map(async (d) => (await readdir(join(bare, 'objects', d))).map((f) => d + f)),
      );
      return ids.flat();
    };
    const looseBefore = new Set(await looseIds());
    // writes go on while git packs
    await Promise.all([
      store.storage.housekeep(),
      ...[1, 2, 3].map((i) =>
        store.createSession(newSession(65000 + i, 'fra1'), pending, user(65000 + i), `during gc ${i}`),
      ),
    ]);
    const packed = await counts();
    expect(Number(packed['in-pack'])).toBeGreaterThanOrEqual(loose);
    // what is still loose is only what the three writes beside gc added (their number depends on when
    // gc ran, so the objects are compared, not the counts)
    expect((await looseIds()).filter((id) => looseBefore.has(id))).toEqual([]);
    await git(bare, 'fsck', '--strict', '--no-dangling');
    const view = () => ({ routers: store.listRouters(), sessions: store.listSessions() });
    const before = view();
    expect(before.sessions.filter((x) => x.spec.asn > 65000)).toHaveLength(3);
    // a restart without the parse cache reads every blob again, now from the pack
    await store.close();
    await rm(join(bare, 'peerops', 'parsed.json'));
    store = await open();
    expect(view()).toEqual(before);
    await store.createSession(newSession(65100, 'fra1'), pending, user(65100), 'after gc');
    expect(store.listSessions()).toHaveLength(before.sessions.length + 1);
  });

  it('warns once and goes on when git is not installed for housekeeping', async () => {
    const lines = await reopenLogging();
    const path = process.env.PATH;
    process.env.PATH = join(dir, 'no-programs-here');
    try {
      await store.storage.housekeep();
      await store.storage.housekeep();
    } finally {
      process.env.PATH = path;
    }
    const warnings = lines.filter((l) => l.includes('no housekeeping'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('the git program is not installed');
    await store.createSession(newSession(64990, 'fra1'), pending, user(64990), 'still writes');
  });

  it('keeps observations and mesh keys for the next flush when writing them fails, and writes nothing half', async () => {
    const file = join(bare, 'peerops', 'observations.json');
    store.recordRouterStatus('fra1', { uptime: 1 });
    await store.flushObservations();
    const before = await readFile(file, 'utf8');
    // the file cannot be replaced (a directory in its place): the old one stays, no temp file is left
    await rm(file);
    await mkdir(file);
    store.recordRouterStatus('fra1', { uptime: 2 });
    await expect(store.flushObservations()).rejects.toThrow();
    expect((await readdir(join(bare, 'peerops'))).filter((f) => f.endsWith('.tmp'))).toEqual([]);
    await rm(file, { recursive: true });
    await writeFile(file, before);
    await store.flushObservations();
    expect(JSON.parse(await readFile(file, 'utf8')).routers.fra1).toEqual({ uptime: 2 });
    // the status ref locked (a push holds it): the new mesh key is not committed, then is at the next flush
    const key = wgKey();
    const statusHead = () => git(bare, 'rev-parse', '--verify', '-q', STATUS_REF).catch(() => 'none');
    const headBefore = await statusHead();
    const lock = join(bare, 'refs', 'heads', 'peerops-status.lock');
    await writeFile(lock, '', { flag: 'wx' });
    store.recordRouterStatus('fra1', { meshPublicKey: key });
    const failed = await store.flushObservations().catch((e: unknown) => e);
    expect(isProblem(failed, 'STORE_UNAVAILABLE')).toBe(true);
    expect(await statusHead()).toBe(headBefore);
    await rm(lock);
    await store.flushObservations();
    const committed = load(await git(bare, 'show', `${STATUS_REF}:routers/fra1.yaml`)) as { status: unknown };
    expect(committed.status).toEqual({ meshPublicKey: key });
  });

  it('warns when git gc fails, and goes on', async () => {
    const lines = await reopenLogging();
    await git(bare, 'config', 'gc.auto', 'not-a-number');
    await store.storage.housekeep();
    expect(lines.filter((l) => l.includes('housekeeping failed'))).toHaveLength(1);
    expect(lines.join('')).toContain('gc.auto');
    await git(bare, 'config', '--unset', 'gc.auto');
    await store.createSession(newSession(64991, 'fra1'), pending, user(64991), 'still writes');
  });

  it('keeps writes and concurrent pushes apart: nothing lost on either side', async () => {
    const writes = Array.from({ length: 20 }, (_, i) =>
      store.createSession(newSession(64700 + i, 'fra1'), pending, user(64700 + i), `create ${i}`),
    );
    await put(work, 'sessions/fra1/as4242420500.yaml', sessionManifest(4242420500, 'fra1'));
    await git(work, 'add', '.');
    await git(work, 'commit', '-q', '-m', 'Merge pull request #5');
    let pushed = false;
    for (let i = 0; i < 200 && !pushed; i++) {
      // a push races the store's 20 writes; a rejected (non-fast-forward) push is retried like a person
      // would, and goes through at the latest once the store is quiet
      pushed = await git(work, 'push', '-q', 'origin', 'main').then(
        () => true,
        async () => {
          await git(work, 'pull', '-q', '--rebase');
          return false;
        },
      );
    }
    expect(pushed).toBe(true);
    await Promise.all(writes);
    await eventually(() => store.listSessions().length === 21);
    const tree = await git(bare, 'ls-tree', '-r', '--name-only', 'main', 'sessions/fra1');
    expect(tree.trim().split('\n')).toHaveLength(21);
    // fsck on a quiet repository: the store may still be completing the merged file, and a commit
    // written between fsck's object scan and its ref scan reads as "missing" (seen once in CI)
    await store.close();
    expect(await git(bare, 'fsck', '--no-progress', '--no-dangling')).toBe('');
  });

  it('keeps the uuid it gave a session from git when completing the spec file had to wait', async () => {
    await store.close();
    await put(work, 'sessions/fra1/as4242420900.yaml', sessionManifest(4242420900, 'fra1'));
    await git(work, 'add', '.');
    await git(work, 'commit', '-q', '-m', 'Merge pull request #9');
    await git(work, 'push', '-q', 'origin', 'main');
    // a push holding the branch lock: the store cannot commit the allocated fields now
    const lock = join(bare, 'refs', 'heads', 'main.lock');
    await writeFile(lock, '', { flag: 'wx' });
    store = await open({ pollIntervalMs: 60000 });
    const [first] = store.listSessions({ asn: 4242420900 });
    expect(first?.spec.uuid).toMatch(/^[0-9a-f-]{36}$/);
    const specFile = () => git(bare, 'show', 'main:sessions/fra1/as4242420900.yaml');
    expect(await specFile()).not.toContain('uuid');
    await store.close();
    await rm(lock);
    // a restart recovers the uuid from the status file, and now completes the spec file with it
    store = await open();
    expect(store.listSessions({ asn: 4242420900 })[0]?.spec.uuid).toBe(first?.spec.uuid);
    expect(await specFile()).toContain(`uuid: ${first?.spec.uuid}`);
  });

  it('reloads exactly the same state after the controller process restarts', async () => {
    await store.close();
    const script = join(import.meta.dirname, 'restart-writer.ts');
    const { stdout } = await execNode(process.execPath, [script, bare], { timeout: 30000 });
    const written = JSON.parse(stdout) as unknown;
    store = await open();
    const view = () => ({
      routers: store.listRouters(),
      sessions: store.listSessions(),
      policies: store.listPolicies(),
    });
    expect(view()).toEqual(written);
    // the same without the parse cache: everything read from the blobs again
    await store.close();
    await rm(join(bare, 'peerops', 'parsed.json'));
    store = await open();
    expect(view()).toEqual(written);
  });
});

describe('git store: a remote', () => {
  let dir: string;
  let http: Awaited<ReturnType<typeof serveGit>>;
  let store: GitStore;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'peerops-store-remote-'));
    await git(dir, 'init', '-q', '--bare', '-b', 'main', 'upstream.git');
    await git(join(dir, 'upstream.git'), 'config', 'http.receivepack', 'true');
    http = await serveGit(dir);
  });
  afterEach(async () => {
    await store?.close();
    await http.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function commitAndPush(work: string, path: string, doc: object, message: string) {
    await put(work, path, doc);
    await git(work, 'add', '.');
    await git(work, 'commit', '-q', '-m', message);
    await git(work, 'push', '-q', 'origin', 'main');
  }
  const upstreamFiles = async () =>
    (await git(join(dir, 'upstream.git'), 'ls-tree', '-r', '--name-only', 'main')).trim().split('\n').sort();

  it('follows the remote and pushes its own commits back, so the remote holds the whole truth', async () => {
    const work = join(dir, 'work');
    await git(dir, 'clone', '-q', join(dir, 'upstream.git'), work);
    const fra1 = routerSpec(1);
    await commitAndPush(
      work,
      'routers/fra1.yaml',
      { apiVersion: GROUP_VERSION, kind: 'Router', metadata: { name: 'fra1' }, spec: fra1 },
      'add fra1',
    );
    http.auth = { username: 'x-access-token', password: 'secret-token-1' };
    store = createGitStore({
      dir: join(dir, 'store.git'),
      logger: quiet,
      pollIntervalMs: 100,
      remote: { url: `${http.url}/upstream.git`, intervalMs: 200, credentials: { ...http.auth } },
    });
    await store.start();
    await eventually(() => store.getRouter('fra1'));
    expect(store.getRouter('fra1')?.spec.uuid).toBe(fra1.uuid);

    // an API write lands on the remote's branch, with its author
    const own = await store.createSession(newSession(64800, 'fra1'), pending, user(64800), 'create');
    await eventually(async () => (await upstreamFiles()).includes('sessions/fra1/as64800.yaml'));
    expect(await git(join(dir, 'upstream.git'), 'log', '-1', '--format=%an', 'main')).toContain('AS64800');
    // and the status on its own branch
    await eventually(async () =>
      (
        await git(join(dir, 'upstream.git'), 'ls-tree', '-r', '--name-only', 'peerops-status').catch(() => '')
      ).includes('sessions/fra1/as64800.yaml'),
    );

    // a person merges on the remote: the store follows
    http.auth = undefined;
    await git(work, 'pull', '-q', '--rebase', 'origin', 'main');
    await commitAndPush(
      work,
      'sessions/fra1/as4242420600.yaml',
      sessionManifest(4242420600, 'fra1'),
      'Merge #6',
    );
    await eventually(() => store.listSessions({ asn: 4242420600 }).length === 1);
    expect(store.getSession(own.spec.uuid)).toBeDefined();
    // the fields the store fills in (uuid, port, createdAt) are pushed back too
    await eventually(async () =>
      (await git(join(dir, 'upstream.git'), 'show', 'main:sessions/fra1/as4242420600.yaml')).includes(
        'uuid:',
      ),
    );
    expect(await upstreamFiles()).toEqual([
      'routers/fra1.yaml',
      'sessions/fra1/as4242420600.yaml',
      'sessions/fra1/as64800.yaml',
    ]);
  });

  it('rebuilds its write on the new tip when a merge lands between its fetch and its push', async () => {
    const work = join(dir, 'work');
    await git(dir, 'clone', '-q', join(dir, 'upstream.git'), work);
    await commitAndPush(
      work,
      'routers/fra1.yaml',
      { apiVersion: GROUP_VERSION, kind: 'Router', metadata: { name: 'fra1' }, spec: routerSpec(1) },
      'add fra1',
    );
    store = createGitStore({
      dir: join(dir, 'store.git'),
      logger: quiet,
      pollIntervalMs: 100,
      remote: { url: `${http.url}/upstream.git`, intervalMs: 60_000 },
    });
    await store.start();
    await eventually(() => store.getRouter('fra1'));
    // the person's merge lands right before the store's push reaches the remote
    let raced = false;
    http.before = async (req) => {
      if (raced || req.method !== 'POST' || !req.url?.includes('git-receive-pack')) return;
      raced = true;
      await commitAndPush(
        work,
        'sessions/fra1/as4242420601.yaml',
        sessionManifest(4242420601, 'fra1'),
        'Merge #7',
      );
    };
    await store.createSession(newSession(64801, 'fra1'), pending, user(64801), 'create');
    await eventually(async () => (await upstreamFiles()).length === 3);
    expect(raced).toBe(true);
    expect(await upstreamFiles()).toEqual([
      'routers/fra1.yaml',
      'sessions/fra1/as4242420601.yaml',
      'sessions/fra1/as64801.yaml',
    ]);
    // linear history: the store's commit rebuilt on the merge, no merge commit
    expect(await git(join(dir, 'upstream.git'), 'log', '--merges', '--format=%s', 'main')).toBe('');
    await eventually(() => store.listSessions({ asn: 4242420601 }).length === 1);
  });
});

describe('git store: the ref lock', () => {
  let dir: string;
  let store: GitStore;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'peerops-store-lock-'));
    store = createGitStore({ dir: join(dir, 'store.git'), logger: quiet, pollIntervalMs: 100 });
    await store.start();
    await store.createRouter('fra1', routerSpec(1), admin);
  });
  afterEach(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('waits for a push holding the branch lock, then writes', async () => {
    const lock = join(dir, 'store.git', 'refs', 'heads', 'main.lock');
    await writeFile(lock, '', { flag: 'wx' });
    const creating = store.createSession(newSession(4242420800, 'fra1'), pending, user(4242420800), 'c');
    await new Promise((r) => setTimeout(r, 300));
    await rm(lock);
    const s = await creating;
    expect(store.getSession(s.spec.uuid)).toBeDefined();
    expect(await git(join(dir, 'store.git'), 'ls-tree', '--name-only', '-r', 'main', 'sessions')).toBe(
      'sessions/fra1/as4242420800.yaml\n',
    );
  });

  it('answers STORE_UNAVAILABLE when the lock stays taken, and changes nothing', async () => {
    const lock = join(dir, 'store.git', 'refs', 'heads', 'main.lock');
    await writeFile(lock, '', { flag: 'wx' });
    const err = await store
      .createSession(newSession(4242420801, 'fra1'), pending, user(4242420801), 'c')
      .catch((e: unknown) => e);
    expect(isProblem(err, 'STORE_UNAVAILABLE')).toBe(true);
    expect(store.listSessions()).toEqual([]);
    await rm(lock);
    await store.createSession(newSession(4242420801, 'fra1'), pending, user(4242420801), 'c');
    expect(store.listSessions()).toHaveLength(1);
  });

  it('refuses a write whole while the status ref stays locked: STORE_UNAVAILABLE, neither ref moved', async () => {
    const bare = join(dir, 'store.git');
    const lock = join(bare, 'refs', 'heads', 'peerops-status.lock');
    const specHead = await git(bare, 'rev-parse', 'main');
    await writeFile(lock, '', { flag: 'wx' });
    const failed = await store
      .createSession(newSession(4242420802, 'fra1'), queued, admin, 'c')
      .catch((e: unknown) => e);
    expect(isProblem(failed, 'STORE_UNAVAILABLE')).toBe(true);
    // every lock is taken before the first ref moves: the spec did not move, no journal is left
    expect(await git(bare, 'rev-parse', 'main')).toBe(specHead);
    await expect(readFile(join(bare, 'peerops', 'journal.json'))).rejects.toThrow(/ENOENT/);
    expect(store.listSessions()).toEqual([]);
    await rm(lock);
    const s = await store.createSession(newSession(4242420802, 'fra1'), queued, admin, 'c again');
    expect(await git(bare, 'show', `${STATUS_REF}:sessions/fra1/as4242420802.yaml`)).toContain(
      `uuid: ${s.spec.uuid}`,
    );
  });

  it('refuses a modify whole while the status ref stays locked: the spec and the status as they were', async () => {
    const bare = join(dir, 'store.git');
    const s = await store.createSession(newSession(4242420805, 'fra1'), queued, admin, 'c');
    const lock = join(bare, 'refs', 'heads', 'peerops-status.lock');
    await writeFile(lock, '', { flag: 'wx' });
    const failed = await store
      .updateSession(
        s.spec.uuid,
        (c) => ({ spec: { ...c.spec, mtu: 1300 }, status: { ...c.status, code: 1, name: 'ACTIVE' } }),
        admin,
        'modify and activate',
      )
      .catch((e: unknown) => e);
    expect(isProblem(failed, 'STORE_UNAVAILABLE')).toBe(true);
    await rm(lock);
    expect(store.getSession(s.spec.uuid)?.spec.mtu).toBe(1420);
    expect(store.getSession(s.spec.uuid)?.status.code).toBe(4);
    expect(await git(bare, 'show', `main:sessions/fra1/as4242420805.yaml`)).toContain('mtu: 1420');
    // as a restart reads them too
    await store.close();
    store = createGitStore({ dir: bare, logger: quiet, pollIntervalMs: 100 });
    await store.start();
    expect(store.getSession(s.spec.uuid)?.status.code).toBe(4);
    expect(store.getSession(s.spec.uuid)?.spec.mtu).toBe(1420);
  });

  it('refuses a status change while the status ref is locked, and changes nothing', async () => {
    const bare = join(dir, 'store.git');
    const s = await store.createSession(newSession(4242420803, 'fra1'), queued, admin, 'c');
    await writeFile(join(bare, 'refs', 'heads', 'peerops-status.lock'), '', { flag: 'wx' });
    const failed = await store
      .updateSession(s.spec.uuid, (c) => ({ status: { ...c.status, code: 1, name: 'ACTIVE' } }), admin, 'up')
      .catch((e: unknown) => e);
    expect(isProblem(failed, 'STORE_UNAVAILABLE')).toBe(true);
    expect(store.getSession(s.spec.uuid)?.status.code).toBe(4);
    expect(await git(bare, 'show', `${STATUS_REF}:sessions/fra1/as4242420803.yaml`)).toContain('code: 4');
  });

  it('retries a create whole while the status ref is locked for a moment (git gc packing refs), never half-way', async () => {
    const bare = join(dir, 'store.git');
    const lock = join(bare, 'refs', 'heads', 'peerops-status.lock');
    await writeFile(lock, '', { flag: 'wx' });
    // the spec ref's lock is free: the write must not move it before it holds the status ref's too
    const created = store.createSession(newSession(4242420806, 'fra1'), pending, user(4242420806), 'c');
    await new Promise((r) => setTimeout(r, 100));
    await rm(lock);
    const s = await created;
    expect(store.getSession(s.spec.uuid)?.status.code).toBe(3);
    expect(await git(bare, 'show', `main:sessions/fra1/as4242420806.yaml`)).toContain(s.spec.uuid);
    expect(await git(bare, 'show', `${STATUS_REF}:sessions/fra1/as4242420806.yaml`)).toContain(s.spec.uuid);
  });

  it('removes a ref lock older than a crashed push could hold, logs it, and writes', async () => {
    const lock = join(dir, 'store.git', 'refs', 'heads', 'main.lock');
    await writeFile(lock, '', { flag: 'wx' });
    const old = new Date(Date.now() - 60_000);
    await utimes(lock, old, old);
    const s = await store.createSession(newSession(4242420804, 'fra1'), pending, user(4242420804), 'c');
    expect(store.getSession(s.spec.uuid)).toBeDefined();
    await expect(readFile(lock)).rejects.toThrow(/ENOENT/);
  });
});
