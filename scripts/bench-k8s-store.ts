/**
 * Kubernetes store benchmark against the real test kube-apiserver and etcd (test/k8s/apiserver.ts, built
 * by scripts/k8s-tools.sh on first use): creates of N sessions (8 at a time), then observation flushes with
 * every session's metrics changed, written regardless of metricsWriteIntervalMs: wall time, and the
 * controller's own CPU per status patch beside what the whole machine spent (API server and etcd run on
 * it too). Last, a flush as the timer runs it, within the interval: nothing written.
 *
 *   npm run bench:k8s-store            (500 sessions)
 *   node scripts/bench-k8s-store.ts 2000
 */
import { readFileSync } from 'node:fs';
import { mapLimit } from '../common/concurrency.ts';
import { KubernetesStore } from '../controller/store/kubernetes/index.ts';
import { startApiServer } from '../test/k8s/apiserver.ts';
import { admin, newSession, pending, routerSpec, user } from '../test/store/fixtures.ts';

const sessions = Number(process.argv[2] ?? 500);
const FLUSHES = 3;

/** CPU ms the whole machine was busy (all cores), from /proc/stat. */
function machineBusyMs(): number {
  const fields = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').split(/ +/).slice(1, 8);
  // user nice system idle iowait irq softirq: all but idle, in clock ticks of 10 ms
  return fields.reduce((sum, v, i) => (i === 3 ? sum : sum + Number(v)), 0) * 10;
}

const server = await startApiServer();
try {
  const namespace = await server.createNamespace('bench');
  const store = new KubernetesStore({
    kubeConfig: server.kubeConfig(),
    namespace,
    flushIntervalMs: 3_600_000,
  });
  await store.start();
  await store.createRouter('fra1', routerSpec(1), admin);
  const started = performance.now();
  const created = await mapLimit(
    Array.from({ length: sessions }, (_, i) => i),
    8,
    (i) => store.createSession(newSession(64000 + i, 'fra1'), pending, user(64000 + i), `create ${i}`),
  );
  const createS = (performance.now() - started) / 1000;
  console.log(
    `${sessions} sessions created in ${createS.toFixed(1)} s (${(sessions / createS).toFixed(0)}/s)`,
  );
  for (let f = 1; f <= FLUSHES; f++) {
    const at = new Date().toISOString();
    for (const s of created)
      store.recordSessionMetrics(s.spec.uuid, { rtt: f, rxBytes: f, txBytes: f, routesImported: f, at });
    const t = performance.now();
    const cpu = process.cpuUsage();
    const busy = machineBusyMs();
    await store.flushObservations({ allMetrics: true });
    const own = process.cpuUsage(cpu);
    console.log(
      `flush ${f}: ${(performance.now() - t).toFixed(0)} ms for ${sessions} status patches; ` +
        `controller CPU ${((own.user + own.system) / 1000 / sessions).toFixed(2)} ms a patch, ` +
        `machine busy ${((machineBusyMs() - busy) / sessions).toFixed(1)} ms a patch`,
    );
  }
  for (const s of created)
    store.recordSessionMetrics(s.spec.uuid, {
      rtt: 0,
      rxBytes: 0,
      txBytes: 0,
      routesImported: 0,
      at: new Date().toISOString(),
    });
  const t = performance.now();
  await store.flushObservations();
  console.log(
    `flush within metricsWriteIntervalMs: ${(performance.now() - t).toFixed(0)} ms (the metrics stay pending on this replica)`,
  );
  await store.close();
} finally {
  await server.stop();
}
