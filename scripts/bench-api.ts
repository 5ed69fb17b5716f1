/**
 * API load benchmark (npm run bench:api). A controller on the git store holding 100 routers × 100 sessions
 * is measured with autocannon against a bare fastify hello-world in the same run (the ceiling):
 * throughput and p50/p99 of `GET /agent/:router/sessions` and of heartbeats; then the delay from an admin
 * approval to the wake-up of a waiting long poll. Each server runs in its own child process so that it does
 * not share a CPU with autocannon. Targets: ≥ 50 % of the ceiling, p99 < 20 ms, wake-up p50 < 100 ms.
 * The hello server also serves one real session list as a static body: what the body alone costs the
 * network path and autocannon.
 *
 * Options: --duration SECONDS (default 10), --connections N (default 32), --routers N, --sessions N.
 */
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import Fastify, { type FastifyInstance } from 'fastify';
import pino from 'pino';

const { values } = parseArgs({
  options: {
    serve: { type: 'string' },
    data: { type: 'string' },
    duration: { type: 'string', default: '10' },
    connections: { type: 'string', default: '32' },
    routers: { type: 'string', default: '100' },
    sessions: { type: 'string', default: '100' },
  },
});

const ADMIN_ASN = 4242420000;

// ---------------------------------------------------------------- child: the servers

