/**
 * The outbox (docs/notifications.md, "The outbox"; docs/store.md): the git store records each write's
 * events in the commit of its status change, a merge pushed with git and a removal on the branch too,
 * keeps them across a restart, confirms many in one commit; and the bound of core/outbox.ts.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { GROUP_VERSION } from '../../common/schema.ts';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ChangeFeed, topics } from '../../controller/store/change-feed.ts';
import type { NotificationEvent } from '../../controller/store/core/events.ts';
import { OUTBOX_LIMIT, OUTBOX_MAX_AGE_MS, Outbox } from '../../controller/store/core/outbox.ts';
import { createGitStore, STATUS_REF, type GitStore } from '../../controller/store/git/index.ts';
import { admin, newSession, pending, queued, routerSpec, user, wgKey } from './fixtures.ts';
import { eventually, git, put } from './git-helpers.ts';

const quiet = pino({ level: 'silent' });

describe('git store: the outbox', () => {
  let dir: string;
  let bare: string;
  let store: GitStore;
  const open = async () => {
    const s = createGitStore({ dir: bare, logger: quiet, pollIntervalMs: 100 });
    await s.start();
    return s;
  };
  const types = () => store.outbox().map((e) => `${e.type} ${e.session?.name ?? e.router?.name}`);
  const outboxFiles = async () =>
    (await git(bare, 'ls-tree', '-r', '--name-only', STATUS_REF, 'outbox/')).split('\n').filter(Boolean);

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'peerops-outbox-'));
    bare = join(dir, 'store.git');
    store = await open();
    await store.createRouter('fra1', routerSpec(1), admin);
    await store.putPolicy('default', { dn42Asn: 4242420000 }, admin);
  });
  afterEach(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('records a write’s events in its status commit, keeps them across a restart, confirms in one commit', async () => {
    const revision = store.revision(topics.outbox);
    const s = await store.createSession(newSession(4242420100, 'fra1'), pending, user(4242420100), 'create');
    expect(store.revision(topics.outbox)).toBeGreaterThan(revision);
    // the create's commit holds the status file and both events
    const created = await git(bare, 'show', '--name-only', '--format=', STATUS_REF);
    expect(created.split('\n').filter(Boolean).sort()).toEqual(
      [
        'sessions/fra1/as4242420100.yaml',
        ...store.outbox().map((e) => `outbox/${e.id.slice(0, 2)}/${e.id}.json`),
      ].sort(),
    );
    await store.updateSession(s.spec.uuid, () => ({ status: queued }), admin, 'approve');
    // a modify of the spec alone changes no status: no event
    await store.updateSession(s.spec.uuid, (c) => ({ spec: { ...c.spec, mtu: 1400 } }), admin, 'mtu');
    expect(types()).toEqual([
      'session.created as4242420100-fra1',
      'session.pending_review as4242420100-fra1',
      'session.approved as4242420100-fra1',
    ]);
    const ids = store.outbox().map((e) => e.id);

    await store.close();
    // the parse cache holds each waiting event (docs/store.md, cold start): a restart reads no blob of them
    const cached = await readFile(join(bare, 'peerops', 'parsed.json'), 'utf8');
    for (const id of ids) expect(cached).toContain(`:outbox/${id.slice(0, 2)}/${id}.json"`);
    store = await open();
    expect(store.outbox().map((e) => e.id)).toEqual(ids);

    const commits = Number(await git(bare, 'rev-list', '--count', STATUS_REF));
    await store.confirmDelivered([...ids.slice(0, 2), 'not-held']);
    expect(Number(await git(bare, 'rev-list', '--count', STATUS_REF))).toBe(commits + 1);
    expect(store.outbox().map((e) => e.id)).toEqual(ids.slice(2));
    expect(await outboxFiles()).toHaveLength(1);
    await store.confirmDelivered(['not-held']); // nothing held: no commit
    expect(Number(await git(bare, 'rev-list', '--count', STATUS_REF))).toBe(commits + 1);

    // an event of its own write, recorded once per id
    const offline: NotificationEvent = {
      id: 'a'.repeat(32),
      type: 'router.agent_offline',
      occurredAt: new Date().toISOString(),
      router: { name: 'fra1', lastHeartbeat: null },
    };
    await store.appendEvents([offline]);
    await store.appendEvents([offline]);
    expect(types()).toEqual(['session.approved as4242420100-fra1', 'router.agent_offline fra1']);
  });

  it('records the events of sessions a push brings and removes, in the status commit that follows', async () => {
    const work = join(dir, 'work');
    await git(dir, 'clone', '-q', bare, work);
    const manifest = {
      apiVersion: GROUP_VERSION,
      kind: 'PeeringSession',
      metadata: { name: 'as4242420200-fra1' },
      spec: {
        asn: 4242420200,
        router: 'fra1',
        ipv6: 'fd42:2:200::1',
        linkLocal: 'fe80::abcd',
        publicKey: wgKey(),
      },
    };
    await put(work, 'sessions/fra1/as4242420200.yaml', manifest);
    await git(work, 'add', '.');
    await git(work, 'commit', '-q', '-m', 'Merge pull request #1');
    await git(work, 'push', '-q', 'origin', 'main');
    await eventually(() => store.outbox().length === 2);
    expect(types()).toEqual([
      'session.created as4242420200-fra1',
      'session.pending_review as4242420200-fra1',
    ]);
    const uuid = store.listSessions({ asn: 4242420200 })[0]?.spec.uuid;
    expect(store.outbox().every((e) => e.session?.uuid === uuid)).toBe(true);

    await eventually(async () => (await git(bare, 'log', '-1', '--format=%an', 'main')) === 'controller\n');
    await git(work, 'pull', '-q', '--ff-only');
    await git(work, 'rm', '-q', 'sessions/fra1/as4242420200.yaml');
    await git(work, 'commit', '-q', '-m', 'Merge pull request #2: withdraw');
    await git(work, 'push', '-q', 'origin', 'main');
    await eventually(() => store.outbox().length === 3);
    expect(store.outbox()[2]).toMatchObject({
      type: 'session.deleted',
      session: { uuid, name: 'as4242420200-fra1', asn: 4242420200, router: 'fra1' },
    });
    // the removal's event is in the commit that removed its status file
    const removal = await git(bare, 'show', '--name-only', '--format=', STATUS_REF);
    expect(removal).toContain('sessions/fra1/as4242420200.yaml');
    expect(removal).toContain(`${store.outbox()[2]?.id}.json`);
  });
});

describe('the outbox bound', () => {
  const event = (i: number): NotificationEvent => ({
    id: i.toString(16).padStart(32, '0'),
    type: 'session.active',
    occurredAt: new Date().toISOString(),
  });

  it(`holds ${OUTBOX_LIMIT} events at most and none older than a week: the oldest are dropped`, () => {
    const outbox = new Outbox(new ChangeFeed());
    const now = Date.now();
    outbox.apply(
      outbox.prepare(
        Array.from({ length: OUTBOX_LIMIT }, (_, i) => event(i)),
        now,
      ),
    );
    expect(outbox.size).toBe(OUTBOX_LIMIT);
    // one more: the oldest goes (counted as dropped), the limit holds
    const next = outbox.prepare([event(OUTBOX_LIMIT), event(OUTBOX_LIMIT)], now);
    expect(next.add).toHaveLength(1);
    expect(next.remove.map((e) => e.event.id)).toEqual([event(0).id]);
    expect(next.dropped).toBe(1);
    outbox.apply(next);
    expect(outbox.size).toBe(OUTBOX_LIMIT);
    expect(outbox.list()[0]?.id).toBe(event(1).id);
    expect(outbox.list().at(-1)?.id).toBe(event(OUTBOX_LIMIT).id);
    // a week later the next write drops every event recorded before
    const later = outbox.prepare([event(OUTBOX_LIMIT + 1)], now + OUTBOX_MAX_AGE_MS + 1);
    expect(later.dropped).toBe(OUTBOX_LIMIT);
    outbox.apply(later);
    expect(outbox.list().map((e) => e.id)).toEqual([event(OUTBOX_LIMIT + 1).id]);
    // an id it holds is not recorded again
    expect(outbox.prepare([event(OUTBOX_LIMIT + 1)], now).add).toEqual([]);
  });

  it('keeps the newest of one write that records more than the bound', () => {
    const outbox = new Outbox(new ChangeFeed());
    const held = outbox.prepare([event(0)]);
    outbox.apply(held);
    const many = outbox.prepare(Array.from({ length: OUTBOX_LIMIT + 5 }, (_, i) => event(i + 1)));
    expect(many.add).toHaveLength(OUTBOX_LIMIT);
    expect(many.add[0]?.event.id).toBe(event(6).id);
    expect(many.remove.map((e) => e.event.id)).toEqual([event(0).id]);
    expect(many.dropped).toBe(6);
    outbox.apply(many);
    expect(outbox.size).toBe(OUTBOX_LIMIT);
    expect(outbox.list().at(-1)?.id).toBe(event(OUTBOX_LIMIT + 5).id);
  });
});
