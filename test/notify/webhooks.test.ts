/**
 * Webhooks on the git store (one instance, which leads itself): the routes, the events of a session's
 * life as a local receiver gets them, each signature checked with the secret of the create answer, who
 * receives what, and retries after a 500.
 */
import { createHmac } from 'node:crypto';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildApp } from '../../controller/app.ts';
import { TokenIssuer, loadOrCreateKey } from '../../controller/auth/jwt.ts';
import { loadConfig } from '../../controller/config.ts';
import { register } from '../../controller/metrics.ts';
import { Dispatcher } from '../../controller/notify/deliver.ts';
import { Notifier } from '../../controller/notify/notifier.ts';
import { FileWebhooks } from '../../controller/notify/webhooks.ts';
import type { NotificationEvent } from '../../controller/store/core/events.ts';
import { SessionReconciler } from '../../controller/reconcile/session-reconciler.ts';
import { createGitStore } from '../../controller/store/git/index.ts';
import type { Store } from '../../controller/store/store.ts';
import { ADMIN_ASN, OTHER_ASN, USER_ASN, routerFields, sessionFields } from '../api/helpers.ts';
import { eventually, startReceiver, type Received, type Receiver } from './receiver.ts';

let dir: string;
let store: Store;
let app: FastifyInstance;
let tokens: TokenIssuer;
let notifier: Notifier;
let adminRx: Receiver;
let peerRx: Receiver;
let secrets: Map<string, string>;
let agentToken: string;
const tokenOf = (asn: number, role: 'user' | 'admin' = 'user') => tokens.issueToken(asn, role).token;

async function post(url: string, token: string, body: unknown) {
  return app.inject({
    method: 'POST',
    url,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    payload: JSON.stringify(body),
  });
}

async function ok(url: string, token: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await post(url, token, body);
  if (res.statusCode !== 200)
    throw new Error(`${url} ${JSON.stringify(body)}: ${res.statusCode} ${res.body}`);
  return res.json();
}

/** The events a receiver got, each checked against its signature first. */
function events(rx: Receiver): (NotificationEvent & { delivery: string })[] {
  return rx.received
    .filter((r) => r.status === 200)
    .map((r) => ({ ...verified(r), delivery: String(r.headers['x-peerops-delivery']) }));
}

function verified(r: Received): NotificationEvent {
  const event = JSON.parse(r.body) as NotificationEvent;
  const secret = secretFor(r);
  const expected = `sha256=${createHmac('sha256', secret).update(r.body).digest('hex')}`;
  expect(r.headers['x-peerops-signature']).toBe(expected);
  expect(r.headers['x-peerops-event']).toBe(event.type);
  expect(r.headers['content-type']).toBe('application/json');
  expect(Number(r.headers['x-peerops-timestamp'])).toBeGreaterThan(Date.now() / 1000 - 600);
  return event;
}

/** Each receiver serves one hook: its secret is that hook's. */
function secretFor(r: Received): string {
  const rx = adminRx.received.includes(r) ? 'admin' : 'peer';
  const secret = secrets.get(rx);
  if (!secret) throw new Error(`no secret for the ${rx} receiver`);
  return secret;
}

