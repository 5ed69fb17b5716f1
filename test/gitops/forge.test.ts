/**
 * GitOps with a forge (docs/gitops.md): a real `peerops serve --git-remote` following a repository that
 * git's own `git http-backend` serves on loopback behind Basic credentials, and a person's clone of it.
 * - a merge on the forge reaches the router's long poll: the time from the push to the session in the
 *   router's list is printed, with the default interval and with the forge's webhook;
 * - an API create lands on the forge's branch;
 * - an outage of the forge (2 minutes; FORGE_OUTAGE_SECONDS shortens it) loses nothing: writes go on
 *   locally, the controller says it is behind, and catches up when the forge returns;
 * - a push of a broken manifest into the controller's own repository is refused with its reason;
 * - the credentials never reach the log.
 */
import { execFile } from 'node:child_process';
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
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
const TOKEN = `tok-${randomBytes(12).toString('hex')}`;
const WEBHOOK_SECRET = `hook-${randomBytes(12).toString('hex')}`;
const OUTAGE_MS = Number(process.env.FORGE_OUTAGE_SECONDS ?? 120) * 1000;

let root: string;
let forge: GitHttpServer;
let work: string;
let controller: ControllerProcess;
let issuer: TokenIssuer;
let agentToken: string;
let admin: string;

const git = async (cwd: string, ...args: string[]) => (await run('git', args, { cwd })).stdout;
const upstream = () => join(root, 'forge', 'upstream.git');
const onForge = (path: string, ref = 'main') => show(upstream(), ref, path);

/** Poll until check() holds, every 100 ms (the checks count against the admin's rate limit). */
const eventually = <T>(check: () => Promise<T | undefined | false>, timeoutMs: number, what: string) =>
  poll(check, timeoutMs, () => `${what}:\n${controller.output.slice(-3000)}`, 100);

/** A person's merge: commit a file in the clone and push it to the forge (rebased on what the controller pushed). */
async function merge(path: string, doc: object, message: string): Promise<void> {
  forge.auth = undefined;
  await git(work, 'pull', '-q', '--rebase', 'origin', 'main');
  await mkdir(dirname(join(work, path)), { recursive: true });
  await writeFile(join(work, path), dump(doc));
  await git(work, 'add', '.');
  await git(work, 'commit', '-q', '-m', message);
  // the controller pushes too (the fields it fills in): like a person, pull and push again when refused
  for (let attempt = 1; ; attempt++) {
    try {
      await git(work, 'push', '-q', 'origin', 'main');
      break;
    } catch (err) {
      if (attempt >= 5) throw err;
      await git(work, 'pull', '-q', '--rebase', 'origin', 'main');
    }
  }
  forge.auth = { username: 'x-access-token', password: TOKEN };
}

const sessionDoc = (asn: number) => ({
  apiVersion: 'peerops.dev/v1alpha1',
  kind: 'PeeringSession',
  metadata: { name: `as${asn}-fra1` },
  spec: {
    asn,
    router: 'fra1',
    ipv6: `fd42:${(asn % 0x10000).toString(16)}::1`,
    linkLocal: 'fe80::1234',
    publicKey: randomBytes(32).toString('base64'),
    mtu: 1420,
  },
});

/** The router's long poll until a session of `asn` is in its list; ms from `since`. */
async function untilRouterSees(asn: number, since: number): Promise<number> {
  let etag: string | undefined;
  for (;;) {
    const res = await fetch(`${controller.base}/agent/fra1/sessions?wait=20`, {
      headers: { authorization: `Bearer ${agentToken}`, ...(etag ? { 'if-none-match': etag } : {}) },
    });
    if (res.status === 200) {
      etag = res.headers.get('etag') ?? undefined;
      const body = (await res.json()) as { sessions: { asn: number }[] };
      if (body.sessions.some((s) => s.asn === asn)) return Date.now() - since;
    }
    if (Date.now() - since > 30_000)
      throw new Error(`router never saw AS${asn}:\n${controller.output.slice(-3000)}`);
  }
}

