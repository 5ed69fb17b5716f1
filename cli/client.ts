/**
 * What every HTTP command of the CLI shares: the controller URL and token (flags, then PEEROPS_URL and
 * PEEROPS_TOKEN, then the context; cli/config.ts), requests that turn problem details into
 * `code: detail`, output as a table or `-o wide|json|yaml`, flags parsed with a "did you mean", and the
 * exit statuses of docs/cli.md ("Exit status").
 */
import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';
import { dump } from 'js-yaml';
import { serverEvents, type ServerEvent } from '../common/event-stream.ts';
import { showable } from '../common/text.ts';
import { usageError } from '../common/usage.ts';
import { CliConfigError, DEFAULT_URL, selectContext } from './config.ts';

export { configDir, DEFAULT_URL } from './config.ts';

/** The exit statuses (docs/cli.md, "Exit status"). */
export const EXIT = { OK: 0, REFUSED: 1, USAGE: 2, UNREACHABLE: 3 } as const;

/** A failure to show as `code: detail`; USAGE exits 2, UNREACHABLE 3, any other code 1. */
export class CliError extends Error {
  readonly code: string;
  constructor(code: string, detail: string) {
    super(detail);
    this.name = 'CliError';
    this.code = code;
  }
  get exitStatus(): number {
    return this.code === 'USAGE' ? EXIT.USAGE : this.code === 'UNREACHABLE' ? EXIT.UNREACHABLE : EXIT.REFUSED;
  }
}

export interface ClientOptions {
  url?: string | undefined;
  token?: string | undefined;
  context?: string | undefined;
}

interface NetCause {
  code?: string;
  message?: string;
  errors?: NetCause[];
}

/**
 * Why fetch failed, as one line naming the URL: fetch says only "fetch failed", the reason (refused, TLS,
 * DNS, timeout) is its cause, and OpenSSL's own text means nothing to most users.
 */
export function fetchFailure(err: unknown, url: string, seconds = 30): string {
  const e = err as Error & { cause?: NetCause };
  if (e.name === 'TimeoutError' || e.name === 'AbortError')
    return `cannot reach the controller at ${url}: no answer within ${seconds} s`;
  const cause = e.cause ?? {};
  // a connect to "localhost" tries ::1 and 127.0.0.1: the codes are those of the attempts
  const codes = [cause.code, ...(cause.errors ?? []).map((x) => x.code)].filter((c) => c !== undefined);
  const text = `${cause.message ?? ''} ${codes.join(' ')}`;
  if (
    url.startsWith('https://') &&
    /wrong version number|WRONG_VERSION_NUMBER|packet length too long/i.test(text)
  )
    return `the controller at ${url} does not speak HTTPS; use ${url.replace(/^https:/, 'http:')}`;
  if (codes.includes('ECONNREFUSED')) return `cannot reach the controller at ${url}: connection refused`;
  if (codes.includes('ENOTFOUND') || codes.includes('EAI_AGAIN')) {
    let host = url;
    try {
      host = new URL(url).hostname;
    } catch {
      // the URL was checked before; keep it whole
    }
    return `cannot reach the controller at ${url}: no such host ${host}`;
  }
  // fetch never connects to the ports of other protocols (1, 25, 6000, …: the Fetch standard's list)
  if (cause.message === 'bad port')
    return `cannot reach the controller at ${url}: fetch does not connect to that port (reserved for another protocol)`;
  if (codes.includes('ETIMEDOUT') || codes.includes('UND_ERR_CONNECT_TIMEOUT'))
    return `cannot reach the controller at ${url}: connection timed out`;
  const reason = (cause.message ?? codes[0] ?? e.message).split('\n')[0];
  return `cannot reach the controller at ${url}: ${reason}`;
}

/** Seconds to wait for the controller: PEEROPS_TIMEOUT, default 30 (docs/cli.md, "Common options"). */
export function requestTimeout(env: NodeJS.ProcessEnv = process.env): number {
  const n = Number(env.PEEROPS_TIMEOUT);
  return Number.isFinite(n) && n > 0 ? n : 30;
}

function origin(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return url;
  }
}

export function checkUrl(url: string): string {
  if (!/^https?:\/\/[^\s/]+[^\s]*$/.test(url))
    throw new CliError('USAGE', `--url '${url}' is not an http(s) URL`);
  return url.replace(/\/+$/, '');
}

export class Client {
  readonly url: string;
  private readonly token: string | undefined;

  private readonly notLoggedIn: string;

