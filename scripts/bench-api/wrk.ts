/**
 * The load driver of bench:api's agent and user-list scenarios (scripts/bench-api.ts): wrk, one thread,
 * pinned to CPU 1 where there are two (the server runs on CPU 0), cycling the given requests; the figures
 * from wrk's own summary and the server process's CPU time per request from /proc.
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PIN, cpuTicks, type Server } from './harness.ts';

export interface Figures {
  rps: number;
  p50: number;
  p99: number;
  /** CPU time (user + system, all threads) of the server process per request, µs. */
  cpuUs: number;
  errors: number;
}

export interface LoadRequest {
  method: 'GET' | 'POST';
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

export function ensureWrk(): void {
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

export interface Load {
  name: string;
  server: Server;
  requests: LoadRequest[];
}

export interface WrkOptions {
  /** 2 s first, not measured (JIT, connections). */
  warmUp: boolean;
  seconds: number;
  connections: number;
}

/** One wrk run against `load`. */
export async function measure({ server, requests }: Load, opts: WrkOptions): Promise<Figures> {
  const script = join(tmpdir(), `peerops-bench-${randomUUID()}.lua`);
  await writeFile(script, wrkScript(requests));
  const wrk = (seconds: number) =>
    execFileSync(
      PIN ? 'taskset' : 'wrk',
      [
        ...(PIN ? ['-c', '1', 'wrk'] : []),
        '-t1',
        `-c${opts.connections}`,
        `-d${seconds}s`,
        '-s',
        script,
        server.url,
      ],
      { encoding: 'utf8' },
    );
  try {
    if (opts.warmUp) wrk(2); // JIT, connections: not measured
    const before = cpuTicks(server.child.pid as number);
    const out = wrk(opts.seconds);
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
