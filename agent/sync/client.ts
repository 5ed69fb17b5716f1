/**
 * Control-plane client of the agent (docs/api.md, Agent API): node:http(s) with a per-request timeout, retries
 * with exponential backoff and jitter, 429 honoured (`Retry-After`, `X-RateLimit-Reset`), responses
 * validated against common/agent-api.ts. The token goes only into the Authorization header: it is
 * never part of an error message or a log line. Not fetch: loading fetch's HTTP stack (undici) costs
 * the agent ~18 MiB of RSS, a quarter of its budget on a small router (docs/decisions.md).
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { TSchema } from 'typebox';
import {
  Ack,
  HeartbeatAck,
  AgentSessionsResponse,
  BirdConfigResponse,
  BootstrapConfigResponse,
  MeshResponse,
  ModifyAck,
  type HeartbeatBody,
  type MeshStatusBody,
  type ModifyBody,
  type ReportBody,
} from '../../common/agent-api.ts';
import { LgQueries, type LgAnswer, type LgQuery } from '../../common/looking-glass.ts';
import { validate } from '../../common/validate.ts';
import { request as httpRequest } from '../node-http.ts';

export interface ClientOptions {
  url: string;
  token: string;
  router: string;
  requestTimeout: number; // seconds
  maxRetries: number;
  retryInitialDelay: number; // milliseconds
  retryMaxDelay: number; // milliseconds
}

export class ControlPlaneError extends Error {
  readonly status: number | undefined;
  /** Worth retrying: network error, timeout, 429, 5xx. */
  readonly transient: boolean;
  /** The controller refused the agent's token (401): no retry mends that, the agent stops. */
  get unauthorized(): boolean {
    return this.status === 401;
  }
  constructor(message: string, status: number | undefined, transient: boolean) {
    super(message);
    this.name = 'ControlPlaneError';
    this.status = status;
    this.transient = transient;
  }
}

export interface SessionsResult {
  /** undefined when the controller answered 304 Not Modified. */
  body: AgentSessionsResponse | undefined;
  etag: string | undefined;
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(t);
      resolve();
    });
  });

/** An answer read whole (the agent API's bodies are small JSON documents). */
interface Answer {
  status: number;
  headers: HeaderReader;
  body: string;
}

/** What rateLimitWait reads: a fetch Headers, or the headers of a node:http answer. */
export interface HeaderReader {
  get(name: string): string | null | undefined;
}

function headerReader(headers: IncomingHttpHeaders): HeaderReader {
  return {
    get: (name) => {
      const v = headers[name.toLowerCase()];
      return Array.isArray(v) ? v.join(', ') : v;
    },
  };
}

