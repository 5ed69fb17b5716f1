/**
 * Two replicas, two agent observations of one router and one session within the same flush period
 * (docs/kubernetes.md, Observations): the older one to replica A, the newer one to replica B, as an
 * agent whose requests a Service spreads over the replicas sends them (docs/agent.md). Whatever order
 * the replicas' flushes land in, the newest observation wins on both replicas within the flush interval
 * and the watch delay, and stays: an older one never overwrites it (in the flush, or when a watched
 * object arrives). A real kube-apiserver + etcd (test/k8s/apiserver.ts); the stores are two in-process
 * replicas, each with its own clients, informers and index, as in replicas.test.ts, whose flush timers are
 * the test's: it flushes B first and A second, the order that lost the newest, then both every
 * FLUSH_MS while it reads both replicas every 100 ms, as `GET` answers from the index. Then the same
 * with two real `peerops serve` processes and their own flush timers, whose phases the test does not
 * choose: the agent's report pairs are spread over one flush interval, so some land each way round, and
 * both replicas' `GET /metrics` (session gauges, heartbeat time) are read every 100 ms.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { HeartbeatBody } from '../../common/agent-api.ts';
import type { SessionMetrics } from '../../common/schema.ts';
import { checkOrThrow } from '../../common/validate.ts';
import { TokenIssuer, loadOrCreateKey } from '../../controller/auth/jwt.ts';
import { createKubernetesStore, type KubernetesStore } from '../../controller/store/kubernetes/index.ts';
import { ADMIN_ASN, routerFields, sessionFields } from '../api/helpers.ts';
import { admin, newSession, queued, routerSpec } from '../store/fixtures.ts';
import { ControllerProcess } from '../support/controller-process.ts';
import { freePort } from '../support/ports.ts';
import { useApiServer } from './apiserver.ts';

/** The flush interval of a replica (the store's default). */
const FLUSH_MS = 2000;
/** How long a watch event may take to reach the other replica on a loaded machine. */
const WATCH_DELAY_MS = 2000;
/** How long both replicas are read after the newer observation: four flushes of each. */
const WINDOW_MS = Number(process.env['OBSERVATION_ORDER_WINDOW_MS'] ?? 4 * FLUSH_MS);
/** Sessions of the `peerops serve` case, each with its report pair at its own phase of the flush. */
const PAIRS = Number(process.env['OBSERVATION_ORDER_PAIRS'] ?? 8);

const server = useApiServer();

