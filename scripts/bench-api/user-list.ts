/**
 * The user-list scenario of bench:api (scripts/bench-api.ts; method and figures in docs/benchmarks.md): a
 * user's session list at 10,000 sessions against a bare fastify route serving the same bytes.
 */
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import {
  FIXTURE_ASN,
  buildFixture,
  percentile,
  startOnFixture,
  startServer,
  stopServers,
  verdict,
  type Server,
} from './harness.ts';
import { measure, type Figures, type Load, type LoadRequest, type WrkOptions } from './wrk.ts';

/**
 * `POST /session` action list as users send it, one ASN after the other: in the fixture each ASN has one
 * session on every router (100 at the default size, a 65 KiB answer). Target: ≤ 100 µs of the
 * controller's CPU per request, best round.
 */
export async function userList({
  routers,
  perRouter,
  rounds,
  wrkOptions,
}: {
  routers: number;
  perRouter: number;
  rounds: number;
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
    const loads: Load[] = [
      {
        name: 'hello-world POST, the list static',
        server: hello,
        requests: [{ ...(requests[0] as LoadRequest), path: '/user-list' }],
      },
      { name: 'POST /session list', server: controller, requests },
    ];
    console.log(`${rounds} rounds of ${loads.length} measurements, ${wrkOptions(false).seconds} s each …`);
    const results = new Map<Load, Figures[]>(loads.map((l) => [l, []]));
    for (let round = 0; round < rounds; round++)
      for (const l of loads) results.get(l)?.push(await measure(l, wrkOptions(round === 0)));
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