  constructor(opts: { url: string; token: string | undefined; notLoggedIn?: string }) {
    this.url = opts.url.replace(/\/+$/, '');
    this.token = opts.token;
    this.notLoggedIn = opts.notLoggedIn ?? 'not logged in: run `peerops login` (or pass --token)';
  }

  /** Flags first, then PEEROPS_URL/PEEROPS_TOKEN, then the context (--context, PEEROPS_CONTEXT, current). */
  static async create(opts: ClientOptions, env: NodeJS.ProcessEnv = process.env): Promise<Client> {
    let ctx;
    try {
      ctx = await selectContext(opts.context, env);
    } catch (err) {
      if (err instanceof CliConfigError) throw new CliError('USAGE', err.message);
      throw err;
    }
    const url = checkUrl(opts.url ?? (env.PEEROPS_URL || undefined) ?? ctx?.url ?? DEFAULT_URL);
    // a context's token goes only to its own controller: another one could replay it to this one
    const own = ctx !== undefined && origin(ctx.url) === origin(url);
    const token = opts.token ?? (env.PEEROPS_TOKEN || undefined) ?? (own ? ctx?.token : undefined);
    const hint =
      ctx !== undefined && !own
        ? `not logged in to ${url} (context ${ctx.name} is for ${ctx.url}): run \`peerops login --url ${url}\``
        : undefined;
    return new Client({ url, token, ...(hint ? { notLoggedIn: hint } : {}) });
  }

  /** POST a JSON body; answers the JSON reply or throws CliError with the problem's code and detail. */
  async post<T = unknown>(path: string, body: unknown): Promise<T> {
    if (!this.token) throw await this.missingToken();
    return this.request<T>('POST', path, body);
  }

  /**
   * The error of a request made without a token: reach the controller first (GET /livez), so that a
   * mistyped or unreachable URL says so with exit status 3 rather than "not logged in" (docs/cli.md,
   * "Exit status"). Any answer at all means the URL reaches something: then the login is what is missing.
   */
  private async missingToken(): Promise<CliError> {
    try {
      await this.request('GET', '/livez');
    } catch (err) {
      if (err instanceof CliError && err.code === 'UNREACHABLE') return err;
    }
    return new CliError('INVALID_TOKEN', this.notLoggedIn);
  }

  /** GET a public resource (no token needed). */
  async get<T = unknown>(path: string): Promise<T> {
    return this.request<T>('GET', path);
  }

  private async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const seconds = requestTimeout();
    let res: Response;
    const headers: Record<string, string> = { accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    try {
      res = await fetch(`${this.url}${path}`, {
        method,
        headers,
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        signal: AbortSignal.timeout(seconds * 1000),
      });
    } catch (err) {
      throw new CliError('UNREACHABLE', fetchFailure(err, this.url, seconds));
    }
    return this.answer<T>(res);
  }

  /**
   * GET an event stream (docs/api.md, Live updates): its events until the controller ends it. A refusal
   * throws as `post` does; a connection that drops or cannot be made throws UNREACHABLE. The timeout
   * (PEEROPS_TIMEOUT) is for the answer's headers only: a stream is quiet for long.
   */
  async *events(path: string): AsyncGenerator<ServerEvent> {
    if (!this.token) throw await this.missingToken();
    const seconds = requestTimeout();
    const connecting = new AbortController();
    const timer = setTimeout(
      () => connecting.abort(new DOMException('timeout', 'TimeoutError')),
      seconds * 1000,
    );
    let res: Response;
    try {
      res = await fetch(`${this.url}${path}`, {
        headers: { accept: 'text/event-stream', authorization: `Bearer ${this.token}` },
        signal: connecting.signal,
      });
    } catch (err) {
      throw new CliError('UNREACHABLE', fetchFailure(err, this.url, seconds));
    } finally {
      clearTimeout(timer);
    }
    if (!res.ok || !res.body) {
      await this.answer(res); // a refusal throws its problem; a 200 without a body is a stream that ended
      return;
    }
    try {
      yield* serverEvents(res.body);
    } catch (err) {
      throw new CliError('UNREACHABLE', `lost the controller at ${this.url}: ${(err as Error).message}`);
    }
  }

  /** A JSON answer, or the CliError of a refusal (its problem's code and detail). */
  private async answer<T>(res: Response): Promise<T> {
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      throw new CliError(
        `HTTP_${res.status}`,
        `the controller at ${this.url} answered something that is not JSON`,
      );
    }
    if (!res.ok) {
      const p = (parsed ?? {}) as { code?: string; detail?: string; errors?: FieldProblem[] };
      throw new CliError(p.code ?? `HTTP_${res.status}`, problemText(p.detail ?? res.statusText, p.errors));
    }
    return parsed as T;
  }
}

