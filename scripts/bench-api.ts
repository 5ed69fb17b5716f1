/**
 * API load benchmark (npm run bench:api). A controller on the git store holding 100 routers × 100 sessions
 * is measured with wrk against a bare fastify hello-world in the same run (the ceiling): throughput,
 * p50/p99 and CPU time per request of `GET /agent/:router/sessions` and of heartbeats; then the delay
 * from an admin approval to the wake-up of a waiting long poll, and a /metrics scrape once every session
 * has reported. Targets: ≥ 50 % of the ceiling, p99 < 20 ms, wake-up p50 < 100 ms.
 *
 * The ceiling of an endpoint is the bare hello-world of its method: `GET /` answering {hello: 'world'} for
 * the session list, `POST /` of the same heartbeat body answering {ok: true} for the heartbeat. A POST pays
 * for receiving its body (the request stream's events, the JSON parse) whoever serves it; judged against
 * the GET, the heartbeat's share would charge the controller with that too. The share against the other
 * hello-world is printed beside it.
 *
 * Each server runs in its own process pinned to CPU 0 and wrk (one thread, C) to CPU 1, so neither steals
 * the other's CPU. wrk rather than autocannon: autocannon parses responses in JavaScript and became the
 * limit itself on a 36 KiB body. CPU µs per request of the server process (from /proc) is printed beside
 * req/s: on a shared VM it moves less than throughput does. Requests carry what agents send (Node's fetch: Accept-Encoding gzip).
 *
 * The measurements run in rounds, each round every endpoint and ceiling once. The host is a shared VM whose
 * neighbours take CPU in bursts, and a burst only ever slows a measurement: each load's best round is
 * the estimate of its own cost, as timeit and other benchmark tools take the minimum. The targets are judged on best against best; the median of
 * the per-round ratios is printed beside it.
 *
 * A reference row, the hello-world with 20 µs of busy work per request, shows what a fixed amount of handler
 * time costs in the same run. Guest halt polling is switched on for the run where it can be (see
 * enableHaltPolling for why).
 *
 * Two more scenarios: `user-list` (bench-api/user-list.ts: a user's session list at 10,000 sessions, also
 * while every router reports its sessions' metrics once per --report-seconds, default 60) and
 * `storm` (bench-api/storm.ts: 1,000 fresh agents connecting at once, then the same fleet running while
 * its controller is restarted on the same store and port, modelled on the real agent's retries and
 * backoff). The fixture and the server processes are bench-api/harness.ts, wrk's runs bench-api/wrk.ts.
 *
 * Method and current figures: docs/benchmarks.md.
 *
 * Options: --duration SECONDS per measurement (default 3; the storm's fresh phase: 90), --rounds N
 * (default 5), --connections N (default 32), --routers N, --sessions N, --no-halt-poll (measure with the
 * VM's idle halting as it is); the storm's --reconnect-duration SECONDS (its window after the restart,
 * default 30) and --no-reconnect (the fresh phase alone). Needs wrk (Debian package `wrk`; installed when
 * missing and running as root).
 */
