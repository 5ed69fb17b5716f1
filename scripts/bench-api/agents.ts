/**
 * The storm's simulated agents (storm.ts), a thousand in one process: the HTTP client they share, the
 * timer of the fresh agents' periodic requests, and the running agent of the reconnect phase, which does
 * what agent/agent.ts and agent/sync/client.ts do when their controller goes away and comes back.
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { gunzipSync } from 'node:zlib';
import { LONG_POLL_MAX_S, jittered } from '../../agent/agent.ts';
import { AgentConfigFile } from '../../agent/config.ts';
import { ControlPlaneClient, rateLimitWait } from '../../agent/sync/client.ts';
import { LongPollSupport } from '../../agent/sync/long-poll.ts';

/** The agent's defaults of controlPlane, from its config schema (agent/config.ts, docs/agent.md). */
const defaults = AgentConfigFile.properties.controlPlane.properties;
const defaultOf = (field: keyof typeof defaults): number => {
  const value = (defaults[field] as { default?: unknown }).default;
  if (typeof value !== 'number') throw new Error(`agent config: controlPlane.${field} has no default`);
  return value;
};
export const HEARTBEAT_S = defaultOf('heartbeatInterval');
export const REPORT_S = defaultOf('metricInterval');
/** The sync loop's long poll wait, as agent/agent.ts computes it. */
export const LONG_POLL_S = Math.min(defaultOf('syncInterval'), LONG_POLL_MAX_S);

export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export interface Repeating {
  stop(): void;
  /** When `fn` runs next (Date.now() time). */
  readonly due: number;
}

/** `fn` every `seconds` ± 10 %, as the agent's heartbeat and report loops (agent/agent.ts). */
export function repeat(seconds: number, fn: () => void): Repeating {
  let timer: NodeJS.Timeout;
  let due = 0;
  const next = () => {
    const wait = jittered(seconds * 1000);
    due = Date.now() + wait;
    timer = setTimeout(() => {
      fn();
      next();
    }, wait);
  };
  next();
  return {
    stop: () => clearTimeout(timer),
    get due() {
      return due;
    },
  };
}

/**
 * HTTP/1.1 keep-alive over node:http: lighter than fetch for thousands of open requests. `signal` aborts
 * the exchange (the request is destroyed), as the agent's per-request timeout does.
 */
export function httpClient(base: string) {
  const agent = new HttpAgent({ keepAlive: true, maxSockets: Infinity });
  const url = new URL(base);
  const call = (
    method: string,
    path: string,
    headers: Record<string, string>,
    body?: string,
    signal?: AbortSignal,
  ) =>
    new Promise<Answer>((resolve, reject) => {
      const options = { host: url.hostname, port: url.port, method, path, headers, agent };
      const req = httpRequest(signal ? { ...options, signal } : options, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const raw = Buffer.concat(chunks);
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: res.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw,
          });
        });
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(body);
    });
  return { call, close: () => agent.destroy() };
}

export type HttpClient = ReturnType<typeof httpClient>;

// ---------------------------------------------------------------- the running agent

const REQUEST_TIMEOUT_S = defaultOf('requestTimeout');
const SYNC_INTERVAL_S = defaultOf('syncInterval');
const MAX_RETRIES = defaultOf('maxRetries');
const RETRY_INITIAL_DELAY_MS = defaultOf('retryInitialDelay');
const RETRY_MAX_DELAY_MS = defaultOf('retryMaxDelay');

/** The agent's own retry delays, initial · 2^attempt up to the max, ± 25 % (agent/sync/client.ts): its backoff alone. */
const retryDelays = new ControlPlaneClient({
  url: 'http://unused.invalid',
  token: 'unused',
  router: 'unused',
  requestTimeout: REQUEST_TIMEOUT_S,
  maxRetries: MAX_RETRIES,
  retryInitialDelay: RETRY_INITIAL_DELAY_MS,
  retryMaxDelay: RETRY_MAX_DELAY_MS,
});

export type PeerList = 'bird-config' | 'mesh';

/** What an agent keeps in memory across a controller restart, from the fresh phase to the running agent. */
export interface AgentState {
  router: string;
  /** Authorization and Accept-Encoding, on every request. */
  headers: Record<string, string>;
  /** The heartbeat body; its mesh key is the one the controller stored from the first heartbeat. */
  heartbeat: string;
  /** The metrics report body; undefined until the agent has its sessions (agent/agent.ts:326). */
  report: string | undefined;
  /** The session list's ETag, sent with each long poll (agent/agent.ts:204). */
  sessionsEtag: string | undefined;
  /** The ETags of the last BIRD config and mesh list answers (agent/sync/client.ts:123, lastAnswers). */
  listEtags: Map<PeerList, string>;
  /** Passes done (agent/agent.ts:62): after the first, each sync round starts with a long poll. */
  passes: number;
  /** What was left of the waits for the next heartbeat and report when the fresh phase ended, ms. */
  heartbeatInMs: number;
  reportInMs: number;
}

