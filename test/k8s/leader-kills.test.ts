/**
 * Webhook events across Lease-holder kills (docs/kubernetes.md, "The outbox"): two real `peerops serve`
 * replicas on the Kubernetes store (a real kube-apiserver + etcd, test/k8s/apiserver.ts) and an admin
 * hook's receiver on loopback. Sessions go through their transitions (create, approve, the agent's reports
 * up and down, delete) through either replica; LEADER_KILLS times the replica holding the Lease is
 * SIGKILLed, and changes are made through the other one before it takes the Lease over (no replica
 * leads then). Every event of an acknowledged change reaches the receiver at least once, and the outbox
 * (session annotations, outbox records) empties once delivered.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoordinationV1Api, CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenIssuer, loadOrCreateKey } from '../../controller/auth/jwt.ts';
import type { NotificationEvent } from '../../controller/store/core/events.ts';
import { routerFields, sessionFields } from '../api/helpers.ts';
import { eventually, startReceiver, type Receiver } from '../notify/receiver.ts';
import { ControllerProcess } from '../support/controller-process.ts';
import { freePort } from '../support/ports.ts';
import { TOOLS_BUILD_TIMEOUT_MS, useApiServer } from './apiserver.ts';

/** SIGKILLs of the Lease holder; 10 take about a minute here (each waits out a 2 s Lease and a restart). */
const KILLS = Number(process.env['LEADER_KILLS'] ?? 10);
const LEASE_SECONDS = 2;
const ADMIN_ASN = 4242420000;

const server = useApiServer();
let dir: string;
let issuer: TokenIssuer;
let rx: Receiver;
const replicas: { name: string; process: ControllerProcess }[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-leader-kills-'));
  issuer = new TokenIssuer(await loadOrCreateKey(join(dir, 'jwt-ed25519.pem')));
  // a receiver slower than the changes come: the leader always holds undelivered events when it is killed
  rx = await startReceiver({ delayMs: 100 });
}, TOOLS_BUILD_TIMEOUT_MS);

