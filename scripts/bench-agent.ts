/**
 * Agent benchmark (docs/benchmarks.md, "The agent"): the agent as operators run it, its own process
 * (`node dist/peerops.js agent`, the npm package's bundle, rebuilt first), against the real controller
 * (this process, real git store), a real BIRD and real wireguard-go in a network namespace. Per size:
 * the first pass (creates every tunnel and file, one configure), passes with nothing to change (zero
 * writes, zero configures, zero tunnel changes), the agent's RSS (/proc/<pid>/status VmRSS, and VmHWM,
 * the peak) beside an empty Node's, and the wireguard-go daemons' RSS (one per tunnel; not the agent's).
 * Pass times are the agent's own `peerops_agent_sync_pass_seconds` (the reconcile step), read from its
 * /metrics. Node's options are the shipped ones: the bundle runs itself again with the agent's
 * (agent/node-args.ts), and the agent's command line is printed; --node-args gives others instead.
 * Needs root (namespaces).
 *
 * Usage: npm run bench:agent [-- [--no-build] [--mappings] [--node-args="--flag …"] 10 100 1000]
 * (default 10 100). `--mappings`: the agent's largest memory mappings after the no-op passes.
 * `--wireguard=peerops-wireguard` runs the tunnels in peerops-wireguard (one host process, built by
 * scripts/build-wireguard-host.sh) instead of a wireguard-go daemon each (the default).
 * The agent runs inside the router's namespace, as on a router, its controller and /metrics reached
 * through a forwarder (netnsBridge); `--wrapped` runs it outside with every command it runs wrapped in
 * `ip netns exec` (PEEROPS_AGENT_NETNS), as the integration tests do: ~2-3 ms more a command.
 */
import { spawn } from 'node:child_process';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { connect, createServer, type Socket } from 'node:net';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { AGENT_NODE_ARGS_ENV } from '../agent/node-args.ts';
import { startAgentLab, type AgentLab } from '../test/agent/lab.ts';
import { expectOk } from '../test/api/helpers.ts';
import { exec } from '../test/support/netns.ts';
import { freePort } from '../test/support/ports.ts';

const ROOT = join(import.meta.dirname, '..');
const args = process.argv.slice(2);
const build = !args.includes('--no-build');
const mappings = args.includes('--mappings');
const wrapped = args.includes('--wrapped');
/**
 * --node-args: Node's options instead of the shipped ones (also in PEEROPS_AGENT_NODE_ARGS, so that the
 * bundle adds none). Without it the bundle adds the shipped ones itself, as it does for operators.
 */
const nodeArgsGiven = args.find((a) => a.startsWith('--node-args='))?.slice('--node-args='.length);
const nodeArgs = (nodeArgsGiven ?? '').split(' ').filter(Boolean);
if (nodeArgsGiven !== undefined) process.env[AGENT_NODE_ARGS_ENV] = nodeArgs.join(' ');
else delete process.env[AGENT_NODE_ARGS_ENV];
const sizes = args.map(Number).filter((n) => n > 0);
const SIZES = sizes.length ? sizes : [10, 100];
const ENTRY = join(ROOT, 'dist', 'peerops.js');
/** The userspace WireGuard the agent runs (PEEROPS_WIREGUARD, docs/agent.md); else the agent's choice. */
const wireguardArg = args.find((a) => a.startsWith('--wireguard='))?.slice('--wireguard='.length);
const WIREGUARD = wireguardArg ?? 'wireguard-go';
if (WIREGUARD !== 'wireguard-go' && WIREGUARD !== 'peerops-wireguard')
  throw new Error(`--wireguard=${WIREGUARD}: use peerops-wireguard or wireguard-go`);
const MiB = 1024 * 1024;

/**
 * Targets (docs/benchmarks.md): by size, the smallest bracket the size fits in. Pass times from issue 30,
 * RSS from issue 48 (iEdon's Go agent was 19.9 MiB at 100 sessions).
 */