/** One HTTP exchange of a running agent: one try of a request. */
export interface Exchange {
  router: string;
  what: 'heartbeat' | 'report' | 'long poll' | 'sessions' | PeerList;
  /** 0 for a request's first try, then 1, 2, … for its retries. */
  attempt: number;
  /** Date.now() when sent. */
  sentAt: number;
  ms: number;
  /** undefined: no answer (refused, cut, timed out; `error` says which). */
  status: number | undefined;
  error: string | undefined;
  /** The last try of a request whose retries are spent: the request failed (agent/sync/client.ts:175). */
  gaveUp: boolean;
}

const headerValue = (headers: IncomingHttpHeaders, name: string): string | undefined => {
  const value = headers[name.toLowerCase()];
  return Array.isArray(value) ? value.join(', ') : value;
};

/**
 * A running agent's requests, as agent/agent.ts and its client (agent/sync/client.ts) make them: the sync
 * loop (long poll with If-None-Match, then the BIRD config, then the pass's mesh list and BIRD config
 * together, both with If-None-Match; a failed round backs off), the heartbeat and metrics report loops
 * (each waits its interval ± 10 % after the last one, failed or not), every request retried on a network
 * error, 429 or 5xx. What the agent does on the router (BIRD, WireGuard) takes no time here; its status
 * reports (POST /modify, only when a session's state changes) and the mesh status report are not sent,
 * as in the fresh phase.
 */
export class RunningAgent {
  /** The agent's own judge of whether the controller holds long polls (agent/sync/long-poll.ts). */
  readonly longPoll = new LongPollSupport();
  private readonly state: AgentState;
  private readonly http: HttpClient;
  private readonly record: (exchange: Exchange) => void;
  private readonly stopped: AbortSignal;
  private failures = 0;
  /** Which of the agent's loops this one runs: all of them, or the heartbeat loop apart from the others. */
  private readonly loops: 'all' | 'heartbeat' | 'all but heartbeat';

  constructor(
    state: AgentState,
    http: HttpClient,
    record: (exchange: Exchange) => void,
    stopped: AbortSignal,
    loops: 'all' | 'heartbeat' | 'all but heartbeat' = 'all',
  ) {
    this.state = state;
    this.http = http;
    this.record = record;
    this.stopped = stopped;
    this.loops = loops;
  }

  /** The agent's loops (agent/agent.ts:120-127), until `stopped`. */
  async run(): Promise<void> {
    const { heartbeat, report, heartbeatInMs, reportInMs } = this.state;
    const heartbeats = () => this.every(heartbeatInMs, HEARTBEAT_S, () => this.post('heartbeat', heartbeat));
    if (this.loops === 'heartbeat') return heartbeats();
    await Promise.all([
      this.syncLoop(),
      this.loops === 'all' ? heartbeats() : undefined,
      this.every(reportInMs, REPORT_S, async () => {
        if (report !== undefined) await this.post('report', report);
      }),
    ]);
  }

  /** Waits `ms`, less when the agent stops (agent/agent.ts:149). */
  private sleep(ms: number): Promise<void> {
    return sleep(ms, undefined, { signal: this.stopped }).catch(() => undefined);
  }

  /** agent/agent.ts:186-195, resumed where the fresh phase left it; a failure waits as a success does. */
  private async every(firstInMs: number, seconds: number, task: () => Promise<void>): Promise<void> {
    await this.sleep(firstInMs);
    while (!this.stopped.aborted) {
      await task().catch(() => undefined);
      await this.sleep(jittered(seconds * 1000));
    }
  }

  /** agent/agent.ts:237-276: a round that fails waits the client's failureDelay, then long polls again. */
  private async syncLoop(): Promise<void> {
    // The first round is a pass at once, as when a long poll has just ended (agent/agent.ts:241-252, a
    // woken round): the fresh phase's agents asked for their lists once, in its burst, and a running agent
    // asks again at the end of every long poll, so its ETags are current.
    let first = true;
    while (!this.stopped.aborted) {
      const woken = first;
      first = false;
      const wait = this.longPoll.held && this.state.passes > 0 && !woken ? LONG_POLL_S : 0;
      try {
        const t0 = Date.now();
        await this.syncOnce(wait);
        this.failures = 0;
        if (!this.longPoll.held || wait === 0) {
          const pause = (this.state.passes > 1 && !woken ? SYNC_INTERVAL_S * 1000 : 0) - (Date.now() - t0);
          await this.sleep(Math.max(0, pause));
        }
      } catch {
        if (this.stopped.aborted) return;
        this.failures++;
        await this.sleep(retryDelays.failureDelay(this.failures));
      }
    }
  }

