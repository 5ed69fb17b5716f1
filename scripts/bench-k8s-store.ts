/**
 * Kubernetes store benchmark against the real test kube-apiserver and etcd (test/k8s/apiserver.ts, built
 * by scripts/k8s-tools.sh on first use). Two modes:
 *
 * Writes (the default): creates of N sessions (8 at a time), then observation flushes with every session's
 * metrics changed, written regardless of metricsWriteIntervalMs: wall time, and the controller's own CPU
 * per status patch beside what the whole machine spent (API server and etcd run on it too). Last, a flush
 * as the timer runs it, within the interval: nothing written.
 *
 * Replicas: the API server is filled with N sessions over R routers straight through the Kubernetes API
 * (objects as the store writes them, status subresource included), then `peerops serve` is started
 * PEEROPS_REPLICAS times as separate processes, as operators run them (PEEROPS_STORE=kubernetes, a
 * kubeconfig, a shared JWT key), one after the other as a rolling update does. Per replica: the time from
 * spawn to /health answering (the store's list and watch synced come before the listen), VmRSS and VmHWM
 * after the start and after the test. Then the cross-replica delay: a router's long poll held on replica B
 * while a session is created and approved on replica A, from A's answer to the approval to B's answer,
 * ROUNDS times. Targets (docs/benchmarks.md): start < 10 s, RSS < 500 MiB, propagation p50 < 200 ms.
 *
 *   npm run bench:k8s-store                          (writes, 500 sessions)
 *   node scripts/bench-k8s-store.ts 2000
 *   npm run bench:k8s-store -- replicas              (10,000 sessions over 100 routers, 3 replicas, 30 rounds)
 *   node scripts/bench-k8s-store.ts replicas 1000 --routers 10 --replicas 2 --rounds 10
 *   node scripts/bench-k8s-store.ts replicas --node-options=--max-semi-space-size=2
 *
 * Method and current figures: docs/benchmarks.md.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { mapLimit } from '../common/concurrency.ts';
import { withSessionConditions, reportingRouterConditions, atGeneration } from '../common/conditions.ts';
import { GROUP_VERSION } from '../common/schema.ts';
import { KubeApi } from '../controller/store/kubernetes/api.ts';
import { createKubernetesStore } from '../controller/store/kubernetes/index.ts';
import { ROOT, startApiServer, type TestApiServer } from '../test/k8s/apiserver.ts';
import { waitForHealth } from '../test/support/health.ts';
import { freePort } from '../test/support/ports.ts';
import { admin, newSession, pending, routerSpec, user } from '../test/store/fixtures.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    routers: { type: 'string', default: '100' },
    replicas: { type: 'string', default: '3' },
    rounds: { type: 'string', default: '30' },
    /** NODE_OPTIONS of the replicas, e.g. --max-semi-space-size=2 (docs/kubernetes.md, memory). */
    'node-options': { type: 'string', default: '' },
  },
});
const replicasMode = positionals[0] === 'replicas';
const sessions = Number(positionals[replicasMode ? 1 : 0] ?? (replicasMode ? 10_000 : 500));
const FLUSHES = 3;
const ADMIN_ASN = 4242420000;
const MiB = 1024 * 1024;

/** CPU ms the whole machine was busy (all cores), from /proc/stat. */
function machineBusyMs(): number {
  const fields = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').split(/ +/).slice(1, 8);
  // user nice system idle iowait irq softirq: all but idle, in clock ticks of 10 ms
  return fields.reduce((sum, v, i) => (i === 3 ? sum : sum + Number(v)), 0) * 10;
}

const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

