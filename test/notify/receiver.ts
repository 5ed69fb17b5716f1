/** A webhook receiver on loopback for the notification tests: records every request, answers as told. */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  status: number;
}

export interface Receiver {
  url: string;
  received: Received[];
  /** The statuses to answer requests whose body `match`es with, in turn; 200 once they are used up. */
  answer(statuses?: number[], match?: (body: string) => boolean): void;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const received: Received[] = [];
  let statuses: number[] = [];
  let matches: (body: string) => boolean = () => true;
  const server: Server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      const status = (matches(body) ? statuses.shift() : undefined) ?? 200;
      received.push({ headers: req.headers, body, status });
      res.writeHead(status, { 'content-type': 'text/plain' }).end(status === 200 ? 'ok' : 'no');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    received,
    answer: (s = [], match = () => true) => {
      statuses = [...s];
      matches = match;
    },
    close: () =>
      new Promise<void>((resolve) => {
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