const percentile = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) * p)] as number;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'peerops-forge-'));
  await mkdir(join(root, 'forge'));
  await run('git', ['init', '-q', '--bare', '-b', 'main', upstream()]);
  await run('git', ['--git-dir', upstream(), 'config', 'http.receivepack', 'true']);
  forge = await serveGit(join(root, 'forge'));
  work = join(root, 'work');
  await run('git', ['clone', '-q', `${forge.url}/upstream.git`, work]);
  await git(work, 'config', 'user.name', 'Reviewer');
  await git(work, 'config', 'user.email', 'reviewer@example.net');
  await mkdir(join(work, 'routers'));
  await mkdir(join(work, 'policy'));
  await writeFile(
    join(work, 'routers', 'fra1.yaml'),
    dump({
      apiVersion: 'peerops.dev/v1alpha1',
      kind: 'Router',
      metadata: { name: 'fra1' },
      spec: {
        uuid: randomUUID(),
        displayName: 'Frankfurt 1',
        nodeId: 1,
        region: 'eu-central',
        endpointHost: 'fra1.example.net',
        publicKey: randomBytes(32).toString('base64'),
        linkLocal: 'fe80::1',
        loopback: { ipv6: 'fd00::1' },
      },
    }),
  );
  await writeFile(
    join(work, 'policy', 'default.yaml'),
    dump({
      apiVersion: 'peerops.dev/v1alpha1',
      kind: 'RoutingPolicy',
      metadata: { name: 'default' },
      spec: { dn42Asn: ADMIN_ASN, mergeIsApproval: true },
    }),
  );
  await git(work, 'add', '.');
  await git(work, 'commit', '-q', '-m', 'network: fra1 and the policy');
  await git(work, 'push', '-q', 'origin', 'main');
  forge.auth = { username: 'x-access-token', password: TOKEN };

  const data = join(root, 'data');
  await mkdir(data, { mode: 0o700 });
  const credentials = join(root, 'forge-token');
  await writeFile(credentials, `x-access-token:${TOKEN}\n`, { mode: 0o600 });
  controller = new ControllerProcess(
    data,
    await freePort(),
    { PEEROPS_GIT_CREDENTIALS_FILE: credentials, PEEROPS_GIT_WEBHOOK_SECRET: WEBHOOK_SECRET },
    // writes go on while the forge is down (the outage below): the asynchronous push mode
    ['--git-remote', `${forge.url}/upstream.git`, '--git-push-mode', 'async'],
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
  const rotated = await controller.post(admin, '/admin/router', { action: 'rotate-token', name: 'fra1' });
  expect(rotated.status, JSON.stringify(rotated.body)).toBe(200);
  agentToken = rotated.body.agentToken as string;
}, 120_000);

afterAll(async () => {
  if (process.env.FORGE_TEST_LOG) await writeFile(process.env.FORGE_TEST_LOG, controller?.output ?? '');
  await controller?.kill();
  await forge?.close();
  await rm(root, { recursive: true, force: true });
});

