/**
 * What the agent runs for each looking-glass operation (docs/agent.md, Looking glass): ping and
 * traceroute (mtr where installed) as programs, the rest as BIRD commands on its control socket. The
 * controller checked every argument; they are checked again here, since nothing reaches a command that
 * this module did not build.
 */
import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import {
  LG_OUTPUT_LIMIT_BYTES,
  LG_PAGE_DEFAULT,
  LG_TIME_LIMIT_MS,
  type LgAnswer,
  type LgQuery,
  type LgRoaState,
  type LgRouteVerdict,
} from '../../common/looking-glass.ts';
import { lgTargetProblem } from '../../common/looking-glass-target.ts';
import { isIpv6 } from '../../common/net.ts';
import type { BirdControl, Reply } from '../bird/control.ts';
import { ROA_TABLES } from '../bird/main-config.ts';
import { sessionProtocolName, sessionProtocols } from '../bird/names.ts';
import { cutUtf8, runBounded, type Bounds } from './bounded.ts';
import { saidText } from '../../common/messages.ts';

export const LG_BOUNDS: Bounds = { timeMs: LG_TIME_LIMIT_MS, outputBytes: LG_OUTPUT_LIMIT_BYTES };

/**
 * The BIRD protocols of the session on a listen port, the link-local one first: the agent's own names,
 * or the hand-made ones an adopted session keeps (docs/agent.md, Adopting a running router).
 */
export type ProtocolsOf = (listenPort: number) => readonly string[];
const ownProtocols: ProtocolsOf = (listenPort) => sessionProtocols({ listenPort });

/** Programs tried for traceroute, in order: the first one installed runs. */
const TRACE_PROGRAMS = (target: string): [string, string[]][] => {
  const family = isIpv6(target) ? '-6' : '-4';
  return [
    ['mtr', [family, '--report', '--no-dns', '--report-cycles', '2', target]],
    ['traceroute', [family, '-n', '-q', '1', '-w', '1', '-m', '30', target]],
  ];
};

/** Runs one query within `bounds`; a failure of BIRD or of the program is an answer too. */
export async function answerQuery(
  query: LgQuery,
  bird: BirdControl,
  bounds = LG_BOUNDS,
  protocolsOf: ProtocolsOf = ownProtocols,
): Promise<LgAnswer> {
  switch (query.op) {
    case 'ping': {
      const target = checkedTarget(query, 'ping');
      // four probes half a second apart, each waited for 1 s: done well inside the bound
      const family = isIpv6(target) ? '-6' : '-4';
      return runBounded('ping', [family, '-n', '-c', '4', '-i', '0.5', '-W', '1', target], bounds);
    }
    case 'traceroute': {
      const target = checkedTarget(query, 'traceroute');
      for (const [program, args] of TRACE_PROGRAMS(target))
        if (await installed(program)) return runBounded(program, args, bounds);
      return {
        output: 'neither mtr nor traceroute is installed on this router',
        truncated: false,
        timedOut: false,
      };
    }
    case 'route': {
      const target = checkedTarget(query, 'route');
      const from = query.listenPort === undefined ? '' : ` protocol ${protocolsOf(query.listenPort)[0]}`;
      return birdText(bird, `show route for ${target}${from} all`, bounds);
    }
    case 'protocol': {
      // the session's protocol and, for a peer without multiprotocol BGP, its IPv4 one (names.ts)
      const port = portOf(query);
      const names = protocolsOf(port);
      if (names[0] === sessionProtocolName(port))
        return birdText(bird, `show protocols all "${names[0]}*"`, bounds);
      // adopted: names of the hand-made files' own, asked one by one
      const answers: LgAnswer[] = [];
      for (const name of names) answers.push(await birdText(bird, `show protocols all "${name}"`, bounds));
      return {
        output: answers.map((a) => a.output).join('\n'),
        truncated: answers.some((a) => a.truncated),
        timedOut: answers.some((a) => a.timedOut),
      };
    }
    case 'routes':
      return routesPage(query, bird, bounds, protocolsOf);
  }
}

/**
 * Is `program` on PATH? Asked before running it: under `ip netns exec` (PEEROPS_AGENT_NETNS) a missing
 * program is ip's exit 255, not an error the agent could tell from a failing one.
 */
async function installed(program: string): Promise<boolean> {
  for (const dir of (process.env.PATH ?? '').split(delimiter).filter(Boolean))
    if (
      await access(join(dir, program), constants.X_OK).then(
        () => true,
        () => false,
      )
    )
      return true;
  return false;
}

function checkedTarget(query: LgQuery, op: 'ping' | 'traceroute' | 'route'): string {
  const target = query.target ?? '';
  // admin true: the controller already held a peer to DN42's ranges; here only the form is checked
  const why = lgTargetProblem(target, op, true);
  if (why) throw new Error(`target ${target} ${saidText(why)}`);
  return target;
}

function portOf(query: LgQuery): number {
  if (query.listenPort === undefined) throw new Error(`${query.op} needs the session's listen port`);
  return query.listenPort;
}

/** A BIRD command under the time bound, its reply as BIRD's text (without the line codes). */
async function birdReply(bird: BirdControl, command: string, bounds: Bounds): Promise<Reply | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>(
    (resolve) => (timer = setTimeout(() => resolve(undefined), bounds.timeMs)),
  );
  try {
    return await Promise.race([bird.command(command), late]);
  } finally {
    clearTimeout(timer);
  }
}

