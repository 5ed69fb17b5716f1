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
 * Method and current figures: docs/benchmarks.md.
 *
 * Options: --duration SECONDS per measurement (default 3), --rounds N (default 5), --connections N
 * (default 32), --routers N, --sessions N, --no-halt-poll (measure with the VM's idle halting as it is).
 * Needs wrk (Debian package `wrk`; installed when missing and running as root).
 */
import { execFile, execFileSync, fork, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { gunzipSync, gzipSync } from 'node:zlib';
import { Agent as HttpAgent, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import Fastify, { type FastifyInstance } from 'fastify';
import pino from 'pino';
import { jittered } from '../agent/agent.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    serve: { type: 'string' },
    data: { type: 'string' },
    probe: { type: 'string' },
    duration: { type: 'string' },
    rounds: { type: 'string', default: '5' },
    connections: { type: 'string', default: '32' },
    routers: { type: 'string' },
    sessions: { type: 'string' },
    'no-halt-poll': { type: 'boolean', default: false },
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
const ADMIN_ASN = 4242420000;
/** The fixture's session s of every router belongs to FIXTURE_ASN + s. */
const FIXTURE_ASN = 4242421000;
/** What Node's fetch, and so the agent, sends. */
const AGENT_ACCEPT_ENCODING = 'gzip, deflate';
/** The reference row's added work per request, in µs. */
const BUSY_US = 20;
/** Server on CPU 0, load generator on CPU 1, when there are two. */
const PIN = availableParallelism() >= 2;

// ---------------------------------------------------------------- child: the servers

async function serve(kind: string, data: string | undefined): Promise<void> {
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
    // A real router's session list, gzipped as the agent receives it, as a static body: what the bytes
    // of the answer of GET /agent/:router/sessions alone cost the server.
    const list = await readFile(process.env.BENCH_BODY_FILE as string);
    app.get('/list', async (_req, reply) =>
      reply.type('application/json').header('content-encoding', 'gzip').send(list),
    );
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
    const config = loadConfig({ data, listen: '127.0.0.1:0' }, {});
    // The benchmark measures the request path, not the limiter's refusals: limits far above the load.
    config.rateLimit = { perMinute: 1e9, agentPerMinute: 1e9 };
    const store = await openStore(config, pino({ level: 'warn' }));
    await store.start();
    const tokens = await TokenIssuer.fromFile(defaultKeyPath(config.dataDir));
    // The controller's own logger (one info line per request), written to /dev/null instead of stdout.
    const { controllerLogger, logDestination } = await import('../controller/logger.ts');
    const logger = controllerLogger(config.logLevel, logDestination('/dev/null'));
    app = await buildApp({ store, tokens, config, logger });
    process.on(
      'SIGTERM',
      () =>
        void app
          ?.close()
          .then(() => store.close())
          .then(() => process.exit(0)),
    );
  }
  const address = await app.listen({ host: '127.0.0.1', port: 0 });
  // The event loop's delays, asked for by the storm: a stall of the controller itself, told apart from
  // the load generator's own (both run on one shared machine).
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  process.on('message', (m: string) => {
    if (m !== 'event-loop') return;
    process.send?.({ loopMaxMs: loop.max / 1e6, loopP99Ms: loop.percentile(99) / 1e6 });
    loop.reset();
  });
  process.send?.({ address });
}

// ---------------------------------------------------------------- parent: fixtures and measurements

interface Server {
  child: ChildProcess;
  url: string;
}

interface Fixture {
  data: string;
  tokens: Map<string, string>;
}

const wgKey = () => randomBytes(32).toString('base64');

/** Writes the manifests straight into the store repository as one commit (10 000 API calls would take minutes). */
async function buildFixture(routers: number, perRouter: number): Promise<Fixture> {
  const { renderManifest, routerPath, sessionPath, policyPath } = await import('../common/manifests.ts');
  const data = await mkdtemp(join(tmpdir(), 'peerops-bench-'));
  const work = join(data, 'work');
  const tokens = new Map<string, string>();
  const files: [string, string][] = [];
  files.push([
    policyPath('default'),
    renderManifest('RoutingPolicy', 'default', { dn42Asn: ADMIN_ASN, mergeIsApproval: true }),
  ]);
  const createdAt = new Date().toISOString();
  for (let r = 1; r <= routers; r++) {
    const name = `r${r}`;
    const token = randomBytes(32).toString('base64url');
    tokens.set(name, token);
    files.push([
      routerPath(name),
      renderManifest('Router', name, {
        uuid: randomUUID(),
        displayName: `Router ${r}`,
        nodeId: r,
        region: 'bench',
        endpointHost: `${name}.bench.example`,
        publicKey: wgKey(),
        linkLocal: 'fe80::1',
        loopback: { ipv4: `172.20.${r >> 8}.${r & 255}` },
        agentTokenSha256: createHash('sha256').update(token).digest('hex'),
      }),
    ]);
    for (let s = 1; s <= perRouter; s++) {
      const asn = FIXTURE_ASN + s;
      files.push([
        sessionPath(name, asn),
        renderManifest('PeeringSession', `as${asn}-${name}`, {
          uuid: randomUUID(),
          asn,
          router: name,
          ipv6: `fd42:${s.toString(16)}::1`,
          linkLocal: `fe80::2:${s.toString(16)}`,
          endpoint: `peer${s}.example.org:51820`,
          publicKey: wgKey(),
          mtu: 1420,
          listenPort: 20000 + (asn % 10000),
          createdAt,
        }),
      ]);
    }
  }
  for (const [path, text] of files) {
    await mkdir(dirname(join(work, path)), { recursive: true });
    await writeFile(join(work, path), text);
  }
  const gitDir = join(data, 'store.git');
  const git = (...args: string[]) =>
    execFileSync('git', [`--git-dir=${gitDir}`, `--work-tree=${work}`, ...args], {
      env: {
        ...process.env,
        GIT_AUTHOR_NAME: 'bench',
        GIT_AUTHOR_EMAIL: 'bench@peerops.invalid',
        GIT_COMMITTER_NAME: 'bench',
        GIT_COMMITTER_EMAIL: 'bench@peerops.invalid',
      },
      stdio: 'pipe',
    });
  execFileSync('git', ['init', '--bare', '-q', '-b', 'main', gitDir]);
  git('add', '-A');
  git('commit', '-q', '-m', `bench fixture: ${routers} routers × ${perRouter} sessions`);
  await rm(work, { recursive: true, force: true });
  return { data, tokens };
}

function startServer(kind: string, data?: string, env: Record<string, string> = {}): Promise<Server> {
  const child = fork(
    new URL(import.meta.url).pathname,
    ['--serve', kind, ...(data ? ['--data', data] : [])],
    {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      env: { ...process.env, ...env },
      execArgv:
        kind === 'controller' && process.env.BENCH_PROFILE
          ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_PROFILE]
          : [],
    },
  );
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill();
      reject(new Error(`${kind} server did not start in 600 s`));
    }, 600_000);
    child.once('message', (m: { address: string }) => {
      clearTimeout(timer);
      // Every thread of the server (event loop, GC helpers, libuv pool) on CPU 0.
      if (PIN) execFileSync('taskset', ['-a', '-p', '-c', '0', String(child.pid)], { stdio: 'ignore' });
      resolve({ child, url: m.address });
    });
    child.once('exit', (code) => reject(new Error(`${kind} server exited with ${code}`)));
  });
}

