/**
 * Controller metrics on prom-client's default registry: those docs/operator-guide.md (Monitoring) lists
 * (per-session RTT/routes/bytes, stuck sessions, offline agents, login outcomes, store latency).
 * Gauges about stored state are computed at scrape time from every open store, so they survive restarts.
 * The per-session gauges are written as text beside the registry's (metricsText), for their number.
 */
import {
  Counter,
  Gauge,
  Histogram,
  register,
  type CounterConfiguration,
  type GaugeConfiguration,
  type HistogramConfiguration,
} from 'prom-client';
import type { Store } from './store/store.ts';
import { ALL_STATUS_CODES, SessionStatus, statusName } from '../common/status.ts';

/** Stores whose state the scrape-time gauges report (normally one; tests may open several). */
const sources = new Set<{ store: Store; stuckAfterSeconds: number; offlineAfterSeconds: number }>();

export function addMetricsSource(
  store: Store,
  opts: { stuckAfterSeconds: number; offlineAfterSeconds: number },
): () => void {
  const entry = {
    store,
    stuckAfterSeconds: opts.stuckAfterSeconds,
    offlineAfterSeconds: opts.offlineAfterSeconds,
  };
  sources.add(entry);
  return () => sources.delete(entry);
}

// The registry is process-wide and this module may be loaded more than once (tests, several apps): a
// metric already registered under the name is the one to use.
/** A metric of the default registry, made once: modules that register at load may be loaded twice (tests). */
export function counter<T extends string>(config: CounterConfiguration<T>): Counter<T> {
  return (register.getSingleMetric(config.name) as Counter<T> | undefined) ?? new Counter(config);
}
export function gauge<T extends string>(config: GaugeConfiguration<T>): Gauge<T> {
  return (register.getSingleMetric(config.name) as Gauge<T> | undefined) ?? new Gauge(config);
}
function histogram<T extends string>(config: HistogramConfiguration<T>): Histogram<T> {
  return (register.getSingleMetric(config.name) as Histogram<T> | undefined) ?? new Histogram(config);
}

/** Latency buckets of http_request_duration_seconds, in seconds. */
const HTTP_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/**
 * The HTTP figures of one route and method: requests by status and the latency histogram, counted in
 * plain numbers on the request path and read by http_requests_total and http_request_duration_seconds at
 * scrape time. prom-client's labelled series validate and hash their labels on every observation, which
 * cost 1.5-2 µs of each agent request in `npm run bench:api`.
 */
export class RouteHttpMetrics {
  readonly statuses = new Map<number, number>();
  /** Requests per latency bucket, not cumulative; the last counts those above the largest bound. */
  readonly buckets: number[] = new Array<number>(HTTP_BUCKETS.length + 1).fill(0);
  sum = 0;
  count = 0;
  readonly route: string;
  readonly method: string;

  constructor(route: string, method: string) {
    this.route = route;
    this.method = method;
  }

  record(status: number, seconds: number): void {
    this.statuses.set(status, (this.statuses.get(status) ?? 0) + 1);
    let i = 0;
    while (i < HTTP_BUCKETS.length && seconds > (HTTP_BUCKETS[i] as number)) i++;
    this.buckets[i] = (this.buckets[i] as number) + 1;
    this.sum += seconds;
    this.count++;
  }
}

type LatencyLabel = 'route' | 'method' | 'le';

/**
 * http_request_duration_seconds: a prom-client histogram whose values are the routes' own counts
 * (RouteHttpMetrics) rather than its observations. It holds the routes itself, so that a second copy of
 * this module (tests) records into the registered one.
 */
class RouteLatencyHistogram extends Histogram<LatencyLabel> {
  // Set by prom-client's constructor from the configuration; its typings leave them out.
  declare readonly name: string;
  declare readonly help: string;
  declare readonly aggregator: string;
  readonly routes = new Map<string, RouteHttpMetrics>();

  /** The figures of a route and method, created on first use. */
  route(route: string, method: string): RouteHttpMetrics {
    const key = `${method} ${route}`;
    let metrics = this.routes.get(key);
    if (!metrics) this.routes.set(key, (metrics = new RouteHttpMetrics(route, method)));
    return metrics;
  }

  /** What both prom-client's get() and the registry's text exposition read, in their shape. */
  async getForPromString() {
    const bucket = `${this.name}_bucket`;
    const values: { metricName: string; labels: Record<string, string | number>; value: number }[] = [];
    for (const { route, method, buckets, sum, count } of this.routes.values()) {
      let cumulative = 0;
      HTTP_BUCKETS.forEach((le, i) => {
        cumulative += buckets[i] as number;
        values.push({ metricName: bucket, labels: { le, route, method }, value: cumulative });
      });
      values.push(
        { metricName: bucket, labels: { le: '+Inf', route, method }, value: count },
        { metricName: `${this.name}_sum`, labels: { route, method }, value: sum },
        { metricName: `${this.name}_count`, labels: { route, method }, value: count },
      );
    }
    return { name: this.name, help: this.help, type: 'histogram', aggregator: this.aggregator, values };
  }
}

