/**
 * What the bench:api scenarios run on (scripts/bench-api.ts; the storm: storm.ts): the fixture written
 * straight into a git store, the server processes (bench-api.ts forked with --serve), and the helpers
 * that make figures of what they measure.
 */
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

/** The benchmark's entry: forked with --serve as each server, with --probe as the storm's /health probe. */
export const BENCH_SCRIPT = new URL('../bench-api.ts', import.meta.url).pathname;

export const ADMIN_ASN = 4242420000;
/** The fixture's session s of every router belongs to FIXTURE_ASN + s. */
export const FIXTURE_ASN = 4242421000;
/** What Node's fetch, and so the agent, sends. */
export const AGENT_ACCEPT_ENCODING = 'gzip, deflate';
/** Server on CPU 0, load generator on CPU 1, when there are two. */
export const PIN = availableParallelism() >= 2;

export interface Server {
  child: ChildProcess;
  url: string;
  /** When it began to listen, by its own Date.now() (one clock for every process of the machine). */
  listeningAt: number;
}

export interface Fixture {
  data: string;
  tokens: Map<string, string>;
}

export const wgKey = () => randomBytes(32).toString('base64');

/** Writes the manifests straight into the store repository as one commit (10 000 API calls would take minutes). */
export async function buildFixture(routers: number, perRouter: number): Promise<Fixture> {
  const { renderManifest, routerPath, sessionPath, policyPath } = await import('../../common/manifests.ts');
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

/**
 * `port` 0 takes any free port; the storm's restart passes the first controller's, so that the URL its
 * agents know stays valid.
 */
export function startServer(
  kind: string,
  data?: string,
  env: Record<string, string> = {},
  port = 0,
): Promise<Server> {
  const child = fork(
    BENCH_SCRIPT,
    ['--serve', kind, '--port', String(port), ...(data ? ['--data', data] : [])],
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
    child.once('message', (m: { address: string; listeningAt: number }) => {
      clearTimeout(timer);
      // Every thread of the server (event loop, GC helpers, libuv pool) on CPU 0.
      if (PIN) execFileSync('taskset', ['-a', '-p', '-c', '0', String(child.pid)], { stdio: 'ignore' });
      resolve({ child, url: m.address, listeningAt: m.listeningAt });
    });
    child.once('exit', (code) => reject(new Error(`${kind} server exited with ${code}`)));
  });
}

/**
 * The fixture is written straight into git, without the status file a controller keeps for each
 * session: a first start writes those 10 000 files. A controller restarted on its own store is what
 * runs in production: one start completes the fixture, a second process is measured
 * (docs/benchmarks.md, "Git writes and the HTTP path", says why this once mattered).
 */
export async function startOnFixture(fixture: Fixture): Promise<Server> {
  let t = Date.now();
  await stopServers([await startServer('controller', fixture.data)]);
  console.log(`first start completed the fixture in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  t = Date.now();
  const controller = await startServer('controller', fixture.data);
  console.log(`controller loaded the store in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  return controller;
}

/** SIGTERM (the controller closes its store) and wait for the exits. */
export async function stopServers(servers: (Server | undefined)[]): Promise<void> {
  const children = servers.flatMap((s) => (s ? [s.child] : []));
  for (const c of children) c.kill('SIGTERM');
  await Promise.all(
    children.map((c) => (c.exitCode !== null ? Promise.resolve() : new Promise((r) => c.once('exit', r)))),
  );
}

/** User + system CPU time of a process (all its threads), in clock ticks of 10 ms. */
export function cpuTicks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

export const verdict = (ok: boolean) => (ok ? 'met' : 'MISSED');

export function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}