  /** agent/agent.ts:201-235 with the client's sessions() (agent/sync/client.ts:214-226). */
  private async syncOnce(wait: number): Promise<void> {
    const t0 = Date.now();
    const etag = this.state.sessionsEtag;
    const res = await this.request(
      wait ? 'long poll' : 'sessions',
      'GET',
      `/sessions${wait ? `?wait=${wait}` : ''}`,
      etag ? { 'if-none-match': etag } : {},
      undefined,
      (REQUEST_TIMEOUT_S + wait) * 1000,
    );
    if (res.status !== 304) {
      if (res.status >= 400) throw new Error(`GET sessions: HTTP ${res.status}`);
      this.state.sessionsEtag = headerValue(res.headers, 'etag');
    }
    if (wait) this.longPoll.answered(res.status !== 304, Date.now() - t0);
    await this.kept('bird-config');
    // The pass's mesh step asks for the mesh with the policy the pass holds, and keeps the mesh as it is
    // when the controller does not answer (agent/reconcile/mesh-step.ts).
    await this.kept('mesh').catch(() => undefined);
    this.state.passes++;
  }

  /** agent/sync/client.ts:242-251: asked with the ETag of the last answer; a 304 is that answer. */
  private async kept(list: PeerList): Promise<void> {
    const last = this.state.listEtags.get(list);
    const res = await this.request(list, 'GET', `/${list}`, last ? { 'if-none-match': last } : {});
    if (res.status === 304 && last) return;
    if (res.status !== 200) throw new Error(`GET ${list}: HTTP ${res.status}`);
    const etag = headerValue(res.headers, 'etag');
    if (etag) this.state.listEtags.set(list, etag);
    else this.state.listEtags.delete(list);
  }

  /** agent/sync/client.ts:257-263: the answer must be the Ack. */
  private async post(what: 'heartbeat' | 'report', body: string): Promise<void> {
    const res = await this.request(what, 'POST', `/${what}`, { 'content-type': 'application/json' }, body);
    if (res.status >= 400) throw new Error(`POST ${what}: HTTP ${res.status}`);
  }

  /**
   * agent/sync/client.ts:136-181: each try with its timeout; a network error, 429 or 5xx is tried again
   * after backoff(attempt) (429: at least its Retry-After), up to maxRetries times; other answers are the
   * caller's. Every try is recorded.
   */
  private async request(
    what: Exchange['what'],
    method: 'GET' | 'POST',
    path: string,
    headers: Record<string, string>,
    body?: string,
    timeoutMs = REQUEST_TIMEOUT_S * 1000,
  ): Promise<Answer> {
    const { router } = this.state;
    const all = { ...this.state.headers, ...headers };
    for (let attempt = 0; ; attempt++) {
      const timeout = AbortSignal.timeout(timeoutMs);
      const sentAt = Date.now();
      const t = performance.now();
      let res: Answer | undefined;
      let error: string | undefined;
      try {
        const signal = AbortSignal.any([timeout, this.stopped]);
        res = await this.http.call(method, `/agent/${router}${path}`, all, body, signal);
      } catch (err) {
        if (this.stopped.aborted) throw err;
        error = timeout.aborted
          ? 'timed out'
          : ((err as NodeJS.ErrnoException).code ?? (err as Error).message);
      }
      // worth retrying, as the client's ControlPlaneError.transient (agent/sync/client.ts:35)
      const transient = res === undefined || res.status === 429 || res.status >= 500;
      const gaveUp = transient && attempt >= MAX_RETRIES;
      const ms = performance.now() - t;
      this.record({ router, what, attempt, sentAt, ms, status: res?.status, error, gaveUp });
      if (res && !transient) return res;
      if (gaveUp) throw new Error(`${method} ${path}: ${error ?? `HTTP ${res?.status}`}`);
      let delay = retryDelays.backoff(attempt);
      const answered = res;
      if (answered?.status === 429)
        delay = Math.max(delay, rateLimitWait({ get: (name) => headerValue(answered.headers, name) }));
      await this.sleep(delay);
    }
  }
}