const httpDuration =
  (register.getSingleMetric('http_request_duration_seconds') as RouteLatencyHistogram | undefined) ??
  new RouteLatencyHistogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request latency by route pattern and method',
    labelNames: ['route', 'method'],
    buckets: HTTP_BUCKETS,
  });

/** Where the request path records a route's requests (matched routes, and `unmatched` for 404s). */
export function routeHttpMetrics(route: string, method: string): RouteHttpMetrics {
  return httpDuration.route(route, method);
}

counter({
  name: 'http_requests_total',
  help: 'HTTP requests by route pattern, method and status',
  labelNames: ['route', 'method', 'status'] as const,
  collect() {
    this.reset();
    for (const { route, method, statuses } of httpDuration.routes.values())
      for (const [status, n] of statuses) this.inc({ route, method, status: String(status) }, n);
  },
});

/** Login outcomes; the login plugin increments it (`success`, `auth_failed`, `asn_blocked`, …: docs/login.md). */
export const loginTotal = counter({
  name: 'peerops_login_total',
  help: 'Login attempts by outcome',
  labelNames: ['outcome'] as const,
});

export const storeLatency = histogram({
  name: 'peerops_store_operation_duration_seconds',
  help: 'Latency of store writes by operation',
  labelNames: ['operation', 'outcome'] as const,
  buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
});

gauge({
  name: 'active_sessions_total',
  help: 'BGP sessions by status',
  labelNames: ['status'] as const,
  collect() {
    const counts = new Map<number, number>(ALL_STATUS_CODES.map((c) => [c, 0]));
    for (const { store } of sources)
      for (const s of store.listSessions()) counts.set(s.status.code, (counts.get(s.status.code) ?? 0) + 1);
    this.reset();
    for (const [code, n] of counts) this.set({ status: statusName(code as 0) }, n);
  },
});

gauge({
  name: 'agent_heartbeat_timestamp',
  help: 'Unix time (seconds) of the last heartbeat per router',
  labelNames: ['router'] as const,
  collect() {
    this.reset();
    for (const { store } of sources)
      for (const r of store.listRouters()) {
        const at = r.status.lastHeartbeat ? Date.parse(r.status.lastHeartbeat) / 1000 : 0;
        this.set({ router: r.name }, at);
      }
  },
});

gauge({
  name: 'peerops_agent_offline',
  help: '1 when the router has sent no heartbeat for more than the offline threshold (5 min)',
  labelNames: ['router'] as const,
  collect() {
    this.reset();
    const now = Date.now();
    for (const { store, offlineAfterSeconds } of sources)
      for (const r of store.listRouters()) {
        const at = r.status.lastHeartbeat ? Date.parse(r.status.lastHeartbeat) : 0;
        this.set({ router: r.name }, now - at > offlineAfterSeconds * 1000 ? 1 : 0);
      }
  },
});

gauge({
  name: 'peerops_router_ready',
  help: "1 while the router's Ready condition is True; reason: Ready's reason (BirdDown, AgentNotReporting, …)",
  labelNames: ['router', 'reason'] as const,
  collect() {
    this.reset();
    for (const { store } of sources)
      for (const r of store.listRouters()) {
        const ready = r.status.conditions?.find((c) => c.type === 'Ready');
        this.set(
          { router: r.name, reason: ready?.reason ?? 'NeverReported' },
          ready?.status === 'True' ? 1 : 0,
        );
      }
  },
});

gauge({
  name: 'peerops_sessions_stuck',
  help: 'Sessions in QUEUED_FOR_SETUP for longer than the stuck threshold (10 min), by router',
  labelNames: ['router'] as const,
  collect() {
    this.reset();
    const now = Date.now();
    for (const { store, stuckAfterSeconds } of sources) {
      for (const r of store.listRouters()) this.set({ router: r.name }, 0);
      for (const s of store.listSessions()) {
        if (!isStuck(s.status, now, stuckAfterSeconds)) continue;
        this.inc({ router: s.spec.router });
      }
    }
  },
});

gauge({
  name: 'peerops_store_writable',
  help: '1 while the store takes writes, 0 while its disk refuses them or its data directory is read-only (why: /health)',
  collect() {
    this.reset();
    for (const { store } of sources) {
      const state = store.writeState?.();
      if (state) this.set(state.problem ? 0 : 1);
    }
  },
});

