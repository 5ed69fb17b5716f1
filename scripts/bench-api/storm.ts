/**
 * The storm scenario of bench:api (scripts/bench-api.ts; method and figures in docs/benchmarks.md). First
 * the fresh phase: 1,000 agents start at the same instant, each with a mesh key the controller has not
 * seen and no ETags. Then, unless --no-reconnect, the reconnect phase: the same fleet, running, while
 * its controller is restarted (an upgrade): stopped with SIGTERM and started again on the same store
 * and port. Its agents keep what a running agent keeps in memory (their mesh key, which the controller
 * stored, and the ETags of their last session list, BIRD config and mesh list) and do what the real one
 * does when its controller goes away and comes back (agents.ts: RunningAgent).
 * Over 600 lines: both phases, their targets and verdicts in one script that prints them.
 */
import { fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  HEARTBEAT_S,
  LONG_POLL_S,
  REPORT_S,
  RunningAgent,
  httpClient,
  repeat,
  type AgentState,
  type Exchange,
  type HttpClient,
  type PeerList,
} from './agents.ts';
import {
  AGENT_ACCEPT_ENCODING,
  BENCH_SCRIPT,
  buildFixture,
  cpuTicks,
  percentile,
  startOnFixture,
  startServer,
  stopServers,
  verdict,
  wgKey,
  type Fixture,
  type Server,
} from './harness.ts';

export interface StormOptions {
  routers: number;
  perRouter: number;
  /** Of the fresh phase. */
  seconds: number;
  /** Of the reconnect phase's window, from the SIGTERM; 0: no reconnect phase. */
  reconnectSeconds: number;
}

/** What the /health probe sends its parent: each probe's latency and when it was sent (Date.now()). */
interface HealthProbes {
  ms: number[];
  sentAt: number[];
  /** Through a restart: the probes without an answer (or not a 200). */
  errors: { sentAt: number; error: string }[];
}

/**
 * Forked: GET /health every 50 ms for `seconds`; sends its latencies (ms) to the parent. An error ends it,
 * unless `throughRestart`: then the controller may be away for a while, and an error is recorded instead.
 */
export async function probeHealth(url: string, seconds: number, throughRestart: boolean): Promise<void> {
  const client = httpClient(url);
  const probes: HealthProbes = { ms: [], sentAt: [], errors: [] };
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) {
    const sentAt = Date.now();
    const t = performance.now();
    let answered = false;
    try {
      const res = await client.call('GET', '/health', {});
      if (res.status !== 200) throw new Error(`/health answered ${res.status}`);
      answered = true;
    } catch (err) {
      if (!throughRestart) throw err;
      probes.errors.push({ sentAt, error: (err as NodeJS.ErrnoException).code ?? (err as Error).message });
    }
    const took = performance.now() - t;
    if (answered) {
      probes.ms.push(took);
      probes.sentAt.push(sentAt);
    }
    await sleep(Math.max(0, 50 - took));
  }
  client.close();
  process.send?.(probes);
}

/** What the heartbeat sender gets: the agents' states (their ETag maps as entries, for IPC). */
type SenderStates = (Omit<AgentState, 'listEtags'> & { listEtags: [PeerList, string][] })[];
/** What it sends back: its heartbeats' exchanges and its own event loop's longest delay. */
interface SenderReport {
  exchanges: Exchange[];
  loopMaxMs: number;
}

/**
 * The reconnect phase's heartbeats, sent from a process of their own (bench-api.ts --heartbeats): a
 * thousand agents' reconnect in one process stalls its event loop for hundreds of ms, and a heartbeat
 * timed there would carry the other agents' work, which on real routers runs elsewhere. Runs each agent's
 * heartbeat loop (RunningAgent) until told 'stop', records the exchanges after 'record', and sends them.
 */
