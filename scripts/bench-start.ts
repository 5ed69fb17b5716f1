/**
 * Start to ready, from outside the process (npm run bench:start): from spawning `peerops serve` to its
 * first 200 on `/health` and to the first 200 of an agent's session fetch (`GET /agent/:router/sessions`),
 * as an orchestrator and an agent see it; the npm bundle (dist/peerops.js, `npm run build` makes it) and
 * the sources (bin/peerops.ts), on a git store of 10,000 sessions (100 routers × 100; --sessions 100000
 * for 100 × 1,000). Beside them in the same run: a bare `node -e` HTTP server and a bare fastify, each to
 * its first 200, what any Node server on this machine pays before it runs code of its own.
 *
 * Rounds alternate the four; each figure's best round is the estimate (a shared machine's neighbours
 * only ever slow a start), the median printed beside it. The bundle and the sources each start a copy
 * of the fixture once before the rounds: the first start writes each session's status file and the
 * store's parse cache, as a controller restarted on its own data directory has them (docs/benchmarks.md,
 * "Start to ready").
 *
 * Targets (issue 48): the bundle at 10,000 sessions ≤ 0.80 s, the figure of iEdon PeerAPI (the anchor)
 * in the issue's run (the anchor does not run here); at 100,000 sessions ≤ 5 s.
 *
 * Options: --sessions N (10000 or 100000), --rounds N (default 5).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { availableParallelism, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { buildFixture, percentile, verdict, type Fixture } from './bench-api/harness.ts';

const { values } = parseArgs({
  options: {
    sessions: { type: 'string', default: '10000' },
    rounds: { type: 'string', default: '5' },
  },
});
const SESSIONS = Number(values.sessions);
const ROUTERS = 100;
const ROUNDS = Number(values.rounds);
const ROOT = new URL('..', import.meta.url).pathname;
const BUNDLE = `${ROOT}dist/peerops.js`;
const SOURCES = `${ROOT}bin/peerops.ts`;
/** Seconds within which a start must answer, else the run fails. */
const START_LIMIT_S = 300;

/** A port nobody listens on now. */
async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  return port;
}

/** What a start is timed to: the first 200 of each URL, each polled every 5 ms from the spawn on. */
interface Probe {
  url: string;
  headers?: Record<string, string>;
}

/** Milliseconds from the spawn to the first 200 of each probe, in order. */
async function timeStart(argv: string[], probes: Probe[]): Promise<number[]> {
  const started = performance.now();
  const child: ChildProcess = spawn(process.execPath, argv, {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, PEEROPS_LOG_LEVEL: 'warn' },
  });
  let exited = false;
  child.once('exit', () => (exited = true));
  try {
    const times: number[] = [];
    for (const probe of probes) {
      for (;;) {
        if (exited) throw new Error(`${argv.join(' ')} exited before it answered ${probe.url}`);
        if (performance.now() - started > START_LIMIT_S * 1000)
          throw new Error(`${argv.join(' ')} did not answer in ${START_LIMIT_S} s`);
        const ok = await fetch(probe.url, { ...(probe.headers ? { headers: probe.headers } : {}) })
          .then(async (res) => (await res.arrayBuffer(), res.status === 200))
          .catch(() => false);
        if (ok) break;
        await sleep(5);
      }
      times.push(performance.now() - started);
    }
    return times;
  } finally {
    if (!exited) {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
  }
}

interface Contender {
  name: string;
  /** The figures it prints, one per probe. */
  figures: string[];
  run: (port: number) => Promise<number[]>;
}

const bareNode = `require('node:http').createServer((q, s) => s.end('ok')).listen(+process.argv[1], '127.0.0.1')`;
const bareFastify =
  `import('fastify').then(({ default: F }) => { const app = F(); app.get('/health', async () => ({ status: 'ok' }));` +
  ` return app.listen({ host: '127.0.0.1', port: +process.argv[1] }); })`;

