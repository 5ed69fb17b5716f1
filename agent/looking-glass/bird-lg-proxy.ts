/**
 * bird-lg-go's proxy protocol, served by the agent (docs/agent.md, bird-lg-go): an operator who runs
 * bird-lg-go's frontend points it at the router's agent instead of running bird-lg-go's proxy beside it.
 * Off unless `lookingGlass.birdLgProxy.listen` is set, and then only on that address and to the clients
 * `allowFrom` lists. `GET /bird?q=<command>` (and `/bird6`) answers BIRD's reply as text, without the
 * line codes, as bird-lg-go's proxy does; `GET /traceroute?q=<address>` (and `/traceroute6`) the
 * traceroute. Only the commands the looking glass itself runs are taken (plus `show protocols`, the
 * frontend's summary page), each rebuilt from its checked parts, never passed on as sent; targets are
 * held to DN42's ranges as a peer's are; every query runs under the looking glass's bounds (10 s, 256
 * KiB) and at most LG_QUERIES_PER_ROUTER at once.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import ipaddr from 'ipaddr.js';
import type { Logger } from 'pino';
import { LG_QUERIES_PER_ROUTER } from '../../common/looking-glass.ts';
import { lgTargetProblem } from '../../common/looking-glass-target.ts';
import type { BirdControl } from '../bird/control.ts';
import { parseListen } from '../config.ts';
import { createServer } from '../node-http.ts';
import { answerQuery, birdText, LG_BOUNDS } from './queries.ts';
import type { Bounds } from './bounded.ts';
import { saidText } from '../../common/messages.ts';

export interface BirdLgProxyOptions {
  /** `[::1]:8000`, `10.0.0.1:8000`: where to listen (bird-lg-go's frontend uses its `--proxy-port`, 8000). */
  listen: string;
  /** Addresses or prefixes that may ask (`fd00::/8`, `10.0.0.5`); loopback always may. */
  allowFrom: readonly string[];
}

/** A protocol name as BIRD prints it, quoted or not by the frontend (`'dn42_21496'`). */
const PROTOCOL = /^'?([A-Za-z0-9_]{1,64})'?$/;
const ROUTE_FLAGS = new Set(['all', 'primary', 'filtered', 'count']);
const ROUTE_SELECTORS = new Set(['for', 'protocol', 'export', 'noexport']);

/**
 * The BIRD command to run for bird-lg-go's `q`, rebuilt from its checked parts; or why it is refused.
 * Taken: `show protocols`, `show protocols all <protocol>`, and `show route` with one of `for <address
 * or prefix>`, `protocol|export|noexport <protocol>` and any of `all`, `primary`, `filtered`, `count`.
 */
export function birdLgCommand(q: string): { command: string } | { refused: string } {
  const words = q.trim().split(/\s+/);
  const refused = {
    refused: 'only show protocols [all <protocol>] and show route for|protocol|export|noexport are answered',
  };
  if (words[0] !== 'show') return refused;
  if (words[1] === 'protocols') {
    if (words.length === 2) return { command: 'show protocols' };
    const name = PROTOCOL.exec(words[3] ?? '')?.[1];
    if (words.length === 4 && words[2] === 'all' && name) return { command: `show protocols all "${name}"` };
    return refused;
  }
  if (words[1] !== 'route') return refused;
  const flags = new Set<string>();
  let selector: string | undefined;
  for (let i = 2; i < words.length; i++) {
    const word = words[i]!;
    if (ROUTE_FLAGS.has(word)) flags.add(word);
    else if (ROUTE_SELECTORS.has(word) && selector === undefined) {
      const arg = words[++i] ?? '';
      if (word === 'for') {
        const why = lgTargetProblem(arg, 'route', false);
        if (why) return { refused: `${arg} ${saidText(why)}` };
        selector = `for ${arg}`;
      } else {
        const name = PROTOCOL.exec(arg)?.[1];
        if (!name) return { refused: `'${arg}' is not a protocol name` };
        // a symbol, as BIRD's grammar wants after these words (a quoted string is a pattern only for show protocols)
        selector = `${word} ${name}`;
      }
    } else return refused;
  }
  if (!selector) return refused;
  return { command: ['show route', selector, ...[...flags].sort()].join(' ') };
}

