/**
 * Client of BIRD's control socket: the numbered reply protocol (`0001 BIRD … ready.` on connect; reply
 * lines `DDDD-text` continue, ` text` continues with the previous code, `DDDD text` ends the reply; codes
 * 0xxx ok, 1xxx/2xxx table rows, 8xxx run-time errors, 9xxx command errors) and a connection pool that
 * grows from poolSize to poolSizeMax and reconnects after BIRD restarts.
 */
import { createConnection, type Socket } from 'node:net';

export interface ReplyLine {
  code: number;
  text: string;
}

export interface Reply {
  lines: ReplyLine[];
  /** Code of the final line. */
  code: number;
}

export class BirdError extends Error {
  readonly code: number;
  readonly reply: Reply | undefined;
  constructor(message: string, code = 0, reply?: Reply) {
    super(message);
    this.name = 'BirdError';
    this.code = code;
    this.reply = reply;
  }
}

/** Incremental parser of reply lines; returns a Reply each time a final line arrives. */
export class ReplyParser {
  private buffer = '';
  private lines: ReplyLine[] = [];
  private lastCode = 0;

  push(chunk: string): Reply[] {
    this.buffer += chunk;
    const done: Reply[] = [];
    let nl: number;
    while ((nl = this.buffer.indexOf('\n')) >= 0) {
      const line = this.buffer.slice(0, nl);
      this.buffer = this.buffer.slice(nl + 1);
      const m = /^(\d{4})([ -])(.*)$/.exec(line);
      if (m) {
        this.lastCode = Number(m[1]);
        this.lines.push({ code: this.lastCode, text: m[3] ?? '' });
        if (m[2] === ' ') {
          done.push({ lines: this.lines, code: this.lastCode });
          this.lines = [];
        }
      } else {
        this.lines.push({ code: this.lastCode, text: line.startsWith(' ') ? line.slice(1) : line });
      }
    }
    return done;
  }
}

/** One connection: commands run one at a time, in order. */
export class BirdConnection {
  private readonly socket: Socket;
  private readonly parser = new ReplyParser();
  private waiting: { resolve(r: Reply): void; reject(e: Error): void }[] = [];
  private closedError: Error | undefined;
  readonly ready: Promise<Reply>;
  private chain: Promise<unknown> = Promise.resolve();

  constructor(path: string, timeoutMs = 10_000) {
    this.socket = createConnection(path);
    this.socket.setEncoding('utf8');
    this.ready = new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
    this.ready.catch(() => undefined);
    this.socket.setTimeout(timeoutMs, () =>
      this.fail(new BirdError(`BIRD control socket ${path}: timed out`)),
    );
    this.socket.on('data', (chunk: string) => {
      for (const reply of this.parser.push(chunk)) this.waiting.shift()?.resolve(reply);
    });
    this.socket.on('error', (err) => this.fail(new BirdError(`BIRD control socket ${path}: ${err.message}`)));
    this.socket.on('close', () => this.fail(new BirdError(`BIRD control socket ${path}: closed`)));
  }

  get closed(): boolean {
    return this.closedError !== undefined;
  }

  private fail(err: Error): void {
    this.closedError ??= err;
    for (const w of this.waiting.splice(0)) w.reject(err);
    this.socket.destroy();
  }

  /** Sends one command and resolves with its whole reply (errors are replies: check `code`). */
  command(cmd: string): Promise<Reply> {
    if (/[\r\n]/.test(cmd)) return Promise.reject(new BirdError('a BIRD command is one line'));
    const run = async (): Promise<Reply> => {
      await this.ready;
      if (this.closedError) throw this.closedError;
      const reply = new Promise<Reply>((resolve, reject) => this.waiting.push({ resolve, reject }));
      this.socket.write(`${cmd}\n`);
      return reply;
    };
    const result = this.chain.then(run, run);
    this.chain = result.catch(() => undefined);
    return result;
  }

  close(): void {
    this.socket.end();
    this.socket.destroy();
  }
}

/** Pool of connections to one control socket. */
export class BirdControl {
  readonly path: string;
  private readonly min: number;
  private readonly max: number;
  private idle: BirdConnection[] = [];
  private total = 0;
  private queue: { resolve: (c: BirdConnection) => void; reject: (err: unknown) => void }[] = [];

  constructor(path: string, opts: { poolSize?: number; poolSizeMax?: number } = {}) {
    this.path = path;
    this.min = opts.poolSize ?? 5;
    this.max = Math.max(opts.poolSizeMax ?? 64, this.min);
  }

  private async connect(): Promise<BirdConnection> {
    const conn = new BirdConnection(this.path);
    const hello = await conn.ready;
    if (hello.code !== 1)
      throw new BirdError(`BIRD greeted with ${hello.code}: ${hello.lines[0]?.text ?? ''}`);
    return conn;
  }

  private async acquire(): Promise<BirdConnection> {
    while (this.idle.length) {
      const c = this.idle.pop()!;
      if (!c.closed) return c;
      this.total--;
    }
    if (this.total < this.max) {
      this.total++;
      try {
        return await this.connect();
      } catch (err) {
        this.slotFreed();
        throw err;
      }
    }
    return new Promise((resolve, reject) => this.queue.push({ resolve, reject }));
  }

  private release(c: BirdConnection): void {
    if (c.closed) {
      this.slotFreed();
      return;
    }
    const next = this.queue.shift();
    if (next) next.resolve(c);
    else if (this.idle.length < this.min) this.idle.push(c);
    else {
      this.total--;
      c.close();
    }
  }