export function sendHeartbeats(url: string): void {
  const http = httpClient(url);
  const stop = new AbortController();
  const exchanges: Exchange[] = [];
  let recording = false;
  const record = (exchange: Exchange) => {
    if (recording) exchanges.push(exchange);
  };
  let running: Promise<void>[] = [];
  const loop = monitorEventLoopDelay({ resolution: 10 });
  process.on('message', (message: { states: SenderStates } | 'record' | 'stop') => {
    if (message === 'record') {
      recording = true;
      loop.enable();
    } else if (message === 'stop') {
      recording = false;
      loop.disable();
      stop.abort();
      void Promise.all(running).then(() => {
        http.close();
        const sent: SenderReport = { exchanges, loopMaxMs: loop.max / 1e6 };
        process.send?.(sent, () => process.exit(0));
      });
    } else {
      running = message.states.map((state) =>
        new RunningAgent(
          { ...state, listEtags: new Map(state.listEtags) },
          http,
          record,
          stop.signal,
          'heartbeat',
        ).run(),
      );
    }
  });
}

function forkHeartbeats(url: string, states: AgentState[]) {
  const sender = fork(BENCH_SCRIPT, ['--heartbeats', url], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const report = new Promise<SenderReport>((resolve, reject) => {
    sender.once('message', (m) => resolve(m as SenderReport));
    sender.once(
      'exit',
      (code) => code !== 0 && reject(new Error(`the heartbeat sender exited with ${code}`)),
    );
  });
  report.catch(() => undefined); // awaited after the window
  const sent: SenderStates = states.map((s) => ({ ...s, listEtags: [...s.listEtags] }));
  sender.send({ states: sent });
  return {
    record: () => sender.send('record'),
    stop: () => {
      sender.send('stop');
      return report;
    },
  };
}

function forkProbe(url: string, seconds: number, throughRestart: boolean): Promise<HealthProbes> {
  const probe = fork(
    BENCH_SCRIPT,
    ['--probe', url, '--duration', String(seconds), ...(throughRestart ? ['--through-restart'] : [])],
    { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] },
  );
  return new Promise<HealthProbes>((resolve, reject) => {
    probe.once('message', resolve);
    probe.once('exit', (code) => code !== 0 && reject(new Error(`the /health probe exited with ${code}`)));
  });
}

interface LoopDelay {
  loopMaxMs: number;
  loopP99Ms: number;
}

/** The server's event-loop delays since it was last asked, or since it listens (serve in bench-api.ts). */
function eventLoop(server: Server): Promise<LoopDelay> {
  return new Promise((resolve) => {
    server.child.once('message', resolve);
    server.child.send('event-loop');
  });
}

/** Peak RSS of a process, MiB. */
function peakRssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmHWM:\s+(\d+)/.exec(status)?.[1]) / 1024;
}

/**
 * The kernel's count of connections dropped because a listen socket's accept queue was full
 * (TcpExt ListenOverflows, for the whole network namespace): a dropped handshake waits out a SYN
 * retransmission (1 s, then 3 s), which shows as an outlier in the heartbeats' times.
 */
function listenOverflows(): number {
  const [names, values] = readFileSync('/proc/net/netstat', 'utf8')
    .split('\n')
    .filter((line) => line.startsWith('TcpExt:'))
    .map((line) => line.split(/\s+/));
  return Number(values?.[names?.indexOf('ListenOverflows') ?? -1] ?? 0);
}

const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
const figures = (xs: number[]) =>
  `p50 ${percentile(xs, 50).toFixed(1)} ms, p99 ${percentile(xs, 99).toFixed(1)} ms, max ${percentile(xs, 100).toFixed(1)} ms`;

// ---------------------------------------------------------------- the machine's ceiling

/** What the machine allows any server in the fresh phase's burst: the first POSTs, /health meanwhile. */
interface BurstCeiling {
  firstMs: number[];
  healthMs: number[];
  /** Handshakes the kernel dropped meanwhile (listenOverflows). */
  overflows: number;
}

/** How long the ceiling's /health probe runs: the burst is over well within it. */
const CEILING_PROBE_S = 4;

/**
 * The fresh phase's burst against a bare fastify hello-world, pinned as the controller is: `routers`
 * clients each open a connection and POST a heartbeat's body, all in the same instant, from this
 * process as the agents do, while /health is probed every 50 ms. What the hello-world cannot do with
 * the same burst on the same machine (its answers do nothing), no controller can: the fresh phase's
 * targets are printed beside it.
 */