describe('GitOps with a forge', () => {
  it('brings a merge on the forge to the router with the default interval, and faster with the webhook', async () => {
    const polled: number[] = [];
    for (let i = 0; i < 7; i++) {
      const asn = 4242421100 + i;
      // a merge lands at any moment of the fetch interval, not right after the last fetch
      await new Promise((r) => setTimeout(r, Math.random() * 5000));
      await merge(`sessions/fra1/as${asn}.yaml`, sessionDoc(asn), `Merge pull request #${i}`);
      polled.push(await untilRouterSees(asn, Date.now()));
    }
    const hooked: number[] = [];
    for (let i = 0; i < 5; i++) {
      const asn = 4242421200 + i;
      await merge(`sessions/fra1/as${asn}.yaml`, sessionDoc(asn), `Merge pull request #${10 + i}`);
      const pushed = Date.now();
      const body = JSON.stringify({ ref: 'refs/heads/main' });
      const signature = `sha256=${createHmac('sha256', WEBHOOK_SECRET).update(body).digest('hex')}`;
      const hook = await fetch(`${controller.base}/hooks/git`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-hub-signature-256': signature },
        body,
      });
      expect(hook.status).toBe(200);
      hooked.push(await untilRouterSees(asn, pushed));
    }
    console.log(
      `forge → router: default interval p50 ${percentile(polled, 0.5)} ms, max ${Math.max(...polled)} ms; ` +
        `with the webhook p50 ${percentile(hooked, 0.5)} ms, max ${Math.max(...hooked)} ms`,
    );
    expect(percentile(polled, 0.5)).toBeLessThan(5000);
    expect(percentile(hooked, 0.5)).toBeLessThan(1000);
    // the fields the controller fills in went back to the forge
    await eventually(
      async () => /uuid: [0-9a-f-]{36}/.test((await onForge('sessions/fra1/as4242421100.yaml')) ?? ''),
      15_000,
      'the uuid the controller filled in, on the forge',
    );
  }, 180_000);

  it('refuses a webhook without the right signature', async () => {
    const body = JSON.stringify({ ref: 'refs/heads/main' });
    for (const headers of [
      {},
      { 'x-hub-signature-256': `sha256=${createHmac('sha256', 'wrong').update(body).digest('hex')}` },
      { 'x-gitea-signature': 'deadbeef' },
      { 'x-gitlab-token': 'wrong' },
    ]) {
      const res = await fetch(`${controller.base}/hooks/git`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body,
      });
      expect(res.status).toBe(401);
      expect(((await res.json()) as { code: string }).code).toBe('AUTH_FAILED');
    }
  });

  it('puts an API create on the forge, with its author, and the approval on the status branch', async () => {
    const asn = 4242421300;
    const created = await controller.post(issuer.issueToken(asn, 'user').token, '/session', {
      action: 'create',
      router: 'fra1',
      ipv6: 'fd42:1300::1',
      linkLocal: 'fe80::1300',
      publicKey: randomBytes(32).toString('base64'),
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    await eventually(() => onForge(`sessions/fra1/as${asn}.yaml`), 15_000, 'the create on the forge');
    expect(await run('git', ['--git-dir', upstream(), 'log', '-1', '--format=%an', 'main'])).toMatchObject({
      stdout: expect.stringContaining(`AS${asn}`),
    });
    const approved = await controller.post(admin, '/admin/session', {
      action: 'approve',
      uuid: created.body.uuid,
    });
    expect(approved.status).toBe(200);
    await eventually(
      async () => (await onForge(`sessions/fra1/as${asn}.yaml`, 'peerops-status'))?.includes('code: 4'),
      15_000,
      'the approval on the status branch',
    );
  });

  it(
    'keeps writing through an outage of the forge, says it is behind, and catches up',
    async () => {
      forge.failing = true;
      const logFrom = controller.output.length;
      const logged = (text: string) => controller.output.slice(logFrom).includes(text);
      const asns = [4242421400, 4242421401, 4242421402];
      const started = Date.now();
      for (const [i, asn] of asns.entries()) {
        const created = await controller.post(issuer.issueToken(asn, 'user').token, '/session', {
          action: 'create',
          router: 'fra1',
          ipv6: `fd42:140${i}::1`,
          linkLocal: 'fe80::1400',
          publicKey: randomBytes(32).toString('base64'),
        });
        expect(created.status, JSON.stringify(created.body)).toBe(200);
        await new Promise((r) => setTimeout(r, Math.min(OUTAGE_MS / 4, 20_000)));
      }
      await eventually(
        async () => logged('cannot sync with the remote'),
        20_000,
        'the log line of the outage',
      );
      const metrics = await (await fetch(`${controller.base}/metrics`)).text();
      expect(metrics).toMatch(/^peerops_git_remote_in_sync 0$/m);
      expect(metrics).toMatch(/^peerops_git_remote_failures_total\{operation="fetch"\} [1-9]/m);
      for (const asn of asns) expect(await onForge(`sessions/fra1/as${asn}.yaml`)).toBeUndefined();
      await new Promise((r) => setTimeout(r, Math.max(0, OUTAGE_MS - (Date.now() - started))));

      forge.failing = false;
      for (const asn of asns)
        await eventually(
          () => onForge(`sessions/fra1/as${asn}.yaml`),
          20_000,
          `AS${asn} on the forge after the outage`,
        );
      await eventually(
        async () => logged('caught up with the remote again'),
        20_000,
        'the log line of the end of the outage',
      );
      expect(await (await fetch(`${controller.base}/metrics`)).text()).toMatch(
        /^peerops_git_remote_in_sync 1$/m,
      );
      console.log(
        `forge outage: ${Math.round((Date.now() - started) / 1000)} s, ${asns.length} writes kept and pushed`,
      );
    },
    OUTAGE_MS + 120_000,
  );

  it("refuses a push of a broken manifest into the controller's own repository, with the reason", async () => {
    const local = join(root, 'local');
    await run('git', ['clone', '-q', join(root, 'data', 'store.git'), local]);
    await git(local, 'config', 'user.name', 'Pusher');
    await git(local, 'config', 'user.email', 'pusher@example.net');
    await writeFile(
      join(local, 'sessions', 'fra1', 'as4242421500.yaml'),
      'kind: PeeringSession\nspec: [broken\n',
    );
    await git(local, 'add', '.');
    await git(local, 'commit', '-q', '-m', 'a broken manifest');
    const push = await run('git', ['push', 'origin', 'HEAD:main'], { cwd: local }).then(
      () => ({ code: 0, stderr: '' }),
      (err: { code: number; stderr: string }) => ({ code: err.code, stderr: err.stderr }),
    );
    expect(push.code).not.toBe(0);
    expect(push.stderr).toContain('sessions/fra1/as4242421500.yaml');
    expect(push.stderr).toMatch(/remote: .*sessions\/fra1\/as4242421500\.yaml/);
  });

  it('never logs the forge credentials', () => {
    expect(controller.output).not.toContain(TOKEN);
  });
});