import { execFile } from 'node:child_process';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import Fastify, { type FastifyInstance } from 'fastify';
import pino from 'pino';
import {
  ADMIN_ASN,
  AGENT_ACCEPT_ENCODING,
  buildFixture,
  percentile,
  startOnFixture,
  startServer,
  stopServers,
  verdict,
  wgKey,
  type Server,
} from './bench-api/harness.ts';
import { probeHealth, sendHeartbeats, storm } from './bench-api/storm.ts';
import { userList } from './bench-api/user-list.ts';
import { ensureWrk, measure, type Figures, type Load, type LoadRequest } from './bench-api/wrk.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    serve: { type: 'string' },
    data: { type: 'string' },
    probe: { type: 'string' },
    heartbeats: { type: 'string' },
    duration: { type: 'string' },
    rounds: { type: 'string', default: '5' },
    connections: { type: 'string', default: '32' },
    routers: { type: 'string' },
    sessions: { type: 'string' },
    'no-halt-poll': { type: 'boolean', default: false },
    'no-reconnect': { type: 'boolean', default: false },
    'reconnect-duration': { type: 'string', default: '30' },
    'report-seconds': { type: 'string', default: '60' },
    // the children's own: the server's port, the /health probe's through a controller restart
    port: { type: 'string', default: '0' },
    'through-restart': { type: 'boolean', default: false },
  },
});
/** `agents` (the default), `user-list` or `storm`: see the header. */
const scenario = positionals[0] ?? 'agents';
const SCENARIOS = ['agents', 'user-list', 'storm'];
/** Per scenario: routers, sessions per router, seconds (of each measurement; of the whole storm). */
const SIZES: Record<string, [number, number, number]> = {
  agents: [100, 100, 3],
  'user-list': [100, 100, 3],
  storm: [1000, 10, 90],
};
const [defaultRouters, defaultSessions, defaultSeconds] = SIZES[scenario] ?? [100, 100, 3];
const size = {
  routers: Number(values.routers ?? defaultRouters),
  perRouter: Number(values.sessions ?? defaultSessions),
  seconds: Number(values.duration ?? defaultSeconds),
};

const execFileAsync = promisify(execFile);
/** wrk's options for a measurement of this run (`warmUp`: the first round's). */
const wrkOptions = (warmUp: boolean) => ({
  warmUp,
  seconds: size.seconds,
  connections: Number(values.connections),
});
/** The reference row's added work per request, in µs. */
const BUSY_US = 20;

// ---------------------------------------------------------------- child: the servers

async function serve(kind: string, data: string | undefined, port: number): Promise<void> {
  let app: FastifyInstance;
  if (kind === 'hello') {
    app = Fastify({ logger: false });
    app.get('/', async () => ({ hello: 'world' }));
    app.post('/', async () => ({ ok: true }));
    // The hello-world with a fixed amount of work added: what BUSY_US of handler time costs in this run.
    app.get('/busy', async () => {
      const end = performance.now() + BUSY_US / 1000;
      while (performance.now() < end);
      return { hello: 'world' };
    });
    // The storm's ceiling probes it as the controller's /health is probed.
    app.get('/health', async () => ({ status: 'ok' }));
    // A real router's session list, gzipped as the agent receives it, as a static body: what the bytes
    // of the answer of GET /agent/:router/sessions alone cost the server.
    if (process.env.BENCH_BODY_FILE) {
      const list = await readFile(process.env.BENCH_BODY_FILE);
      app.get('/list', async (_req, reply) =>
        reply.type('application/json').header('content-encoding', 'gzip').send(list),
      );
    }
    // A user's session list as a static body, for `user-list`: what its bytes alone cost the server.
    if (process.env.BENCH_USER_LIST_FILE) {
      const userList = await readFile(process.env.BENCH_USER_LIST_FILE);
      const encoding = process.env.BENCH_USER_LIST_ENCODING;
      app.post('/user-list', async (_req, reply) => {
        if (encoding) reply.header('content-encoding', encoding);
        return reply.type('application/json').send(userList);
      });
    }
  } else {
    const { buildApp } = await import('../controller/app.ts');
    const { loadConfig } = await import('../controller/config.ts');
    const { TokenIssuer, defaultKeyPath } = await import('../controller/auth/jwt.ts');
    const { openStore } = await import('../controller/store/open.ts');
    const config = loadConfig({ data, listen: `127.0.0.1:${port}` }, {});
    // The benchmark measures the request path, not the limiter's refusals: limits far above the load.
    config.rateLimit = { perMinute: 1e9, agentPerMinute: 1e9 };
    const store = await openStore(config, pino({ level: 'warn' }));
    await store.start();
    // as `peerops serve` does once its store has loaded
    (await import('../controller/heap.ts')).fixHeapGrowth();
    const tokens = await TokenIssuer.fromFile(defaultKeyPath(config.dataDir));
    // The controller's own logger (one info line per request), written to /dev/null instead of stdout.
    const { controllerLogger, logDestination } = await import('../controller/logger.ts');
    const logger = controllerLogger(config.logLevel, logDestination('/dev/null'));
    // the leader's notifier, as `peerops serve` runs it: the outbox is delivered and emptied, so each
    // write records its events in an outbox as small as a running network's, not one full at 10,000
    const { Notifier } = await import('../controller/notify/notifier.ts');
    const { FileWebhooks } = await import('../controller/notify/webhooks.ts');
    const notifier = new Notifier({ store, webhooks: new FileWebhooks(config.dataDir) });
    notifier.start();
    app = await buildApp({ store, tokens, config, logger, notifier });
    process.on(
      'SIGTERM',
      () =>
        void app
          ?.close()
          .then(() => store.close())
          .then(() => process.exit(0)),
    );
  }
  // as `peerops serve` listens (controller/main.ts)
  const { LISTEN_BACKLOG } = await import('../controller/app.ts');
  const address = await app.listen({ host: '127.0.0.1', port, backlog: LISTEN_BACKLOG });
  const listeningAt = Date.now();
  // The event loop's delays, asked for by the storm: a stall of the controller itself, told apart from
  // the load generator's own (both run on one shared machine).
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  process.on('message', (m: string) => {
    if (m !== 'event-loop') return;
    process.send?.({ loopMaxMs: loop.max / 1e6, loopP99Ms: loop.percentile(99) / 1e6 });
    loop.reset();
  });
  process.send?.({ address, listeningAt });
}