async function burstCeiling(routers: number): Promise<BurstCeiling> {
  const hello = await startServer('hello');
  const http = httpClient(hello.url);
  try {
    const health = forkProbe(hello.url, CEILING_PROBE_S, false);
    await sleep(500); // the probe's connection made before the burst, as in the fresh phase
    const post = { 'content-type': 'application/json', 'accept-encoding': AGENT_ACCEPT_ENCODING };
    const overflowsBefore = listenOverflows();
    const firstMs = await Promise.all(
      Array.from({ length: routers }, async () => {
        const beat = JSON.stringify({ version: '1.0.0', uptime: 1, meshPublicKey: wgKey() });
        const t = performance.now();
        const res = await http.call('POST', '/', post, beat);
        if (res.status !== 200) throw new Error(`the hello-world answered ${res.status}`);
        return performance.now() - t;
      }),
    );
    const overflows = listenOverflows() - overflowsBefore;
    return { firstMs: sorted(firstMs), healthMs: sorted((await health).ms), overflows };
  } finally {
    http.close();
    await stopServers([hello]);
  }
}

// ---------------------------------------------------------------- the fresh phase

/**
 * 1,000 routers' agents connecting at once (1,000 × 10 sessions at the default size), at the agents'
 * documented rates: each sends its first heartbeat with a mesh key the controller has not seen, fetches
 * its sessions, BIRD config and mesh list, holds a session long poll (wait=55, renewed when answered),
 * sends a heartbeat every 30 s and a metrics report every 60 s, each ± 10 % as the agent waits. A
 * forked probe polls /health every 50 ms. Printed: heartbeat p50/p99/max, /health max, the long-poll wake-ups the controller counted
 * (peerops_long_poll_wakeups_total), the controller's CPU and peak RSS. Then the reconnect phase.
 */
