/**
 * A session's history read from Prometheus (docs/kubernetes.md, Session history): the per-session gauges
 * every replica exports (controller/metrics.ts) scraped by the operator's Prometheus, merged over the
 * replicas with `max by (__name__)`, so that either replica answers with every report any of them got
 * and a new pod starts with the whole history. Points come in the embedded history's shape
 * (controller/history/samples.ts): RTT in ms, bytes moved within the point's span, route counts.
 */
import { problem } from '../../common/messages.ts';
import { emptySample, type Sample } from './samples.ts';

/** How long a graph waits for Prometheus before the API answers 503 HISTORY_UNAVAILABLE. */
export const PROMETHEUS_TIMEOUT_MS = 5_000;
/** An answer larger than this is refused unread: 5 series of at most 11,000 points are far below. */
const MAX_ANSWER_BYTES = 8 * 1024 * 1024;

const FIGURES = {
  peerops_session_rtt_seconds: 'rtt',
  peerops_session_rx_bytes: 'rxBytes',
  peerops_session_tx_bytes: 'txBytes',
  peerops_session_routes_imported: 'routesImported',
  peerops_session_routes_exported: 'routesExported',
} as const;
type MetricName = keyof typeof FIGURES;

interface QueryRangeAnswer {
  status: string;
  error?: string;
  data?: { resultType: string; result: { metric: { __name__?: string }; values: [number, string][] }[] };
}

export class PrometheusHistory {
  private readonly base: string;
  private readonly timeoutMs: number;
  private readonly now: () => number;

  constructor(opts: { url: string; timeoutMs?: number; now?: () => number }) {
    this.base = opts.url.replace(/\/+$/, '');
    this.timeoutMs = opts.timeoutMs ?? PROMETHEUS_TIMEOUT_MS;
    this.now = opts.now ?? Date.now;
  }

  /** The session's points from `fromMinute` on at `stepMinutes`, as SessionHistory.series answers them. */
  async series(uuid: string, fromMinute: number, stepMinutes: number): Promise<Sample[]> {
    const step = stepMinutes * 60;
    const start = (fromMinute - (fromMinute % stepMinutes)) * 60;
    // up to the end of the current span: its point has the reports so far, as in the embedded history
    const end = Math.ceil(this.now() / 1000 / step) * step;
    // the uuid matched the route's pattern: nothing in it needs escaping
    const names = Object.keys(FIGURES).join('|');
    const query = `max by (__name__) ({__name__=~"${names}",session="${uuid}"})`;
    // the value at the end of each span is the span's last report: the point is named by its start, as in
    // the embedded history
    const params = new URLSearchParams({
      query,
      start: String(start + step),
      end: String(end),
      step: String(step),
    });
    const answer = await this.fetchAnswer(`${this.base}/api/v1/query_range?${params.toString()}`);
    const points = new Map<number, Sample>();
    const at = (t: number): Sample => {
      const minute = Math.floor(t / 60) - stepMinutes;
      let point = points.get(minute);
      if (!point) {
        point = emptySample(minute);
        points.set(minute, point);
      }
      return point;
    };
    for (const series of answer) {
      const figure = FIGURES[series.metric.__name__ as MetricName] as
        (typeof FIGURES)[MetricName] | undefined;
      if (!figure) continue;
      let previous: { t: number; value: number } | undefined;
      for (const [t, text] of series.values) {
        const value = Number(text);
        if (!Number.isFinite(value)) continue;
        const point = at(t);
        if (figure === 'rtt') point.rtt = value * 1000;
        else if (figure === 'rxBytes' || figure === 'txBytes')
          // the agents report counters: a span's bytes are the rise since the step before (a counter that
          // went back started again: a new interface), none after a gap (docs/store.md, Session history)
          point[figure] =
            previous?.t === t - step ? (value >= previous.value ? value - previous.value : value) : null;
        else point[figure] = value;
        previous = { t, value };
      }
    }
    return [...points.values()].sort((a, b) => a.minute - b.minute);
  }

  private async fetchAnswer(url: string): Promise<NonNullable<QueryRangeAnswer['data']>['result']> {
    let answer: QueryRangeAnswer;
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(this.timeoutMs) });
      const length = Number(res.headers.get('content-length') ?? 0);
      if (length > MAX_ANSWER_BYTES) {
        await res.body?.cancel();
        throw new Error(`answer of ${length} bytes`);
      }
      const text = await res.text();
      if (text.length > MAX_ANSWER_BYTES) throw new Error(`answer of ${text.length} bytes`);
      answer = JSON.parse(text) as QueryRangeAnswer;
      if (!res.ok || answer.status !== 'success') throw new Error(answer.error ?? `HTTP ${res.status}`);
    } catch (err) {
      const reason =
        (err as Error).name === 'TimeoutError'
          ? `no answer within ${this.timeoutMs / 1000} s`
          : (err as Error).message;
      throw problem('history.prometheusUnavailable', { reason });
    }
    if (answer.data?.resultType !== 'matrix')
      throw problem('history.prometheusUnavailable', { reason: 'not a matrix' });
    return answer.data.result;
  }
}