function targets(n: number): { firstMs?: number; noopMs?: number; rssMiB?: number } {
  if (n <= 100) return { firstMs: 3000, noopMs: 500, rssMiB: 50 };
  if (n <= 1000) return { firstMs: 30_000, noopMs: 500, rssMiB: 90 };
  return {};
}

function verdict(value: number, target: number | undefined): string {
  return target === undefined ? '(no target)' : value <= target ? 'met' : 'MISSED';
}

function machine(): string {
  const l = loadavg().map((x) => x.toFixed(2));
  return `${cpus().length} CPUs, load average ${l.join(' ')}`;
}

interface Memory {
  rss: number;
  hwm: number;
  /** The process's own pages (heap, code V8 compiled) and the files it maps (node's binary, shared). */
  anon: number;
  file: number;
}

/** VmRSS, VmHWM, RssAnon, RssFile of a process, in bytes. */
async function memoryOf(pid: number): Promise<Memory> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) * 1024;
  return { rss: kb('VmRSS'), hwm: kb('VmHWM'), anon: kb('RssAnon'), file: kb('RssFile') };
}

/** The largest mappings of a process by RSS (`--mappings`): what dominates its memory. */
async function largestMappings(pid: number): Promise<string> {
  const rss = new Map<string, number>();
  let name = '';
  for (const line of (await readFile(`/proc/${pid}/smaps`, 'utf8')).split('\n')) {
    const head = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) name = head[1] || '[anon]';
    const r = /^Rss:\s+(\d+) kB/.exec(line);
    if (r) rss.set(name, (rss.get(name) ?? 0) + Number(r[1]) * 1024);
  }
  return [...rss]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 6)
    .map(([n, b]) => `${n} ${fmtMiB(b)}`)
    .join(', ');
}

/** RSS of a Node process that loads nothing (the floor any Node program stands on). */
async function emptyNode(): Promise<Memory> {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 60000)'], { stdio: 'ignore' });
  try {
    await new Promise((r) => setTimeout(r, 500));
    return await memoryOf(child.pid!);
  } finally {
    child.kill('SIGKILL');
  }
}

/**
 * The userspace WireGuard processes (wireguard-go daemons, or peerops-wireguard's one host) in the node's
 * namespace: how many, their RSS and PSS summed (PSS shares the
 * binary's pages among the daemons: the memory they take together), threads, and CPU time so far
 * (every thread's /proc/<pid>/task/<tid>/schedstat, in nanoseconds: finer than the clock ticks of
 * /proc/<pid>/stat, which a daemon's few milliseconds would round to zero).
 */
async function wireguardGo(
  ns: string,
): Promise<{ count: number; rss: number; pss: number; threads: number; cpuMs: number }> {
  const pids = (await exec('ip', ['netns', 'pids', ns])).stdout.split(/\s+/).filter(Boolean);
  const out = { count: 0, rss: 0, pss: 0, threads: 0, cpuMs: 0 };
  for (const pid of pids) {
    const comm = (await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '')).trim();
    // comm is the program's name cut to 15 characters
    if (comm !== WIREGUARD.slice(0, 15)) continue;
    out.count++;
    out.rss += (await memoryOf(Number(pid)).catch(() => ({ rss: 0 }))).rss;
    const rollup = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8').catch(() => '');
    out.pss += Number(/^Pss:\s+(\d+) kB/m.exec(rollup)?.[1] ?? 0) * 1024;
    const tids = await readdir(`/proc/${pid}/task`).catch(() => [] as string[]);
    out.threads += tids.length;
    for (const tid of tids) {
      const stat = await readFile(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').catch(() => '0');
      out.cpuMs += Number(stat.split(' ')[0]) / 1e6;
    }
  }
  return out;
}

/**
 * CPU seconds of a process (utime + stime) and of the children it waited for (cutime + cstime: the
 * commands it ran, `ip netns exec` wrapping included, not the daemons wireguard-go forks off).
 */
async function cpuOf(pid: number): Promise<{ own: number; children: number }> {
  const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  const tick = (i: number) => Number(fields[i]) / 100; // USER_HZ
  return { own: tick(11) + tick(12), children: tick(13) + tick(14) };
}