// ---------------------------------------------------------------- parent: measurements

async function longPollWakeups(url: string, data: string, tokens: Map<string, string>, rounds: number) {
  const { TokenIssuer, defaultKeyPath } = await import('../controller/auth/jwt.ts');
  const issuer = await TokenIssuer.fromFile(defaultKeyPath(data));
  const admin = issuer.issueToken(ADMIN_ASN, 'admin').token;
  const post = async (path: string, token: string, body: unknown) => {
    const res = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
    return res.json() as Promise<{ uuid: string }>;
  };
  const fromRequest: number[] = [];
  const fromResponse: number[] = [];
  const routerNames = [...tokens.keys()];
  for (let i = 0; i < rounds; i++) {
    const router = routerNames[i % routerNames.length] as string;
    const agent = tokens.get(router) as string;
    const user = issuer.issueToken(4242425000 + i, 'user').token;
    const { uuid } = await post('/session', user, {
      action: 'create',
      router,
      // A fresh address per round: an address already used by another ASN's session is refused.
      ipv6: `fd42:beef:${i.toString(16)}::1`,
      linkLocal: 'fe80::beef',
      publicKey: wgKey(),
      endpoint: 'bench.example.org:51820',
    });
    const current = await fetch(`${url}/agent/${router}/sessions`, {
      headers: { authorization: `Bearer ${agent}` },
    });
    await current.arrayBuffer();
    const etag = current.headers.get('etag') as string;
    let woke = 0;
    const poll = fetch(`${url}/agent/${router}/sessions?wait=30`, {
      headers: { authorization: `Bearer ${agent}`, 'if-none-match': etag },
    }).then(async (res) => {
      woke = performance.now();
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`long poll answered ${res.status}`);
    });
    await new Promise((r) => setTimeout(r, 50));
    const t0 = performance.now();
    await post('/admin/session', admin, { action: 'approve', uuid });
    const t1 = performance.now();
    await poll;
    fromRequest.push(woke - t0);
    fromResponse.push(woke - t1);
  }
  fromRequest.sort((a, b) => a - b);
  fromResponse.sort((a, b) => a - b);
  return { fromRequest, fromResponse };
}

/**
 * GET /metrics once every session has an agent report (each router reports all its sessions once), as
 * Prometheus scrapes it: time to the whole body (the bench's own receiving included) and its size; and
 * what a scrape does to agents: the latency of heartbeats sent one after another meanwhile.
 */
