/**
 * Git store benchmark: cold start time and memory with 1,000 and 10,000 sessions in the repository,
 * create latency p50/p99, and the observation flush (every session's metrics and every router's heartbeat
 * changed): its time and what it adds to the repository (nothing, it goes to the observation file). Each measurement runs in a fresh process so memory figures are its own.
 *
 * From 10,000 sessions also the network at scale (1,000 routers × 100 sessions at 100,000):
 * a fixture written by `git fast-import`, cold start, RSS, agent session fetch and create latency under
 * the agents' load (heartbeats, metrics reports, long polls), repository size and `git gc` time, each
 * with its target and verdict.
 *
 *   npm run bench:store                                   (1,000 and 10,000 sessions)
 *   npm run bench:store -- 100000                         (one size; from 10,000 the network at scale)
 *   node scripts/bench-store.ts --scale 2000              (only the network at scale, any size)
 *   npm run bench:store -- 100000 --keep DIR              (keep the network's fixture in DIR, reuse it)
 *   node scripts/bench-store.ts --generate DIR 10000      (keep a repository, e.g. for profiling)
 *   node scripts/bench-store.ts --measure DIR/store.git 0 (one start of the store on it; --deliver
 *                                                         after the count: confirm its outbox's events)
 *   node scripts/bench-store.ts --generate-scale DIR 100000 (keep a network at scale; --measure-scale)
 *   node scripts/bench-store.ts --objects                 (own object code against isomorphic-git's)
 *
 * Over 600 lines: each mode above runs in a fresh process of this same script, so that memory figures
 * are the measured start's own.
 */
import { execFile, spawn } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { access, mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { monitorEventLoopDelay, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { CORE_SCHEMA, dump } from 'js-yaml';
import pino from 'pino';
import { withSessionConditions } from '../common/conditions.ts';
import { mergedSessionStatus } from '../common/rules/index.ts';
import { fixHeapGrowth } from '../controller/heap.ts';
import { agentSession } from '../controller/api/views.ts';
import { topics } from '../controller/store/change-feed.ts';
import { createGitStore } from '../controller/store/git/index.ts';
import { gcAuto } from '../controller/store/gitdb/housekeeping.ts';
import { renderManifest, routerPath, sessionPath } from '../common/manifests.ts';

const exec = promisify(execFile);
const ROUTERS = 4;
const CREATES = 300;
/**
 * git without the caller's repository: run from `git bisect run` or a hook, GIT_DIR and its kin point at
 * that repository, and the fixture's `git init` and commits would land there.
 */
const GIT_ENV = {
  ...Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) => !['GIT_DIR', 'GIT_WORK_TREE', 'GIT_INDEX_FILE', 'GIT_COMMON_DIR', 'GIT_PREFIX'].includes(k),
    ),
  ),
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_CONFIG_NOSYSTEM: '1',
};

const key = () => randomBytes(32).toString('base64');
const mib = (bytes: number) => `${(bytes / 1048576).toFixed(0)} MiB`;
const FLUSHES = 3;