async function writesBench(server: TestApiServer): Promise<void> {
  const namespace = await server.createNamespace('bench');
  const store = createKubernetesStore({
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
    await store.storage.flushObservations({ allMetrics: true });
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
}

// ---------------------------------------------------------------- replicas mode

const wgKey = () => randomBytes(32).toString('base64');

/**
 * Routers, their agent-token Secrets, the default policy and `count` sessions spread over the routers,
 * written as the store writes them (labels, audit annotations, the status subresource with conditions,
 * metrics and BGP state of an ACTIVE session), 32 requests at a time. Answers each router's agent token.
 */
async function fill(server: TestApiServer, namespace: string, routers: number, count: number) {
  const api = new KubeApi(server.kubeConfig(), namespace);
  const now = new Date().toISOString();
  const audit = (message: string) => ({
    'peerops.dev/last-actor': `admin AS${ADMIN_ASN}`,
    'peerops.dev/last-change': message,
  });
  await api.create('RoutingPolicy', {
    apiVersion: GROUP_VERSION,
    kind: 'RoutingPolicy',
    metadata: { name: 'default', annotations: audit('set policy default') },
    spec: { dn42Asn: ADMIN_ASN },
  });
  const tokens = new Map<string, string>();
  const names = Array.from({ length: routers }, (_, i) => `r${i + 1}`);
  await mapLimit(names, 16, async (name) => {
    const token = randomBytes(32).toString('base64url');
    tokens.set(name, token);
    const { agentTokenSha256: _none, ...spec } = routerSpec(Number(name.slice(1)));
    const created = await api.create('Router', {
      apiVersion: GROUP_VERSION,
      kind: 'Router',
      metadata: { name, annotations: audit(`add router ${name}`) },
      spec: { ...spec, endpointHost: `${name}.bench.example` },
    });
    await api.patchStatus(
      'Router',
      name,
      atGeneration(
        {
          lastHeartbeat: now,
          agentVersion: '0.0.0-bench',
          uptime: 3600,
          conditions: reportingRouterConditions(undefined, now),
        },
        created.metadata.generation,
      ),
    );
    await api.putTokenHash(name, createHash('sha256').update(token).digest('hex'));
  });
  const perRouter = Math.ceil(count / routers);
  const started = performance.now();
  let done = 0;
  await mapLimit(
    Array.from({ length: count }, (_, i) => i),
    32,
    async (i) => {
      const router = names[i % routers] as string;
      const s = Math.floor(i / routers) + 1;
      const asn = 4242421000 + s;
      const name = `as${asn}-${router}`;
      const status = withSessionConditions(
        {
          code: 1,
          name: 'ACTIVE',
          interface: `wg_${20000 + s}`,
          lastTransitionTime: now,
          bgpState: 'Established',
          bgpSince: now,
          metrics: { rtt: 12.5, rxBytes: 123456, txBytes: 654321, routesImported: 42, at: now },
        },
        undefined,
      );
      // spec and status in one create: a PeeringSession has no status subresource
      await api.create('PeeringSession', {
        apiVersion: GROUP_VERSION,
        kind: 'PeeringSession',
        metadata: {
          name,
          labels: { 'peerops.dev/router': router, 'peerops.dev/asn': String(asn) },
          annotations: audit(`create session AS${asn} on ${router}`),
        },
        spec: {
          uuid: randomUUID(),
          asn,
          router,
          ipv6: `fd42:${s.toString(16)}::1`,
          linkLocal: `fe80::2:${s.toString(16)}`,
          endpoint: `peer${s}.example.org:51820`,
          publicKey: wgKey(),
          mtu: 1420,
          mpbgp: true,
          extendedNextHop: true,
          listenPort: 20000 + s,
          restartGeneration: 0,
          createdAt: now,
        },
        status: atGeneration(status, 1),
      });
      if (++done % 1000 === 0 || done === count) {
        const s = (performance.now() - started) / 1000;
        console.log(`  filled ${done}/${count} sessions in ${s.toFixed(1)} s (${(done / s).toFixed(0)}/s)`);
      }
    },
  );
  console.log(`${routers} routers × ${perRouter} sessions (at most) in namespace ${namespace}`);
  return tokens;
}

interface Replica {
  name: string;
  child: ChildProcess;
  base: string;
  startMs: number;
  /** Of startMs, the store's list and watch (its own log line says). */
  storeMs: number;
  output: () => string;
}

/** VmRSS and VmHWM of a process, in MiB. */
function memory(pid: number): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { rss: (kib('VmRSS') * 1024) / MiB, hwm: (kib('VmHWM') * 1024) / MiB };
}

/** `peerops serve` as a pod runs it; resolves once /health answers. */
async function startReplica(
  name: string,
  dir: string,
  env: Record<string, string>,
  children: ChildProcess[],
): Promise<Replica> {
  const port = await freePort();
  let output = '';
  const t0 = performance.now();
  const child = spawn(
    process.execPath,
    ['bin/peerops.ts', 'serve', '--listen', `127.0.0.1:${port}`, '--data', join(dir, name)],
    {
      cwd: ROOT,
      env: { ...process.env, ...env, POD_NAME: name, PEEROPS_LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  children.push(child);
  const keep = (b: Buffer) => {
    output = (output + b.toString()).slice(-20_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const base = `http://127.0.0.1:${port}`;
  await waitForHealth(base, child, {
    name: `replica ${name}`,
    timeoutMs: 120_000,
    intervalMs: 20,
    output: () => output,
  });
  const startMs = performance.now() - t0;
  const line = output.split('\n').find((l) => l.includes('"kubernetes store started"'));
  const storeMs = line ? Number((JSON.parse(line) as { ms?: number }).ms) : NaN;
  return { name, child, base, startMs, storeMs, output: () => output };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

const verdict = (met: boolean) => (met ? 'met' : 'MISSED');

/**
 * A session created and approved on `a` while the router's long poll waits on `b`: from the approval sent
 * to `a`, and from `a`'s answer to it, to `b`'s answer (which must hold the new session), `rounds` times.
 * `b` often answers before `a` does (the watch event overtakes the rest of `a`'s write: its status write
 * and audit), so the figure from `a`'s answer can be below zero; the target is judged from the request.
 */
async function propagation(
  a: Replica,
  b: Replica,
  tokens: Map<string, string>,
  issue: (asn: number, role: 'user' | 'admin') => string,
  rounds: number,
): Promise<{ fromRequest: number[]; fromAnswer: number[] }> {
  // the API allows 60 requests a minute per caller: another admin for every 50 rounds
  const adminTokens = new Map<number, string>();
  const adminToken = (round: number) => {
    const asn = ADMIN_ASN + Math.floor(round / 50);
    if (!adminTokens.has(asn)) adminTokens.set(asn, issue(asn, 'admin'));
    return adminTokens.get(asn) as string;
  };
  const post = async (base: string, path: string, token: string, body: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
    return res.json() as Promise<{ uuid: string }>;
  };
  const routerNames = [...tokens.keys()];
  const fromRequest: number[] = [];
  const fromAnswer: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const router = routerNames[i % routerNames.length] as string;
    const agent = { authorization: `Bearer ${tokens.get(router) as string}` };
    const asn = 4242425000 + i;
    const { uuid } = await post(a.base, '/session', issue(asn, 'user'), {
      action: 'create',
      router,
      ipv6: `fd42:beef:${i.toString(16)}::1`,
      linkLocal: 'fe80::beef',
      publicKey: wgKey(),
      endpoint: 'bench.example.org:51820',
    });
    const current = await fetch(`${b.base}/agent/${router}/sessions`, { headers: agent });
    await current.arrayBuffer();
    const etag = current.headers.get('etag') as string;
    let woke = 0;
    const poll = fetch(`${b.base}/agent/${router}/sessions?wait=60`, {
      headers: { ...agent, 'if-none-match': etag },
    }).then(async (res) => {
      woke = performance.now();
      const body = (await res.json()) as { sessions: { uuid: string }[] };
      if (res.status !== 200 || !body.sessions.some((s) => s.uuid === uuid))
        throw new Error(`the long poll on ${b.name} answered ${res.status} without session ${uuid}`);
    });
    // a failure is reported where the poll is awaited, with the replica's state, not as an unhandled rejection
    const polled = poll.then(
      () => undefined,
      (err: unknown) => err,
    );
    await new Promise((r) => setTimeout(r, 50));
    const sent = performance.now();
    await post(a.base, '/admin/session', adminToken(i), { action: 'approve', uuid });
    const approved = performance.now();
    const failed = await polled;
    if (failed !== undefined)
      throw new Error(
        `round ${i}: the long poll on ${b.name} failed (${failed instanceof Error ? failed.message : JSON.stringify(failed)}; ${b.name} exit ` +
          `${b.child.exitCode ?? b.child.signalCode ?? 'none'}); its output:\n${b.output().slice(-4000)}`,
        { cause: failed },
      );
    fromRequest.push(woke - sent);
    fromAnswer.push(woke - approved);
  }
  return { fromRequest: fromRequest.sort((x, y) => x - y), fromAnswer: fromAnswer.sort((x, y) => x - y) };
}

async function replicasBench(server: TestApiServer): Promise<void> {
  const routers = Number(values.routers);
  const replicaCount = Number(values.replicas);
  const rounds = Number(values.rounds);
  const namespace = await server.createNamespace('bench-replicas');
  const tokens = await fill(server, namespace, routers, sessions);
  const dir = await mkdtemp(join(tmpdir(), 'peerops-bench-k8s-'));
  const children: ChildProcess[] = [];
  try {
    const { TokenIssuer } = await import('../controller/auth/jwt.ts');
    const keyFile = join(dir, 'jwt.key');
    const issuer = await TokenIssuer.fromFile(keyFile);
    const kubeconfig = join(dir, 'kubeconfig');
    await writeFile(kubeconfig, server.kubeConfig().exportConfig(), { mode: 0o600 });
    const env = {
      PEEROPS_STORE: 'kubernetes',
      PEEROPS_NAMESPACE: namespace,
      KUBECONFIG: kubeconfig,
      PEEROPS_JWT_KEY_FILE: keyFile,
      PEEROPS_ADMIN_ASNS: String(ADMIN_ASN),
      ...(values['node-options'] ? { NODE_OPTIONS: values['node-options'] } : {}),
    };
    // the floor: the same process on an empty namespace (Node, the modules, the API server's answers)
    const empty = await startReplica(
      'empty',
      dir,
      {
        ...env,
        PEEROPS_NAMESPACE: await server.createNamespace('bench-empty'),
      },
      children,
    );
    await new Promise((res) => setTimeout(res, 2000));
    const floor = { startMs: empty.startMs, storeMs: empty.storeMs, ...memory(empty.child.pid as number) };
    empty.child.kill('SIGKILL');
    console.log(
      `on an empty namespace: ready in ${(floor.startMs / 1000).toFixed(2)} s, RSS ${floor.rss.toFixed(0)} MiB`,
    );
    const replicas: Replica[] = [];
    const started: { rss: number; hwm: number }[] = [];
    for (let r = 0; r < replicaCount; r++) {
      const replica = await startReplica(`replica-${r}`, dir, env, children);
      replicas.push(replica);
      // what the process holds once started, after its first garbage collections settle
      await new Promise((res) => setTimeout(res, 2000));
      started.push(memory(replica.child.pid as number));
      console.log(
        `${replica.name}: ready in ${(replica.startMs / 1000).toFixed(2)} s ` +
          `(the store's list and watch ${(replica.storeMs / 1000).toFixed(2)} s)`,
      );
    }
    const [a, b] = [replicas[0] as Replica, replicas[1 % replicaCount] as Replica];
    const delays = await propagation(a, b, tokens, (asn, role) => issuer.issueToken(asn, role).token, rounds);
    console.log('');
    console.log(
      `${sessions} sessions over ${routers} routers, ${replicaCount} replicas` +
        `${values['node-options'] ? ` (NODE_OPTIONS=${values['node-options']})` : ''}; ` +
        `${availableParallelism()} CPUs, load average ${load()} at the end, ${new Date().toISOString()}`,
    );
    console.log(
      '| replica | start (spawn to /health) | of it the store (list + watch) | RSS after start | RSS after the test | VmHWM |',
    );
    console.log(
      '| ------- | ------------------------ | ------------------------------ | --------------- | ------------------ | ----- |',
    );
    console.log(
      `| empty namespace | ${(floor.startMs / 1000).toFixed(2)} s | ${(floor.storeMs / 1000).toFixed(2)} s | ` +
        `${floor.rss.toFixed(0)} MiB | | ${floor.hwm.toFixed(0)} MiB |`,
    );
    let worstStart = 0;
    let worstRss = 0;
    for (const [i, replica] of replicas.entries()) {
      const after = memory(replica.child.pid as number);
      const before = started[i] as { rss: number };
      worstStart = Math.max(worstStart, replica.startMs);
      worstRss = Math.max(worstRss, before.rss, after.rss, after.hwm);
      console.log(
        `| ${replica.name} | ${(replica.startMs / 1000).toFixed(2)} s | ${(replica.storeMs / 1000).toFixed(2)} s | ` +
          `${before.rss.toFixed(0)} MiB | ` +
          `${after.rss.toFixed(0)} MiB | ${after.hwm.toFixed(0)} MiB |`,
      );
    }
    console.log('');
    console.log(
      `start of a replica (slowest)      ${(worstStart / 1000).toFixed(2)} s   target < 10 s   ${verdict(worstStart < 10_000)}`,
    );
    console.log(
      `RSS of a replica (peak, VmHWM)    ${worstRss.toFixed(0)} MiB   target < 500 MiB   ${verdict(worstRss < 500)}`,
    );
    const spread = (d: number[]) =>
      `p50 ${percentile(d, 50).toFixed(0)} ms, p95 ${percentile(d, 95).toFixed(0)} ms, max ${(d.at(-1) ?? NaN).toFixed(0)} ms`;
    const p50 = percentile(delays.fromRequest, 50);
    console.log(
      `approval sent to ${a.name} → long poll answered on ${b.name}: ${spread(delays.fromRequest)} (N=${rounds})   ` +
        `target p50 < 200 ms   ${verdict(p50 < 200)}`,
    );
    console.log(`  from ${a.name}'s answer to the approval: ${spread(delays.fromAnswer)}`);
  } finally {
    for (const child of children)
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
  }
}

console.log(
  `${new Date().toISOString()}: ${availableParallelism()} CPUs, load average ${load()} at the start`,
);
const server = await startApiServer();
try {
  if (replicasMode) await replicasBench(server);
  else await writesBench(server);
} finally {
  await server.stop();
}