afterAll(async () => {
  for (const r of replicas) await r.process.kill();
  await rx?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const admin = () => issuer.issueToken(ADMIN_ASN, 'admin').token;
const user = (asn: number) => issuer.issueToken(asn, 'user').token;

type State = 'pending' | 'queued' | 'active' | 'error' | 'deleting' | 'gone' | 'unknown';
interface Tracked {
  uuid: string;
  asn: number;
  port: number;
  state: State;
}

describe('the outbox across Lease-holder kills', () => {
  it(`delivers every event of acknowledged changes across ${KILLS} SIGKILLs of the leader`, async () => {
    const namespace = await server.createNamespace('leader-kills');
    const kubeconfig = await server.kubeconfigFile();
    for (const name of ['replica-a', 'replica-b']) {
      const process = new ControllerProcess(join(dir, name), await freePort(), {
        PEEROPS_STORE: 'kubernetes',
        PEEROPS_NAMESPACE: namespace,
        KUBECONFIG: kubeconfig,
        POD_NAME: name,
        PEEROPS_LEASE_DURATION_SECONDS: String(LEASE_SECONDS),
        PEEROPS_JWT_KEY_FILE: join(dir, 'jwt-ed25519.pem'),
      });
      await process.start();
      replicas.push({ name, process });
    }
    const leases = server.kubeConfig().makeApiClient(CoordinationV1Api);
    const holder = async () =>
      (await leases.readNamespacedLease({ name: 'peerops-controller', namespace }).catch(() => undefined))
        ?.spec?.holderIdentity ?? '';
    const waitHolder = async (check: (h: string) => boolean) => {
      const deadline = Date.now() + (LEASE_SECONDS + 10) * 1000;
      for (let h = await holder(); ; h = await holder()) {
        if (check(h)) return h;
        if (Date.now() > deadline) throw new Error(`lease holder still '${h}'`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    let alive = [...replicas];
    let turn = 0;
    /** A write through the replicas alive, in turn; acknowledged only with 200. */
    const send = async (token: string, path: string, body: unknown, via = alive) => {
      const r = via[turn++ % via.length];
      if (!r) throw new Error('no replica alive');
      return r.process.post(token, path, body);
    };
    const ok = async (token: string, path: string, body: unknown) => {
      const answer = await send(token, path, body);
      expect(answer.status, `${path}: ${JSON.stringify(answer.body)}`).toBe(200);
      return answer.body;
    };

    await waitHolder((h) => h !== '');
    await ok(admin(), '/admin/policy', { action: 'set', spec: { dn42Asn: ADMIN_ASN } });
    const { agentToken } = (
      await replicas[0]!.process.post(admin(), '/admin/router', {
        action: 'add',
        ...routerFields('fra1'),
      })
    ).body as { agentToken: string };
    await replicas[0]!.process.post(admin(), '/admin/webhooks', { action: 'create', url: rx.url });
    // the other replica serves fra1 once its watch brought it (milliseconds)
    await new Promise((r) => setTimeout(r, 1000));

    const sessions: Tracked[] = [];
    /** Acknowledged changes' events: `<uuid> <type>` → how many distinct ones must arrive. */
    const expected = new Map<string, number>();
    const expect1 = (uuid: string, type: string) =>
      expected.set(`${uuid} ${type}`, (expected.get(`${uuid} ${type}`) ?? 0) + 1);
    let nextAsn = 4242421000;
    let acknowledged = 0;
    let whileNoLeader = 0;

    /** One transition of some session, through `via`; its events are expected once it is answered 200. */
    const step = async (via: typeof alive): Promise<void> => {
      const pick = (state: State) => sessions.find((s) => s.state === state);
      const agent = async (s: Tracked, status: number, next: State, type?: string) => {
        const answer = await send(
          agentToken,
          '/agent/fra1/modify',
          { uuid: s.uuid, status, interface: `wg_${s.port}`, ...(status === 2 ? { message: 'down' } : {}) },
          via,
        );
        s.state = answer.status === 200 ? next : 'unknown';
        if (answer.status === 200 && type) expect1(s.uuid, type);
        if (answer.status === 200) acknowledged++;
      };
      const candidates: (() => Promise<void>)[] = [];
      const pending = pick('pending');
      if (pending)
        candidates.push(async () => {
          const answer = await send(
            admin(),
            '/admin/session',
            { action: 'approve', uuid: pending.uuid },
            via,
          );
          pending.state = answer.status === 200 ? 'queued' : 'unknown';
          if (answer.status === 200) {
            expect1(pending.uuid, 'session.approved');
            acknowledged++;
          }
        });
      const queued = pick('queued');
      if (queued) candidates.push(() => agent(queued, 1, 'active', 'session.active'));
      const active = pick('active');
      if (active) candidates.push(() => agent(active, 2, 'error', 'session.error'));
      const failed = pick('error');
      if (failed) candidates.push(() => agent(failed, 1, 'active', 'session.active'));
      const deleting = pick('deleting');
      if (deleting) candidates.push(() => agent(deleting, 0, 'gone', 'session.deleted'));
      const up = sessions.filter((s) => s.state === 'active');
      if (up.length > 2) {
        const s = up[0]!;
        candidates.push(async () => {
          const answer = await send(user(s.asn), '/session', { action: 'delete', uuid: s.uuid }, via);
          s.state = answer.status === 200 ? 'deleting' : 'unknown';
          if (answer.status === 200) acknowledged++;
        });
      }
      if (candidates.length === 0 || sessions.filter((s) => s.state === 'pending').length < 2)
        candidates.push(async () => {
          const asn = nextAsn++;
          const answer = await send(user(asn), '/session', sessionFields('fra1'), via);
          if (answer.status !== 200) return;
          const created = answer.body as { uuid: string; listenPort: number };
          sessions.push({ uuid: created.uuid, asn, port: created.listenPort, state: 'pending' });
          expect1(created.uuid, 'session.created');
          expect1(created.uuid, 'session.pending_review');
          acknowledged++;
        });
      await candidates[Math.floor(Math.random() * candidates.length)]!();
    };

    const started = Date.now();
    for (let kill = 0; kill < KILLS; kill++) {
      for (let i = 0; i < 12; i++) await step(alive);
      const leaderName = await waitHolder((h) => replicas.some((r) => r.name === h));
      const leader = replicas.find((r) => r.name === leaderName)!;
      await leader.process.kill();
      alive = replicas.filter((r) => r !== leader);
      // the Lease still names the dead replica until it expires: nobody leads, the survivor takes writes
      for (let i = 0; i < 8 && (await holder()) === leaderName; i++) {
        const before = acknowledged;
        await step(alive);
        if ((await holder()) === leaderName) whileNoLeader += acknowledged - before;
      }
      await waitHolder((h) => h !== leaderName && h !== '');
      await leader.process.start();
      alive = [...replicas];
    }
    for (let i = 0; i < 12; i++) await step(alive);

    const delivered = () => {
      const got = new Map<string, Set<string>>();
      for (const r of rx.received) {
        const event = JSON.parse(r.body) as NotificationEvent;
        if (!event.session) continue;
        const key = `${event.session.uuid} ${event.type}`;
        got.set(key, (got.get(key) ?? new Set()).add(event.id));
      }
      return got;
    };
    const missing = () => {
      const got = delivered();
      return [...expected].filter(([key, n]) => (got.get(key)?.size ?? 0) < n);
    };
    await eventually('every expected event delivered', () => missing().length === 0, 60_000).catch(
      (err: unknown) => {
        throw new Error(`${String(err)}: missing ${JSON.stringify(missing().slice(0, 10))}`);
      },
    );

    // confirmed: no event left on a session object nor in an outbox record
    const custom = server.kubeConfig().makeApiClient(CustomObjectsApi);
    const core = server.kubeConfig().makeApiClient(CoreV1Api);
    const waiting = async () => {
      const listed = (await custom.listNamespacedCustomObject({
        group: 'peerops.dev',
        version: 'v1alpha1',
        namespace,
        plural: 'peeringsessions',
      })) as { items: { metadata: { annotations?: Record<string, string> } }[] };
      const onSessions = listed.items.filter((s) => s.metadata.annotations?.['peerops.dev/outbox']).length;
      const records = (await core.listNamespacedConfigMap({ namespace, labelSelector: 'peerops.dev/outbox' }))
        .items.length;
      return onSessions + records;
    };
    const deadline = Date.now() + 30_000;
    while ((await waiting()) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    expect(await waiting()).toBe(0);

    const events = [...expected.values()].reduce((a, b) => a + b, 0);
    const ids = rx.received.map((r) => (JSON.parse(r.body) as NotificationEvent).id);
    const distinct = new Set(ids).size;
    console.log(
      `leader kills: ${KILLS} kills in ${((Date.now() - started) / 1000).toFixed(0)} s, ${acknowledged} acknowledged ` +
        `changes (${whileNoLeader} while no replica led), ${events} session events expected, all delivered; ` +
        `${ids.length} deliveries of ${distinct} distinct events (${ids.length - distinct} repeats), lost 0`,
    );
    expect(missing()).toEqual([]);
  }, 600_000);
});