/** Bytes (content and on disk) and files under the repository's objects/ directory. */
async function objectsSize(dir: string): Promise<{ bytes: number; disk: number; files: number }> {
  let bytes = 0;
  let disk = 0;
  let files = 0;
  for (const entry of await readdir(join(dir, 'objects'), { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const s = await stat(join(entry.parentPath, entry.name));
    bytes += s.size;
    disk += s.blocks * 512;
    files++;
  }
  return { bytes, disk, files };
}

/** Every session's metrics and every router's heartbeat changed, then flushed; the slowest of FLUSHES. */
async function measureFlush(store: ReturnType<typeof createGitStore>, dir: string) {
  const before = await objectsSize(dir);
  let flushMs = 0;
  for (let f = 1; f <= FLUSHES; f++) {
    const at = new Date().toISOString();
    for (const s of store.listSessions())
      store.recordSessionMetrics(s.spec.uuid, { rtt: f, rxBytes: f, txBytes: f, routesImported: f, at });
    for (const r of store.listRouters()) store.recordRouterStatus(r.name, { uptime: f, lastHeartbeat: at });
    const t = performance.now();
    await store.flushObservations();
    flushMs = Math.max(flushMs, performance.now() - t);
  }
  const after = await objectsSize(dir);
  return { flushMs, addedBytes: after.bytes - before.bytes, addedFiles: after.files - before.files };
}

/** A bare repository with `sessions` complete session manifests, as people would have pushed them. */
async function generate(root: string, sessions: number): Promise<string> {
  const work = join(root, 'work');
  const write = async (path: string, text: string) => {
    await mkdir(dirname(join(work, path)), { recursive: true });
    await writeFile(join(work, path), text);
  };
  for (let r = 1; r <= ROUTERS; r++) {
    const name = `r${r}`;
    await write(
      routerPath(name),
      renderManifest('Router', name, {
        uuid: randomUUID(),
        displayName: `Router ${r}`,
        nodeId: r,
        region: 'eu',
        endpointHost: `${name}.example.net`,
        publicKey: key(),
        linkLocal: `fe80::1:${r.toString(16)}`,
        loopback: { ipv6: `fd00::${r}` },
      }),
    );
  }
  await write('policy/default.yaml', renderManifest('RoutingPolicy', 'default', { dn42Asn: 4242420000 }));
  for (let i = 0; i < sessions; i++) {
    const router = `r${(i % ROUTERS) + 1}`;
    const asn = 4242420000 + Math.floor(i / ROUTERS);
    await write(
      sessionPath(router, asn),
      renderManifest('PeeringSession', `as${asn}-${router}`, {
        uuid: randomUUID(),
        asn,
        router,
        ipv6: `fd42:${(i % 65535).toString(16)}::1`,
        linkLocal: 'fe80::2',
        endpoint: `peer${i}.example.org:51820`,
        publicKey: key(),
        mtu: 1420,
        listenPort: 20000 + (asn % 10000),
        createdAt: new Date().toISOString(),
      }),
    );
  }
  const git = (...args: string[]) => exec('git', args, { cwd: work, env: GIT_ENV, maxBuffer: 1 << 26 });
  await git('init', '-q', '-b', 'main');
  await git('add', '.');
  // no `gc --auto` after the commit: git runs it in the background, and the work tree is removed below
  await git(
    ...['-c', 'user.name=bench', '-c', 'user.email=bench@example.org', '-c', 'gc.auto=0'],
    ...['commit', '-q', '-m', 'generated'],
  );
  const bare = join(root, 'store.git');
  await exec('git', ['clone', '-q', '--bare', work, bare], { env: GIT_ENV });
  await rm(work, { recursive: true, force: true });
  return bare;
}

/**
 * In a fresh process: start the store, report time and memory, then time creates. `deliver`: before it
 * stops, confirm every event of the outbox, as the leader's notifier does when no webhook is defined.
 */
async function measure(dir: string, creates: number, deliver = false): Promise<void> {
  const started = performance.now();
  const cpu = process.cpuUsage();
  const store = createGitStore({ dir, logger: pino({ level: 'warn' }), pollIntervalMs: 60000 });
  await store.start();
  const startMs = performance.now() - started;
  const used = process.cpuUsage(cpu);
  const startCpuMs = (used.user + used.system) / 1000;
  fixHeapGrowth(); // as `peerops serve` does once its store has loaded
  global.gc?.();
  const mem = process.memoryUsage();
  const latencies: number[] = [];
  for (let i = 0; i < creates; i++) {
    const asn = 64512 + i;
    const t = performance.now();
    await store.createSession(
      {
        asn,
        router: 'r1',
        ipv6: `fd42:ffff:${i.toString(16)}::1`,
        linkLocal: 'fe80::3',
        publicKey: key(),
        mtu: 1420,
      },
      { code: 3, name: 'PENDING_REVIEW' },
      { name: `AS${asn}`, role: 'user', asn },
      `create session AS${asn} on r1`,
    );
    latencies.push(performance.now() - t);
  }
  const flush = creates > 0 ? await measureFlush(store, dir) : undefined;
  const waiting = store.outbox().length;
  if (deliver) await store.confirmDelivered(store.outbox().map((e) => e.id));
  await store.close();
  latencies.sort((a, b) => a - b);
  const pct = (p: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? 0;
  console.log(
    JSON.stringify({
      sessions: store.listSessions().length - creates,
      waiting,
      startMs,
      startCpuMs,
      rss: mem.rss,
      heapUsed: mem.heapUsed,
      p50: pct(50),
      p99: pct(99),
      flush,
    }),
  );
}

interface Figures {
  sessions: number;
  /** Events in the outbox once the start and the creates were done. */
  waiting: number;
  startMs: number;
  startCpuMs: number;
  rss: number;
  heapUsed: number;
  p50: number;
  p99: number;
  flush?: { flushMs: number; addedBytes: number; addedFiles: number };
}

async function child(dir: string, creates: number, deliver = false): Promise<Figures> {
  const { stdout } = await exec(
    process.execPath,
    [
      '--expose-gc',
      import.meta.filename,
      '--measure',
      dir,
      String(creates),
      ...(deliver ? ['--deliver'] : []),
    ],
    { maxBuffer: 1 << 24 },
  );
  const line = stdout.trim().split('\n').pop() ?? '{}';
  return JSON.parse(line) as Figures;
}

async function bench(sessions: number): Promise<void> {
  const root = await mkdtemp(join(tmpdir(), 'peerops-bench-store-'));
  try {
    const t = performance.now();
    const dir = await generate(root, sessions);
    console.log(
      `\n${sessions} sessions (${ROUTERS} routers), repository generated in ${((performance.now() - t) / 1000).toFixed(1)} s`,
    );
    // first start: every session arrives without status and gets one (one commit on the status ref)
    const first = await child(dir, 0);
    // housekeeping packs what the first start wrote loose
    const loose = await objectsSize(dir);
    const gc = await gcAuto(dir, new AbortController().signal);
    const packed = await objectsSize(dir);
    // a restart before the leader delivered the first start's events (webhook receivers down): each
    // of them waiting in the outbox; this run then delivers them, as the leader with no webhook does
    const waiting = await child(dir, 0, true);
    // cold start proper: a restarted controller on a repository it has written before
    const cold = await child(dir, CREATES);
    // the same without the parse cache (first start after an upgrade): every blob read and parsed again
    await rm(join(dir, 'peerops', 'parsed.json'));
    const uncached = await child(dir, 0);
    const row = (label: string, f: Figures) =>
      console.log(
        `  ${label.padEnd(28)} ${(f.startMs / 1000).toFixed(2).padStart(6)} s   rss ${mib(f.rss).padStart(8)}   heap ${mib(f.heapUsed).padStart(8)}   (${f.sessions} sessions loaded)`,
      );
    row('first start (status import)', first);
    const size = (o: { files: number; disk: number }) => `${o.files} files, ${mib(o.disk)} on disk`;
    console.log(
      `  housekeeping (git gc --auto)  ${gc.ran ? `${(gc.ms / 1000).toFixed(2).padStart(6)} s` : gc.reason}: objects ${size(loose)} → ${size(packed)}`,
    );
    row(`restart, ${waiting.waiting} events waiting`, waiting);
    row('cold start (restart)', cold);
    if (sessions >= 10000)
      console.log(
        `    CPU ${(cold.startCpuMs / 1000).toFixed(2)} s; target at 10,000 sessions < 0.75 s on an idle machine: ${verdict(cold.startMs < 750)}`,
      );
    row('cold start, no parse cache', uncached);
    console.log(
      `  create latency over ${CREATES} creates: p50 ${cold.p50.toFixed(1)} ms, p99 ${cold.p99.toFixed(1)} ms`,
    );
    if (cold.flush)
      console.log(
        `  observation flush (all metrics and heartbeats changed), slowest of ${FLUSHES}: ${cold.flush.flushMs.toFixed(0)} ms; ` +
          `the repository grew by ${cold.flush.addedFiles} object files, ${cold.flush.addedBytes} bytes`,
      );
  } finally {
    // git may still be packing the generating clone in the background (gc --auto detaches): retry
    await rm(root, { recursive: true, force: true, maxRetries: 10, retryDelay: 500 });
  }
}

// ---------------------------------------------------------------- the network at scale

/** Sessions per router in the scale fixture: 1,000 routers carry 100,000 sessions. */
const PER_ROUTER = 100;
/** The agents' documented intervals (docs/agent.md): heartbeat 30 s, metrics 60 s. */
const HEARTBEAT_MS = 30_000;
const METRICS_MS = 60_000;
const SCALE_CREATES = 300;
const TARGETS = { coldStartMs: 5000, rssBytes: 1 << 30, fetchP99Ms: 10, createP99Ms: 100 };

/** A WireGuard public key as `wg pubkey` prints it: 32 bytes, the top bit clear (canonical). */
const canonicalKey = () => {
  const bytes = randomBytes(32);
  bytes[31] = (bytes[31] ?? 0) & 0x7f;
  return bytes.toString('base64');
};

/**
 * A bare repository of `sessions / PER_ROUTER` routers and `sessions` complete session manifests on
 * `main`, each with the status file the store writes on `peerops-status` (QUEUED_FOR_SETUP, so agents
 * fetch them), written straight into one pack by `git fast-import`: minutes faster than files, `git
 * add` and a first start at 100,000 sessions.
 */
async function generateNetwork(root: string, sessions: number): Promise<string> {
  const bare = join(root, 'store.git');
  await exec('git', ['init', '-q', '--bare', '-b', 'main', bare], { env: GIT_ENV });
  const child = spawn('git', ['fast-import', '--quiet'], {
    env: { ...GIT_ENV, GIT_DIR: bare },
    stdio: ['pipe', 'inherit', 'inherit'],
  });
  const done = new Promise<void>((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`git fast-import: ${code}`))));
  });
  let chunk: string[] = [];
  let size = 0;
  const flush = async () => {
    if (!child.stdin.write(chunk.join(''))) await once(child.stdin, 'drain');
    chunk = [];
    size = 0;
  };
  const put = async (text: string) => {
    chunk.push(text);
    size += text.length;
    if (size > 1 << 20) await flush();
  };
  const data = (text: string) => `data ${Buffer.byteLength(text)}\n${text}\n`;
  const file = (path: string, text: string) => `M 100644 inline ${path}\n${data(text)}`;
  const commit = (ref: string, message: string) =>
    `commit ${ref}\ncommitter bench <bench@example.org> 1764000000 +0000\n${data(message)}`;
  const routers = Math.max(1, Math.ceil(sessions / PER_ROUTER));
  const at = new Date().toISOString();
  const status = withSessionConditions(mergedSessionStatus(true, at, false), undefined);
  const specs: { path: string; uuid: string }[] = [];
  await put(commit('refs/heads/main', `${routers} routers, ${sessions} sessions\n`));
  await put(file('policy/default.yaml', renderManifest('RoutingPolicy', 'default', { dn42Asn: 4242420000 })));
  for (let r = 0; r < routers; r++) {
    const name = `r${r + 1}`;
    await put(
      file(
        routerPath(name),
        renderManifest('Router', name, {
          uuid: randomUUID(),
          displayName: `Router ${r + 1}`,
          nodeId: r + 1,
          region: 'eu',
          endpointHost: `${name}.example.net`,
          publicKey: canonicalKey(),
          linkLocal: `fe80::1:${(r + 1).toString(16)}`,
          loopback: { ipv6: `fd00::${(r + 1).toString(16)}` },
        }),
      ),
    );
  }
  for (let i = 0; i < sessions; i++) {
    const router = `r${Math.floor(i / PER_ROUTER) + 1}`;
    // one ASN per session of a router; an ASN peers with several routers, with its own address on each
    const asn = 4242420000 + (i % 10000);
    const uuid = randomUUID();
    const path = sessionPath(router, asn);
    specs.push({ path, uuid });
    await put(
      file(
        path,
        renderManifest('PeeringSession', `as${asn}-${router}`, {
          uuid,
          asn,
          router,
          ipv6: `fd42:${(i >> 16).toString(16)}:${(i & 0xffff).toString(16)}::1`,
          linkLocal: 'fe80::2',
          endpoint: `peer${i}.example.org:51820`,
          publicKey: canonicalKey(),
          mtu: 1420,
          listenPort: 20000 + (asn % 10000),
          createdAt: at,
        }),
      ),
    );
    if ((i + 1) % 20000 === 0) console.log(`  … ${i + 1} session manifests`);
  }
  await put(commit('refs/heads/peerops-status', `status of ${sessions} session(s)\n`));
  for (const { path, uuid } of specs) await put(file(path, dump({ uuid, status }, { schema: CORE_SCHEMA })));
  await flush();
  child.stdin.end();
  await done;
  return bare;
}

