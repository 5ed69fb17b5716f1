/**
 * Webhooks with two controller replicas on one real kube-apiserver (test/k8s/apiserver.ts): each has its
 * own store, app, notifier and LeaderElector, as two pods would; the hooks are in the one Secret. Changes
 * made through either replica reach the receiver once each, from the leader (a rejection too: its reason
 * is in the status, docs/api.md, Decisions); after a hand-over the new leader goes on without repeating.
 */
import { createHmac } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../controller/app.ts';
import { TokenIssuer, loadOrCreateKey } from '../../controller/auth/jwt.ts';
import { loadConfig } from '../../controller/config.ts';
import { Notifier } from '../../controller/notify/notifier.ts';
import type { NotificationEvent } from '../../controller/store/core/events.ts';
import { KubernetesWebhooks } from '../../controller/notify/kubernetes.ts';
import { LeaderElector, createKubernetesStore } from '../../controller/store/kubernetes/index.ts';
import type { Store } from '../../controller/store/store.ts';
import { ADMIN_ASN, USER_ASN, routerFields, sessionFields } from '../api/helpers.ts';
import { TOOLS_BUILD_TIMEOUT_MS, useApiServer } from '../k8s/apiserver.ts';
import { eventually, startReceiver, type Receiver } from './receiver.ts';

interface Replica {
  name: string;
  store: Store;
  app: FastifyInstance;
  elector: LeaderElector;
}

const server = useApiServer();
let dir: string;
let tokens: TokenIssuer;
let rx: Receiver;
let replicas: Replica[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-notify-k8s-'));
  tokens = new TokenIssuer(await loadOrCreateKey(join(dir, 'jwt-ed25519.pem')));
  rx = await startReceiver();
}, TOOLS_BUILD_TIMEOUT_MS);
afterAll(async () => {
  for (const r of replicas) {
    await r.elector.stop();
    await r.app.close();
    await r.store.close();
  }
  await rx?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function replica(name: string, namespace: string): Promise<Replica> {
  const kubeConfig = server.kubeConfig();
  const store = createKubernetesStore({ kubeConfig, namespace, flushIntervalMs: 200 });
  await store.start();
  const notifier = new Notifier({
    store,
    webhooks: new KubernetesWebhooks(server.kubeConfig(), namespace),
    retryBaseMs: 100,
    allowPrivateTargets: true,
  });
  const config = {
    ...loadConfig({ data: join(dir, name), listen: '127.0.0.1:0' }, {}),
    rateLimit: { perMinute: 100_000, agentPerMinute: 100_000 },
  };
  const app = await buildApp({ store, tokens, config, logger: false, notifier });
  await app.ready();
  const elector = new LeaderElector({
    kubeConfig: server.kubeConfig(),
    namespace,
    name: 'peerops-controller',
    identity: name,
    leaseDurationSeconds: 3,
    retryIntervalMs: 300,
    onStartedLeading: () => notifier.start(),
    onStoppedLeading: () => notifier.stop(),
  });
  elector.start();
  return { name, store, app, elector };
}

async function ok(r: Replica, url: string, token: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await r.app.inject({
    method: 'POST',
    url,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    payload: JSON.stringify(body),
  });
  if (res.statusCode !== 200) throw new Error(`${r.name} ${url}: ${res.statusCode} ${res.body}`);
  return res.json();
}

const admin = () => tokens.issueToken(ADMIN_ASN, 'admin').token;
const user = () => tokens.issueToken(USER_ASN, 'user').token;

describe('webhooks with two replicas', () => {
  it('deliver each event once, across a leader hand-over', async () => {
    const namespace = await server.createNamespace('notify');
    replicas = [await replica('a', namespace), await replica('b', namespace)];
    const [a, b] = replicas as [Replica, Replica];
    await eventually('a leader', () => replicas.some((r) => r.elector.isLeader), 30_000);

    // the hook is made at one replica and used by whichever leads (the one Secret)
    const hook = await ok(b, '/admin/webhooks', admin(), { action: 'create', url: rx.url });
    const secret = hook.secret as string;
    expect((await ok(a, '/admin/webhooks', admin(), { action: 'list' })).webhooks).toHaveLength(1);

    const { agentToken } = (await ok(a, '/admin/router', admin(), {
      action: 'add',
      ...routerFields('fra1'),
    })) as { agentToken: string };
    await eventually('b sees the router', () => b.store.getRouter('fra1') !== undefined);
    const received = () =>
      rx.received.map((r) => {
        expect(r.headers['x-peerops-signature']).toBe(
          `sha256=${createHmac('sha256', secret).update(r.body).digest('hex')}`,
        );
        return JSON.parse(r.body) as NotificationEvent;
      });
    const of = (uuid: string) =>
      received()
        .filter((e) => e.session?.uuid === uuid)
        .map((e) => e.type);

    // create at b, approve at a, the agent reports at b
    const uuid = (await ok(b, '/session', user(), sessionFields('fra1'))).uuid as string;
    await eventually('a sees the session', () => a.store.getSession(uuid) !== undefined);
    await ok(a, '/admin/session', admin(), { action: 'approve', uuid });
    await eventually('b sees the approval', () => b.store.getSession(uuid)?.status.code === 4);
    const port = b.store.getSession(uuid)?.spec.listenPort ?? 0;
    await ok(b, '/agent/fra1/modify', agentToken, { uuid, status: 1, interface: `wg_${port}` });
    const lifecycle = ['session.created', 'session.pending_review', 'session.approved', 'session.active'];
    await eventually('created … active', () => of(uuid).length >= lifecycle.length, 30_000);

    // a rejection at the replica that does not lead: told by the leader, once
    const other = (
      await ok(a, '/session', tokens.issueToken(USER_ASN + 1, 'user').token, sessionFields('fra1'))
    ).uuid as string;
    await eventually('b sees the other session', () => b.store.getSession(other) !== undefined);
    const follower = replicas.find((r) => !r.elector.isLeader) ?? b;
    await ok(follower, '/admin/session', admin(), { action: 'reject', uuid: other, reason: 'test' });
    await eventually('rejected', () => of(other).includes('session.rejected'), 30_000);

    // hand-over: the leader stops (and hands the lease back); the other one leads and reports on
    const leader = replicas.find((r) => r.elector.isLeader);
    const next = replicas.find((r) => r !== leader);
    if (!leader || !next) throw new Error('no leader');
    await leader.elector.stop();
    await eventually(`${next.name} leads`, () => next.elector.isLeader, 30_000);
    await ok(next, '/agent/fra1/modify', agentToken, {
      uuid,
      status: 2,
      interface: `wg_${port}`,
      message: 'down',
    });
    await eventually('error', () => of(uuid).includes('session.error'), 30_000);

    // settle, then every event exactly once
    await new Promise((r) => setTimeout(r, 2000));
    expect(of(uuid)).toEqual([...lifecycle, 'session.error']);
    expect(of(other).sort()).toEqual([
      'session.created',
      'session.deleted',
      'session.pending_review',
      'session.rejected',
    ]);
    const ids = received().map((e) => e.id);
    expect(new Set(ids).size).toBe(ids.length);
  }, 180_000);
});