async function until(what: string, check: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A report's metrics as the agent route records them: `at` is when the replica got the report. */
const metrics = (rxBytes: number): SessionMetrics => ({
  rtt: 1,
  rxBytes,
  txBytes: rxBytes,
  routesImported: 1,
  at: new Date().toISOString(),
});

const heartbeat = (uptime: number) => checkOrThrow(HeartbeatBody, { version: '1.0.0', uptime }, 'heartbeat');

/** Both replicas' view every 100 ms: the longest stretch each showed a value other than the newest. */
interface Reading {
  /** ms after the newer observation was recorded that a replica last showed an older value. */
  lastStaleMs: number;
  /** The longest run of readings (ms) in which one replica showed an older value. */
  longestStaleMs: number;
}

async function read(
  replicas: Record<string, KubernetesStore>,
  newest: (store: KubernetesStore) => boolean,
  since: number,
  flush: () => Promise<void>,
): Promise<Reading> {
  let lastStaleMs = 0;
  let longestStaleMs = 0;
  const staleSince = new Map<string, number>();
  let nextFlush = since;
  let flushing: Promise<void> = Promise.resolve();
  while (Date.now() - since < WINDOW_MS) {
    const now = Date.now();
    for (const [name, store] of Object.entries(replicas)) {
      if (newest(store)) {
        staleSince.delete(name);
        continue;
      }
      const from = staleSince.get(name) ?? now;
      staleSince.set(name, from);
      lastStaleMs = now - since;
      longestStaleMs = Math.max(longestStaleMs, now - from);
    }
    // the replicas' flush timers, both in turn
    if (now >= nextFlush) {
      nextFlush += FLUSH_MS;
      flushing = flushing.then(flush);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  await flushing;
  return { lastStaleMs, longestStaleMs };
}

describe('observations on two replicas', () => {
  it('keep the newest of two reports landing at two replicas within one flush', async () => {
    const namespace = await server.createNamespace('observation-order');
    const [a, b] = [0, 1].map(() =>
      // the test flushes, in the order that lost the newest: no timer of the store's own
      createKubernetesStore({ kubeConfig: server.kubeConfig(), namespace, flushIntervalMs: 3_600_000 }),
    ) as [KubernetesStore, KubernetesStore];
    await Promise.all([a.start(), b.start()]);
    try {
      await a.createRouter('fra1', routerSpec(1), admin);
      const session = await a.createSession(newSession(4242420041, 'fra1'), queued, admin, 'create');
      const uuid = session.spec.uuid;
      await until('replica b sees the session', () => b.getSession(uuid) !== undefined, 5000);

      // the agent's reports: the older one to A, the newer one (a few ms later) to B
      expect(a.recordHeartbeat('fra1', heartbeat(100))).toBe(true);
      a.recordSessionMetrics(uuid, metrics(100));
      await new Promise((r) => setTimeout(r, 5));
      expect(b.recordHeartbeat('fra1', heartbeat(200))).toBe(true);
      b.recordSessionMetrics(uuid, metrics(200));
      const since = Date.now();
      const newest = (store: KubernetesStore) =>
        store.getRouter('fra1')?.status.uptime === 200 &&
        store.getSession(uuid)?.status.metrics?.rxBytes === 200;

      // B's flush lands first, A's second, at once and then every FLUSH_MS
      const reading = await read({ a, b }, newest, since, async () => {
        await b.flushObservations();
        await a.flushObservations();
      });
      console.log(
        `observation order: an older value last seen ${reading.lastStaleMs} ms after the newest was recorded, ` +
          `longest stale stretch ${reading.longestStaleMs} ms (bound ${FLUSH_MS + WATCH_DELAY_MS} ms, window ${WINDOW_MS} ms)`,
      );
      expect(reading.lastStaleMs).toBeLessThanOrEqual(FLUSH_MS + WATCH_DELAY_MS);
      expect(newest(a) && newest(b)).toBe(true);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});

/** The values of one series per label value from a `GET /metrics` text. */
function series(text: string, metric: string, label: string): Map<string, string> {
  const out = new Map<string, string>();
  const line = new RegExp(`^${metric}\\{(?:[^}]*,)?${label}="([^"]+)"[^}]*\\} (\\S+)$`, 'gm');
  for (const m of text.matchAll(line)) out.set(m[1] ?? '', m[2] ?? '');
  return out;
}

describe('an agent whose reports two `peerops serve` replicas take in turn', () => {
  it(`shows its newest report on both replicas within the bound, whatever the flushes' phase`, async () => {
    const namespace = await server.createNamespace('observation-serve');
    const kubeconfig = await server.kubeconfigFile();
    const dir = await mkdtemp(join(tmpdir(), 'peerops-observation-order-'));
    const issuer = new TokenIssuer(await loadOrCreateKey(join(dir, 'jwt-ed25519.pem')));
    const adminToken = issuer.issueToken(ADMIN_ASN, 'admin').token;
    const replicas: ControllerProcess[] = [];
    try {
      for (const name of ['replica-a', 'replica-b']) {
        const replica = new ControllerProcess(join(dir, name), await freePort(), {
          PEEROPS_STORE: 'kubernetes',
          PEEROPS_NAMESPACE: namespace,
          KUBECONFIG: kubeconfig,
          POD_NAME: name,
          PEEROPS_JWT_KEY_FILE: join(dir, 'jwt-ed25519.pem'),
        });
        await replica.start();
        replicas.push(replica);
      }
      const [a, b] = replicas as [ControllerProcess, ControllerProcess];
      const metricsOf = async (r: ControllerProcess) =>
        (await fetch(`${r.base}/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
      expect(
        (await a.post(adminToken, '/admin/policy', { action: 'set', spec: { dn42Asn: ADMIN_ASN } })).status,
      ).toBe(200);
      const added = await a.post(adminToken, '/admin/router', { action: 'add', ...routerFields('fra1') });
      expect(added.status, JSON.stringify(added.body)).toBe(200);
      const { agentToken } = added.body as { agentToken: string };
      const uuids: string[] = [];
      for (let i = 0; i < PAIRS; i++) {
        const asn = 4242421100 + i;
        const created = await (i % 2 ? b : a).post(
          issuer.issueToken(asn, 'user').token,
          '/session',
          sessionFields('fra1'),
        );
        expect(created.status, JSON.stringify(created.body)).toBe(200);
        uuids.push((created.body as { uuid: string }).uuid);
      }
      for (const r of replicas)
        await expect
          .poll(
            async () => series(await metricsOf(r), 'active_sessions_total', 'status').get('PENDING_REVIEW'),
            {
              timeout: 10_000,
              interval: 100,
            },
          )
          .toBe(String(PAIRS));

      // both replicas read every 100 ms: per series (a session's received bytes, the router's heartbeat
      // time) how long after its newest value was acknowledged a replica last showed another
      const newest = new Map<string, { acknowledged: number; value: string | undefined }>();
      const lastStale = new Map<string, number>();
      let reading = true;
      const reader = (async () => {
        while (reading) {
          for (const r of replicas) {
            const text = await metricsOf(r);
            const at = Date.now();
            const shown = new Map([
              ...series(text, 'peerops_session_rx_bytes', 'session'),
              ...series(text, 'agent_heartbeat_timestamp', 'router'),
            ]);
            for (const [key, { acknowledged, value }] of newest)
              if (shown.get(key) !== value) lastStale.set(key, at - acknowledged);
          }
          await new Promise((r) => setTimeout(r, 100));
        }
      })();

      // the agent's pairs, one per session, spread over one flush interval: the older report to A, the
      // newer to B, as requests a Service spreads; a heartbeat pair with each
      const ok = async (r: ControllerProcess, path: string, body: unknown) => {
        const answer = await r.post(agentToken, path, body);
        expect(answer.status, `${path}: ${JSON.stringify(answer.body)}`).toBe(200);
      };
      const report = (uuid: string, rxBytes: number) => ({
        sessions: [{ uuid, rtt: 1, rxBytes, txBytes: rxBytes, routesImported: 1 }],
      });
      const start = Date.now();
      for (const [i, uuid] of uuids.entries()) {
        const wait = start + (i * FLUSH_MS) / PAIRS - Date.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        await ok(a, '/agent/fra1/heartbeat', { version: '1.0.0', uptime: 2 * i });
        await ok(a, '/agent/fra1/report', report(uuid, 100));
        await ok(b, '/agent/fra1/heartbeat', { version: '1.0.0', uptime: 2 * i + 1 });
        await ok(b, '/agent/fra1/report', report(uuid, 200));
        newest.set(uuid, { acknowledged: Date.now(), value: '200' });
      }
      // B shows the heartbeat it got at once
      const beat = series(await metricsOf(b), 'agent_heartbeat_timestamp', 'router').get('fra1');
      newest.set('fra1', { acknowledged: Date.now(), value: beat });
      await new Promise((r) => setTimeout(r, WINDOW_MS));
      reading = false;
      await reader;
      const longest = Math.max(0, ...lastStale.values());
      console.log(
        `observation order, 2 serve replicas, ${PAIRS} report pairs: an older value last seen ${longest} ms after ` +
          `the newest was acknowledged (${lastStale.size} of ${PAIRS + 1} series ever showed one; ` +
          `bound ${FLUSH_MS + WATCH_DELAY_MS} ms, read for ${WINDOW_MS} ms after the last)`,
      );
      expect(longest).toBeLessThanOrEqual(FLUSH_MS + WATCH_DELAY_MS);
    } finally {
      for (const r of replicas) await r.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