interface ScaleFigures {
  sessions: number;
  startMs: number;
  startCpuMs: number;
  rssAfterStart: number;
  rssPeak: number;
  heapUsed: number;
  create: { p50: number; p99: number; n: number };
  fetch: { p50: number; p99: number; n: number };
  heartbeats: number;
  metrics: number;
  wakes: number;
  runMs: number;
  /** Pauses while the creates ran: major (mark-compact) and minor GCs, the event loop's delay. */
  pauses: {
    majorGcs: number;
    majorGcMaxMs: number;
    minorGcMs: number;
    loopDelayP99Ms: number;
    loopDelayMaxMs: number;
    /** Creates over the target that overlapped a major GC. */
    slowCreatesInMajorGc: number;
    slowCreates: number;
  };
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;

/**
 * In a fresh process: start the store, then under the agents' load (every router's heartbeat every 30 s,
 * its sessions' metrics every 60 s, its long poll re-armed after each wake and answered with the
 * router's session list) time `creates` creates on random routers and the agent session fetch: what
 * `GET /agent/<router>/sessions` computes when the router's revision moved (controller/api/agent.ts:
 * the router's sessions from the index, all but PENDING_REVIEW, as agent sessions, serialised and
 * hashed), timed from when it was asked, so time spent waiting behind other work counts.
 */
async function measureScale(dir: string, creates: number): Promise<void> {
  const started = performance.now();
  const cpu = process.cpuUsage();
  const store = createGitStore({ dir, logger: pino({ level: 'warn' }), pollIntervalMs: 2000 });
  await store.start();
  const startMs = performance.now() - started;
  const used = process.cpuUsage(cpu);
  fixHeapGrowth(); // as `peerops serve` does once its store has loaded
  global.gc?.();
  const rssAfterStart = process.memoryUsage().rss;
  const heapUsed = process.memoryUsage().heapUsed;
  const routers = store.listRouters().map((r) => r.name);
  const sessionsOf = new Map(
    routers.map((r) => [r, store.listSessions({ router: r }).map((s) => s.spec.uuid)]),
  );

  const fetchView = (router: string) => {
    const sessions = store
      .listSessions({ router })
      .flatMap((s) => agentSession(s) ?? [])
      .sort((a, b) => a.uuid.localeCompare(b.uuid));
    const hash = createHash('sha256').update(JSON.stringify(sessions)).digest('base64url');
    return Buffer.from(JSON.stringify({ revision: hash, sessions })).length;
  };
  const stop = new AbortController();
  let heartbeats = 0;
  let metrics = 0;
  let wakes = 0;
  const heartbeat = (router: string) => {
    store.recordRouterStatus(router, { lastHeartbeat: new Date().toISOString(), uptime: heartbeats });
    heartbeats++;
  };
  const report = (router: string) => {
    const at = new Date().toISOString();
    for (const uuid of sessionsOf.get(router) ?? [])
      store.recordSessionMetrics(uuid, { rtt: 1, rxBytes: metrics, txBytes: metrics, routesImported: 1, at });
    metrics++;
  };
  // the routers' heartbeats and metrics reports, spread evenly over their intervals
  const TICK_MS = 100;
  const due = { heartbeat: 0, metrics: 0 };
  let nextHeartbeat = 0;
  let nextReport = 0;
  const ticker = setInterval(() => {
    due.heartbeat += (routers.length * TICK_MS) / HEARTBEAT_MS;
    due.metrics += (routers.length * TICK_MS) / METRICS_MS;
    for (; due.heartbeat >= 1; due.heartbeat--)
      heartbeat(routers[nextHeartbeat++ % routers.length] as string);
    for (; due.metrics >= 1; due.metrics--) report(routers[nextReport++ % routers.length] as string);
  }, TICK_MS);
  // each router's agent holds a long poll, answered with its session list when its revision moves
  const agents = routers.map(async (router) => {
    const topic = topics.routerSessions(router);
    while (!stop.signal.aborted) {
      const revision = store.revision(topic);
      const next = await store.waitForChange(topic, revision, 60_000, stop.signal).catch(() => revision);
      if (next !== revision && !stop.signal.aborted) {
        fetchView(router);
        wakes++;
      }
    }
  });

  // GC pauses and the event loop's delay while the creates run, to tell a slow create's cause
  const gcs: { kind: number; start: number; end: number }[] = [];
  const recordGcs = (entries: PerformanceEntry[]) => {
    for (const e of entries as (PerformanceEntry & { detail?: { kind?: number } })[])
      gcs.push({ kind: e.detail?.kind ?? 0, start: e.startTime, end: e.startTime + e.duration });
  };
  const gcObserver = new PerformanceObserver((list) => recordGcs(list.getEntries()));
  gcObserver.observe({ entryTypes: ['gc'] });
  const loopDelay = monitorEventLoopDelay({ resolution: 10 });
  loopDelay.enable();
  const runStart = performance.now();
  const createTimes: number[] = [];
  const createSpans: { start: number; end: number }[] = [];
  const fetchTimes: number[] = [];
  let rssPeak = rssAfterStart;
  // agent session fetches of random routers, each timed from when it was asked
  const fetching = (async () => {
    while (!stop.signal.aborted) {
      await new Promise((resolve) => setTimeout(resolve, 5));
      const asked = performance.now();
      await new Promise((resolve) => setImmediate(resolve));
      fetchView(routers[Math.floor(Math.random() * routers.length)] as string);
      fetchTimes.push(performance.now() - asked);
      rssPeak = Math.max(rssPeak, process.memoryUsage.rss());
    }
  })();
  // ASNs and addresses of a random block, so runs on a kept fixture (--generate-scale) do not clash
  const block = Math.floor(Math.random() * 0xffff);
  for (let i = 0; i < creates; i++) {
    const asn = 4200000000 + block * 1000 + i;
    const router = routers[Math.floor(Math.random() * routers.length)] as string;
    const t = performance.now();
    await store.createSession(
      {
        asn,
        router,
        ipv6: `fd42:ffff:${block.toString(16)}:${i.toString(16)}::1`,
        linkLocal: 'fe80::3',
        publicKey: canonicalKey(),
        mtu: 1420,
      },
      { code: 3, name: 'PENDING_REVIEW' },
      { name: `AS${asn}`, role: 'user', asn },
      `create session AS${asn} on ${router}`,
    );
    createTimes.push(performance.now() - t);
    createSpans.push({ start: t, end: performance.now() });
  }
  const runMs = performance.now() - runStart;
  loopDelay.disable();
  recordGcs(gcObserver.takeRecords());
  gcObserver.disconnect();
  // NODE_PERFORMANCE_GC_MAJOR (4): a mark-compact; NODE_PERFORMANCE_GC_INCREMENTAL (8): its marking steps
  const majors = gcs.filter((g) => g.kind === 4 || g.kind === 8);
  const slow = createSpans.filter((c) => c.end - c.start > TARGETS.createP99Ms);
  const pauses = {
    majorGcs: gcs.filter((g) => g.kind === 4).length,
    majorGcMaxMs: Math.max(0, ...majors.map((g) => g.end - g.start)),
    minorGcMs: gcs.filter((g) => !majors.includes(g)).reduce((sum, g) => sum + g.end - g.start, 0),
    loopDelayP99Ms: loopDelay.percentile(99) / 1e6,
    loopDelayMaxMs: loopDelay.max / 1e6,
    slowCreatesInMajorGc: slow.filter((c) => majors.some((g) => g.end > c.start && g.start < c.end)).length,
    slowCreates: slow.length,
  };
  stop.abort();
  clearInterval(ticker);
  await fetching;
  await Promise.all(agents);
  await store.close();
  createTimes.sort((a, b) => a - b);
  fetchTimes.sort((a, b) => a - b);
  const figures: ScaleFigures = {
    sessions: store.listSessions().length - creates,
    startMs,
    startCpuMs: (used.user + used.system) / 1000,
    rssAfterStart,
    rssPeak,
    heapUsed,
    create: { p50: percentile(createTimes, 50), p99: percentile(createTimes, 99), n: createTimes.length },
    fetch: { p50: percentile(fetchTimes, 50), p99: percentile(fetchTimes, 99), n: fetchTimes.length },
    heartbeats,
    metrics,
    wakes,
    runMs,
    pauses,
  };
  console.log(JSON.stringify(figures));
}

async function childScale(dir: string, creates: number): Promise<ScaleFigures> {
  const { stdout } = await exec(
    process.execPath,
    ['--expose-gc', import.meta.filename, '--measure-scale', dir, String(creates)],
    { maxBuffer: 1 << 24 },
  );
  return JSON.parse(stdout.trim().split('\n').pop() ?? '{}') as ScaleFigures;
}

const verdict = (ok: boolean) => (ok ? 'met' : 'MISSED');

/** The network at scale: the fixture, a first start, then cold start, memory and latency under agent load. */
async function benchScale(sessions: number, keep?: string): Promise<void> {
  // --keep DIR: the fixture and its parse cache are kept in DIR/<sessions> and reused by the next run
  const root = keep
    ? join(keep, String(sessions))
    : await mkdtemp(join(tmpdir(), 'peerops-bench-store-scale-'));
  const reuse =
    keep !== undefined &&
    (await access(join(root, 'store.git', 'peerops', 'parsed.json')).then(
      () => true,
      () => false,
    ));
  try {
    const routers = Math.ceil(sessions / PER_ROUTER);
    const row = (label: string, text: string) => console.log(`  ${label.padEnd(34)} ${text}`);
    let t = performance.now();
    const dir = join(root, 'store.git');
    if (reuse) {
      console.log(
        `\n${sessions} sessions on ${routers} routers × ${PER_ROUTER} (agents' load), kept in ${root}`,
      );
    } else {
      console.log(
        `\n${sessions} sessions on ${routers} routers × ${PER_ROUTER} (agents' load), generating …`,
      );
      await mkdir(root, { recursive: true });
      await generateNetwork(root, sessions);
      console.log(
        `  repository generated (git fast-import) in ${((performance.now() - t) / 1000).toFixed(1)} s`,
      );
      // the first start reads and judges every blob and writes the parse cache, as after an upgrade
      console.log('  first start (no parse cache: every blob read from the pack) …');
      const first = await child(dir, 0);
      row(
        'first start, no parse cache',
        `${(first.startMs / 1000).toFixed(2)} s (${first.sessions} sessions loaded)`,
      );
    }
    console.log(`  cold start, then ${SCALE_CREATES} creates under the agents' load …`);
    const f = await childScale(dir, SCALE_CREATES);
    // Two more starts alone: on a shared machine a neighbour's burst only ever slows a start, so the
    // best of three is judged (as bench:api judges each load's best round); all three are printed.
    type Start = Pick<Figures, 'startMs' | 'startCpuMs'>;
    const starts: Start[] = [f, await child(dir, 0), await child(dir, 0)];
    const [best, median] = [...starts].sort((a, b) => a.startMs - b.startMs) as [Start, Start];
    const seconds = (ms: number) => (ms / 1000).toFixed(2);
    row(
      'cold start (restart)',
      `${starts.map((s) => seconds(s.startMs)).join(' / ')} s in 3 starts: best ${seconds(best.startMs)} s ` +
        `(CPU ${seconds(best.startCpuMs)} s), median ${seconds(median.startMs)} s; ` +
        `target < ${TARGETS.coldStartMs / 1000} s (best): ${verdict(best.startMs < TARGETS.coldStartMs)}`,
    );
    row(
      'RSS after start / peak under load',
      `${mib(f.rssAfterStart)} / ${mib(f.rssPeak)} (heap ${mib(f.heapUsed)}), target < 1 GiB: ${verdict(f.rssPeak < TARGETS.rssBytes)}`,
    );
    row(
      'agent session fetch p50 / p99',
      `${f.fetch.p50.toFixed(2)} / ${f.fetch.p99.toFixed(2)} ms (${f.fetch.n} fetches), target p99 < ${TARGETS.fetchP99Ms} ms: ${verdict(f.fetch.p99 < TARGETS.fetchP99Ms)}`,
    );
    row(
      'create p50 / p99',
      `${f.create.p50.toFixed(1)} / ${f.create.p99.toFixed(1)} ms (${f.create.n} creates), target p99 < ${TARGETS.createP99Ms} ms: ${verdict(f.create.p99 < TARGETS.createP99Ms)}`,
    );
    const p = f.pauses;
    row(
      'pauses while creating',
      `${p.majorGcs} mark-compact GCs (longest step ${p.majorGcMaxMs.toFixed(0)} ms), minor GCs ${p.minorGcMs.toFixed(0)} ms in all; ` +
        `event loop delay p99 ${p.loopDelayP99Ms.toFixed(0)} ms, max ${p.loopDelayMaxMs.toFixed(0)} ms; ` +
        `${p.slowCreatesInMajorGc} of ${p.slowCreates} creates over ${TARGETS.createP99Ms} ms overlapped a mark-compact`,
    );
    row(
      "agents' load meanwhile",
      `${(f.runMs / 1000).toFixed(1)} s: ${f.heartbeats} heartbeats, ${f.metrics} metrics reports (${PER_ROUTER} sessions each), ${f.wakes} long polls woken and answered`,
    );
    const du = async () => Number((await exec('du', ['-sk', dir])).stdout.split('\t')[0]) * 1024;
    const before = await du();
    t = performance.now();
    await exec('git', ['--git-dir', dir, 'gc', '--quiet'], { env: GIT_ENV });
    const gcMs = performance.now() - t;
    row('repository size (du)', `${mib(before)}; after git gc ${mib(await du())}`);
    row('git gc', `${(gcMs / 1000).toFixed(1)} s`);
  } finally {
    if (!keep) await rm(root, { recursive: true, force: true, maxRetries: 10, retryDelay: 500 });
  }
}

/**
 * `--objects`: what one create's objects cost written by the store's own object code (objects.ts: native
 * zlib, then isomorphic-git's writeObject of the deflated bytes) against isomorphic-git's own
 * writeBlob/writeTree/writeCommit (which deflate through CompressionStream): a session blob, its router's
 * tree of `entries` sessions, a root tree and a commit, ROUNDS times each, into one repository.
 */
async function benchObjects(entries: number): Promise<void> {
  const ROUNDS = 200;
  const dir = await mkdtemp(join(tmpdir(), 'peerops-bench-objects-'));
  try {
    const git = (await import('isomorphic-git')).default;
    const { gitFs } = await import('../controller/git-fs.ts');
    const own = await import('../controller/store/gitdb/objects.ts');
    await git.init({ fs: gitFs, dir, bare: true });
    const text = renderManifest('PeeringSession', 'as4242420001-fra1', {
      uuid: randomUUID(),
      asn: 4242420001,
      router: 'fra1',
      ipv6: 'fd00::1',
      linkLocal: 'fe80::1',
      publicKey: key(),
      mtu: 1420,
      listenPort: 20001,
    });
    const names = Array.from({ length: entries }, (_, i) => `as${4242420000 + i}.yaml`);
    const person = { name: 'peerops', email: 'peerops@localhost', timestamp: 1764000000, timezoneOffset: 0 };
    const variants: Record<string, (round: number) => Promise<void>> = {
      'own object code (objects.ts)': async (round) => {
        const blob = await own.writeBlob(dir, Buffer.from(`${text}# ${round}\n`));
        const tree = await own.writeTree(
          dir,
          names.map((name, i) => ({ type: 'blob' as const, name, oid: i === 0 ? blob : blob })),
        );
        const root = await own.writeTree(dir, [{ type: 'tree', name: 'sessions', oid: tree }]);
        await own.writeCommit(dir, {
          tree: root,
          parents: [],
          author: person,
          committer: person,
          timestamp: person.timestamp + round,
          message: `create ${round}`,
        });
      },
      'isomorphic-git writeBlob/Tree/Commit': async (round) => {
        const blob = await git.writeBlob({ fs: gitFs, dir, blob: Buffer.from(`${text}# ${round}\n`) });
        const tree = await git.writeTree({
          fs: gitFs,
          dir,
          tree: names.map((path) => ({ mode: '100644', path, oid: blob, type: 'blob' as const })),
        });
        const root = await git.writeTree({
          fs: gitFs,
          dir,
          tree: [{ mode: '040000', path: 'sessions', oid: tree, type: 'tree' }],
        });
        await git.writeCommit({
          fs: gitFs,
          dir,
          commit: {
            tree: root,
            parent: [],
            author: { ...person, timestamp: person.timestamp + round },
            committer: { ...person, timestamp: person.timestamp + round },
            message: `create ${round}\n`,
          },
        });
      },
    };
    console.log(`\nobjects of one create, ${entries} sessions in the router's tree, ${ROUNDS} rounds:`);
    for (const [label, write] of Object.entries(variants)) {
      const times: number[] = [];
      const cpu = process.cpuUsage();
      for (let round = 0; round < ROUNDS; round++) {
        const start = performance.now();
        await write(round);
        times.push(performance.now() - start);
      }
      const used = process.cpuUsage(cpu);
      times.sort((a, b) => a - b);
      const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))] ?? 0;
      console.log(
        `  ${label.padEnd(38)} p50 ${at(0.5).toFixed(2)} ms, p99 ${at(0.99).toFixed(2)} ms, ` +
          `CPU ${((used.user + used.system) / 1000 / ROUNDS).toFixed(2)} ms a create`,
      );
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === '--objects') {
  for (const n of [2500, 25000]) await benchObjects(n);
} else if (process.argv[2] === '--generate') {
  console.log(await generate(process.argv[3] as string, Number(process.argv[4] ?? 1000)));
} else if (process.argv[2] === '--measure') {
  await measure(process.argv[3] as string, Number(process.argv[4] ?? 0), process.argv[5] === '--deliver');
} else if (process.argv[2] === '--generate-scale') {
  await mkdir(process.argv[3] as string, { recursive: true });
  console.log(await generateNetwork(process.argv[3] as string, Number(process.argv[4] ?? 1000)));
} else if (process.argv[2] === '--scale') {
  const keepAt = process.argv.indexOf('--keep');
  await benchScale(Number(process.argv[3] ?? 1000), keepAt >= 0 ? process.argv[keepAt + 1] : undefined);
} else if (process.argv[2] === '--measure-scale') {
  await measureScale(process.argv[3] as string, Number(process.argv[4] ?? SCALE_CREATES));
} else {
  const args = process.argv.slice(2);
  const keepAt = args.indexOf('--keep');
  const keep = keepAt >= 0 ? args.splice(keepAt, 2)[1] : undefined;
  const sizes = args.map(Number).filter((n) => n > 0);
  const load = () =>
    loadavg()
      .map((l) => l.toFixed(2))
      .join(' ');
  console.log(`${new Date().toISOString()}, ${availableParallelism()} CPUs, load average ${load()}`);
  for (const n of sizes.length > 0 ? sizes : [1000, 10000]) {
    // the classic fixture (4 routers) up to 10,000 sessions; the network at scale from 10,000
    if (n <= 10000) await bench(n);
    if (n >= 10000) await benchScale(n, keep);
  }
  console.log(`\nload average at the end ${load()}`);
}