/** The command-line flag that sets a request field, so a field error tells the user what to type. */
const FLAG_OF_FIELD: Record<string, string> = {
  router: '--router',
  ipv6: '--ipv6',
  ipv4: '--ipv4',
  linkLocal: '--link-local',
  publicKey: '--public-key',
  endpoint: '--endpoint',
  mtu: '--mtu',
  mpbgp: '--[no-]mpbgp',
  extendedNextHop: '--[no-]extended-next-hop',
  displayName: '--display-name',
  nodeId: '--node-id',
  region: '--region',
  location: '--location',
  provider: '--provider',
  endpointHost: '--endpoint-host',
  maxSessions: '--max-sessions',
  autoApprove: '--auto-approve',
  'loopback/ipv4': '--loopback-ipv4',
  'loopback/ipv6': '--loopback-ipv6',
  dn42Asn: '--dn42-asn',
  rpkiServers: '--rpki',
  blockedAsns: '--block',
  maxPendingPerAsn: '--max-pending',
};

interface FieldProblem {
  pointer: string;
  message: string;
}

/** `/ipv6 (--ipv6)`: the pointer of a field error and the flag that sets the field, if there is one. */
function fieldName(pointer: string): string {
  const flag = FLAG_OF_FIELD[pointer.replace(/^\/spec\//, '/').slice(1)];
  return flag ? `${pointer} (${flag})` : pointer;
}

/**
 * A problem's detail, then one line per field error, each field error once. The controller's detail
 * usually restates the first field error (`create /ipv6: must be an IPv6 address`, `router r1: <message>`):
 * that error is then told in the detail line, its pointer and flag added there, and not listed again.
 */
export function problemText(detail: string, all: FieldProblem[] = []): string {
  // one error per field: a garbage key breaks both its pattern and its length, and one line says it
  const errors = all.filter((e, i) => all.findIndex((x) => x.pointer === e.pointer) === i);
  const [first, ...rest] = errors;
  let head = detail;
  let listed = errors;
  if (first && detail.endsWith(`: ${first.message}`)) {
    let lead = detail.slice(0, -`: ${first.message}`.length);
    if (lead === first.pointer || lead.endsWith(` ${first.pointer}`))
      lead = lead.slice(0, -first.pointer.length).trimEnd();
    head = `${lead ? `${lead} ` : ''}${fieldName(first.pointer)}: ${first.message}`;
    listed = rest;
  }
  return [head, ...listed.map((e) => `  ${fieldName(e.pointer)}: ${e.message}`)].map(showable).join('\n');
}

/**
 * A plain text table: header row, then rows; columns as wide as their widest cell. Cells come from the
 * server: a control or bidi character is shown escaped, never sent to the terminal.
 */
export function table(headers: string[], rows: (string | number | null | undefined)[][]): string {
  const cells = [
    headers,
    ...rows.map((r) => r.map((c) => (c === null || c === undefined ? '-' : showable(String(c))))),
  ];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  return cells
    .map((r) =>
      r
        .map((c, i) => (c ?? '').padEnd(widths[i] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** Levenshtein distance, for "did you mean". */
export function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++)
      row[j] = Math.min(
        (prev[j] ?? 0) + 1,
        (row[j - 1] ?? 0) + 1,
        (prev[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    prev = row;
  }
  return prev[b.length] ?? 0;
}

/** `; did you mean 'x'?` for the nearest known word within distance 2, else ''. */
export function didYouMean(word: string, known: Iterable<string>, quote = (k: string) => `'${k}'`): string {
  let best: string | undefined;
  let bestDistance = 3;
  for (const k of known) {
    const d = distance(word, k);
    if (d < bestDistance) [best, bestDistance] = [k, d];
  }
  return best === undefined ? '' : `; did you mean ${quote(best)}?`;
}

/** `unknown <what> 'word'` with the nearest known one: a usage error. */
export function unknownWord(what: string, word: string, known: Iterable<string>): CliError {
  return new CliError('USAGE', `unknown ${what} '${word}'${didYouMean(word, known)}`);
}

/** The options every command that talks to the controller takes. */
export const COMMON_OPTIONS = {
  url: { type: 'string' },
  token: { type: 'string' },
  context: { type: 'string' },
  json: { type: 'boolean' },
  output: { type: 'string', short: 'o' },
  help: { type: 'boolean', short: 'h' },
} as const;

/**
 * node:util parseArgs, strict, its errors said as one line (its own text explains positionals, which
 * is not what went wrong), an unknown flag with the nearest known one.
 */
export function parseFlags<T extends ParseArgsOptionsConfig>(args: string[], options: T) {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (err) {
    if (!isParseArgsError(err)) throw err;
    const message = err.message;
    const unknown = /^Unknown option '(-{1,2})([^']+)'/.exec(message);
    if (unknown) {
      const flags = Object.keys(options).map((k) => `--${k}`);
      const given = `${unknown[1]}${unknown[2]}`;
      throw new CliError('USAGE', `unknown option '${given}'${didYouMean(given, flags)}`);
    }
    const missing = /^Option '(-\w, )?(--[^ ']+)[^']*' argument missing/.exec(message);
    if (missing) throw new CliError('USAGE', `${missing[2]} needs a value`);
    const noArg = /^Option '(--[^ ']+)[^']*' does not take an argument/.exec(message);
    if (noArg) throw new CliError('USAGE', `${noArg[1]} takes no value`);
    const ambiguous = /^Option '(-\w)[^']*' argument is ambiguous/.exec(message);
    if (ambiguous) throw new CliError('USAGE', `${ambiguous[1]} needs a value`);
    throw new CliError('USAGE', message.split(/\.\s/)[0] ?? message);
  }
}

/** Whether `err` is node:util parseArgs refusing the arguments (unknown option, missing value, …). */
function isParseArgsError(err: unknown): err is TypeError {
  return err instanceof TypeError && 'code' in err && String(err.code).startsWith('ERR_PARSE_ARGS');
}

/** Runs a command body: prints CliErrors as `code: detail` and returns the exit status. */
export async function run(body: () => Promise<number | void>): Promise<number> {
  try {
    return (await body()) ?? 0;
  } catch (err) {
    if (err instanceof CliError) {
      if (err.code === 'USAGE') return usageError(err.message);
      console.error(`${err.code}: ${err.message}`);
      return err.exitStatus;
    }
    if (err instanceof CliConfigError) return usageError(err.message);
    if (isParseArgsError(err)) return usageError(err.message);
    throw err;
  }
}

export const FORMATS = ['table', 'wide', 'json', 'yaml'] as const;
export type Format = (typeof FORMATS)[number];

/** `-o FORMAT`, with `--json` an alias of `-o json`. */
export function outputFormat(v: { json?: boolean | undefined; output?: string | undefined }): Format {
  if (v.output === undefined) return v.json ? 'json' : 'table';
  const f = FORMATS.find((x) => x === v.output);
  if (!f)
    throw new CliError(
      'USAGE',
      `-o '${v.output}': one of ${FORMATS.join(', ')}${didYouMean(v.output, FORMATS)}`,
    );
  if (v.json && f !== 'json') throw new CliError('USAGE', `--json and -o ${f} exclude each other`);
  return f;
}

/**
 * Prints `value` as JSON or YAML (the controller's answer as is), or `human()` for people; `wide()`
 * (default: `human()`) with more columns.
 */
export function output(
  format: Format,
  value: unknown,
  human: () => string,
  wide: () => string = human,
): void {
  if (format === 'json') console.log(JSON.stringify(value, null, 2));
  else if (format === 'yaml') process.stdout.write(dump(value, { lineWidth: -1 }));
  else console.log(format === 'wide' ? wide() : human());
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A session UUID from a whole UUID or a prefix of one of `uuids` (as git takes a commit prefix). A
 * prefix that matches none or several is a usage error naming them.
 */
export function resolveUuid(arg: string, uuids: () => Promise<string[]>): Promise<string> {
  if (UUID.test(arg)) return Promise.resolve(arg.toLowerCase());
  if (!/^[0-9a-f-]+$/i.test(arg))
    return Promise.reject(new CliError('USAGE', `'${arg}' is not a session UUID or a prefix of one`));
  return uuids().then((all) => {
    const matches = all.filter((u) => u.startsWith(arg.toLowerCase()));
    if (matches.length === 1) return matches[0] as string;
    if (matches.length === 0)
      throw new CliError('SESSION_NOT_FOUND', `no session whose UUID starts with ${arg}`);
    throw new CliError('USAGE', `'${arg}' matches ${matches.length} sessions: ${matches.join(', ')}`);
  });
}
