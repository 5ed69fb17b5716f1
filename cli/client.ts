/**
 * What every HTTP command of the CLI shares: the controller URL (`--url` or PEEROPS_URL), the saved token
 * (`~/.config/peerops/token`, mode 0600; `peerops login` writes it with saveToken), requests that turn
 * problem details into `code: detail`, and plain tables for people (`--json` for scripts).
 */
import { mkdir, readFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { atomicWriteFile } from '../common/atomic-write.ts';
import { showable } from '../common/text.ts';
import { usageError } from '../common/usage.ts';

export const DEFAULT_URL = 'http://localhost:8080';

export function configDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.PEEROPS_CONFIG_DIR) return env.PEEROPS_CONFIG_DIR;
  return join(env.XDG_CONFIG_HOME || join(homedir(), '.config'), 'peerops');
}

/** Atomically, mode 0600 from the first byte: the token is a credential. Returns the file written. */
export async function saveToken(token: string, dir = configDir()): Promise<string> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, 'token');
  await atomicWriteFile(file, `${token}\n`, { mode: 0o600 });
  return file;
}

/** The saved token, or undefined when there is none. */
export async function loadToken(dir = configDir()): Promise<string | undefined> {
  try {
    const token = (await readFile(join(dir, 'token'), 'utf8')).trim();
    return token || undefined;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** A failure to show as `code: detail` (exit status 1). */
export class CliError extends Error {
  readonly code: string;
  constructor(code: string, detail: string) {
    super(detail);
    this.name = 'CliError';
    this.code = code;
  }
}

export interface ClientOptions {
  url?: string | undefined;
  token?: string | undefined;
}

/** Why fetch failed: it says only "fetch failed", the reason (refused, TLS, DNS, timeout) is its cause. */
export function fetchFailure(err: unknown): string {
  const cause = (err as Error & { cause?: { code?: string; message?: string } }).cause;
  return cause?.message ?? cause?.code ?? (err as Error).message;
}

export class Client {
  readonly url: string;
  private readonly token: string | undefined;

  constructor(opts: { url: string; token: string | undefined }) {
    this.url = opts.url.replace(/\/+$/, '');
    this.token = opts.token;
  }

  static async create(opts: ClientOptions, env: NodeJS.ProcessEnv = process.env): Promise<Client> {
    const url = opts.url ?? env.PEEROPS_URL ?? DEFAULT_URL;
    if (!/^https?:\/\/[^\s]+$/.test(url)) throw new CliError('USAGE', `--url '${url}' is not an http(s) URL`);
    return new Client({ url, token: opts.token ?? env.PEEROPS_TOKEN ?? (await loadToken(configDir(env))) });
  }

  /** POST a JSON body; answers the JSON reply or throws CliError with the problem's code and detail. */
  async post<T = unknown>(path: string, body: unknown): Promise<T> {
    if (!this.token)
      throw new CliError('INVALID_TOKEN', 'not logged in: run `peerops login` (or pass --token)');
    let res: Response;
    try {
      res = await fetch(`${this.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${this.token}` },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(30_000),
      });
    } catch (err) {
      throw new CliError('UNREACHABLE', `cannot reach ${this.url}: ${fetchFailure(err)}`);
    }
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      throw new CliError(`HTTP_${res.status}`, `the controller answered something that is not JSON`);
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
  mpbgp: '--no-mpbgp',
  extendedNextHop: '--no-extended-next-hop',
  displayName: '--display-name',
  nodeId: '--node-id',
  region: '--region',
  location: '--location',
  provider: '--provider',
  endpointHost: '--endpoint-host',
  maxSessions: '--max-sessions',
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
export function problemText(detail: string, errors: FieldProblem[] = []): string {
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
      return 1;
    }
    if (isParseArgsError(err)) return usageError(err.message);
    throw err;
  }
}

export function output(json: boolean | undefined, value: unknown, human: () => string): void {
  console.log(json ? JSON.stringify(value, null, 2) : human());
}
