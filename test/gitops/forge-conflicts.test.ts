/**
 * Forge conflicts in the asynchronous push mode (docs/gitops.md, "When the forge and the API change the
 * same file"): a real `peerops serve --git-remote` against `git http-backend` on loopback, API modifies
 * of sessions while edits of the same manifests land on the forge (a person's commits pushed straight
 * into the forge's repository, as a merge in its web interface). Every modify answered 200 is either
 * still in force on the forge or surfaced: kept on a branch of the forge, listed by GET /admin/store
 * under the ForgeConflicts condition, told to an admin's webhook (a real HTTP receiver on loopback), and
 * noted on the session's record. A SIGKILL and restart keep the records; an admin clears one.
 *
 * CONFLICT_MODIFIES (default 20) sets the number of modifies: the first half while the controller cannot
 * reach the forge (each of those is a conflict), the rest racing the forge's edits.
 */
import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { dump } from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenIssuer, defaultKeyPath } from '../../controller/auth/jwt.ts';
import { eventually as poll, show } from '../store/git-helpers.ts';
import { ControllerProcess } from '../support/controller-process.ts';
import { serveGit, type GitHttpServer } from '../support/git-http.ts';
import { freePort } from '../support/ports.ts';

const run = promisify(execFile);
const ADMIN_ASN = 4242420000;
const FIRST_ASN = 4242422000;
const MODIFIES = Number(process.env.CONFLICT_MODIFIES ?? 20);
const TOKEN = `tok-${randomBytes(12).toString('hex')}`;

interface Conflict {
  id: string;
  path: string;
  session?: { name: string; uuid?: string; asn: number };
  at: string;
  commit: string;
  actor: string;
  forgeCommit: string;
  branch: string;
  keptCommit: string;
}
interface StoreAnswer {
  conditions: { type: string; status: string; reason: string; message: string }[];
  forgeConflicts?: Conflict[];
}
interface SessionRecord {
  uuid: string;
  mtu: number;
  forgeConflict: { id: string; branch: string; message: string } | null;
}

let root: string;
let forge: GitHttpServer;
let person: string;
let controller: ControllerProcess;
let issuer: TokenIssuer;
let admin: string;
let receiver: Server;
const received: { type: string; conflict?: Conflict }[] = [];
/** The sessions, by index: uuid and the ASN whose token modifies it. */
const sessions: { uuid: string; asn: number; path: string }[] = [];

const upstream = () => join(root, 'forge', 'upstream.git');
const git = async (cwd: string, ...args: string[]) => (await run('git', args, { cwd })).stdout;
const onForge = (ref: string, path: string) => show(upstream(), ref, path);

/** Poll until check() holds, every 200 ms (the checks count against the admin's rate limit). */
const eventually = <T>(check: () => Promise<T | undefined | false>, timeoutMs: number, what: string) =>
  poll(check, timeoutMs, () => `${what}:\n${controller.output.slice(-3000)}`, 200);

/**
 * A person's edit on the forge: on its current tip, the session's endpoint set (a line far from `mtu`),
 * committed and pushed straight into the forge's repository; tried again when the controller pushed first.
 */
async function forgeEdit(i: number): Promise<void> {
  const { path } = sessions[i] as { path: string };
  for (let attempt = 1; ; attempt++) {
    await git(person, 'fetch', '-q', 'origin', 'main');
    await git(person, 'reset', '-q', '--hard', 'origin/main');
    const file = join(person, path);
    const text = (await readFile(file, 'utf8')).replace(/^ {2}endpoint: .*\n/m, '');
    await writeFile(file, text.replace(/^spec:\n/m, `spec:\n  endpoint: peer${i}.example.org:51820\n`));
    await git(person, 'commit', '-q', '-am', `Merge pull request #${i}: endpoint of ${path}`);
    try {
      await git(person, 'push', '-q', 'origin', 'HEAD:main');
      return;
    } catch (err) {
      if (attempt >= 20) throw err;
    }
  }
}

async function apiModify(i: number): Promise<void> {
  const { uuid, asn } = sessions[i] as { uuid: string; asn: number };
  const res = await controller.post(issuer.issueToken(asn, 'user').token, '/session', {
    action: 'modify',
    uuid,
    mtu: 1300 + i,
  });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
}