async function metricsScrapes(url: string, tokens: Map<string, string>, scrapes: number) {
  let sessions = 0;
  for (const [router, token] of tokens) {
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const list = (await (await fetch(`${url}/agent/${router}/sessions`, { headers })).json()) as {
      sessions: { uuid: string }[];
    };
    const report = list.sessions.map(({ uuid }, i) => ({
      uuid,
      rtt: 10 + i / 7,
      rxBytes: 1e9 + i,
      txBytes: 2e9 + i,
      routesImported: i,
    }));
    const res = await fetch(`${url}/agent/${router}/report`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ sessions: report }),
    });
    if (!res.ok) throw new Error(`report of ${router}: ${res.status} ${await res.text()}`);
    sessions += report.length;
  }
  const [router, token] = [...tokens][0] as [string, string];
  const heartbeat = {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ version: '1.0.0', uptime: 100 }),
  };
  const ms: number[] = [];
  const heartbeatMs: number[] = [];
  let bytes = 0;
  let scraping = true;
  const agent = (async () => {
    while (scraping) {
      const t = performance.now();
      await (await fetch(`${url}/agent/${router}/heartbeat`, heartbeat)).arrayBuffer();
      heartbeatMs.push(performance.now() - t);
    }
  })();
  // curl takes the scrapes, so that receiving 4 MiB does not hold up this process's heartbeats
  for (let i = 0; i < scrapes; i++) {
    const { stdout } = await execFileAsync('curl', [
      '-sf',
      '-o',
      '/dev/null',
      '-w',
      '%{time_total} %{size_download}',
      `${url}/metrics`,
    ]);
    const [seconds, size] = stdout.split(' ').map(Number);
    ms.push((seconds ?? NaN) * 1000);
    bytes = size ?? 0;
  }
  scraping = false;
  await agent;
  const sorted = (xs: number[]) => xs.sort((a, b) => a - b);
  return { sessions, ms: sorted(ms), bytes, heartbeatMs: sorted(heartbeatMs) };
}

/**
 * This VM halts an idle vCPU, and waking a halted one costs its waker a trip through the hypervisor: on
 * loopback the server's every response write wakes wrk, so a server pays that once per response when it is
 * slower than wrk and wrk waits, and hardly ever when wrk is busy (the hello-world): docs/benchmarks.md
 * has the figures. No real deployment pays it (agents are other hosts), and it skews the ratio against every server slower
 * than the ceiling, so for the run halt polling is switched on (root, cpuidle-haltpoll) and put back.
 */
const HALT_POLL = '/sys/module/haltpoll/parameters/guest_halt_poll_ns';

function enableHaltPolling(): (() => void) | undefined {
  let before: string;
  try {
    before = readFileSync(HALT_POLL, 'utf8').trim();
    if (Number(before) > 0) {
      console.log(`guest halt polling already on (${before} ns)`);
      return undefined;
    }
    writeFileSync(HALT_POLL, '200000');
  } catch {
    console.log('guest halt polling not available (not root, or no cpuidle-haltpoll): measured without');
    return undefined;
  }
  console.log(
    'guest halt polling on for the run (200 µs), back to 0 at the end; --no-halt-poll measures without',
  );
  const restore = () => writeFileSync(HALT_POLL, before);
  process.once('SIGINT', () => {
    restore();
    process.exit(130);
  });
  return restore;
}

async function bench(): Promise<void> {
  if (!SCENARIOS.includes(scenario))
    throw new Error(`unknown scenario ${scenario}: one of ${SCENARIOS.join(', ')}`);
  const load = () =>
    `load average ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}`;
  console.log(
    `bench:api ${scenario}, ${new Date().toISOString()}, ${availableParallelism()} CPUs, ${load()} at start`,
  );
  if (scenario === 'storm')
    await storm({
      ...size,
      reconnectSeconds: values['no-reconnect'] ? 0 : Number(values['reconnect-duration']),
    });
  else {
    ensureWrk();
    const restoreHaltPolling = values['no-halt-poll'] ? undefined : enableHaltPolling();
    try {
      await (scenario === 'user-list'
        ? userList({
            ...size,
            rounds: Number(values.rounds),
            reportSeconds: Number(values['report-seconds']),
            wrkOptions,
          })
        : measureAll());
    } finally {
      restoreHaltPolling?.();
    }
  }
  console.log(`${load()} at the end`);
}

