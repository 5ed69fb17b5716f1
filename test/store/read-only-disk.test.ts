/**
 * A controller started on a read-only data directory (docs/store.md, "A read-only data directory"): a
 * real `peerops serve` on a tmpfs remounted read-only under it. It serves the session lists, an agent's
 * session fetch and long poll and /metrics; every write answers 503 STORE_UNAVAILABLE naming the reason,
 * /health says degraded, GET /admin/store's Writable condition is False; SIGTERM exits 0. Once the
 * directory is writable again it takes the instance lock and writes without a restart. A crash's journal
 * that would need a ref moved is refused at start with its path. Mounting needs root, as the
 * network-namespace tests do.
 */
import { execFile } from 'node:child_process';
import { access, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { TokenIssuer, defaultKeyPath } from '../../controller/auth/jwt.ts';
import { ControllerProcess, type Answer } from '../support/controller-process.ts';
import { freePort } from '../support/ports.ts';
import { routerFields, sessionFields } from '../api/helpers.ts';

const run = promisify(execFile);
const ADMIN_ASN = 4242420000;
const PENDING_ASN = 4242421001;
const APPROVED_ASN = 4242421002;

let root: string;
let mnt: string;
let data: string;
let gitdir: string;
let port: number;
let issuer: TokenIssuer;
let admin: string;
let agentToken: string;
let approved: { uuid: string; listenPort: number };
/** The controller a test runs, killed after it if the test did not stop it. */
let running: ControllerProcess | undefined;

const user = (asn: number) => issuer.issueToken(asn, 'user').token;
const remount = (mode: 'ro' | 'rw') => run('mount', ['-o', `remount,${mode}`, mnt]);
const git = async (...args: string[]) => (await run('git', ['--git-dir', gitdir, ...args])).stdout.trim();
const controller = () => (running = new ControllerProcess(data, port));

async function sessions(c: ControllerProcess): Promise<unknown[]> {
  const listed = await c.post(admin, '/admin/session', { action: 'list' });
  expect(listed.status).toBe(200);
  return (listed.body.sessions as { metrics?: unknown }[]).map(({ metrics: _m, ...s }) => s);
}

function expectReadOnly(answer: Answer, what: string): void {
  expect(answer.status, `${what}: ${JSON.stringify(answer.body)}`).toBe(503);
  expect(answer.body.code, what).toBe('STORE_UNAVAILABLE');
  expect(answer.body.detail, what).toMatch(/data directory is read-only \(EROFS\)/);
}

async function until(what: string, check: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'peerops-read-only-'));
  mnt = join(root, 'mnt');
  await mkdir(mnt);
  await run('mount', ['-t', 'tmpfs', '-o', 'size=24m', 'tmpfs', mnt]);
  data = join(mnt, 'data');
  gitdir = join(data, 'store.git');
  port = await freePort();
  const c = controller();
  issuer = await TokenIssuer.fromFile(defaultKeyPath(data));
  admin = issuer.issueToken(ADMIN_ASN, 'admin').token;
  await c.start();
  expect((await c.post(admin, '/admin/policy', { action: 'set', spec: { dn42Asn: ADMIN_ASN } })).status).toBe(
    200,
  );
  const added = await c.post(admin, '/admin/router', { action: 'add', ...routerFields('fra1') });
  expect(added.status).toBe(200);
  agentToken = added.body.agentToken as string;
  expect((await c.post(user(PENDING_ASN), '/session', sessionFields('fra1'))).status).toBe(200);
  const created = await c.post(user(APPROVED_ASN), '/session', sessionFields('fra1'));
  approved = { uuid: created.body.uuid as string, listenPort: created.body.listenPort as number };
  expect((await c.post(admin, '/admin/session', { action: 'approve', uuid: approved.uuid })).status).toBe(
    200,
  );
  // killed, as a power loss would: its instance lock stays behind for the read-only start to meet
  await c.kill();
  await access(join(gitdir, 'peerops', 'controller.lock'));
}, 60_000);

afterEach(async () => {
  await running?.kill();
});

afterAll(async () => {
  await run('umount', ['-l', mnt]).catch(() => {});
  await rm(root, { recursive: true, force: true });
});