function controller(name: string, entry: string, fixture: Fixture): Contender {
  const [router, token] = [...fixture.tokens][0] as [string, string];
  return {
    name,
    figures: ['/health', 'first agent fetch'],
    run: (port) =>
      timeStart(
        [entry, 'serve', '--data', fixture.data, '--listen', `127.0.0.1:${port}`],
        [
          { url: `http://127.0.0.1:${port}/health` },
          {
            url: `http://127.0.0.1:${port}/agent/${router}/sessions`,
            headers: { authorization: `Bearer ${token}`, 'accept-encoding': 'gzip, deflate' },
          },
        ],
      ),
  };
}

const load = () =>
  `load average ${loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')}`;

async function main(): Promise<void> {
  if (!existsSync(BUNDLE)) throw new Error(`${BUNDLE} is missing: run \`npm run build\` first`);
  console.log(
    `bench:start, ${new Date().toISOString()}, ${availableParallelism()} CPUs, Node ${process.version}, ${load()} at start`,
  );
  console.log(`building fixture: ${ROUTERS} routers × ${SESSIONS / ROUTERS} sessions …`);
  const fixture = await buildFixture(ROUTERS, SESSIONS / ROUTERS);
  // Each build its own fixture: the store's parse cache is tied to the release, so one data directory
  // started by both in turn would time a cache thrown away on every start (docs/benchmarks.md).
  const sourcesFixture = await buildFixture(ROUTERS, SESSIONS / ROUTERS);
  try {
    const contenders: Contender[] = [
      {
        name: 'bare node -e',
        figures: ['first 200'],
        run: (port) => timeStart(['-e', bareNode, String(port)], [{ url: `http://127.0.0.1:${port}/` }]),
      },
      {
        name: 'bare fastify',
        figures: ['first 200'],
        run: (port) =>
          timeStart(
            ['--input-type=module', '-e', bareFastify, String(port)],
            [{ url: `http://127.0.0.1:${port}/health` }],
          ),
      },
      controller('npm bundle', BUNDLE, fixture),
      controller('sources', SOURCES, sourcesFixture),
    ];
    let t = performance.now();
    await (contenders[2] as Contender).run(await freePort());
    await (contenders[3] as Contender).run(await freePort());
    console.log(`first starts completed the fixtures in ${((performance.now() - t) / 1000).toFixed(1)} s`);
    const results = new Map<Contender, number[][]>(contenders.map((c) => [c, []]));
    console.log(`${ROUNDS} rounds of ${contenders.length} starts …`);
    t = performance.now();
    for (let round = 0; round < ROUNDS; round++)
      for (const c of contenders) results.get(c)?.push(await c.run(await freePort()));
    console.log(`(${((performance.now() - t) / 1000).toFixed(0)} s)\n`);
    const best = new Map<string, number>();
    for (const c of contenders) {
      const rounds = results.get(c) as number[][];
      c.figures.forEach((figure, i) => {
        const ms = rounds.map((r) => r[i] as number).sort((a, b) => a - b);
        best.set(`${c.name} ${figure}`, ms[0] as number);
        console.log(
          `${`${c.name}, ${figure}`.padEnd(36)} best ${((ms[0] as number) / 1000).toFixed(2)} s, ` +
            `median ${(percentile(ms, 50) / 1000).toFixed(2)} s ` +
            `(rounds ${rounds.map((r) => ((r[i] as number) / 1000).toFixed(2)).join(' ')})`,
        );
      });
    }
    const seconds = (key: string) => (best.get(key) ?? Infinity) / 1000;
    const health = seconds('npm bundle /health');
    const agent = seconds('npm bundle first agent fetch');
    const limit = SESSIONS >= 100_000 ? 5 : 0.8;
    console.log(
      `\ntargets (best round):\n  npm bundle, ${SESSIONS} sessions, spawn to /health ≤ ${limit} s: ` +
        `${verdict(health <= limit)} (${health.toFixed(2)} s; bare node ${seconds('bare node -e first 200').toFixed(2)} s, ` +
        `bare fastify ${seconds('bare fastify first 200').toFixed(2)} s)` +
        `\n  npm bundle, ${SESSIONS} sessions, spawn to the first agent fetch ≤ ${limit} s: ` +
        `${verdict(agent <= limit)} (${agent.toFixed(2)} s)`,
    );
  } finally {
    for (const { data } of [fixture, sourcesFixture]) await rm(data, { recursive: true, force: true });
  }
  console.log(`${load()} at the end`);
}

await main();