/** One HTTP exchange; rejects on a network error or when `signal` aborts (the request is destroyed). */
async function exchange(
  url: URL,
  method: string,
  headers: Record<string, string>,
  body: string | undefined,
  signal: AbortSignal,
): Promise<Answer> {
  // TLS only for an https controller: loaded on first use
  const send = url.protocol === 'https:' ? (await import('node:https')).request : httpRequest;
  return new Promise((resolve, reject) => {
    const req = send(url, { method, headers, signal }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: headerReader(res.headers),
          body: Buffer.concat(chunks).toString('utf8'),
        }),
      );
      res.on('error', reject);
      res.on('close', () => {
        if (!res.complete) reject(new Error('the connection closed before the answer was complete'));
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

export class ControlPlaneClient {
  private readonly opts: ClientOptions;
  private readonly base: string;
  /** Time of the last answer from the controller (any HTTP status), for /health. */
  lastContact = 0;
  lastError: string | undefined;
  /** The last answers of conditional GETs (kept), by path. */
  private readonly lastAnswers = new Map<string, { etag: string; value: unknown }>();

  constructor(opts: ClientOptions) {
    this.opts = opts;
    this.base = `${opts.url.replace(/\/+$/, '')}/agent/${encodeURIComponent(opts.router)}`;
  }

  /**
   * Milliseconds to wait before retry number `attempt` (0-based): initial · 2^attempt up to retryMaxDelay,
   * ±25 % jitter. The cap is what brings an agent back within seconds of an outage's end; the jitter,
   * applied after it, keeps a fleet's retries out of step (docs/agent.md, "When the controller is down").
   */
  backoff(attempt: number): number {
    const base = Math.min(this.opts.retryMaxDelay, this.opts.retryInitialDelay * 2 ** attempt);
    return Math.round(base * (0.75 + Math.random() * 0.5));
  }

  /** Milliseconds to wait after `failures` failed passes (or bootstraps) in a row. */
  failureDelay(failures: number): number {
    return this.backoff(failures);
  }

  private async request(
    method: 'GET' | 'POST',
    path: string,
    opts: { body?: unknown; headers?: Record<string, string>; timeoutMs?: number; signal?: AbortSignal } = {},
  ): Promise<Answer> {
    const url = new URL(`${this.base}${path}`);
    const body = opts.body !== undefined ? JSON.stringify(opts.body) : undefined;
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.opts.token}`,
      ...(body !== undefined
        ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }
        : {}),
      ...opts.headers,
    };
    let attempt = 0;
    for (;;) {
      let res: Answer | undefined;
      let error: ControlPlaneError;
      const timeout = AbortSignal.timeout(opts.timeoutMs ?? this.opts.requestTimeout * 1000);
      try {
        res = await exchange(
          url,
          method,
          headers,
          body,
          opts.signal ? AbortSignal.any([timeout, opts.signal]) : timeout,
        );
        this.lastContact = Date.now();
        if (res.status < 400 || (res.status >= 400 && res.status < 500 && res.status !== 429)) {
          this.lastError = undefined;
          return res;
        }
        error = new ControlPlaneError(`${method} ${path}: HTTP ${res.status}`, res.status, true);
      } catch (err) {
        if (opts.signal?.aborted) throw new ControlPlaneError(`${method} ${path}: aborted`, undefined, false);
        const what = timeout.aborted ? 'timed out' : (err as Error).message;
        error = new ControlPlaneError(`${method} ${path}: ${what}`, undefined, true);
      }
      this.lastError = error.message;
      if (attempt >= this.opts.maxRetries) throw error;
      let wait = this.backoff(attempt);
      if (res?.status === 429) wait = Math.max(wait, rateLimitWait(res.headers));
      await sleep(wait, opts.signal);
      attempt++;
    }
  }

  private json<T>(res: Answer, schema: TSchema, what: string): T {
    let body: unknown;
    try {
      body = JSON.parse(res.body);
    } catch {
      throw new ControlPlaneError(`${what}: HTTP ${res.status}, body is not JSON`, res.status, false);
    }
    if (res.status >= 400) {
      const detail = (body as { detail?: unknown; code?: unknown } | null)?.detail;
      throw new ControlPlaneError(
        `${what}: HTTP ${res.status} ${typeof detail === 'string' ? detail : ''}`.trim(),
        res.status,
        false,
      );
    }
    const v = validate<T>(schema, body);
    if (!v.ok) {
      const first = v.errors[0];
      throw new ControlPlaneError(
        `${what}: answer does not match the schema (${first?.pointer}: ${first?.message})`,
        res.status,
        false,
      );
    }
    return v.value;
  }

  /**
   * Sessions of this router. With `etag` the controller may answer 304 (body undefined); with `waitSeconds`
   * it holds the request until the revision changes (long poll).
   */
  async sessions(
    opts: { etag?: string; waitSeconds?: number; signal?: AbortSignal } = {},
  ): Promise<SessionsResult> {
    const query = opts.waitSeconds ? `?wait=${opts.waitSeconds}` : '';
    const res = await this.request('GET', `/sessions${query}`, {
      headers: opts.etag ? { 'if-none-match': opts.etag } : {},
      timeoutMs: (this.opts.requestTimeout + (opts.waitSeconds ?? 0)) * 1000,
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
    const etag = res.headers.get('etag') ?? undefined;
    if (res.status === 304) return { body: undefined, etag: opts.etag };
    return { body: this.json<AgentSessionsResponse>(res, AgentSessionsResponse, 'GET sessions'), etag };
  }

  /**
   * The router's merged policy and iBGP peers. Asked with the ETag of the last answer: unchanged, the
   * controller answers 304 and this is the answer kept (the object itself, which callers do not change).
   */
  birdConfig(): Promise<BirdConfigResponse> {
    return this.kept('/bird-config', BirdConfigResponse, 'GET bird-config');
  }

  /** The mesh peers, asked as birdConfig is. */
  mesh(): Promise<MeshResponse> {
    return this.kept('/mesh', MeshResponse, 'GET mesh');
  }

  /** A GET whose last answer is kept with its ETag and asked for with If-None-Match. */
  private async kept<T>(path: string, schema: TSchema, what: string): Promise<T> {
    const last = this.lastAnswers.get(path);
    const res = await this.request('GET', path, last ? { headers: { 'if-none-match': last.etag } } : {});
    if (res.status === 304 && last) return last.value as T;
    const value = this.json<T>(res, schema, what);
    const etag = res.headers.get('etag');
    if (etag) this.lastAnswers.set(path, { etag, value });
    else this.lastAnswers.delete(path);
    return value;
  }

  async bootstrap(): Promise<BootstrapConfigResponse> {
    return this.json(await this.request('GET', '/config'), BootstrapConfigResponse, 'GET config');
  }

  /** Sends a heartbeat; answers whether the controller stores node conditions' keys (HeartbeatAck). */
  async heartbeat(body: HeartbeatBody): Promise<{ conditionKeys: boolean }> {
    const ack = this.json<HeartbeatAck>(
      await this.request('POST', '/heartbeat', { body }),
      HeartbeatAck,
      'POST heartbeat',
    );
    return { conditionKeys: ack.conditionKeys === true };
  }

  async report(body: ReportBody): Promise<void> {
    this.json(await this.request('POST', '/report', { body }), Ack, 'POST report');
  }

  async modify(body: ModifyBody): Promise<ModifyAck> {
    return this.json(await this.request('POST', '/modify', { body }), ModifyAck, 'POST modify');
  }

  async meshStatus(body: MeshStatusBody): Promise<void> {
    this.json(await this.request('POST', '/mesh/status', { body }), Ack, 'POST mesh/status');
  }

  /** Looking-glass queries for this router, the request held up to `waitSeconds` until one comes. */
  async lgQueries(waitSeconds: number, signal?: AbortSignal): Promise<LgQuery[]> {
    const res = await this.request('GET', `/lg?wait=${waitSeconds}`, {
      timeoutMs: (this.opts.requestTimeout + waitSeconds) * 1000,
      ...(signal ? { signal } : {}),
    });
    return this.json<LgQueries>(res, LgQueries, 'GET lg').queries;
  }

  async lgAnswer(id: string, answer: LgAnswer): Promise<void> {
    this.json(await this.request('POST', `/lg/${encodeURIComponent(id)}`, { body: answer }), Ack, 'POST lg');
  }
}

/** Milliseconds until the rate limit resets: Retry-After (seconds or HTTP date), else X-RateLimit-Reset. */
export function rateLimitWait(headers: HeaderReader, now = Date.now()): number {
  const retryAfter = headers.get('retry-after');
  if (retryAfter) {
    const s = Number(retryAfter);
    if (Number.isFinite(s)) return Math.max(0, s * 1000);
    const at = Date.parse(retryAfter);
    if (!Number.isNaN(at)) return Math.max(0, at - now);
  }
  const reset = Number(headers.get('x-ratelimit-reset'));
  if (Number.isFinite(reset) && reset > 0) {
    // Either seconds until reset (small numbers) or a Unix timestamp in seconds.
    return reset > 1e9 ? Math.max(0, reset * 1000 - now) : reset * 1000;
  }
  return 1000;
}