interface Figures {
  rps: number;
  p50: number;
  p99: number;
  /** CPU time (user + system, all threads) of the server process per request, µs. */
  cpuUs: number;
  errors: number;
}

interface LoadRequest {
  method: 'GET' | 'POST';
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

function ensureWrk(): void {
  try {
    execFileSync('wrk', ['--version'], { stdio: 'ignore' });
  } catch (err) {
    // wrk prints its version and exits 1; only a missing binary is ENOENT
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') return;
    if (process.getuid?.() !== 0)
      throw new Error('bench:api needs wrk: apt-get install wrk (as root)', { cause: err });
    console.log('installing wrk (Debian package) …');
    const apt = (...args: string[]) =>
      execFileSync('apt-get', args, {
        stdio: 'inherit',
        env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
      });
    // a fresh machine may have no package lists yet
    apt('update', '-qq');
    apt('install', '-y', '-qq', 'wrk');
  }
}

/** User + system CPU time of a process (all its threads), in clock ticks of 10 ms. */
function cpuTicks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

/**
 * wrk script: the requests are formatted once in init() and cycled; done() prints the figures as JSON.
 * The values are ASCII, so a JSON string literal is also a valid Lua string literal.
 */
function wrkScript(requests: LoadRequest[]): string {
  const lua = (v: string) => JSON.stringify(v);
  const spec = (r: LoadRequest) => {
    const headers = Object.entries(r.headers ?? {})
      .map(([k, v]) => `[${lua(k)}] = ${lua(v)}`)
      .join(', ');
    return `  { ${lua(r.method)}, ${lua(r.path)}, { ${headers} }, ${r.body === undefined ? 'nil' : lua(r.body)} },`;
  };
  return [
    'local specs = {',
    ...requests.map(spec),
    '}',
    'local formatted = {}',
    'local n = 0',
    'function init(args)',
    '  for i, s in ipairs(specs) do formatted[i] = wrk.format(s[1], s[2], s[3], s[4]) end',
    'end',
    'function request()',
    '  n = n % #formatted + 1',
    '  return formatted[n]',
    'end',
    'function done(summary, latency, requests)',
    '  local e = summary.errors',
    `  io.write(string.format('{"requests":%d,"us":%d,"bad":%d,"p50":%d,"p99":%d}\\n',`,
    '    summary.requests, summary.duration, e.connect + e.read + e.write + e.status + e.timeout,',
    '    latency:percentile(50), latency:percentile(99)))',
    'end',
  ].join('\n');
}

interface Load {
  name: string;
  server: Server;
  requests: LoadRequest[];
}

async function measure({ server, requests }: Load, warmUp: boolean): Promise<Figures> {
  const script = join(tmpdir(), `peerops-bench-${randomUUID()}.lua`);
  await writeFile(script, wrkScript(requests));
  const wrk = (seconds: number) =>
    execFileSync(
      PIN ? 'taskset' : 'wrk',
      [
        ...(PIN ? ['-c', '1', 'wrk'] : []),
        '-t1',
        `-c${values.connections}`,
        `-d${seconds}s`,
        '-s',
        script,
        server.url,
      ],
      { encoding: 'utf8' },
    );
  try {
    if (warmUp) wrk(2); // JIT, connections: not measured
    const before = cpuTicks(server.child.pid as number);
    const out = wrk(size.seconds);
    const ticks = cpuTicks(server.child.pid as number) - before;
    const line = out.split('\n').find((l) => l.startsWith('{"requests"'));
    if (!line) throw new Error(`wrk printed no figures:\n${out}`);
    const f = JSON.parse(line) as { requests: number; us: number; bad: number; p50: number; p99: number };
    return {
      rps: f.requests / (f.us / 1e6),
      p50: f.p50 / 1000,
      p99: f.p99 / 1000,
      cpuUs: (ticks * 10_000) / f.requests,
      errors: f.bad,
    };
  } finally {
    await rm(script, { force: true });
  }
}

const verdict = (ok: boolean) => (ok ? 'met' : 'MISSED');

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

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
  if (scenario === 'storm') await storm();
  else {
    ensureWrk();
    const restoreHaltPolling = values['no-halt-poll'] ? undefined : enableHaltPolling();
    try {
      await (scenario === 'user-list' ? userList() : measureAll());
    } finally {
      restoreHaltPolling?.();
    }
  }
  console.log(`${load()} at the end`);
}