export async function birdText(bird: BirdControl, command: string, bounds: Bounds): Promise<LgAnswer> {
  const reply = await birdReply(bird, command, bounds);
  if (!reply) return { output: '', truncated: false, timedOut: true };
  return cut(reply.lines.map((l) => l.text).join('\n'), bounds);
}

function cut(text: string, bounds: Bounds): LgAnswer {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= bounds.outputBytes) return { output: text, truncated: false, timedOut: false };
  return { output: cutUtf8(bytes.subarray(0, bounds.outputBytes)), truncated: true, timedOut: false };
}

/** `Table master6:`, the header BIRD prints before a table's routes. */
const TABLE_LINE = /^Table \S+:$/;
/**
 * The first line of a route: its protocol and since in brackets (`fd42::/48  unicast [dn42_1 12:00] …`,
 * or indented for another route to the same prefix); a `via` line under it has none.
 */
const ROUTE_LINE = /\[\S+ [^\]]*\]/;

/**
 * BIRD's roa_check of a route against the ROA tables the RPKI protocols fill (main-config.ts), with the
 * route's origin AS, as the import filter judges it.
 */
const roaIs = (state: 'ROA_VALID' | 'ROA_INVALID') =>
  `where (net.type = NET_IP6 && roa_check(${ROA_TABLES.ipv6}, net, bgp_path.last) = ${state})` +
  ` || (net.type = NET_IP4 && roa_check(${ROA_TABLES.ipv4}, net, bgp_path.last) = ${state})`;

/** A route as BIRD printed it (its lines) and the prefix it is for. */
interface PrintedRoute {
  net: string;
  text: string;
}

/**
 * The routes of a reply, each its first line (code 1007, its protocol in brackets) and the attribute
 * lines after it; a route indented under another is for the same prefix.
 */
function printedRoutes(reply: Reply): PrintedRoute[] {
  const routes: PrintedRoute[] = [];
  let net = '';
  for (const line of reply.lines) {
    if (TABLE_LINE.test(line.text)) continue;
    if (line.code === 1007 && ROUTE_LINE.test(line.text)) {
      if (!/^\s/.test(line.text)) net = line.text.split(/\s+/, 1)[0] ?? '';
      routes.push({ net, text: line.text });
    } else if (line.code >= 1007 && line.code <= 1012 && routes.length > 0)
      routes[routes.length - 1]!.text += `\n${line.text}`;
  }
  return routes;
}

/**
 * One page of the routes of a session (docs/api.md, Looking glass), each with the filter's verdict and its
 * ROA state. Received: those BIRD accepted from the session (`show route protocol`) and those its import
 * filter rejected (`… filtered`: the template keeps them, `import keep filtered`). Exported: those it
 * sends (`show route export`) and those its export filter holds back (`show route noexport`). Over the
 * session's protocols (its IPv4 one exists only without multiprotocol BGP).
 */
async function routesPage(
  query: LgQuery,
  bird: BirdControl,
  bounds: Bounds,
  protocolsOf: ProtocolsOf,
): Promise<LgAnswer> {
  const port = portOf(query);
  const sets =
    query.direction === 'exported'
      ? ([
          ['accepted', 'export'],
          ['rejected', 'noexport'],
        ] as const)
      : ([
          ['accepted', 'protocol'],
          ['rejected', 'protocol'],
        ] as const);
  const routes: (PrintedRoute & { verdict: LgRouteVerdict; roa: LgRoaState })[] = [];
  const started = Date.now();
  const ask = (command: string) =>
    birdReply(bird, command, { ...bounds, timeMs: bounds.timeMs - (Date.now() - started) });
  const timedOut = (): LgAnswer => ({
    output: routes.map((r) => r.text).join('\n'),
    truncated: false,
    timedOut: true,
  });
  for (const protocol of protocolsOf(port)) {
    for (const [verdict, verb] of sets) {
      const base = `show route ${verb} ${protocol}${verdict === 'rejected' && verb === 'protocol' ? ' filtered' : ''}`;
      const reply = await ask(`${base} all`);
      if (!reply) return timedOut();
      // 8xxx/9xxx: no such protocol
      if (reply.code >= 8000) break;
      const printed = printedRoutes(reply);
      if (printed.length === 0) continue;
      const roa = new Map<string, LgRoaState>();
      for (const state of ['valid', 'invalid'] as const) {
        const judged = await ask(`${base} ${roaIs(state === 'valid' ? 'ROA_VALID' : 'ROA_INVALID')}`);
        if (!judged) return timedOut();
        for (const r of printedRoutes(judged)) roa.set(r.net, state);
      }
      for (const r of printed) routes.push({ ...r, verdict, roa: roa.get(r.net) ?? 'unknown' });
    }
  }
  const offset = query.offset ?? 0;
  const limit = query.limit ?? LG_PAGE_DEFAULT;
  const page = routes.slice(offset, offset + limit);
  return {
    ...cut(page.map((r) => r.text).join('\n'), bounds),
    page: { offset, limit, total: routes.length },
    routes: page.map(({ net, verdict, roa }) => ({ net, verdict, roa })),
  };
}
