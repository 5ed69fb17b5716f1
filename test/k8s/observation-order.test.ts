/**
 * Two replicas, two agent observations of one router and one session within the same flush period
 * (docs/kubernetes.md, Observations): the older one to replica A, the newer one to replica B, as an
 * agent whose requests a Service spreads over the replicas sends them (docs/agent.md). Whatever order
 * the replicas' flushes land in, the newest observation wins on both replicas within the flush interval
 * and the watch delay, and stays: an older one never overwrites it (in the flush, or when a watched
 * object arrives). A real kube-apiserver + etcd (test/k8s/apiserver.ts); the stores are two in-process
 * replicas, each with its own clients, informers and index, as in replicas.test.ts. The flush timers are
 * the test's: it flushes B first and A second, the order that lost the newest, then both every
 * FLUSH_MS while it reads both replicas every 100 ms, as `GET` answers from the index.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HeartbeatBody } from '../../common/agent-api.ts';
import type { SessionMetrics } from '../../common/schema.ts';
import { checkOrThrow } from '../../common/validate.ts';
import { createKubernetesStore, type KubernetesStore } from '../../controller/store/kubernetes/index.ts';
import { admin, newSession, queued, routerSpec } from '../store/fixtures.ts';
import { TOOLS_BUILD_TIMEOUT_MS, startApiServer, type TestApiServer } from './apiserver.ts';

/** The flush interval of a replica (the store's default). */
const FLUSH_MS = 2000;
/** How long a watch event may take to reach the other replica on a loaded machine. */
const WATCH_DELAY_MS = 2000;
/** How long both replicas are read after the newer observation: five flushes of each. */
const WINDOW_MS = Number(process.env['OBSERVATION_ORDER_WINDOW_MS'] ?? 5 * FLUSH_MS);

let server: TestApiServer;
beforeAll(async () => {
  server = await startApiServer();
}, TOOLS_BUILD_TIMEOUT_MS);
afterAll(async () => {
  await server?.stop();
});

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