async function serve(kind: string, data: string | undefined): Promise<void> {
  let app: FastifyInstance;
  if (kind === 'hello') {
    app = Fastify({ logger: false });
    app.get('/', async () => ({ hello: 'world' }));
    app.post('/', async () => ({ ok: true }));
    // A real router's session list as a static body: what the network path and the load generator alone
    // cost for the answer of GET /agent/:router/sessions.
    const big = await readFile(process.env.BENCH_BODY_FILE as string);
    app.get('/big', async (_req, reply) => reply.type('application/json').send(big));
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
    app = await buildApp({ store, tokens, config, logger: false });
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
  process.send?.({ address });
}

// ---------------------------------------------------------------- parent: fixtures and measurements

interface Fixture {
  data: string;
  tokens: Map<string, string>;
}

const wgKey = () => randomBytes(32).toString('base64');

/** Writes the manifests straight into the store repository as one commit (10 000 API calls would take minutes). */
async function buildFixture(routers: number, perRouter: number): Promise<Fixture> {
  const { renderManifest, routerPath, sessionPath, policyPath } =
    await import('../controller/store/git/manifests.ts');
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
      const asn = 4242421000 + s;
      files.push([
        sessionPath(name, asn),
        renderManifest('PeeringSession', `as${asn}-${name}`, {
          uuid: randomUUID(),
          asn,
          router: name,
          ipv6: `fd42:${s.toString(16)}::1`,
          linkLocal: `fe80::${s.toString(16)}`,
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

function startServer(
  kind: string,
  data?: string,
  env: Record<string, string> = {},
): Promise<{ child: ChildProcess; url: string }> {
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
    const timer = setTimeout(() => reject(new Error(`${kind} server did not start in 120 s`)), 120_000);
    child.once('message', (m: { address: string }) => {
      clearTimeout(timer);
      resolve({ child, url: m.address });
    });
    child.once('exit', (code) => reject(new Error(`${kind} server exited with ${code}`)));
  });
}

interface Figures {
  name: string;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
}

async function load(name: string, opts: autocannon.Options): Promise<Figures> {
  // Warm-up (JIT, connection setup), not measured.
  await autocannon({ connections: Number(values.connections), duration: 2, ...opts });
  const result = await autocannon({
    connections: Number(values.connections),
    duration: Number(values.duration),
    ...opts,
  });
  const bad = result.non2xx + result.errors + result.timeouts;
  return {
    name,
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: bad,
  };
}

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
      ipv6: 'fd42:beef::1',
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

async function bench(): Promise<void> {
  const routers = Number(values.routers);
  const perRouter = Number(values.sessions);
  console.log(`building fixture: ${routers} routers × ${perRouter} sessions …`);
  const fixture = await buildFixture(routers, perRouter);
  let hello: { child: ChildProcess; url: string } | undefined;
  let controller: { child: ChildProcess; url: string } | undefined;
  try {
    const t = Date.now();
    controller = await startServer('controller', fixture.data);
    console.log(`controller loaded the store in ${((Date.now() - t) / 1000).toFixed(1)} s`);
    const names = [...fixture.tokens.keys()];
    // One router's session list as the agent receives it becomes the hello server's static body.
    const sample = await fetch(`${controller.url}/agent/${names[0]}/sessions`, {
      headers: { authorization: `Bearer ${fixture.tokens.get(names[0] as string)}` },
    });
    const sampleFile = join(fixture.data, 'sample-sessions.json');
    const sampleBody = Buffer.from(await sample.arrayBuffer());
    await writeFile(sampleFile, sampleBody);
    hello = await startServer('hello', undefined, { BENCH_BODY_FILE: sampleFile });
    // Each agent sends its own, stable mesh key (a changed key is a store change that wakes every poll).
    const heartbeats = new Map(
      names.map((n) => [n, JSON.stringify({ version: '1.0.0', uptime: 100, meshPublicKey: wgKey() })]),
    );
    // One static request per router, cycled by every connection: autocannon pre-builds static requests,
    // as it does for the hello-world URL (a setupRequest callback would make the load generator the limit).
    const agentRequests = (method: 'GET' | 'POST', suffix: string, withBody = false): autocannon.Request[] =>
      names.map((router) => {
        const body = withBody ? heartbeats.get(router) : undefined;
        return {
          method,
          path: `/agent/${router}/${suffix}`,
          headers: {
            authorization: `Bearer ${fixture.tokens.get(router)}`,
            ...(body ? { 'content-type': 'application/json' } : {}),
          },
          ...(body ? { body } : {}),
        };
      });
    const ceiling = await load('hello-world GET (the ceiling)', { url: `${hello.url}/` });
    const postCeiling = await load('hello-world POST of the heartbeat body', {
      url: `${hello.url}/`,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: heartbeats.get(names[0] as string) as string,
    });
    const sessions = await load(`GET /agent/:router/sessions (${perRouter} sessions)`, {
      url: controller.url,
      requests: agentRequests('GET', 'sessions'),
    });
    const heartbeat = await load('POST /agent/:router/heartbeat', {
      url: controller.url,
      requests: agentRequests('POST', 'heartbeat', true),
    });
    // The machine may be shared: the ceiling is measured again after the controller and averaged.
    const ceilingAfter = await load('hello-world GET (again)', { url: `${hello.url}/` });
    ceiling.rps = (ceiling.rps + ceilingAfter.rps) / 2;
    ceiling.name = 'hello-world GET (ceiling, mean of 2)';
    console.log(
      `ceiling before/after: ${(2 * ceiling.rps - ceilingAfter.rps).toFixed(0)} / ${ceilingAfter.rps.toFixed(0)} req/s`,
    );
    const kib = (sampleBody.length / 1024).toFixed(0);
    const bigCeiling = await load(`hello-world GET of that list, static (${kib} KiB)`, {
      url: `${hello.url}/big`,
    });
    const rows = [ceiling, postCeiling, bigCeiling, sessions, heartbeat];
    console.log(
      '\nendpoint                                      req/s   % ceiling   p50 ms   p99 ms   non-2xx',
    );
    for (const r of rows)
      console.log(
        `${r.name.padEnd(44)} ${r.rps.toFixed(0).padStart(7)}   ${((100 * r.rps) / ceiling.rps).toFixed(0).padStart(8)}%   ${String(r.p50).padStart(6)}   ${String(r.p99).padStart(6)}   ${String(r.errors).padStart(7)}`,
      );
    const rounds = 30;
    const wake = await longPollWakeups(controller.url, fixture.data, fixture.tokens, rounds);
    console.log(`\nlong poll wake-up after an admin approval (${rounds} rounds):`);
    console.log(
      `  from sending the approval:      p50 ${percentile(wake.fromRequest, 50).toFixed(1)} ms   p99 ${percentile(wake.fromRequest, 99).toFixed(1)} ms   (includes the git commit)`,
    );
    console.log(
      `  from the approval's response:   p50 ${percentile(wake.fromResponse, 50).toFixed(1)} ms   p99 ${percentile(wake.fromResponse, 99).toFixed(1)} ms   (negative: the poll woke first)`,
    );
    const verdict = (ok: boolean) => (ok ? 'met' : 'MISSED');
    console.log('\ntargets:');
    for (const r of [sessions, heartbeat])
      console.log(
        `  ${r.name}: ≥ 50 % of ceiling ${verdict(r.rps >= ceiling.rps / 2)}, p99 < 20 ms ${verdict(r.p99 < 20)}`,
      );
    console.log(
      `  (the session list reaches ${((100 * sessions.rps) / bigCeiling.rps).toFixed(0)} % of the same list served static)`,
    );
    console.log(`  wake-up p50 < 100 ms: ${verdict(percentile(wake.fromRequest, 50) < 100)}`);
  } finally {
    const exited = (c: ChildProcess) =>
      c.exitCode !== null ? Promise.resolve() : new Promise((r) => c.once('exit', r));
    const children = [hello?.child, controller?.child].filter((c): c is ChildProcess => c !== undefined);
    for (const c of children) c.kill('SIGTERM');
    await Promise.all(children.map(exited));
    await rm(fixture.data, { recursive: true, force: true });
  }
}

if (values.serve) await serve(values.serve, values.data);
else await bench();