/** The steps' times of the agent's first pass that changed something (its `pass applied changes` log line). */
function firstPassSteps(output: string): string {
  for (const line of output.split('\n')) {
    if (!line.includes('pass applied changes')) continue;
    try {
      const steps = (JSON.parse(line) as { stepMs?: Record<string, number> }).stepMs ?? {};
      return Object.entries(steps)
        .map(([name, ms]) => `${name} ${fmtMs(ms)}`)
        .join(', ');
    } catch {
      return '(unreadable log line)';
    }
  }
  return '(no log line)';
}

type Metrics = Map<string, number>;

/** Each step's average time over the no-op passes, from peerops_agent_sync_step_seconds_total. */
function noopSteps(first: Metrics, last: Metrics, count: number): string {
  const out: string[] = [];
  for (const [key, value] of last) {
    const step = /^peerops_agent_sync_step_seconds_total\{step="(\w+)"\}$/.exec(key)?.[1];
    if (step) out.push(`${step} ${fmtMs(((value - (first.get(key) ?? 0)) * 1000) / count)}`);
  }
  return out.join(', ') || '(no step metrics)';
}

/** GET /metrics of the agent: on a port of this namespace, or (in the router's) through a Unix socket. */
function getMetrics(at: number | string): Promise<string> {
  return new Promise((resolve, reject) => {
    const where = typeof at === 'number' ? { host: '127.0.0.1', port: at } : { socketPath: at };
    const req = request({ ...where, path: '/metrics', timeout: 10_000 }, (res) => {
      let body = '';
      res.on('data', (b: Buffer) => (body += b.toString()));
      res.on('end', () => resolve(body));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.end();
  });
}

async function scrape(at: number | string): Promise<Metrics | undefined> {
  try {
    const text = await getMetrics(at);
    const out: Metrics = new Map();
    for (const line of text.split('\n')) {
      const m = /^(\w+)(\{[^}]*\})? (\S+)$/.exec(line);
      if (m) out.set(`${m[1]}${m[2] ?? ''}`, Number(m[3]));
    }
    return out;
  } catch {
    return undefined; // not listening yet
  }
}

const passes = (m: Metrics) => m.get('peerops_agent_sync_pass_seconds_count') ?? 0;

async function waitPasses(
  at: number | string,
  count: number,
  timeoutMs: number,
  pid: number,
): Promise<Metrics> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = await scrape(at);
    if (m && passes(m) >= count) return m;
    if (Date.now() > deadline)
      throw new Error(`the agent did not complete ${count} passes in ${timeoutMs} ms`);
    try {
      process.kill(pid, 0);
    } catch {
      throw new Error('the agent exited');
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Copies bytes both ways between two connections until either ends. */
function splice(a: Socket, b: Socket): void {
  a.pipe(b).pipe(a);
  a.on('error', () => b.destroy());
  b.on('error', () => a.destroy());
}

/** The forwarder that runs in the router's namespace (argv: controller port there, its Unix socket, agent port, /metrics socket). */
const IN_NAMESPACE_FORWARDER = `
const net = require('node:net');
const [controllerPort, controllerSock, agentPort, metricsSock] = process.argv.slice(1);
const splice = (a, b) => { a.pipe(b).pipe(a); a.on('error', () => b.destroy()); b.on('error', () => a.destroy()); };
net.createServer((c) => splice(c, net.connect(controllerSock))).listen(Number(controllerPort), '127.0.0.1');
net.createServer((c) => splice(c, net.connect(Number(agentPort), '127.0.0.1'))).listen(metricsSock);
`;

/**
 * Connects an agent in the router's namespace to this process's controller and this process to the
 * agent's /metrics: loopback differs between namespaces, Unix sockets (files) do not. Returns the
 * controller's URL and the agent's listen address in the namespace, and the /metrics socket here.
 */
async function netnsBridge(
  L: AgentLab,
  dir: string,
): Promise<{ url: string; listen: string; metrics: string; close: () => Promise<void> }> {
  const controllerSock = join(dir, 'controller.sock');
  const metricsSock = join(dir, 'metrics.sock');
  const controllerPort = new URL(L.url).port;
  const here = createServer((c) => splice(c, connect(Number(controllerPort), '127.0.0.1')));
  await new Promise<void>((r) => here.listen(controllerSock, r));
  // loopback ports of the namespace are all free: it is the lab's
  const [inNsController, inNsAgent] = [8080, 9100];
  const forwarder = spawn(
    'ip',
    [
      'netns',
      'exec',
      L.node.name,
      process.execPath,
      '-e',
      IN_NAMESPACE_FORWARDER,
      String(inNsController),
      controllerSock,
      String(inNsAgent),
      metricsSock,
    ],
    { stdio: 'inherit' },
  );
  return {
    url: `http://127.0.0.1:${inNsController}`,
    listen: `127.0.0.1:${inNsAgent}`,
    metrics: metricsSock,
    close: async () => {
      forwarder.kill('SIGKILL');
      await new Promise((r) => here.close(r));
    },
  };
}

/** A distinct 32-byte WireGuard public key per session (any 32 bytes are a key to WireGuard). */
function uniqueKey(i: number): string {
  const key = Buffer.alloc(32, 7);
  key.writeUInt32BE(i, 0);
  return key.toString('base64');
}

async function createSessions(L: AgentLab, n: number): Promise<void> {
  const routerUuid = L.h.store.getRouter(L.router)?.spec.uuid;
  for (let i = 0; i < n; i++) {
    const asn = 4242422000 + i;
    const token = L.h.tokens.issueToken(asn, 'user').token;
    const res = await expectOk(
      L.h.post('/session', token, {
        action: 'create',
        router: routerUuid,
        ipv6: `fd42:${(0x2000 + i).toString(16)}::1`,
        linkLocal: `fe80::${(0x100 + i).toString(16)}`,
        endpoint: `[fd00:ffff::${(i + 2).toString(16)}]:51820`,
        publicKey: uniqueKey(i),
        mtu: 1420,
      }),
    );
    await expectOk(
      L.h.post('/admin/session', L.h.admin, {
        action: 'approve',
        uuid: res.json<{ uuid: string }>().uuid,
      }),
    );
  }
}

const fmtMs = (ms: number) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(0)} ms`);
const fmtMiB = (b: number) => `${(b / MiB).toFixed(1)} MiB`;

console.log(`bench-agent: ${new Date().toISOString()}, ${machine()}, node ${process.version}`);
if (build) {
  const r = await exec(process.execPath, [join(ROOT, 'scripts', 'build-release.ts'), '--npm'], {
    timeoutMs: 300_000,
  });
  if (r.code !== 0) throw new Error(`build failed: ${r.stderr}`);
}
console.log(
  `agent: node ${[...nodeArgs, ENTRY].join(' ')} agent (the npm package's bundle; Node options ${nodeArgsGiven === undefined ? 'as shipped' : 'from --node-args'})`,
);
const empty = await emptyNode();
console.log(`empty Node (${process.version}) RSS: ${fmtMiB(empty.rss)}`);
if (WIREGUARD === 'peerops-wireguard') {
  const r = await exec('bash', [join(ROOT, 'scripts', 'build-wireguard-host.sh')], { timeoutMs: 900_000 });
  if (r.code !== 0) throw new Error(`building peerops-wireguard failed: ${r.stderr}`);
  // the agent (spawned with this environment) finds it on PATH and is told to use it
  process.env.PATH = `${r.stdout.trim().split('\n').at(-1)}:${process.env.PATH ?? ''}`;
}
if (wireguardArg) process.env.PEEROPS_WIREGUARD = WIREGUARD;
console.log(
  wrapped
    ? 'agent: outside the router namespace, each command wrapped in `ip netns exec` (--wrapped)'
    : "agent: inside the router's namespace, as on a router",
);
console.log(
  `WireGuard: ${wireguardArg ? `${WIREGUARD} (--wireguard, given to the agent as PEEROPS_WIREGUARD)` : "the agent's own choice (kernel, else peerops-wireguard on PATH, else wireguard-go)"}`,
);

// Every wireguard-go daemon holds an inotify instance (its UAPI socket); Linux allows a user 128 by default.
const INOTIFY = '/proc/sys/fs/inotify/max_user_instances';
const inotifyNeeded = Math.max(...SIZES) + 512;
const inotifyBefore = (await readFile(INOTIFY, 'utf8')).trim();
if (Number(inotifyBefore) < inotifyNeeded) {
  await writeFile(INOTIFY, String(inotifyNeeded));
  console.log(`raised fs.inotify.max_user_instances to ${inotifyNeeded} (one per wireguard-go daemon)`);
}
/** The machine's limit as it was, at the end or on a signal. */
const restoreInotify = () => writeFile(INOTIFY, inotifyBefore).catch(() => undefined);

let failed = false;
/** The lab of the size under way: removed (namespaces, wireguard-go daemons, BIRD) also on Ctrl-C or kill. */
let current: AgentLab | undefined;
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.once(signal, () => {
    console.error(`bench-agent: ${signal}: removing the lab`);
    const lab = current;
    current = undefined;
    void (lab?.close() ?? Promise.resolve()).then(restoreInotify).finally(() => process.exit(130));
  });
for (const n of SIZES) {
  const t = targets(n);
  const L = await startAgentLab('agb');
  current = L;
  let closeBridge: (() => Promise<void>) | undefined;
  try {
    const t0 = performance.now();
    await createSessions(L, n);
    console.log(`\nsessions=${n} (created and approved in ${fmtMs(performance.now() - t0)})`);
    const port = await freePort();
    const bridge = wrapped ? undefined : await netnsBridge(L, L.root);
    closeBridge = bridge?.close;
    const agent = L.spawnAgent({
      listen: bridge?.listen ?? `127.0.0.1:${port}`,
      url: bridge?.url,
      inNamespace: !wrapped,
      entry: ENTRY,
      nodeArgs,
      // no metric round (pings to every peer) during the measured passes
      intervals: { syncInterval: 2, metricInterval: 3600 },
    });
    const pid = agent.child.pid!;
    const metricsAt = bridge?.metrics ?? port;
    const first = await waitPasses(metricsAt, 1, 120_000 + n * 500, pid);
    // the same pid once the bundle has run itself again with the shipped options
    const cmdline = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').filter(Boolean);
    console.log(`  agent's command line: ${cmdline.join(' ')}`);
    const firstMs = (first.get('peerops_agent_sync_pass_seconds_sum') ?? 0) * 1000;
    const afterFirst = await memoryOf(pid);
    const agentCpu = await cpuOf(pid);
    const wg = await wireguardGo(L.node.name);
    const noopStart = performance.now();
    const NOOPS = 3;
    const last = await waitPasses(metricsAt, passes(first) + NOOPS, 60_000 + n * 100, pid);
    const delta = (key: string) => (last.get(key) ?? 0) - (first.get(key) ?? 0);
    const noopCount = passes(last) - passes(first);
    const noopMs = (delta('peerops_agent_sync_pass_seconds_sum') * 1000) / noopCount;
    const writes = delta('peerops_agent_bird_file_writes_total');
    const tunnels = delta('peerops_agent_tunnel_changes_total');
    const configures = delta('peerops_agent_bird_configures_total');
    const afterNoop = await memoryOf(pid);
    const wgIdle = await wireguardGo(L.node.name);
    const idleSeconds = (performance.now() - noopStart) / 1000;
    const sessionsUp = [...last].filter(([k]) => k.startsWith('peerops_agent_sessions{'));
    const row = (label: string, value: string, target: string, v: string) =>
      console.log(`  ${label.padEnd(30)} ${value.padEnd(28)} target ${target.padEnd(10)} ${v}`);
    row(
      'first pass',
      `${fmtMs(firstMs)} (${first.get('peerops_agent_tunnel_changes_total')} tunnels)`,
      t.firstMs ? `< ${fmtMs(t.firstMs)}` : '-',
      verdict(firstMs, t.firstMs),
    );
    row(
      `no-op pass (avg of ${noopCount})`,
      fmtMs(noopMs),
      t.noopMs ? `< ${fmtMs(t.noopMs)}` : '-',
      verdict(noopMs, t.noopMs),
    );
    row(
      'no-op writes/configures/tunnels',
      `${writes} / ${configures} / ${tunnels}`,
      '0',
      writes + configures + tunnels === 0 ? 'met' : 'MISSED',
    );
    row(
      'agent RSS after first pass',
      `${fmtMiB(afterFirst.rss)} (peak ${fmtMiB(afterFirst.hwm)})`,
      t.rssMiB ? `<= ${t.rssMiB} MiB` : '-',
      verdict(afterFirst.rss / MiB, t.rssMiB),
    );
    row(
      'agent RSS after no-op passes',
      `${fmtMiB(afterNoop.rss)} (peak ${fmtMiB(afterNoop.hwm)}, own ${fmtMiB(afterNoop.anon)}, files ${fmtMiB(afterNoop.file)})`,
      t.rssMiB ? `<= ${t.rssMiB} MiB` : '-',
      verdict(afterNoop.rss / MiB, t.rssMiB),
    );
    console.log(
      `  empty Node RSS                 ${fmtMiB(empty.rss)} (own ${fmtMiB(empty.anon)}, files ${fmtMiB(empty.file)})`,
    );
    if (mappings) console.log(`  largest mappings               ${await largestMappings(pid)}`);
    console.log(
      `  ${`${WIREGUARD} processes`.padEnd(30)} ${wg.count}, RSS ${fmtMiB(wg.rss)} in total (not the agent's), PSS ${fmtMiB(wg.pss)} (${fmtMiB(wg.pss / Math.max(1, wg.count))} each), ${wg.threads} threads`,
    );
    console.log(`  first pass's steps             ${firstPassSteps(agent.output())}`);
    console.log(`  no-op pass's steps (avg)       ${noopSteps(first, last, noopCount)}`);
    console.log(
      `  CPU to the first pass's end    agent ${agentCpu.own.toFixed(2)} s, its commands ${agentCpu.children.toFixed(2)} s, ${WIREGUARD} ${(wg.cpuMs / 1000).toFixed(2)} s (${(wg.cpuMs / Math.max(1, wg.count)).toFixed(1)} ms a process, ${(wg.cpuMs / n).toFixed(1)} ms a tunnel)`,
    );
    console.log(
      `  ${`${WIREGUARD} during no-ops`.padEnd(30)} ${((wgIdle.cpuMs - wg.cpuMs) / idleSeconds).toFixed(0)} ms of CPU a second (${(((wgIdle.cpuMs - wg.cpuMs) / idleSeconds / Math.max(1, wg.count)) * 1000).toFixed(0)} µs a process, ${(((wgIdle.cpuMs - wg.cpuMs) / idleSeconds / n) * 1000).toFixed(0)} µs a tunnel), over ${idleSeconds.toFixed(1)} s`,
    );
    console.log(
      `  sessions by status             ${sessionsUp.map(([k, v]) => `${k.slice(31, -2)}=${v}`).join(' ')}`,
    );
    if (wg.count < (WIREGUARD === 'wireguard-go' ? n : 1)) failed = true;
    await agent.kill('SIGTERM');
  } catch (err) {
    failed = true;
    console.error(`  sessions=${n}: ${(err as Error).message}`);
  } finally {
    // unless a signal's handler is removing it already
    if (current === L) {
      current = undefined;
      await closeBridge?.();
      await L.close();
    } else await new Promise(() => undefined);
  }
}
await restoreInotify();
console.log(`\nbench-agent: done ${new Date().toISOString()}, ${machine()}`);
process.exitCode = failed ? 1 : 0;