const types = (rx: Receiver, uuid: string) =>
  events(rx)
    .filter((e) => e.session?.uuid === uuid)
    .map((e) => e.type);

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-notify-'));
  store = createGitStore({ dir: join(dir, 'store.git'), logger: pino({ level: 'silent' }) });
  await store.start();
  tokens = new TokenIssuer(await loadOrCreateKey(join(dir, 'jwt-ed25519.pem')));
  const config = {
    ...loadConfig({ data: dir, listen: '127.0.0.1:0' }, {}),
    rateLimit: { perMinute: 100_000, agentPerMinute: 100_000 },
  };
  // the receivers are on loopback, which peers' hooks may reach only when allowed (tested below)
  notifier = new Notifier({
    store,
    webhooks: new FileWebhooks(dir),
    retryBaseMs: 100,
    allowPrivateTargets: true,
  });
  app = await buildApp({ store, tokens, config, logger: false, notifier });
  await app.ready();
  notifier.start(); // the git store's one instance leads
  adminRx = await startReceiver();
  peerRx = await startReceiver();
  secrets = new Map();
  const added = await ok('/admin/router', tokenOf(ADMIN_ASN, 'admin'), {
    action: 'add',
    ...routerFields('fra1'),
  });
  agentToken = added.agentToken as string;
});
afterAll(async () => {
  await app?.close();
  await store?.close();
  await adminRx?.close();
  await peerRx?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const admin = () => tokenOf(ADMIN_ASN, 'admin');

describe('webhook routes', () => {
  it('create answers the secret once; list never shows it; the file is owner-only', async () => {
    const created = await ok('/admin/webhooks', admin(), { action: 'create', url: adminRx.url });
    expect(created).toMatchObject({
      url: adminRx.url,
      asn: null,
      events: [],
      createdBy: `admin AS${ADMIN_ASN}`,
    });
    expect(created.secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    secrets.set('admin', created.secret as string);
    const peer = await ok('/webhooks', tokenOf(USER_ASN), { action: 'create', url: peerRx.url });
    expect(peer).toMatchObject({ asn: USER_ASN });
    secrets.set('peer', peer.secret as string);

    const listed = await ok('/admin/webhooks', admin(), { action: 'list' });
    expect(listed.webhooks).toHaveLength(2);
    expect(JSON.stringify(listed)).not.toContain(created.secret as string);
    expect(JSON.stringify(listed)).not.toContain('secret');
    expect((await stat(join(dir, 'webhooks.json'))).mode & 0o777).toBe(0o600);
  });

  it("shows and deletes a peer's own hooks only", async () => {
    expect((await ok('/webhooks', tokenOf(OTHER_ASN), { action: 'list' })).webhooks).toEqual([]);
    const mine = (await ok('/webhooks', tokenOf(USER_ASN), { action: 'list' })).webhooks as { id: string }[];
    expect(mine).toHaveLength(1);
    const res = await post('/webhooks', tokenOf(OTHER_ASN), { action: 'delete', id: mine[0]?.id });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ code: 'NOT_FOUND' });
    // a peer's route never reaches an admin's hook either
    const adminHook = (
      (await ok('/admin/webhooks', admin(), { action: 'list' })).webhooks as { id: string; asn: null }[]
    ).find((h) => h.asn === null);
    expect(
      (await post('/webhooks', tokenOf(USER_ASN), { action: 'delete', id: adminHook?.id })).statusCode,
    ).toBe(404);
  });

  it('keeps to 10 hooks per ASN', async () => {
    const asn = OTHER_ASN + 7;
    for (let i = 0; i < 10; i++)
      await ok('/webhooks', tokenOf(asn), { action: 'create', url: `https://hooks.example.org/${i}` });
    const res = await post('/webhooks', tokenOf(asn), {
      action: 'create',
      url: 'https://hooks.example.org/x',
    });
    expect(res.statusCode).toBe(409);
    expect(res.json()).toMatchObject({ code: 'CONFLICT' });
    expect((await ok('/webhooks', tokenOf(asn), { action: 'list' })).webhooks).toHaveLength(10);
  });

  it('refuses bad input naming the field', async () => {
    const creds = await post('/webhooks', tokenOf(USER_ASN), {
      action: 'create',
      url: 'https://u:p@example.org/x',
    });
    expect(creds.statusCode).toBe(400);
    expect(creds.json()).toMatchObject({ code: 'INVALID_REQUEST', errors: [{ pointer: '/url' }] });
    const event = await post('/webhooks', tokenOf(USER_ASN), {
      action: 'create',
      url: 'https://example.org/x',
      events: ['session.exploded'],
    });
    expect(event.statusCode).toBe(400);
    expect(JSON.stringify(event.json())).toContain('/events/0');
    const scheme = await post('/webhooks', tokenOf(USER_ASN), {
      action: 'create',
      url: 'ftp://example.org/x',
    });
    expect(scheme.json()).toMatchObject({ code: 'INVALID_REQUEST', errors: [{ pointer: '/url' }] });
    expect((await post('/admin/webhooks', tokenOf(USER_ASN), { action: 'list' })).statusCode).toBe(403);
  });
});

describe("a peer's hook to an address no delivery may reach", () => {
  it('is refused at its creation naming /url and the range; a name or an admin hook is not', async () => {
    // this app's notifier keeps the default rules (no PEEROPS_NOTIFY_ALLOW_PRIVATE), unlike the suite's
    const strictDir = await mkdtemp(join(tmpdir(), 'peerops-notify-strict-'));
    const strictNotifier = new Notifier({ store, webhooks: new FileWebhooks(strictDir) });
    const config = { ...loadConfig({ data: strictDir, listen: '127.0.0.1:0' }, {}) };
    const strict = await buildApp({ store, tokens, config, logger: false, notifier: strictNotifier });
    const create = (token: string, path: string, url: string) =>
      strict.inject({
        method: 'POST',
        url: path,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        payload: JSON.stringify({ action: 'create', url }),
      });
    try {
      for (const [url, reason] of [
        ['http://127.0.0.1:22/x', 'is a loopback address (127.0.0.0/8)'],
        ['http://[::1]/x', 'is the loopback address (::1/128)'],
        ['http://169.254.169.254/latest', 'is a link-local address (169.254.0.0/16)'],
        [
          'http://10.0.0.1/x',
          'is a private address (10.0.0.0/8), which only PEEROPS_NOTIFY_ALLOW_PRIVATE allows',
        ],
        ['http://[::ffff:127.0.0.1]/x', 'is a loopback address (127.0.0.0/8)'],
      ] as const) {
        const res = await create(tokenOf(USER_ASN), '/webhooks', url);
        expect(res.statusCode, url).toBe(400);
        const body = res.json() as { code: string; errors: { pointer: string; message: string }[] };
        expect(body.code).toBe('INVALID_REQUEST');
        expect(body.errors[0]?.pointer).toBe('/url');
        expect(body.errors[0]?.message).toContain(reason);
      }
      expect(await strictNotifier.webhooks.list()).toEqual([]); // nothing stored by a refusal
      // a name is judged on what it resolves to, at each delivery; an admin's hook may point anywhere
      expect((await create(tokenOf(USER_ASN), '/webhooks', 'https://hooks.example.org/x')).statusCode).toBe(
        200,
      );
      expect(
        (await create(tokenOf(ADMIN_ASN, 'admin'), '/admin/webhooks', 'http://127.0.0.1/x')).statusCode,
      ).toBe(200);
    } finally {
      await strict.close();
      await strictNotifier.close();
      await rm(strictDir, { recursive: true, force: true });
    }
  });
});

describe("a session's events", () => {
  let uuid: string;
  beforeEach(() => {
    adminRx.answer();
    peerRx.answer();
  });

  it('created and pending review reach admins only', async () => {
    uuid = (await ok('/session', tokenOf(USER_ASN), sessionFields('fra1'))).uuid as string;
    await eventually('admin: created, pending_review', () => types(adminRx, uuid).length === 2);
    expect(types(adminRx, uuid)).toEqual(['session.created', 'session.pending_review']);
    const created = events(adminRx).find((e) => e.session?.uuid === uuid);
    expect(created?.session).toMatchObject({ asn: USER_ASN, router: 'fra1', status: 'PENDING_REVIEW' });
    expect(types(peerRx, uuid)).toEqual([]);
  });

  it('approved, active, error reach the admin and the owner, each once', async () => {
    await ok('/admin/session', admin(), { action: 'approve', uuid });
    const report = (status: number, message?: string) =>
      ok(`/agent/fra1/modify`, agentToken, {
        uuid,
        status,
        interface: `wg_${store.getSession(uuid)?.spec.listenPort ?? 0}`,
        ...(message ? { message } : {}),
      });
    await eventually('peer: approved', () => types(peerRx, uuid).includes('session.approved'));
    await report(1);
    await eventually('peer: active', () => types(peerRx, uuid).includes('session.active'));
    await report(2, 'no handshake for 5 minutes');
    await eventually('both: error', () =>
      [adminRx, peerRx].every((rx) => types(rx, uuid).includes('session.error')),
    );
    const tail = ['session.approved', 'session.active', 'session.error'];
    expect(types(peerRx, uuid)).toEqual(tail);
    expect(types(adminRx, uuid)).toEqual(['session.created', 'session.pending_review', ...tail]);
    const error = events(peerRx).find((e) => e.type === 'session.error');
    expect(error?.session?.lastError?.message).toContain('no handshake');
    // one delivery each: no id twice
    const ids = events(adminRx).map((e) => e.delivery);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('deleted, once the agent has torn it down', async () => {
    await ok('/session', tokenOf(USER_ASN), { action: 'delete', uuid });
    await ok(`/agent/fra1/modify`, agentToken, {
      uuid,
      status: 0,
      interface: `wg_${store.getSession(uuid)?.spec.listenPort ?? 0}`,
    });
    await eventually('peer: deleted', () => types(peerRx, uuid).includes('session.deleted'));
    await eventually('admin: deleted', () => types(adminRx, uuid).includes('session.deleted'));
  });

  it("rejected with the admin's reason; another ASN's session never reaches the peer's hook", async () => {
    const mine = (await ok('/session', tokenOf(USER_ASN), sessionFields('fra1'))).uuid as string;
    const theirs = (await ok('/session', tokenOf(OTHER_ASN), sessionFields('fra1'))).uuid as string;
    await ok('/admin/session', admin(), {
      action: 'reject',
      uuid: mine,
      reason: 'address not in your route object',
    });
    await ok('/admin/session', admin(), { action: 'reject', uuid: theirs, reason: 'no' });
    await eventually('peer: rejected, deleted', () => types(peerRx, mine).length === 2);
    expect(types(peerRx, mine).sort()).toEqual(['session.deleted', 'session.rejected']);
    await eventually('admin: both rejected', () =>
      [mine, theirs].every((u) => types(adminRx, u).includes('session.rejected')),
    );
    const rejected = events(peerRx).find((e) => e.type === 'session.rejected' && e.session?.uuid === mine);
    expect(rejected?.reason).toBe('address not in your route object');
    // once: from the rejecting request, not again from the state the leader reads
    await new Promise((r) => setTimeout(r, 500));
    expect(types(adminRx, mine).filter((t) => t === 'session.rejected')).toHaveLength(1);
    // and gone, as a withdrawn or deleted session is
    expect(types(adminRx, mine).filter((t) => t === 'session.deleted')).toHaveLength(1);
    expect(types(peerRx, theirs)).toEqual([]);
  });

  it("setup failed reaches the admin and the owner, with the agent's message", async () => {
    const failing = (await ok('/session', tokenOf(USER_ASN), sessionFields('fra1'))).uuid as string;
    await ok('/admin/session', admin(), { action: 'approve', uuid: failing });
    await ok(`/agent/fra1/modify`, agentToken, {
      uuid: failing,
      status: 6,
      interface: `wg_${store.getSession(failing)?.spec.listenPort ?? 0}`,
      message: 'bird: syntax error',
    });
    await eventually('both: setup_failed', () =>
      [adminRx, peerRx].every((rx) => types(rx, failing).includes('session.setup_failed')),
    );
    const failed = events(peerRx).find((e) => e.type === 'session.setup_failed');
    expect(failed?.session).toMatchObject({
      status: 'SETUP_FAILED',
      lastError: { message: 'bird: syntax error' },
    });
  });

  it("an agent offline reaches admins' hooks only, once per condition", async () => {
    const reconciler = new SessionReconciler({
      store,
      stuckAfterSeconds: 600,
      offlineAfterSeconds: 300,
      onFindingRaised: (c) => void notifier.findingRaised(c),
    });
    await reconciler.pass(); // fra1's agent never sent a heartbeat
    await reconciler.pass();
    await eventually('admin: agent offline', () =>
      events(adminRx).some((e) => e.type === 'router.agent_offline'),
    );
    await new Promise((r) => setTimeout(r, 300));
    const offline = events(adminRx).filter((e) => e.type === 'router.agent_offline');
    expect(offline).toHaveLength(1);
    expect(offline[0]).toMatchObject({
      router: { name: 'fra1', lastHeartbeat: null },
      reason: 'no heartbeat yet',
    });
    expect(events(peerRx).some((e) => e.type === 'router.agent_offline')).toBe(false);
  });

  it('is retried after a 500 under the same delivery id, and counted', async () => {
    adminRx.answer([500, 503], (body) => body.includes('"session.created"'));
    const before = adminRx.received.length;
    const uuid2 = (await ok('/session', tokenOf(OTHER_ASN + 1), sessionFields('fra1'))).uuid as string;
    await eventually('admin: created after two failures', () =>
      types(adminRx, uuid2).includes('session.created'),
    );
    const created = adminRx.received
      .slice(before)
      .filter((r) => JSON.parse(r.body).type === 'session.created');
    expect(created.map((r) => r.status)).toEqual([500, 503, 200]);
    expect(new Set(created.map((r) => r.headers['x-peerops-delivery'])).size).toBe(1);
    for (const r of created) verified(r);
    const metrics = await register.getSingleMetricAsString('peerops_webhook_deliveries_total');
    expect(metrics).toMatch(
      /peerops_webhook_deliveries_total\{event="session.created",outcome="retried"\} [2-9]/,
    );
    expect(metrics).toMatch(
      /peerops_webhook_deliveries_total\{event="session.created",outcome="delivered"\} [1-9]/,
    );
  });
});

describe('delivery rules', () => {
  it('logs a failing delivery by hook id and host, never its secret', async () => {
    const hookDir = await mkdtemp(join(tmpdir(), 'peerops-notify-log-'));
    const rx = await startReceiver();
    try {
      const hooks = new FileWebhooks(hookDir);
      const hook = await hooks.create({ url: rx.url, asn: null, events: [], createdBy: 'admin' });
      let log = '';
      const logger = pino({ level: 'debug' }, { write: (line: string) => void (log += line) });
      rx.answer([500]);
      const dispatcher = new Dispatcher({ webhooks: hooks, logger, retryBaseMs: 50 });
      void dispatcher.dispatch(
        { id: 'y', type: 'router.agent_offline', occurredAt: new Date().toISOString() },
        await hooks.list(),
      );
      await eventually('delivered on the second attempt', () => rx.received.length === 2);
      await dispatcher.stop();
      expect(log).toContain(hook.id);
      expect(log).toContain('webhook failed; retrying');
      expect(log).not.toContain(hook.secret);
    } finally {
      await rx.close();
      await rm(hookDir, { recursive: true, force: true });
    }
  });

  it("refuses a peer's hook to a loopback address unless allowed; an admin's goes", async () => {
    const hookDir = await mkdtemp(join(tmpdir(), 'peerops-notify-guard-'));
    try {
      const hooks = new FileWebhooks(hookDir);
      const rx = await startReceiver();
      await hooks.create({ url: rx.url, asn: 64512, events: [], createdBy: 'AS64512' });
      await hooks.create({ url: rx.url, asn: null, events: ['session.active'], createdBy: 'admin' });
      const dispatcher = new Dispatcher({ webhooks: hooks });
      const event: NotificationEvent = {
        id: 'x',
        type: 'session.active',
        occurredAt: new Date().toISOString(),
        session: {
          uuid: 'u',
          name: 'as64512-fra1',
          asn: 64512,
          router: 'fra1',
          status: 'ACTIVE',
          lastError: null,
        },
      };
      // each ends at once: the peer's refused, the admin's delivered, the other not among its events
      expect(await dispatcher.dispatch(event, await hooks.list())).toBe(true);
      expect(await dispatcher.dispatch({ ...event, type: 'session.error' }, await hooks.list())).toBe(true);
      await dispatcher.stop();
      expect(rx.received.map((r) => JSON.parse(r.body).type)).toEqual(['session.active']);
      await rx.close();
    } finally {
      await rm(hookDir, { recursive: true, force: true });
    }
  });
});