/** Starts the proxy; resolves once it listens. */
export async function startBirdLgProxy(
  options: BirdLgProxyOptions,
  bird: BirdControl,
  log: Logger,
  bounds: Bounds = LG_BOUNDS,
): Promise<Server> {
  const allowed = options.allowFrom.map((a) =>
    a.includes('/')
      ? ipaddr.parseCIDR(a)
      : ipaddr.parseCIDR(`${a}/${ipaddr.parse(a).kind() === 'ipv6' ? 128 : 32}`),
  );
  const permitted = (remote: string | undefined): boolean => {
    if (!remote) return false;
    let address = ipaddr.parse(remote);
    if (address.kind() === 'ipv6' && (address as ipaddr.IPv6).isIPv4MappedAddress())
      address = (address as ipaddr.IPv6).toIPv4Address();
    if (address.range() === 'loopback') return true;
    return allowed.some(([net, bits]) => net.kind() === address.kind() && address.match(net, bits));
  };
  let running = 0;
  const reply = (res: ServerResponse, status: number, text: string): void => {
    res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8' }).end(text);
  };

  const answer = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (!permitted(req.socket.remoteAddress)) {
      req.socket.destroy();
      return;
    }
    const url = new URL(req.url ?? '/', 'http://proxy');
    const endpoint = url.pathname.replace(/6$/, '');
    const q = url.searchParams.get('q') ?? '';
    if (req.method !== 'GET' || (endpoint !== '/bird' && endpoint !== '/traceroute') || q === '')
      return reply(res, 500, 'Invalid Request\n');
    if (running >= LG_QUERIES_PER_ROUTER)
      return reply(
        res,
        503,
        `Too many concurrent requests (${LG_QUERIES_PER_ROUTER}). Please try again later.\n`,
      );
    running++;
    const started = Date.now();
    try {
      if (endpoint === '/bird') {
        const checked = birdLgCommand(q);
        if ('refused' in checked) return reply(res, 403, `Forbidden: ${checked.refused}\n`);
        const out = await birdText(bird, checked.command, bounds);
        log.info(
          { lg: { proxy: 'bird-lg-go', from: req.socket.remoteAddress, command: checked.command } },
          `looking-glass query answered in ${Date.now() - started} ms`,
        );
        return reply(res, 200, `${out.output}\n${notes(out)}`);
      }
      const target = q.trim();
      const why = lgTargetProblem(target, 'traceroute', false);
      if (why) return reply(res, 400, `Invalid target: ${target} ${saidText(why)}\n`);
      const out = await answerQuery({ id: 'bird-lg-go', op: 'traceroute', target }, bird, bounds);
      log.info(
        { lg: { proxy: 'bird-lg-go', from: req.socket.remoteAddress, op: 'traceroute', target } },
        `looking-glass query answered in ${Date.now() - started} ms`,
      );
      return reply(res, 200, `${out.output.trimEnd()}\n${notes(out)}`);
    } finally {
      running--;
    }
  };

  const server = createServer((req, res) => {
    answer(req, res).catch((err: Error) => {
      log.warn({ err: err.message }, 'bird-lg-go query failed');
      if (res.headersSent) res.destroy();
      else reply(res, 500, `${err.message}\n`);
    });
  });
  // a query takes at most its bound; a client that sends nothing for longer is dropped
  server.requestTimeout = bounds.timeMs + 5_000;
  server.headersTimeout = 10_000;
  const { host, port } = parseListen(options.listen);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  log.info({ listen: options.listen }, 'bird-lg-go proxy listening');
  return server;
}

/** What bird-lg-go's proxy cannot say: the answer was cut at a bound. */
function notes(answer: { timedOut: boolean; truncated: boolean }): string {
  return [
    answer.timedOut ? '(stopped at the 10 s bound)\n' : '',
    answer.truncated ? '(output cut at 256 KiB)\n' : '',
  ].join('');
}
