/** A webhook receiver on loopback for the notification tests: records every request, answers as told. */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  status: number;
  /** performance.now() when the request's body had arrived. */
  at: number;
}

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  /** The statuses to answer requests whose body `match`es with, in turn; 200 once they are used up. */
  answer(statuses?: number[], match?: (body: string) => boolean): void;
  /** Answers the requests held so far (`delayMs`) now, and later ones at once. */
  release(): void;
  close(): Promise<void>;
}

export interface ReceiverOptions {
  /** The loopback address to listen on (default 127.0.0.1). */
  host?: string;
  /** The port (default any free one). */
  port?: number;
  /** Answer each request this long after it arrived (a slow receiver; default at once). */
  delayMs?: number;
}

export async function startReceiver(opts: ReceiverOptions = {}): Promise<Receiver> {
  const host = opts.host ?? '127.0.0.1';
  const received: Received[] = [];
  const held = new Set<() => void>();
  let delayMs = opts.delayMs ?? 0;
  let statuses: number[] = [];
  let matches: (body: string) => boolean = () => true;
  const server: Server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      const status = (matches(body) ? statuses.shift() : undefined) ?? 200;
      received.push({ headers: req.headers, body, status, at: performance.now() });
      const respond = () => {
        held.delete(respond);
        clearTimeout(timer);
        if (!res.destroyed)
          res.writeHead(status, { 'content-type': 'text/plain' }).end(status === 200 ? 'ok' : 'no');
      };
      const timer = delayMs > 0 ? setTimeout(respond, delayMs) : undefined;
      if (timer) held.add(respond);
      else respond();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, resolve);
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}/hook`,
    port,
    received,
    answer: (s = [], match = () => true) => {
      statuses = [...s];
      matches = match;
    },
    release: () => {
      delayMs = 0;
      for (const respond of held) respond();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const respond of held) respond();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Polls until `check` holds (generous: the machine is shared), else throws naming `what`. */
export async function eventually(what: string, check: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