/** Is a session stuck in QUEUED_FOR_SETUP? */
export function isStuck(
  status: { code: number; lastTransitionTime?: string | undefined },
  now: number,
  stuckAfterSeconds: number,
): boolean {
  if (status.code !== SessionStatus.QUEUED_FOR_SETUP || !status.lastTransitionTime) return false;
  return now - Date.parse(status.lastTransitionTime) > stuckAfterSeconds * 1000;
}

type SessionMetrics = NonNullable<ReturnType<Store['listSessions']>[number]['status']['metrics']>;

/** The per-session gauges (the last agent report), labelled session (uuid), router and asn. */
const SESSION_GAUGES: { name: string; help: string; pick: (m: SessionMetrics) => number | null }[] = [
  {
    name: 'peerops_session_rtt_seconds',
    help: 'Round-trip time over the session tunnel (agents report milliseconds)',
    pick: (m) => (m.rtt === null ? null : m.rtt / 1000),
  },
  {
    name: 'peerops_session_routes_imported',
    help: 'Routes imported from the peer',
    pick: (m) => m.routesImported,
  },
  {
    name: 'peerops_session_routes_exported',
    help: 'Routes exported to the peer',
    pick: (m) => m.routesExported ?? null,
  },
  {
    name: 'peerops_session_rx_bytes',
    help: 'Bytes received over the session tunnel',
    pick: (m) => m.rxBytes,
  },
  { name: 'peerops_session_tx_bytes', help: 'Bytes sent over the session tunnel', pick: (m) => m.txBytes },
];

/** A label value as the text format wants it (backslash, quote and newline escaped). */
function labelValue(value: string): string {
  return /[\\"\n]/.test(value) ? value.replace(/[\\"\n]/g, (c) => (c === '\n' ? '\\n' : `\\${c}`)) : value;
}

/**
 * A report's lines, one per gauge (undefined where the value is null), kept while the report is the
 * session's current one: agents report every minute, Prometheus scrapes every 15-30 s.
 */
const reportLines = new WeakMap<SessionMetrics, (string | undefined)[]>();

/**
 * The per-session gauges in the text exposition format, written here rather than as prom-client gauges:
 * at 10,000 sessions they are 40,000 series, and prom-client's labelled set() and its formatting of each
 * series cost 140-340 ms of every scrape, all of it on the event loop that serves the agents.
 */
function sessionGaugesText(): string {
  const families = SESSION_GAUGES.map((g) => [`# HELP ${g.name} ${g.help}`, `# TYPE ${g.name} gauge`]);
  for (const { store } of sources)
    for (const s of store.listSessions()) {
      const m = s.status.metrics;
      if (!m) continue;
      let lines = reportLines.get(m);
      if (!lines) {
        const labels = `{session="${labelValue(s.spec.uuid)}",router="${labelValue(s.spec.router)}",asn="${s.spec.asn}"}`;
        lines = SESSION_GAUGES.map((g) => {
          const value = g.pick(m);
          return value === null ? undefined : `${g.name}${labels} ${value}`;
        });
        reportLines.set(m, lines);
      }
      lines.forEach((line, i) => {
        if (line !== undefined) families[i]?.push(line);
      });
    }
  return `${families.map((lines) => lines.join('\n')).join('\n\n')}\n`;
}

/** A session's state line by spec object, with the values it was made of (checked at each scrape). */
const stateLines = new WeakMap<
  object,
  { uuid: string; router: string; asn: number; code: number; line: string }
>();

/**
 * peerops_session_state: 1 for each session's current status name, one series per session (a session's
 * old state is no series, not a 0), so an alert can name the one peer in ERROR (docs/kubernetes.md,
 * "Monitoring"). Written as text like the per-session gauges above, for the same scrape cost; a line is
 * made again only when its session's status or labels change (a few ms of a scrape at 10,000 sessions).
 */
function sessionStateText(): string {
  const lines = [
    '# HELP peerops_session_state The current status of each session (value 1, status name in label state)',
    '# TYPE peerops_session_state gauge',
  ];
  for (const { store } of sources)
    for (const s of store.listSessions()) {
      const { uuid, router, asn } = s.spec;
      const code = s.status.code;
      let cached = stateLines.get(s.spec);
      if (cached?.code !== code || cached.uuid !== uuid || cached.router !== router || cached.asn !== asn) {
        const labels = `session="${labelValue(uuid)}",router="${labelValue(router)}",asn="${asn}"`;
        const line = `peerops_session_state{${labels},state="${statusName(code)}"} 1`;
        stateLines.set(s.spec, (cached = { uuid, router, asn, code, line }));
      }
      lines.push(cached.line);
    }
  return `${lines.join('\n')}\n`;
}

/** The whole exposition of GET /metrics: prom-client's registry, then the per-session series. */
export async function metricsText(): Promise<string> {
  return `${await register.metrics()}\n${sessionGaugesText()}\n${sessionStateText()}`;
}

export { register };