async function measureAll(): Promise<void> {
  const { routers, perRouter } = size;
  console.log(`building fixture: ${routers} routers × ${perRouter} sessions …`);
  const fixture = await buildFixture(routers, perRouter);
  let hello: Server | undefined;
  let controller: Server | undefined;
  try {
    controller = await startOnFixture(fixture);
    const names = [...fixture.tokens.keys()];
    // One router's session list as the agent receives it becomes the hello server's static body.
    const sample = await fetch(`${controller.url}/agent/${names[0]}/sessions`, {
      headers: { authorization: `Bearer ${fixture.tokens.get(names[0] as string)}` },
    });
    const listBody = Buffer.from(await sample.arrayBuffer());
    const listFile = join(fixture.data, 'sample-sessions.json.gz');
    // gzip with zlib's defaults, as the controller compresses it
    const gzipBytes = gzipSync(listBody);
    await writeFile(listFile, gzipBytes);
    hello = await startServer('hello', undefined, { BENCH_BODY_FILE: listFile });
    // Each agent sends its own, stable mesh key (a changed key is a store change that wakes every poll).
    const heartbeats = new Map(
      names.map((n) => [n, JSON.stringify({ version: '1.0.0', uptime: 100, meshPublicKey: wgKey() })]),
    );
    // One request per router, cycled by every connection.
    const agentRequests = (method: 'GET' | 'POST', suffix: string): LoadRequest[] =>
      names.map((router) => ({
        method,
        path: `/agent/${router}/${suffix}`,
        headers: {
          authorization: `Bearer ${fixture.tokens.get(router)}`,
          'accept-encoding': AGENT_ACCEPT_ENCODING,
          ...(method === 'POST' ? { 'content-type': 'application/json' } : {}),
        },
        ...(method === 'POST' ? { body: heartbeats.get(router) } : {}),
      }));
    const helloGet: LoadRequest[] = [{ method: 'GET', path: '/' }];
    const ceiling: Load = { name: 'hello-world GET', server: hello, requests: helloGet };
    const postCeiling: Load = {
      name: 'hello-world POST, heartbeat body',
      server: hello,
      requests: [
        {
          method: 'POST',
          path: '/',
          headers: { 'content-type': 'application/json' },
          body: heartbeats.get(names[0] as string),
        },
      ],
    };
    const listCeiling: Load = {
      name: 'hello-world GET, the list static',
      server: hello,
      requests: [{ method: 'GET', path: '/list', headers: { 'accept-encoding': AGENT_ACCEPT_ENCODING } }],
    };
    const sessions: Load = {
      name: `GET /agent/:router/sessions (${perRouter})`,
      server: controller,
      requests: agentRequests('GET', 'sessions'),
    };
    const heartbeat: Load = {
      name: 'POST /agent/:router/heartbeat',
      server: controller,
      requests: agentRequests('POST', 'heartbeat'),
    };
    const busy: Load = {
      name: `hello-world GET + ${BUSY_US} µs of work`,
      server: hello,
      requests: [{ method: 'GET', path: '/busy' }],
    };
    const loads = [ceiling, postCeiling, listCeiling, busy, sessions, heartbeat];
    const rounds = Number(values.rounds);
    console.log(
      `session list: ${(listBody.length / 1024).toFixed(0)} KiB, ${(gzipBytes.length / 1024).toFixed(1)} KiB gzipped (what agents receive)`,
    );
    console.log(`${rounds} rounds of ${loads.length} measurements, ${size.seconds} s each …`);
    const results = new Map<Load, Figures[]>(loads.map((l) => [l, []]));
    for (let round = 0; round < rounds; round++)
      for (const l of loads) results.get(l)?.push(await measure(l, wrkOptions(round === 0)));
    const median = (xs: number[]) =>
      percentile(
        [...xs].sort((a, b) => a - b),
        50,
      );
    const of = (l: Load) => results.get(l) as Figures[];
    const mid = (l: Load, key: 'rps' | 'cpuUs' | 'p50' | 'p99') => median(of(l).map((f) => f[key]));
    /** Per round: the load's req/s over the base's in the same round. */
    const shares = (l: Load, base = ceiling) => of(l).map((f, i) => f.rps / (of(base)[i] as Figures).rps);
    const best = (l: Load) => Math.max(...of(l).map((f) => f.rps));
    /** The load's best round over the base's best round. */
    const bestShare = (l: Load, base = ceiling) => best(l) / best(base);
    const pct = (x: number) => `${(100 * x).toFixed(0)}%`;
    console.log(
      `\n${'endpoint'.padEnd(38)} best req/s   % of GET  median: req/s   % of GET  CPU µs/req   p50 ms   p99 ms  errors   % of GET per round`,
    );
    for (const l of loads) {
      const errors = of(l).reduce((n, x) => n + x.errors, 0);
      console.log(
        [
          l.name.padEnd(38),
          best(l).toFixed(0).padStart(10),
          pct(bestShare(l)).padStart(10),
          mid(l, 'rps').toFixed(0).padStart(14),
          pct(median(shares(l))).padStart(10),
          mid(l, 'cpuUs').toFixed(1).padStart(11),
          mid(l, 'p50').toFixed(2).padStart(8),
          mid(l, 'p99').toFixed(2).padStart(8),
          String(errors).padStart(7),
          `  ${shares(l).map(pct).join(' ')}`,
        ].join(' '),
      );
    }
    const approvals = 30;
    const wake = await longPollWakeups(controller.url, fixture.data, fixture.tokens, approvals);
    console.log(`\nlong poll wake-up after an admin approval (${approvals} approvals):`);
    console.log(
      `  from sending the approval:      p50 ${percentile(wake.fromRequest, 50).toFixed(1)} ms   p99 ${percentile(wake.fromRequest, 99).toFixed(1)} ms   (includes the git commit)`,
    );
    console.log(
      `  from the approval's response:   p50 ${percentile(wake.fromResponse, 50).toFixed(1)} ms   p99 ${percentile(wake.fromResponse, 99).toFixed(1)} ms   (negative: the poll woke first)`,
    );
    const scrape = await metricsScrapes(controller.url, fixture.tokens, 20);
    console.log(
      `\nGET /metrics with ${scrape.sessions} sessions reported (${scrape.ms.length} scrapes): p50 ${percentile(scrape.ms, 50).toFixed(1)} ms, ` +
        `max ${percentile(scrape.ms, 100).toFixed(1)} ms, ${(scrape.bytes / 1048576).toFixed(1)} MiB`,
    );
    console.log(
      `  heartbeats meanwhile (${scrape.heartbeatMs.length}, one at a time): p50 ${percentile(scrape.heartbeatMs, 50).toFixed(1)} ms, ` +
        `p99 ${percentile(scrape.heartbeatMs, 99).toFixed(1)} ms, max ${percentile(scrape.heartbeatMs, 100).toFixed(1)} ms`,
    );
    console.log('\ntargets (each endpoint against the bare hello-world of its own method, see the header):');
    for (const [l, base, alike] of [
      [sessions, ceiling, listCeiling],
      [heartbeat, postCeiling, ceiling],
    ] as const) {
      const share = bestShare(l, base);
      console.log(
        `  ${l.name}: ≥ 50 % of "${base.name}" ${verdict(share >= 0.5)} (best rounds ${pct(share)}, ` +
          `median ${pct(median(shares(l, base)))}; ${pct(bestShare(l, alike))} of "${alike.name}"), ` +
          `p99 < 20 ms ${verdict(mid(l, 'p99') < 20)}`,
      );
    }
    console.log(`  wake-up p50 < 100 ms: ${verdict(percentile(wake.fromRequest, 50) < 100)}`);
  } finally {
    await stopServers([hello, controller]);
    await rm(fixture.data, { recursive: true, force: true });
  }
}

if (values.serve) await serve(values.serve, values.data, Number(values.port));
else if (values.probe) await probeHealth(values.probe, Number(values.duration), values['through-restart']);
else if (values.heartbeats) sendHeartbeats(values.heartbeats);
else await bench();