describe('git store: a read-only data directory', () => {
  it('starts, serves reads and agent polls, answers 503 to writes, says degraded, and exits 0 on SIGTERM', async () => {
    const c = controller();
    await c.start();
    const before = await sessions(c);
    await c.kill();
    // A write a crash interrupted before its first ref moved: nothing to finish, so it is served as is.
    const main = await git('rev-parse', 'refs/heads/main');
    await writeFile(
      join(gitdir, 'peerops', 'journal.json'),
      JSON.stringify({ updates: [{ ref: 'refs/heads/main', from: main, to: '1'.repeat(40) }] }),
    );
    await remount('ro');
    try {
      const started = Date.now();
      await c.start();
      console.log(`read-only start: ${Date.now() - started} ms to listening`);

      // reads: the admin's and a user's lists, an agent's session fetch and long poll, /metrics
      expect(await sessions(c)).toEqual(before);
      const mine = await c.post(user(APPROVED_ASN), '/session', { action: 'list' });
      expect(mine.status).toBe(200);
      expect((mine.body.sessions as { uuid: string }[]).map((s) => s.uuid)).toEqual([approved.uuid]);
      const fetched = await fetch(`${c.base}/agent/fra1/sessions`, {
        headers: { authorization: `Bearer ${agentToken}` },
      });
      expect(fetched.status).toBe(200);
      const etag = fetched.headers.get('etag') as string;
      const agentView = (await fetched.json()) as { sessions: { uuid: string }[] };
      expect(agentView.sessions.map((s) => s.uuid)).toEqual([approved.uuid]);
      const polled = await fetch(`${c.base}/agent/fra1/sessions?wait=1`, {
        headers: { authorization: `Bearer ${agentToken}`, 'if-none-match': etag },
      });
      expect(polled.status).toBe(304);
      const metrics = await fetch(`${c.base}/metrics`);
      expect(metrics.status).toBe(200);
      expect(await metrics.text()).toMatch(/^peerops_store_writable 0$/m);

      // what says so: /health (503 degraded with the reason), /livez still ok, the store's condition
      expect(await c.get('/health')).toEqual({
        status: 503,
        body: { status: 'degraded', reason: "the store's data directory is read-only (EROFS)" },
      });
      expect((await c.get('/livez')).status).toBe(200);
      const store = await c.get('/admin/store', admin);
      expect(store.body.conditions).toContainEqual(
        expect.objectContaining({ type: 'Writable', status: 'False', reason: 'ReadOnlyDataDirectory' }),
      );

      // every kind of write is refused, naming the reason, and changes nothing
      const refused = {
        create: await c.post(user(4242421003), '/session', sessionFields('fra1')),
        approve: await c.post(admin, '/admin/session', {
          action: 'approve',
          uuid: (before[0] as { uuid: string }).uuid,
        }),
        agentReport: await c.post(agentToken, '/agent/fra1/modify', {
          uuid: approved.uuid,
          status: 1,
          interface: `wg_${approved.listenPort}`,
        }),
        routerAdd: await c.post(admin, '/admin/router', { action: 'add', ...routerFields('ams1') }),
        policySet: await c.post(admin, '/admin/policy', {
          action: 'set',
          spec: { dn42Asn: ADMIN_ASN, maxPendingPerAsn: 5 },
        }),
      };
      for (const [what, answer] of Object.entries(refused)) expectReadOnly(answer, what);
      // webhooks live beside the store, in the same directory (docs/notifications.md)
      const hook = await c.post(admin, '/admin/webhooks', {
        action: 'create',
        url: 'https://hooks.example.net/peerops',
      });
      expect(hook.status, JSON.stringify(hook.body)).toBe(503);
      expect(hook.body).toMatchObject({ code: 'STORE_UNAVAILABLE', detail: expect.stringMatching(/EROFS/) });
      expect(await sessions(c)).toEqual(before);
      // a heartbeat is kept in memory (docs/store.md, observations): taken, though never flushed here
      const heartbeat = await c.post(agentToken, '/agent/fra1/heartbeat', { version: '0.1.0', uptime: 10 });
      expect(heartbeat.status, JSON.stringify(heartbeat.body)).toBe(200);

      // two of the store's polls (every 2 s) later: said once, and no poll complained
      await new Promise((r) => setTimeout(r, 4200));
      expect(c.output.match(/the data directory is read-only: serving reads/g)).toHaveLength(1);
      expect(c.output).not.toMatch(/following the repository failed|completing manifests from git deferred/);

      expect(await c.stop()).toBe(0);
      expect(c.output).toMatch(/"msg":"stopped"/);
    } finally {
      await remount('rw');
    }
  }, 60_000);

  it('takes the instance lock and writes again once the directory is writable, without a restart', async () => {
    await remount('ro');
    const c = controller();
    try {
      await c.start();
      expect((await c.get('/health')).status).toBe(503);
    } finally {
      await remount('rw');
    }
    await until('health ok', async () => (await c.get('/health')).status === 200);
    // the log is written in batches, within 100 ms (controller/logger.ts)
    await until('the log line', async () => /the data directory is writable again/.test(c.output));
    // the crash's leftovers are cleaned now that it can: the journal of the first test is dropped
    expect(c.output).toMatch(/dropped a write interrupted by a crash/);
    const created = await c.post(user(4242421004), '/session', sessionFields('fra1'));
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    // the holder's own steps ran: its lock, the pre-receive hook
    expect(JSON.parse(await readFile(join(gitdir, 'peerops', 'controller.lock'), 'utf8'))).toMatchObject({
      pid: expect.any(Number),
    });
    expect(await readFile(join(gitdir, 'hooks', 'pre-receive'), 'utf8')).toMatch(/hook pre-receive/);
    const acknowledged = await sessions(c);
    expect(await c.stop()).toBe(0);

    await c.start();
    expect(await sessions(c)).toEqual(acknowledged);
    expect(await c.stop()).toBe(0);
  }, 60_000);

  it('refuses to start, naming the journal, when a crash left a write half-done', async () => {
    // The first ref of the write moved, the status ref did not: only a writer can finish it.
    const main = await git('rev-parse', 'refs/heads/main');
    const status = await git('rev-parse', 'refs/heads/peerops-status');
    const journal = join(gitdir, 'peerops', 'journal.json');
    await writeFile(
      journal,
      JSON.stringify({
        updates: [
          { ref: 'refs/heads/main', from: await git('rev-parse', 'refs/heads/main~1'), to: main },
          { ref: 'refs/heads/peerops-status', from: status, to: '2'.repeat(40) },
        ],
      }),
    );
    await remount('ro');
    try {
      const serve = await run(
        process.execPath,
        ['bin/peerops.ts', 'serve', '--listen', `127.0.0.1:${port}`, '--data', data],
        { env: { ...process.env, PEEROPS_STORE: 'git' } },
      ).then(
        () => ({ code: 0, stderr: '' }),
        (err: { code: number; stderr: string }) => err,
      );
      expect(serve.code).toBe(1);
      expect(serve.stderr).toContain(
        `peerops serve: ${journal}: a write interrupted by a crash must be finished (refs/heads/peerops-status to move) before the store is served, and the data directory is read-only (EROFS); make it writable and start again`,
      );
    } finally {
      await remount('rw');
      await rm(journal);
    }
  }, 60_000);
});