/**
 * The fixture is written straight into git, without the status file a controller keeps for each
 * session: a first start writes those 10 000 files. A controller restarted on its own store is what
 * runs in production: one start completes the fixture, a second process is measured
 * (docs/benchmarks.md, "Git writes and the HTTP path", says why this once mattered).
 */
async function startOnFixture(fixture: Fixture): Promise<Server> {
  let t = Date.now();
  await stopServers([await startServer('controller', fixture.data)]);
  console.log(`first start completed the fixture in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  t = Date.now();
  const controller = await startServer('controller', fixture.data);
  console.log(`controller loaded the store in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  return controller;
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
        ...(method === 'POST' ? { body: heartbeats.get(router) as string } : {}),
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
          body: heartbeats.get(names[0] as string) as string,
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
      for (const l of loads) results.get(l)?.push(await measure(l, round === 0));
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

// ---------------------------------------------------------------- scenario user-list

/**
 * `POST /session` action list as users send it, one ASN after the other: in the fixture each ASN has one
 * session on every router (100 at the default size, a 65 KiB answer). Target: ≤ 100 µs of the
 * controller's CPU per request, best round.
 */
async function userList(): Promise<void> {
  const { routers, perRouter } = size;
  console.log(`building fixture: ${routers} routers × ${perRouter} sessions …`);
  const fixture = await buildFixture(routers, perRouter);
  let controller: Server | undefined;
  let hello: Server | undefined;
  try {
    controller = await startOnFixture(fixture);
    const { TokenIssuer, defaultKeyPath } = await import('../controller/auth/jwt.ts');
    const issuer = await TokenIssuer.fromFile(defaultKeyPath(fixture.data));
    const requests: LoadRequest[] = Array.from({ length: perRouter }, (_, i) => ({
      method: 'POST',
      path: '/session',
      headers: {
        authorization: `Bearer ${issuer.issueToken(FIXTURE_ASN + 1 + i, 'user').token}`,
        'content-type': 'application/json',
        'accept-encoding': 'gzip, deflate, br',
      },
      body: JSON.stringify({ action: 'list' }),
    }));
    // asked twice: the controller gzips a kept list from its second sending on, as under the load
    const ask = () =>
      fetch(`${controller?.url}/session`, {
        method: 'POST',
        headers: requests[0]?.headers,
        body: requests[0]?.body ?? null,
      });
    await (await ask()).arrayBuffer();
    const sample = await ask();
    const body = Buffer.from(await sample.arrayBuffer());
    const answer = JSON.parse(body.toString()) as { sessions: unknown[] };
    console.log(
      `one ASN's list: ${answer.sessions.length} sessions, ${(body.length / 1024).toFixed(0)} KiB; ${perRouter} ASNs in turn`,
    );
    // the static body as the controller sent it (fetch decompressed it)
    const gzipped = sample.headers.get('content-encoding') === 'gzip';
    const listFile = join(fixture.data, 'sample-user-list.json');
    await writeFile(listFile, gzipped ? gzipSync(body) : body);
    console.log(gzipped ? `sent gzipped: ${(gzipSync(body).length / 1024).toFixed(1)} KiB` : 'sent as it is');
    hello = await startServer('hello', undefined, {
      BENCH_BODY_FILE: listFile,
      BENCH_USER_LIST_FILE: listFile,
      ...(gzipped ? { BENCH_USER_LIST_ENCODING: 'gzip' } : {}),
    });
    const loads: Load[] = [
      {
        name: 'hello-world POST, the list static',
        server: hello,
        requests: [{ ...(requests[0] as LoadRequest), path: '/user-list' }],
      },
      { name: 'POST /session list', server: controller, requests },
    ];
    const rounds = Number(values.rounds);
    console.log(`${rounds} rounds of ${loads.length} measurements, ${size.seconds} s each …`);
    const results = new Map<Load, Figures[]>(loads.map((l) => [l, []]));
    for (let round = 0; round < rounds; round++)
      for (const l of loads) results.get(l)?.push(await measure(l, round === 0));
    const bestCpu = new Map<Load, number>();
    for (const l of loads) {
      const figures = results.get(l) as Figures[];
      const sorted = (key: keyof Figures) => figures.map((f) => f[key]).sort((a, b) => a - b);
      const cpu = sorted('cpuUs');
      bestCpu.set(l, cpu[0] ?? Infinity);
      console.log(
        `${l.name.padEnd(36)} CPU µs/req best ${cpu[0]?.toFixed(1)}, median ${percentile(cpu, 50).toFixed(1)} ` +
          `(rounds ${figures.map((f) => f.cpuUs.toFixed(1)).join(' ')}); ` +
          `req/s best ${Math.max(...figures.map((f) => f.rps)).toFixed(0)}; p99 median ${percentile(sorted('p99'), 50).toFixed(2)} ms; ` +
          `errors ${figures.reduce((n, f) => n + f.errors, 0)}`,
      );
    }
    const cpu = bestCpu.get(loads[1] as Load) ?? Infinity;
    console.log(
      `\ntargets:\n  CPU per request ≤ 100 µs (best round): ${verdict(cpu <= 100)} ` +
        `(${cpu.toFixed(1)} µs; the static body's ${bestCpu.get(loads[0] as Load)?.toFixed(1)} µs in the same run)`,
    );
  } finally {
    await stopServers([hello, controller]);
    await rm(fixture.data, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------- scenario storm

/** docs/agent.md: controlPlane.heartbeatInterval and metricInterval; agent/agent.ts: the long poll's wait. */
const HEARTBEAT_S = 30;
const REPORT_S = 60;
const LONG_POLL_S = 55;

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/**
 * `fn` every `seconds` ± 10 %, as the agent's heartbeat and report loops (agent/agent.ts); returns a
 * function that stops it.
 */
function repeat(seconds: number, fn: () => void): () => void {
  let timer: NodeJS.Timeout;
  const next = () => {
    timer = setTimeout(
      () => {
        fn();
        next();
      },
      jittered(seconds * 1000),
    );
  };
  next();
  return () => clearTimeout(timer);
}

/** HTTP/1.1 keep-alive over node:http: lighter than fetch for thousands of open requests. */
function httpClient(base: string) {
  const agent = new HttpAgent({ keepAlive: true, maxSockets: Infinity });
  const url = new URL(base);
  const call = (method: string, path: string, headers: Record<string, string>, body?: string) =>
    new Promise<Answer>((resolve, reject) => {
      const req = httpRequest({ host: url.hostname, port: url.port, method, path, headers, agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const raw = Buffer.concat(chunks);
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: res.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw,
          });
        });
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(body);
    });
  return { call, close: () => agent.destroy() };
}

/** Forked: GET /health every 50 ms for `seconds`; sends its latencies (ms) to the parent. */
async function probeHealth(url: string, seconds: number): Promise<void> {
  const client = httpClient(url);
  const ms: number[] = [];
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) {
    const t = performance.now();
    const res = await client.call('GET', '/health', {});
    if (res.status !== 200) throw new Error(`/health answered ${res.status}`);
    const took = performance.now() - t;
    ms.push(took);
    await sleep(Math.max(0, 50 - took));
  }
  client.close();
  process.send?.({ ms });
}

/**
 * 1,000 routers' agents connecting at once (1,000 × 10 sessions at the default size), at the agents'
 * documented rates: each sends its first heartbeat with a mesh key the controller has not seen, fetches
 * its sessions, BIRD config and mesh list, holds a session long poll (wait=55, renewed when answered),
 * sends a heartbeat every 30 s and a metrics report every 60 s, each ± 10 % as the agent waits. A
 * forked probe polls /health every 50 ms. Printed: heartbeat p50/p99/max, /health max, the long-poll wake-ups the controller counted
 * (peerops_long_poll_wakeups_total), the controller's CPU and peak RSS.
 */
async function storm(): Promise<void> {
  const { routers, perRouter, seconds } = size;
  console.log(`building fixture: ${routers} routers × ${perRouter} sessions …`);
  const fixture = await buildFixture(routers, perRouter);
  let controller: Server | undefined;
  const client = { close: () => undefined as void };
  try {
    controller = await startOnFixture(fixture);
    const pid = controller.child.pid as number;
    const http = httpClient(controller.url);
    client.close = http.close;
    /** Each agent's first heartbeat (its new mesh key), and the later ones. */
    const heartbeatMs: number[] = [];
    const laterHeartbeatMs: number[] = [];
    const failures: string[] = [];
    let longPollAnswers = 0;
    let stopping = false;
    const probe = fork(
      new URL(import.meta.url).pathname,
      ['--probe', controller.url, '--duration', String(seconds)],
      {
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      },
    );
    const health = new Promise<number[]>((resolve, reject) => {
      probe.once('message', (m: { ms: number[] }) => resolve(m.ms));
      probe.once('exit', (code) => code !== 0 && reject(new Error(`the /health probe exited with ${code}`)));
    });
    const eventLoop = () =>
      new Promise<{ loopMaxMs: number; loopP99Ms: number }>((resolve) => {
        controller?.child.once('message', resolve);
        controller?.child.send('event-loop');
      });
    await eventLoop(); // from here on
    const cpuBefore = cpuTicks(pid);
    const started = Date.now();
    console.log(`${routers} agents connect at once, for ${seconds} s …`);

    /**
     * A failed request as printed: what, its error, and when (seconds into the run). Requests the run's
     * own end cuts (a heartbeat sent as the controller is stopped) are not the controller's failures.
     */
    const failure = (what: string, e: Error) => {
      if (!stopping)
        failures.push(`${what}: ${e.message} at ${((Date.now() - started) / 1000).toFixed(1)} s`);
    };
    const runAgent = async (router: string, token: string) => {
      const headers = {
        authorization: `Bearer ${token}`,
        'accept-encoding': AGENT_ACCEPT_ENCODING,
      };
      const post = { ...headers, 'content-type': 'application/json' };
      const beat = JSON.stringify({ version: '1.0.0', uptime: 1, meshPublicKey: wgKey() });
      let beats = 0;
      const heartbeat = async () => {
        const t = performance.now();
        const res = await http.call('POST', `/agent/${router}/heartbeat`, post, beat);
        (beats++ === 0 ? heartbeatMs : laterHeartbeatMs).push(performance.now() - t);
        if (res.status !== 200) failures.push(`heartbeat ${router}: ${res.status}`);
      };
      await heartbeat();
      const first = await http.call('GET', `/agent/${router}/sessions`, headers);
      let etag = String(first.headers.etag);
      const uuids = (JSON.parse(first.body.toString()) as { sessions: { uuid: string }[] }).sessions.map(
        (s) => s.uuid,
      );
      await http.call('GET', `/agent/${router}/bird-config`, headers);
      await http.call('GET', `/agent/${router}/mesh`, headers);
      const report = JSON.stringify({
        sessions: uuids.map((uuid) => ({ uuid, rtt: 12, rxBytes: 1e6, txBytes: 2e6, routesImported: 10 })),
      });
      const timers = [
        repeat(HEARTBEAT_S, () => void heartbeat().catch((e: Error) => failure('heartbeat', e))),
        repeat(
          REPORT_S,
          () =>
            void http
              .call('POST', `/agent/${router}/report`, post, report)
              .catch((e: Error) => failure('report', e)),
        ),
      ];
      try {
        while (!stopping) {
          const res = await http.call('GET', `/agent/${router}/sessions?wait=${LONG_POLL_S}`, {
            ...headers,
            'if-none-match': etag,
          });
          if (res.status === 200) {
            longPollAnswers++;
            etag = String(res.headers.etag);
          }
        }
      } catch (err) {
        if (!stopping) throw err;
      } finally {
        for (const stop of timers) stop();
      }
    };
    const agents = [...fixture.tokens].map(([router, token]) =>
      runAgent(router, token).catch((e: Error) => {
        failure(router, e);
      }),
    );
    const healthMs = await health;
    const elapsed = (Date.now() - started) / 1000;
    const cpuSeconds = (cpuTicks(pid) - cpuBefore) / 100;
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const peakRss = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1]) / 1024;
    const metrics = await (await fetch(`${controller.url}/metrics`)).text();
    const wakeups = (answer: string) =>
      Number(
        new RegExp(`peerops_long_poll_wakeups_total\\{answer="${answer}"\\} (\\d+)`).exec(metrics)?.[1] ?? 0,
      );
    const loop = await eventLoop();
    stopping = true;
    http.close();
    await Promise.all(agents);
    const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
    const hb = sorted([...heartbeatMs, ...laterHeartbeatMs]);
    const h = sorted(healthMs);
    const figures = (xs: number[]) =>
      `p50 ${percentile(xs, 50).toFixed(1)} ms, p99 ${percentile(xs, 99).toFixed(1)} ms, max ${percentile(xs, 100).toFixed(1)} ms`;
    console.log(`\nover ${elapsed.toFixed(0)} s: ${hb.length} heartbeats, ${figures(hb)}`);
    console.log(`  the first of each agent (a new mesh key): ${figures(sorted(heartbeatMs))}`);
    console.log(
      `  the later ones: ${laterHeartbeatMs.length ? figures(sorted(laterHeartbeatMs)) : 'none (a run under 30 s)'}`,
    );
    console.log(
      `controller event loop delay: p99 ${loop.loopP99Ms.toFixed(1)} ms, max ${loop.loopMaxMs.toFixed(1)} ms ` +
        '(beside the latencies: what the controller itself stalled, not the load generator)',
    );
    console.log(
      `/health (${h.length} probes, every 50 ms): p50 ${percentile(h, 50).toFixed(1)} ms, max ${percentile(h, 100).toFixed(1)} ms`,
    );
    console.log(
      `long-poll wake-ups: ${wakeups('unchanged')} with the answer unchanged, ${wakeups('changed')} changed; ` +
        `${longPollAnswers} long polls answered 200`,
    );
    console.log(
      `controller: ${cpuSeconds.toFixed(1)} s of CPU (${((100 * cpuSeconds) / elapsed).toFixed(0)} % of a core), peak RSS ${peakRss.toFixed(0)} MiB`,
    );
    if (failures.length)
      console.log(`failures: ${failures.length}, first: ${failures.slice(0, 3).join('; ')}`);
    console.log('\ntargets:');
    console.log(`  heartbeat p99 < 50 ms: ${verdict(percentile(hb, 99) < 50)}`);
    console.log(`  /health never over 100 ms: ${verdict(percentile(h, 100) <= 100)}`);
    console.log(
      `  no wake-up without a change to the answer (nothing changes sessions here): ${verdict(wakeups('unchanged') === 0)}`,
    );
    console.log(`  no failed request: ${verdict(failures.length === 0)}`);
  } finally {
    client.close();
    await stopServers([controller]);
    await rm(fixture.data, { recursive: true, force: true });
  }
}

/** SIGTERM (the controller closes its store) and wait for the exits. */
async function stopServers(servers: (Server | undefined)[]): Promise<void> {
  const children = servers.flatMap((s) => (s ? [s.child] : []));
  for (const c of children) c.kill('SIGTERM');
  await Promise.all(
    children.map((c) => (c.exitCode !== null ? Promise.resolve() : new Promise((r) => c.once('exit', r)))),
  );
}

if (values.serve) await serve(values.serve, values.data);
else if (values.probe) await probeHealth(values.probe, Number(values.duration));
else await bench();