async function storeStatus(): Promise<StoreAnswer> {
  const res = await fetch(`${controller.base}/admin/store`, {
    headers: { authorization: `Bearer ${admin}` },
  });
  expect(res.status).toBe(200);
  return (await res.json()) as StoreAnswer;
}

async function sessionOf(i: number): Promise<SessionRecord> {
  const { uuid, asn } = sessions[i] as { uuid: string; asn: number };
  const res = await controller.post(issuer.issueToken(asn, 'user').token, '/session', { action: 'list' });
  const found = (res.body.sessions as SessionRecord[]).find((s) => s.uuid === uuid);
  if (!found) throw new Error(`session ${uuid} not listed`);
  return found;
}

/** Is modify i in force on the forge's branch? */
async function effective(i: number): Promise<boolean> {
  return new RegExp(`^ {2}mtu: ${1300 + i}$`, 'm').test(
    (await onForge('main', (sessions[i] as { path: string }).path)) ?? '',
  );
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'peerops-forge-conflicts-'));
  await mkdir(join(root, 'forge'));
  await run('git', ['init', '-q', '--bare', '-b', 'main', upstream()]);
  await run('git', ['--git-dir', upstream(), 'config', 'http.receivepack', 'true']);
  forge = await serveGit(join(root, 'forge'));
  person = join(root, 'person');
  await run('git', ['clone', '-q', upstream(), person]);
  await git(person, 'config', 'user.name', 'Reviewer');
  await git(person, 'config', 'user.email', 'reviewer@example.net');
  await mkdir(join(person, 'routers'));
  await mkdir(join(person, 'policy'));
  const manifest = (kind: string, name: string, spec: object) =>
    dump({ apiVersion: 'peerops.dev/v1alpha1', kind, metadata: { name }, spec });
  await writeFile(
    join(person, 'routers', 'fra1.yaml'),
    manifest('Router', 'fra1', {
      uuid: randomUUID(),
      displayName: 'Frankfurt 1',
      nodeId: 1,
      region: 'eu-central',
      endpointHost: 'fra1.example.net',
      publicKey: randomBytes(32).toString('base64'),
      linkLocal: 'fe80::1',
      loopback: { ipv6: 'fd00::1' },
    }),
  );
  await writeFile(
    join(person, 'policy', 'default.yaml'),
    manifest('RoutingPolicy', 'default', { dn42Asn: ADMIN_ASN }),
  );
  await git(person, 'add', '.');
  await git(person, 'commit', '-q', '-m', 'network: fra1 and the policy');
  await git(person, 'push', '-q', 'origin', 'HEAD:main');
  forge.auth = { username: 'x-access-token', password: TOKEN };

  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      received.push(JSON.parse(body) as { type: string; conflict?: Conflict });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));

  const data = join(root, 'data');
  await mkdir(data, { mode: 0o700 });
  const credentials = join(root, 'forge-token');
  await writeFile(credentials, `x-access-token:${TOKEN}\n`, { mode: 0o600 });
  controller = new ControllerProcess(
    data,
    await freePort(),
    { PEEROPS_GIT_CREDENTIALS_FILE: credentials, PEEROPS_GIT_PUSH_MODE: 'async', PEEROPS_GIT_INTERVAL: '1' },
    ['--git-remote', `${forge.url}/upstream.git`],
  );
  issuer = await TokenIssuer.fromFile(defaultKeyPath(data));
  admin = issuer.issueToken(ADMIN_ASN, 'admin').token;
  await controller.start();
  await eventually(
    async () =>
      ((await controller.post(admin, '/admin/router', { action: 'list' })).body.routers as unknown[]).length >
      0,
    15_000,
    'router fra1 from the forge',
  );
  const hook = await controller.post(admin, '/admin/webhooks', {
    action: 'create',
    url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`,
  });
  expect(hook.status, JSON.stringify(hook.body)).toBe(200);
  for (let i = 0; i < MODIFIES; i++) {
    const asn = FIRST_ASN + i;
    const created = await controller.post(issuer.issueToken(asn, 'user').token, '/session', {
      action: 'create',
      router: 'fra1',
      ipv6: `fd42:${(asn % 0x10000).toString(16)}::1`,
      linkLocal: 'fe80::1234',
      publicKey: randomBytes(32).toString('base64'),
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    sessions.push({ uuid: created.body.uuid as string, asn, path: `sessions/fra1/as${asn}.yaml` });
  }
  for (const { path } of sessions)
    await eventually(() => onForge('main', path), 20_000, `${path} on the forge`);
}, 180_000);

afterAll(async () => {
  if (process.env.FORGE_TEST_LOG) await writeFile(process.env.FORGE_TEST_LOG, controller?.output ?? '');
  await controller?.kill();
  await forge?.close();
  await new Promise((r) => receiver?.close(r));
  await rm(root, { recursive: true, force: true });
});

describe('forge conflicts in the asynchronous push mode', () => {
  let conflicts: Conflict[] = [];

  it('keeps, lists, tells and notes every acknowledged modify a forge edit replaced', async () => {
    const started = Date.now();
    const half = Math.ceil(MODIFIES / 2);
    // the controller cannot reach the forge while people merge there: each of these rebuilds is a conflict
    forge.failing = true;
    for (let i = 0; i < half; i++) await Promise.all([apiModify(i), forgeEdit(i)]);
    forge.failing = false;
    // then both at once: whichever lands first, nothing acknowledged is lost silently
    // (the forge's edit up to 0.5 s after the modify: sometimes the controller pushes first)
    for (let i = half; i < MODIFIES; i++)
      await Promise.all([
        apiModify(i),
        new Promise((r) => setTimeout(r, Math.random() * 500)).then(() => forgeEdit(i)),
      ]);

    const conflictOf = (i: number) => conflicts.find((c) => c.session?.uuid === sessions[i]?.uuid);
    await eventually(
      async () => {
        conflicts = (await storeStatus()).forgeConflicts ?? [];
        for (let i = 0; i < MODIFIES; i++) if (!conflictOf(i) && !(await effective(i))) return false;
        return /^peerops_git_remote_in_sync 1$/m.test(
          await (await fetch(`${controller.base}/metrics`)).text(),
        );
      },
      60_000,
      'every modify in force on the forge or surfaced',
    );
    let inForce = 0;
    for (let i = 0; i < MODIFIES; i++) {
      const conflict = conflictOf(i);
      const inEffect = await effective(i);
      // one or the other: a replaced modify is not in force, one in force was not replaced
      expect(Boolean(conflict), `modify ${i}`).toBe(!inEffect);
      if (inEffect) inForce++;
      if (!conflict) continue;
      const { path } = sessions[i] as { path: string };
      // the kept branch (pushed by the cycle after the one that recorded it): the store's version of the
      // file on top of the forge's tip that replaced it
      const kept = await eventually(
        () => onForge(conflict.branch, path),
        20_000,
        `branch ${conflict.branch}`,
      );
      expect(kept).toMatch(new RegExp(`^ {2}mtu: ${1300 + i}$`, 'm'));
      expect(
        (await run('git', ['--git-dir', upstream(), 'rev-parse', `${conflict.branch}^`])).stdout.trim(),
      ).toBe(conflict.forgeCommit);
      expect(conflict).toMatchObject({ path, actor: `AS${sessions[i]?.asn}` });
      // the caller's next read says so
      const record = await sessionOf(i);
      expect(record.forgeConflict).toMatchObject({ id: conflict.id, branch: conflict.branch });
      expect(record.forgeConflict?.message).toContain(`your version is kept on branch ${conflict.branch}`);
    }
    console.log(
      `forge conflicts: ${MODIFIES} modifies answered 200 = ${inForce} in force on the forge + ` +
        `${conflicts.length} surfaced conflicts, in ${Math.round((Date.now() - started) / 1000)} s`,
    );
    expect(inForce + conflicts.length).toBe(MODIFIES);
    expect(conflicts.length).toBeGreaterThanOrEqual(half);

    const condition = (await storeStatus()).conditions.find((c) => c.type === 'ForgeConflicts');
    expect(condition).toMatchObject({ status: 'True', reason: 'ChangesReplaced' });
    const metrics = await (await fetch(`${controller.base}/metrics`)).text();
    expect(metrics).toMatch(new RegExp(`^peerops_git_forge_conflicts_total ${conflicts.length}$`, 'm'));
    for (const c of conflicts) {
      expect(controller.output).toContain(c.branch);
      await eventually(
        async () => received.some((e) => e.type === 'store.forge_conflict' && e.conflict?.id === c.id),
        20_000,
        `the admin's webhook event of conflict ${c.id}`,
      );
    }
    const cli = await run(
      process.execPath,
      ['bin/peerops.ts', 'admin', 'store', 'status', '--url', controller.base, '--token', admin],
      { cwd: process.cwd() },
    );
    expect(cli.stdout).toMatch(/ForgeConflicts +True +ChangesReplaced/);
    expect(cli.stdout).toContain((conflicts[0] as Conflict).branch);
  }, 240_000);

  it('keeps the records across a SIGKILL and a restart, and an admin clears one', async () => {
    await controller.kill();
    await controller.start();
    // the restarted controller pushes the kept branches again (the forge holds them: nothing to do)
    await eventually(
      async () =>
        /^peerops_git_remote_in_sync 1$/m.test(await (await fetch(`${controller.base}/metrics`)).text()),
      20_000,
      'the restarted controller in sync with the forge',
    );
    expect(controller.output).not.toContain('cannot sync with the remote');
    // and keeps no local ref of them (the records name the commits)
    const refs = await run('git', [
      '--git-dir',
      join(root, 'data', 'store.git'),
      'for-each-ref',
      'refs/peerops',
    ]);
    expect(refs.stdout).toBe('');
    const after = (await storeStatus()).forgeConflicts ?? [];
    expect(after.map((c) => c.id)).toEqual(conflicts.map((c) => c.id));
    const first = conflicts[0] as Conflict;
    const i = sessions.findIndex((s) => s.uuid === first.session?.uuid);
    expect((await sessionOf(i)).forgeConflict?.id).toBe(first.id);

    const bad = await controller.post(admin, '/admin/store/conflicts', { action: 'clear', id: 'not-an-id' });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain('/id');
    const unknown = await controller.post(admin, '/admin/store/conflicts', {
      action: 'clear',
      id: '0'.repeat(12),
    });
    expect(unknown.status).toBe(404);
    const user = await controller.post(issuer.issueToken(FIRST_ASN, 'user').token, '/admin/store/conflicts', {
      action: 'clear',
      id: first.id,
    });
    expect(user.status).toBe(403);

    const cleared = await controller.post(admin, '/admin/store/conflicts', { action: 'clear', id: first.id });
    expect(cleared.status, JSON.stringify(cleared.body)).toBe(200);
    expect((cleared.body.forgeConflicts as Conflict[]).map((c) => c.id)).not.toContain(first.id);
    expect((await sessionOf(i)).forgeConflict).toBeNull();
    // the kept branch stays on the forge until an admin deletes it there
    expect(await onForge(first.branch, first.path)).toBeDefined();
  }, 120_000);

  it('keeps the records when the disk is lost: a fresh controller takes them from the forge', async () => {
    // once the clearing is on the forge's status branch
    await eventually(
      async () =>
        !(await onForge('peerops-status', 'conflicts/forge.yaml'))?.includes(conflicts[0]?.id ?? ''),
      20_000,
      'the clearing pushed to peerops-status',
    );
    await controller.kill();
    const data = join(root, 'fresh');
    await mkdir(data, { mode: 0o700 });
    controller = new ControllerProcess(
      data,
      await freePort(),
      {
        PEEROPS_GIT_CREDENTIALS_FILE: join(root, 'forge-token'),
        PEEROPS_GIT_PUSH_MODE: 'async',
        PEEROPS_GIT_INTERVAL: '1',
      },
      ['--git-remote', `${forge.url}/upstream.git`],
    );
    await controller.start();
    admin = (await TokenIssuer.fromFile(defaultKeyPath(data))).issueToken(ADMIN_ASN, 'admin').token;
    const listed = await eventually(
      async () => {
        const found = (await storeStatus()).forgeConflicts ?? [];
        return found.length > 0 && found;
      },
      20_000,
      'the conflict records from the forge',
    );
    expect(listed.map((c) => c.id)).toEqual(conflicts.slice(1).map((c) => c.id));
    // its kept commits are on the forge's branches, not on this disk: the cycles go on all the same
    await new Promise((r) => setTimeout(r, 3000));
    expect(controller.output).not.toContain('cannot sync with the remote');
  }, 60_000);
});