export async function storm({ routers, perRouter, seconds, reconnectSeconds }: StormOptions): Promise<void> {
  console.log(`building fixture: ${routers} routers × ${perRouter} sessions …`);
  const fixture = await buildFixture(routers, perRouter);
  console.log(`the machine's ceiling: ${routers} first POSTs to a bare fastify hello-world at once …`);
  const ceiling = await burstCeiling(routers);
  console.log(
    `  ${figures(ceiling.firstMs)}; /health meanwhile max ${percentile(ceiling.healthMs, 100).toFixed(1)} ms; ` +
      `accept queue overflows ${ceiling.overflows}`,
  );
  let controller: Server | undefined;
  let client: HttpClient | undefined;
  try {
    controller = await startOnFixture(fixture);
    const pid = controller.child.pid as number;
    const http = httpClient(controller.url);
    client = http;
    /** Each agent's first heartbeat (its new mesh key), and the later ones. */
    const heartbeatMs: number[] = [];
    const laterHeartbeatMs: number[] = [];
    const failures: string[] = [];
    /** What each agent keeps, for the reconnect phase. */
    const states: AgentState[] = [];
    let longPollAnswers = 0;
    let stopping = false;
    const health = forkProbe(controller.url, seconds, false);
    await eventLoop(controller); // from here on
    // every agent runs in this process: a heartbeat's time includes this loop's own delays
    const ownLoop = monitorEventLoopDelay({ resolution: 10 });
    ownLoop.enable();
    const cpuBefore = cpuTicks(pid);
    const overflowsBefore = listenOverflows();
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
      const state: AgentState = {
        router,
        headers,
        heartbeat: beat,
        report: undefined,
        sessionsEtag: undefined,
        listEtags: new Map(),
        passes: 0,
        heartbeatInMs: 0,
        reportInMs: 0,
      };
      states.push(state);
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
      // only their ETags kept: a thousand agents' lists would hold hundreds of MB here
      const listEtags: [PeerList, string | undefined][] = [
        ['bird-config', (await http.call('GET', `/agent/${router}/bird-config`, headers)).headers.etag],
        ['mesh', (await http.call('GET', `/agent/${router}/mesh`, headers)).headers.etag],
      ];
      const report = JSON.stringify({
        sessions: uuids.map((uuid) => ({ uuid, rtt: 12, rxBytes: 1e6, txBytes: 2e6, routesImported: 10 })),
      });
      const heartbeats = repeat(
        HEARTBEAT_S,
        () => void heartbeat().catch((e: Error) => failure('heartbeat', e)),
      );
      const reports = repeat(
        REPORT_S,
        () =>
          void http
            .call('POST', `/agent/${router}/report`, post, report)
            .catch((e: Error) => failure('report', e)),
      );
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
        // What the agent has after its first pass, and where its heartbeats and reports stand.
        const now = Date.now();
        state.report = report;
        state.sessionsEtag = etag;
        state.passes = 1;
        for (const [list, listEtag] of listEtags) if (listEtag) state.listEtags.set(list, listEtag);
        state.heartbeatInMs = Math.max(0, heartbeats.due - now);
        state.reportInMs = Math.max(0, reports.due - now);
        heartbeats.stop();
        reports.stop();
      }
    };
    const agents = [...fixture.tokens].map(([router, token]) =>
      runAgent(router, token).catch((e: Error) => {
        failure(router, e);
      }),
    );
    const healthMs = (await health).ms;
    const elapsed = (Date.now() - started) / 1000;
    const cpuSeconds = (cpuTicks(pid) - cpuBefore) / 100;
    const overflows = listenOverflows() - overflowsBefore;
    const peakRss = peakRssMiB(pid);
    const metrics = await (await fetch(`${controller.url}/metrics`)).text();
    const wakeups = (answer: string) =>
      Number(
        new RegExp(`peerops_long_poll_wakeups_total\\{answer="${answer}"\\} (\\d+)`).exec(metrics)?.[1] ?? 0,
      );
    const loop = await eventLoop(controller);
    stopping = true;
    http.close();
    await Promise.all(agents);
    const hb = sorted([...heartbeatMs, ...laterHeartbeatMs]);
    const h = sorted(healthMs);
    console.log(`\nover ${elapsed.toFixed(0)} s: ${hb.length} heartbeats, ${figures(hb)}`);
    console.log(`  the first of each agent (a new mesh key): ${figures(sorted(heartbeatMs))}`);
    console.log(
      `  the later ones: ${laterHeartbeatMs.length ? figures(sorted(laterHeartbeatMs)) : 'none (a run under 30 s)'}`,
    );
    console.log(
      `accept queue overflows (handshakes the kernel dropped, each retried after 1 s): ${overflows}`,
    );
    console.log(
      `controller event loop delay: p99 ${loop.loopP99Ms.toFixed(1)} ms, max ${loop.loopMaxMs.toFixed(1)} ms ` +
        '(beside the latencies: what the controller itself stalled, not the load generator)',
    );
    ownLoop.disable();
    console.log(
      `the load generator's own event loop (every agent, part of the heartbeats' times): p99 ` +
        `${(ownLoop.percentile(99) / 1e6).toFixed(1)} ms, max ${(ownLoop.max / 1e6).toFixed(1)} ms`,
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
    console.log(
      `  heartbeat p99 < 50 ms: ${verdict(percentile(hb, 99) < 50)} ` +
        `(the hello-world's first POSTs p99 ${percentile(ceiling.firstMs, 99).toFixed(1)} ms)`,
    );
    console.log(
      `  /health never over 100 ms: ${verdict(percentile(h, 100) <= 100)} ` +
        `(beside the hello-world's burst: max ${percentile(ceiling.healthMs, 100).toFixed(1)} ms)`,
    );
    console.log(
      `  no wake-up without a change to the answer (nothing changes sessions here): ${verdict(wakeups('unchanged') === 0)}`,
    );
    console.log(`  no failed request: ${verdict(failures.length === 0)}`);
    if (reconnectSeconds > 0) await reconnect(controller, fixture, states, reconnectSeconds);
  } finally {
    client?.close();
    await stopServers([controller]);
    await rm(fixture.data, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------- the reconnect phase

/**
 * How long the running agents go on before the controller is stopped: their first pass (agents.ts: a
 * running agent's lists are current) settles and their long polls are held, as a running fleet's are.
 */
const HOLD_BEFORE_RESTART_S = 10;

/** How many of each. */
function tally(xs: string[]): string {
  const counts = new Map<string, number>();
  for (const x of xs) counts.set(x, (counts.get(x) ?? 0) + 1);
  return [...counts].map(([x, n]) => `${x} ${n}`).join(', ');
}

/**
 * The fresh phase's agents go on as running agents (agents.ts), from the state each kept, while the
 * controller is stopped (SIGTERM, as at the end of the run) and started again on the same store and
 * port. Measured over `seconds` from the SIGTERM: heartbeats and /health answered by the new controller
 * (a probe sent before it listens meets a closed port, not a stall), its event-loop delay, the lists'
 * 200 and 304 answers, failed requests, its CPU and peak RSS. A request refused or cut while the
 * controller is away and then retried is not a failure; one that fails once it listens, or whose retries
 * all fell while it was away, is.
 */
async function reconnect(
  controller: Server,
  fixture: Fixture,
  states: AgentState[],
  seconds: number,
): Promise<void> {
  const http = httpClient(controller.url);
  const stop = new AbortController();
  const exchanges: Exchange[] = [];
  let recording = false;
  const record = (exchange: Exchange) => {
    if (recording) exchanges.push(exchange);
  };
  let restarted: Server | undefined;
  try {
    const agents = states.map(
      (state) => new RunningAgent(state, http, record, stop.signal, 'all but heartbeat'),
    );
    const heartbeats = forkHeartbeats(controller.url, states);
    const running = agents.map((agent) => agent.run());
    console.log(
      `\nreconnect after a controller restart: the ${agents.length} agents go on, with their mesh key and ETags; ` +
        `in ${HOLD_BEFORE_RESTART_S} s the controller is stopped and started again on the same store and port, ` +
        `measured for ${seconds} s from the SIGTERM …`,
    );
    await sleep(HOLD_BEFORE_RESTART_S * 1000);
    const health = forkProbe(controller.url, seconds, true);
    health.catch(() => undefined); // awaited below, after the window
    recording = true;
    heartbeats.record();
    // The agents run in this process: a heartbeat's time here includes this loop's own delays.
    const ownLoop = monitorEventLoopDelay({ resolution: 10 });
    ownLoop.enable();
    const stoppedAt = Date.now();
    await stopServers([controller]);
    const spawnedAt = Date.now();
    restarted = await startServer('controller', fixture.data, {}, Number(new URL(controller.url).port));
    const { listeningAt } = restarted;
    const pid = restarted.child.pid as number;
    const startCpuTicks = cpuTicks(pid);
    const s = (ms: number) => (ms / 1000).toFixed(1);
    console.log(
      `controller stopped in ${s(spawnedAt - stoppedAt)} s (SIGTERM to exit), started again in ` +
        `${s(listeningAt - spawnedAt)} s (spawn to listening): ${s(listeningAt - stoppedAt)} s from SIGTERM to listening`,
    );
    await sleep(Math.max(0, stoppedAt + seconds * 1000 - Date.now()));
    recording = false;
    ownLoop.disable();
    const sender = await heartbeats.stop();
    exchanges.push(...sender.exchanges);
    const listenedS = (Date.now() - listeningAt) / 1000;
    const cpuSeconds = (cpuTicks(pid) - startCpuTicks) / 100;
    const peakRss = peakRssMiB(pid);
    const loop = await eventLoop(restarted);
    const probes = await health;
    stop.abort();
    http.close();
    await Promise.all(running);

    const answeredByNew = exchanges.filter((e) => e.status !== undefined && e.sentAt >= listeningAt);
    const answeredByOld = exchanges.filter((e) => e.status !== undefined && e.sentAt < listeningAt);
    const whileAway = exchanges.filter((e) => e.status === undefined && e.sentAt < listeningAt);
    const count = (xs: Exchange[], what: Exchange['what'], status: number) =>
      xs.filter((e) => e.what === what && e.status === status).length;
    const hb = sorted(answeredByNew.filter((e) => e.what === 'heartbeat').map((e) => e.ms));
    const h = sorted(probes.ms.filter((_, i) => (probes.sentAt[i] ?? 0) >= listeningAt));
    const retries = answeredByNew.filter((e) => e.attempt > 0);
    const lastRetry = Math.max(...retries.map((e) => e.sentAt - listeningAt));
    const at = (sentAt: number) => `${s(sentAt - stoppedAt)} s after the SIGTERM`;
    const failures = [
      ...exchanges
        .filter(
          (e) =>
            (e.status !== undefined && e.status !== 200 && e.status !== 304) ||
            (e.status === undefined && e.sentAt >= listeningAt) ||
            e.gaveUp,
        )
        .map(
          (e) =>
            `${e.what} ${e.router}: ${e.error ?? `HTTP ${e.status}`}${e.gaveUp ? ', its retries spent' : ''} at ${at(e.sentAt)}`,
        ),
      ...probes.errors
        .filter((p) => p.sentAt >= listeningAt)
        .map((p) => `/health: ${p.error} at ${at(p.sentAt)}`),
    ];

    console.log(
      `\nover ${seconds} s from the SIGTERM (${listenedS.toFixed(0)} s of them with the new controller):`,
    );
    console.log(`  heartbeats answered by the new controller: ${hb.length}, ${figures(hb)}`);
    console.log(
      `  new controller event loop delay: p99 ${loop.loopP99Ms.toFixed(1)} ms, max ${loop.loopMaxMs.toFixed(1)} ms`,
    );
    console.log(
      `  the load generator's event loops, max delay: the heartbeat sender's ${sender.loopMaxMs.toFixed(1)} ms ` +
        `(part of the heartbeats' times above), the other loops' ${(ownLoop.max / 1e6).toFixed(1)} ms`,
    );
    console.log(
      `  /health since it listens (${h.length} probes, every 50 ms): p50 ${percentile(h, 50).toFixed(1)} ms, max ${percentile(h, 100).toFixed(1)} ms`,
    );
    const lists = (['long poll', 'sessions', 'bird-config', 'mesh'] as const)
      .map((what) => `${what} ${count(answeredByNew, what, 200)} / ${count(answeredByNew, what, 304)}`)
      .join(', ');
    console.log(`  lists answered by the new controller, 200 / 304: ${lists}`);
    console.log(
      `  the stopping controller released ${count(answeredByOld, 'long poll', 304)} held long polls (304) ` +
        `and answered ${answeredByOld.length - count(answeredByOld, 'long poll', 304)} other requests`,
    );
    console.log(
      `  refused or cut while it was away: ${whileAway.length} tries (${tally(whileAway.map((e) => e.error ?? '')) || 'none'}); ` +
        `${retries.length} retries answered by the new controller` +
        (retries.length ? `, the last sent ${(lastRetry / 1000).toFixed(1)} s after it listened` : ''),
    );
    console.log(
      `  agents that turned long polling off (agent/sync/long-poll.ts): ${agents.filter((a) => !a.longPoll.held).length}`,
    );
    console.log(
      `  new controller: ${(startCpuTicks / 100).toFixed(1)} s of CPU to start, ${cpuSeconds.toFixed(1)} s since it listens ` +
        `(${((100 * cpuSeconds) / listenedS).toFixed(0)} % of a core), peak RSS ${peakRss.toFixed(0)} MiB`,
    );
    if (failures.length)
      console.log(`  failures: ${failures.length}, first: ${failures.slice(0, 3).join('; ')}`);
    console.log('\ntargets, reconnect after a controller restart:');
    console.log(`  heartbeat p99 < 50 ms: ${verdict(percentile(hb, 99) < 50)}`);
    console.log(`  /health never over 100 ms: ${verdict(percentile(h, 100) <= 100)}`);
    console.log(`  no failed request: ${verdict(failures.length === 0)}`);
  } finally {
    stop.abort();
    http.close();
    await stopServers([restarted]);
  }
}
