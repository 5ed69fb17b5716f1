/**
 * Looking-glass benchmark (docs/benchmarks.md, "The looking glass"): `POST /lg` `show route for` over
 * loopback HTTP to the real controller (this process, real git store), handed to the agent's
 * looking-glass poll (agent/looking-glass/service.ts, in this process) and run on a real BIRD in a
 * network namespace that has SESSIONS BGP protocols and as many routes, then answered back: the whole
 * round trip a caller waits for, sequentially. Then CONCURRENT callers ask at once (each again after a
 * 429 until answered) while the agent runs its reconcile passes for PEER_SESSIONS sessions of the
 * router in its own process (`peerops agent`): how much the queries delay a pass. Needs root.
 *
 * Usage: npm run bench:lg [-- SESSIONS [QUERIES [CONCURRENT]]] (default 1000 sessions, 200 queries, 100).
 */
import { writeFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';
import pino from 'pino';
import { BirdControl } from '../agent/bird/control.ts';
import { LookingGlassService } from '../agent/looking-glass/service.ts';
import { ControlPlaneClient } from '../agent/sync/client.ts';
import { sessionFields } from '../test/api/helpers.ts';
import { startAgentLab } from '../test/agent/lab.ts';
import { freePort } from '../test/support/ports.ts';
import { percentile, verdict } from './bench-api/harness.ts';
import { benchHistory } from './bench-lg-history.ts';

const SESSIONS = Number(process.argv[2] ?? 1000);
const QUERIES = Number(process.argv[3] ?? 200);
const CONCURRENT = Number(process.argv[4] ?? 100);
const TARGET_P50_MS = 300;
/** How much concurrent queries may delay the router's reconcile pass. */
const TARGET_PASS_DELAY_MS = 100;
/** Sessions of the router (approved, waiting for peers that never come): what its passes reconcile. */
const PEER_SESSIONS = 10;
/** How long the agent's passes are measured alone, and again under bursts of queries (a pass a second). */
const WINDOW_MS = 15_000;

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
  const post = (i: number) =>
    fetch(`${L.url}/lg`, {
      method: 'POST',
      headers: { authorization: `Bearer ${L.h.admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        op: 'route',
        router: L.router,
        target: `fd42:${(0x1000 + (i % SESSIONS)).toString(16)}::1`,
      }),
    });
  const ask = async (i: number): Promise<number> => {
    const t0 = performance.now();
    const res = await post(i);
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
      `  (load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')})\n` +
      `target p50 < ${TARGET_P50_MS} ms: ${verdict(p50 < TARGET_P50_MS)}`,
  );

  // The router's reconcile passes, alone and under CONCURRENT callers (the controller runs 16 of a
  // router's queries at once and answers the rest 429, after which a caller asks again). The agent is
  // its own process here, as on a router: its passes share its event loop and BIRD with the queries,
  // not with this process's controller and callers. Its passes' time is its pass histogram's.
  stop.abort();
  await polling;
  for (let i = 0; i < PEER_SESSIONS; i++) {
    const asn = 4242425000 + i;
    const created = await L.h.post(
      '/session',
      L.h.tokens.issueToken(asn, 'user').token,
      sessionFields(L.router),
    );
    const { uuid } = created.json<{ uuid: string }>();
    await L.h.post('/admin/session', L.h.admin, { action: 'approve', uuid });
  }
  const metricsPort = await freePort();
  const agent = L.spawnAgent({ listen: `127.0.0.1:${metricsPort}`, intervals: { syncInterval: 1 } });
  const passes = async (): Promise<{ sum: number; count: number }> => {
    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
    return {
      sum: value('peerops_agent_sync_pass_seconds_sum') * 1000,
      count: value('peerops_agent_sync_pass_seconds_count'),
    };
  };
  // the first passes set the sessions up
  for (let deadline = Date.now() + 30_000; ;) {
    if ((await passes().catch(() => ({ count: 0 }))).count >= 3) break;
    if (Date.now() > deadline) throw new Error(`the agent made no passes:\n${agent.output()}`);
    await sleep(200);
  }
  const window = async (load: () => Promise<void>) => {
    const before = await passes();
    await load();
    const after = await passes();
    const count = after.count - before.count;
    return { count, meanMs: (after.sum - before.sum) / Math.max(count, 1) };
  };
  const idleBefore = await window(() => sleep(WINDOW_MS / 2));
  let refused = 0;
  let bursts = 0;
  let burstMs = 0;
  const caller = async (i: number): Promise<void> => {
    for (;;) {
      const res = await post(i);
      await res.arrayBuffer();
      if (res.status === 200) return;
      if (res.status !== 429) throw new Error(`concurrent query ${i}: ${res.status}`);
      refused++;
      // about the time the 16 queries under way take to be answered
      await sleep(100);
    }
  };
  const loaded = await window(async () => {
    const until = Date.now() + WINDOW_MS;
    while (Date.now() < until) {
      const b0 = performance.now();
      await Promise.all(Array.from({ length: CONCURRENT }, (_, i) => caller(i)));
      burstMs += performance.now() - b0;
      bursts++;
    }
  });
  // alone before and after the queries, so that the machine's own drift weighs on both sides
  const idleAfter = await window(() => sleep(WINDOW_MS / 2));
  const idle = {
    count: idleBefore.count + idleAfter.count,
    meanMs:
      (idleBefore.meanMs * idleBefore.count + idleAfter.meanMs * idleAfter.count) /
      Math.max(idleBefore.count + idleAfter.count, 1),
  };
  const delay = loaded.meanMs - idle.meanMs;
  console.log(
    `${bursts} bursts of ${CONCURRENT} concurrent show route for on one router over ${WINDOW_MS / 1000} s (a burst answered in ${(burstMs / bursts).toFixed(0)} ms on average; ${refused} refusals 429 asked again), the agent's reconcile pass with ${PEER_SESSIONS} sessions:\n` +
      `  alone ${idle.meanMs.toFixed(1)} ms on average (${idle.count} passes), under the queries ${loaded.meanMs.toFixed(1)} ms (${loaded.count} passes): delayed ${delay.toFixed(1)} ms\n` +
      `  (load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')})\n` +
      `target pass delayed by at most ${TARGET_PASS_DELAY_MS} ms: ${verdict(delay <= TARGET_PASS_DELAY_MS)}`,
  );
  await agent.kill('SIGTERM');
  bird.close();
} finally {
  stop.abort();
  await L.close();
}

// the session history's storage and 30-day query (no namespace needed): scripts/bench-lg-history.ts
await benchHistory();