  /**
   * A connection is gone (died, or never came up): the next waiter gets a new one or the error of
   * connecting, so no caller waits for a connection that will never be released.
   */
  private slotFreed(): void {
    this.total--;
    const next = this.queue.shift();
    if (next) this.acquire().then(next.resolve, next.reject);
  }

  /** Runs one command on a pooled connection; a dead connection (BIRD restarted) is retried once on a new one. */
  async command(cmd: string): Promise<Reply> {
    for (let attempt = 0; ; attempt++) {
      const c = await this.acquire();
      try {
        return await c.command(cmd);
      } catch (err) {
        if (attempt >= 1 || !c.closed) throw err;
      } finally {
        this.release(c);
      }
    }
  }

  /** Is BIRD answering? */
  async ping(): Promise<boolean> {
    return (await this.check()) === undefined;
  }

  /** Why BIRD does not answer (the control socket's error, BIRD's reply), or undefined when it does. */
  async check(): Promise<string | undefined> {
    try {
      const reply = await this.command('show status');
      return reply.code === 13 ? undefined : `BIRD answered show status with ${reply.code}`;
    } catch (err) {
      return (err as Error).message;
    }
  }

  /**
   * `configure` (optionally of another main file): resolves with BIRD's words when it reconfigured,
   * throws BirdError with BIRD's message when it refused. Never reports a failed configure as success.
   */
  async configure(file?: string): Promise<string> {
    const reply = await this.command(file ? `configure "${file.replace(/["\\]/g, '')}"` : 'configure');
    const text = reply.lines.map((l) => l.text).join('\n');
    if (reply.code === 3 || reply.code === 4 || reply.code === 18 || reply.code === 20) return text;
    throw new BirdError(reply.lines.at(-1)?.text ?? text, reply.code, reply);
  }

  /** `restart <name>`: BGP reconnects now instead of after its connect retry time (a re-created tunnel). */
  async restartProtocol(name: string): Promise<void> {
    const reply = await this.command(`restart "${name.replace(/["\\]/g, '')}"`);
    if (reply.code >= 8000)
      throw new BirdError(reply.lines.at(-1)?.text ?? 'restart failed', reply.code, reply);
  }

  /** `show protocols all [name]` parsed; undefined for a single protocol BIRD does not know. */
  async protocols(name?: string): Promise<ProtocolInfo[]> {
    const reply = await this.command(
      name ? `show protocols all "${name.replace(/["\\]/g, '')}"` : 'show protocols all',
    );
    if (reply.code >= 8000) {
      if (/not found|no protocols match/i.test(reply.lines.at(-1)?.text ?? '')) return [];
      throw new BirdError(reply.lines.at(-1)?.text ?? 'show protocols failed', reply.code, reply);
    }
    return parseProtocols(reply);
  }

  /**
   * Protocol name → BGP state (`Established`, `Active`, …) of every BGP protocol, from the short
   * `show protocols` (one line each, where `show protocols all` has dozens): the agent's fault watch
   * asks every few seconds. Throws when BIRD does not answer.
   */
  async bgpStates(): Promise<Map<string, string>> {
    const reply = await this.command('show protocols');
    if (reply.code >= 8000)
      throw new BirdError(reply.lines.at(-1)?.text ?? 'show protocols failed', reply.code, reply);
    return new Map(
      parseProtocols(reply)
        .filter((p) => p.proto === 'BGP')
        .map((p) => [p.name, p.info.split(/\s+/)[0] ?? '']),
    );
  }

  close(): void {
    for (const c of this.idle) c.close();
    this.idle = [];
    this.total = 0;
  }
}

export interface ProtocolInfo {
  name: string;
  proto: string;
  /** `up`, `down`, `start`, … */
  state: string;
  /** BIRD's since column as printed (its timeformat). */
  since: string;
  info: string;
  /** `Established`, `Active`, `Connect`, … for BGP. */
  bgpState: string | undefined;
  routesImported: number;
  /** Routes exported to the neighbour (`Routes: … N exported`). */
  routesExported: number;
  lastError: string | undefined;
}

/** Parses the rows (code 1002) and details (code 1006) of `show protocols all`. */
export function parseProtocols(reply: Reply): ProtocolInfo[] {
  const out: ProtocolInfo[] = [];
  let current: ProtocolInfo | undefined;
  for (const line of reply.lines) {
    if (line.code === 1002) {
      const cols = line.text.trim().split(/\s+/);
      const [name = '', proto = '', , state = ''] = cols;
      // since is one or two columns (time, or date and time); the info follows.
      const rest = cols.slice(4);
      const sinceParts = rest.length > 1 && /^\d{2}:\d{2}/.test(rest[1] ?? '') ? 2 : 1;
      current = {
        name,
        proto,
        state,
        since: rest.slice(0, sinceParts).join(' '),
        info: rest.slice(sinceParts).join(' '),
        bgpState: undefined,
        routesImported: 0,
        routesExported: 0,
        lastError: undefined,
      };
      out.push(current);
    } else if (line.code === 1006 && current) {
      const text = line.text.trim();
      const bgp = /^BGP state:\s+(\S+)/.exec(text);
      if (bgp) current.bgpState = bgp[1];
      const routes = /^Routes:\s+(\d+) imported/.exec(text);
      if (routes) current.routesImported += Number(routes[1]);
      const exported = /^Routes:.*\b(\d+) exported/.exec(text);
      if (exported) current.routesExported += Number(exported[1]);
      const err = /^Last error:\s+(.*)$/.exec(text);
      if (err) current.lastError = err[1];
    }
  }
  return out;
}
