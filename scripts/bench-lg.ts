/**
 * Looking-glass benchmark (docs/benchmarks.md, "The looking glass"): `POST /lg` `show route for` over
 * loopback HTTP to the real controller (this process, real git store), handed to the agent's
 * looking-glass poll (agent/looking-glass/service.ts, in this process) and run on a real BIRD in a
 * network namespace that has SESSIONS BGP protocols and as many routes, then answered back: the whole
 * round trip a caller waits for, sequentially. Needs root (namespaces).
 *
 * Usage: npm run bench:lg [-- SESSIONS [QUERIES]] (default 1000 sessions, 200 queries).
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import pino from 'pino';
import { BirdControl } from '../agent/bird/control.ts';
import { LookingGlassService } from '../agent/looking-glass/service.ts';
import { ControlPlaneClient } from '../agent/sync/client.ts';
import { startAgentLab } from '../test/agent/lab.ts';
import { percentile, verdict } from './bench-api/harness.ts';
import { benchHistory } from './bench-lg-history.ts';

const SESSIONS = Number(process.argv[2] ?? 1000);
const QUERIES = Number(process.argv[3] ?? 200);
const TARGET_P50_MS = 300;

/** SESSIONS passive BGP protocols (no neighbor answers: their state is what a router's idle ones are) and a /48 each. */
function localConfig(n: number): string {
  const lines: string[] = [];
  for (let i = 0; i < n; i++)
    lines.push(
      `protocol bgp bench_${i} { local as 4242420001; neighbor fd00:ff::${(i + 1).toString(16)} as ${4242430000 + i}; passive; ipv6 { import none; export none; }; }`,
    );
  const routes = Array.from(
    { length: n },
    (_, i) => `  route fd42:${(0x1000 + i).toString(16)}::/48 unreachable;`,
  );
  lines.push(`protocol static bench_routes {\n  ipv6;\n${routes.join('\n')}\n}`);
  return `${lines.join('\n')}\n`;
}

const L = await startAgentLab('blg');
const stop = new AbortController();
try {
  const localDir = join(L.root, 'bird', 'local.d');
  await writeFile(join(localDir, 'bench.conf'), localConfig(SESSIONS));
  const bird = new BirdControl(L.config.routing.controlSocket);
  await bird.configure();
  const protocols = (await bird.protocols()).filter((p) => /^bench_\d+$/.test(p.name)).length;
  const service = new LookingGlassService(
    new ControlPlaneClient({ ...L.config.controlPlane, router: L.router }),
    bird,
    pino({ level: 'silent' }),
  );
  const polling = service.run(stop.signal);
  const ask = async (i: number): Promise<number> => {
    const target = `fd42:${(0x1000 + (i % SESSIONS)).toString(16)}::1`;
    const t0 = performance.now();
    const res = await fetch(`${L.url}/lg`, {
      method: 'POST',
      headers: { authorization: `Bearer ${L.h.admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({ op: 'route', router: L.router, target }),
    });
    const body = (await res.json()) as { output?: string };
    const ms = performance.now() - t0;
    if (res.status !== 200 || !body.output?.includes('/48'))
      throw new Error(`query ${i}: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
    return ms;
  };
  for (let i = 0; i < 10; i++) await ask(i); // warm-up
  const times: number[] = [];
  for (let i = 0; i < QUERIES; i++) times.push(await ask(i));
  times.sort((a, b) => a - b);
  const p50 = percentile(times, 50);
  console.log(
    `looking glass, show route for, ${protocols} BGP protocols and ${SESSIONS} routes on the router, ${QUERIES} queries one after another:\n` +
      `  round trip p50 ${p50.toFixed(1)} ms, p95 ${percentile(times, 95).toFixed(1)} ms, p99 ${percentile(times, 99).toFixed(1)} ms, max ${times.at(-1)?.toFixed(1)} ms\n` +
      `target p50 < ${TARGET_P50_MS} ms: ${verdict(p50 < TARGET_P50_MS)}`,
  );
  stop.abort();
  await polling;
  bird.close();
} finally {
  stop.abort();
  await L.close();
}

// the session history's storage and 30-day query (no namespace needed): scripts/bench-lg-history.ts
await benchHistory();
