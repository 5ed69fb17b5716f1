/**
 * The user-list scenario of bench:api (scripts/bench-api.ts; method and figures in docs/benchmarks.md): a
 * user's session list at 10,000 sessions against a bare fastify route serving the same bytes, once with
 * nothing changing and once while every router reports its sessions' metrics at the agents' rate
 * (reporter.ts), each report changing the lists of every ASN it names.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout } from 'node:timers/promises';
import { gzipSync } from 'node:zlib';
import {
  FIXTURE_ASN,
  buildFixture,
  cpuTicks,
  percentile,
  startOnFixture,
  startServer,
  stopServers,
  verdict,
  type Server,
} from './harness.ts';
import { measure, type Figures, type Load, type LoadRequest, type WrkOptions } from './wrk.ts';

const REPORTER = new URL('reporter.ts', import.meta.url).pathname;

/** The report load's process, running once it printed `ready`; `stop` ends it and tells what it sent. */
async function startReports(
  url: string,
  routersFile: string,
  seconds: number,
): Promise<{ stop: () => Promise<{ sent: number; failed: number }> }> {
  const child: ChildProcess = spawn(process.execPath, [REPORTER, url, routersFile, String(seconds)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream })[Symbol.asyncIterator]();
  if ((await lines.next()).value !== 'ready') throw new Error('the reporter did not start');
  return {
    stop: async () => {
      child.kill('SIGTERM');
      const summary = (await lines.next()).value as string;
      await once(child, 'exit');
      return JSON.parse(summary) as { sent: number; failed: number };
    },
  };
}

/**
 * `POST /session` action list as users send it, one ASN after the other: in the fixture each ASN has one
 * session on every router (100 at the default size, a 65 KiB answer). Targets (controller's CPU per
 * request, best round): ≤ 100 µs while nothing changes, ≤ 150 µs while every router reports once per
 * `reportSeconds`, less the CPU the reports alone take (measured in a window after each round's).
 */
export async function userList({
  routers,
  perRouter,
  rounds,
  reportSeconds,
  wrkOptions,
}: {
  routers: number;
  perRouter: number;
  rounds: number;
  /** How often each router reports (the agents' metricInterval). */
  reportSeconds: number;
  /** wrk's options for a measurement (`warmUp`: the first round's). */
  wrkOptions: (warmUp: boolean) => WrkOptions;
}): Promise<void> {
  console.log(`building fixture: ${routers} routers × ${perRouter} sessions …`);
  const fixture = await buildFixture(routers, perRouter);
  let controller: Server | undefined;
  let hello: Server | undefined;
  try {
    controller = await startOnFixture(fixture);
    const { TokenIssuer, defaultKeyPath } = await import('../../controller/auth/jwt.ts');
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
    // every router's sessions, as its agent knows them, for the report load
    const reporting = await Promise.all(
      [...fixture.tokens].map(async ([name, token]) => {
        const res = await fetch(`${controller?.url}/agent/${name}/sessions`, {
          headers: { authorization: `Bearer ${token}` },
        });
        const { sessions } = (await res.json()) as { sessions: { uuid: string }[] };
        return { name, token, uuids: sessions.map((s) => s.uuid) };
      }),
    );
    const routersFile = join(fixture.data, 'reporting-routers.json');
    await writeFile(routersFile, JSON.stringify(reporting));
    const loads: Load[] = [
      {
        name: 'hello-world POST, the list static',
        server: hello,
        requests: [{ ...(requests[0] as LoadRequest), path: '/user-list' }],
      },
      { name: 'POST /session list', server: controller, requests },
      { name: `POST /session list, reports /${reportSeconds}s`, server: controller, requests },
    ];
    const reported = loads[2] as Load;
    /** The same rounds, the reports' own CPU taken out (no measurement of its own). */
    const reportedNet: Load = { ...reported, name: 'the same, less the reports alone' };
    console.log(
      `${rounds} rounds of ${loads.length} measurements, ${wrkOptions(false).seconds} s each; ` +
        `the last with each of ${routers} routers reporting ${perRouter} sessions every ${reportSeconds} s …`,
    );
    const results = new Map<Load, Figures[]>(loads.map((l) => [l, []]));
    const reportsSent = { sent: 0, failed: 0 };
    /** Per round, the controller's CPU µs per second for the reports alone (no list requests). */
    const reportCpu: number[] = [];
    const pid = controller.child.pid as number;
    const { seconds } = wrkOptions(false);
    for (let round = 0; round < rounds; round++)
      for (const l of loads) {
        const reports =
          l === reported ? await startReports(controller.url, routersFile, reportSeconds) : undefined;
        results.get(l)?.push(await measure(l, wrkOptions(round === 0)));
        if (reports) {
          const before = cpuTicks(pid);
          await setTimeout(seconds * 1000);
          reportCpu.push(((cpuTicks(pid) - before) * 10_000) / seconds);
        }
        const summary = await reports?.stop();
        reportsSent.sent += summary?.sent ?? 0;
        reportsSent.failed += summary?.failed ?? 0;
      }
    console.log(
      `reports sent ${reportsSent.sent}, refused or failed ${reportsSent.failed}; the reports alone took ` +
        `${reportCpu.map((us) => (us / 1000).toFixed(1)).join(' ')} ms of CPU per second (rounds)`,
    );
    // The list's own share under the report load: the round's CPU less what the reports alone took in
    // the window right after it (an estimate: both windows see the same report rate).
    results.set(
      reportedNet,
      (results.get(reported) as Figures[]).map((f, round) => ({
        ...f,
        cpuUs: f.cpuUs - (reportCpu[round] ?? 0) / f.rps,
      })),
    );
    const bestCpu = new Map<Load, number>();
    for (const l of [...loads, reportedNet]) {
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
    const cpuReported = bestCpu.get(reportedNet) ?? Infinity;
    const staticCpu = bestCpu.get(loads[0] as Load)?.toFixed(1);
    console.log(
      `\ntargets:\n  CPU per request ≤ 100 µs, nothing changing (best round): ${verdict(cpu <= 100)} ` +
        `(${cpu.toFixed(1)} µs; the static body's ${staticCpu} µs in the same run)` +
        `\n  CPU per request ≤ 150 µs, routers reporting every ${reportSeconds} s (best round): ` +
        `${verdict(cpuReported <= 150 && reportsSent.failed === 0 && reportsSent.sent > 0)} ` +
        `(${cpuReported.toFixed(1)} µs less the reports' own; ${bestCpu.get(reported)?.toFixed(1)} µs with them)`,
    );
  } finally {
    await stopServers([hello, controller]);
    await rm(fixture.data, { recursive: true, force: true });
  }
}
