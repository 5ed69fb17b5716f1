/**
 * `peerops session list|show|create|modify|delete|restart|config`: the user's sessions over POST /session.
 * A session is named by its UUID or a unique prefix of it (docs/cli.md).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { PEER_CONFIG_FORMATS } from '../common/peer-config/formats.ts';
import { writeConfigFiles } from './config-files.ts';
import { showable } from '../common/text.ts';
import { englishText } from '../common/messages.ts';
import { SessionStatus } from '../common/status.ts';
import {
  CliError,
  Client,
  COMMON_OPTIONS,
  type Format,
  output,
  outputFormat,
  parseFlags,
  resolveUuid,
  run,
  table,
  unknownWord,
} from './client.ts';
import type { SessionRecord } from '../controller/api/responses.ts';
import type { LgAnswer } from '../common/looking-glass.ts';
import { lgText } from './lg.ts';
import { HISTORY_RANGE_NAMES, type SessionHistoryResponse } from '../common/history.ts';
import { historyTable } from './history.ts';

export const ACTIONS = [
  'list',
  'show',
  'create',
  'modify',
  'delete',
  'restart',
  'config',
  'routes',
  'protocol',
  'history',
] as const;

const USAGE = `usage: peerops session <action> [options]

  list [--watch]                         your sessions (admins: all); --watch: then each change as it happens
  show UUID                              one session (UUID or a unique prefix of it)
  create --router R --ipv6 ADDR --link-local ADDR --public-key KEY
         [--endpoint HOST:PORT] [--ipv4 ADDR] [--mtu N] [--no-mpbgp] [--no-extended-next-hop]
  modify UUID [--public-key KEY] [--link-local ADDR] [--ipv6 ADDR] [--ipv4 ADDR | --no-ipv4]
         [--endpoint HOST:PORT | --no-endpoint] [--mtu N] [--mpbgp | --no-mpbgp]
         [--extended-next-hop | --no-extended-next-hop]
                                         change what you give; a new address (and, where the policy
                                         says so, a new key) waits for a review again
  delete UUID
  restart UUID
  config UUID --format wg-quick|networkd|bird|frr [--out DIR]
                                         your side's configuration: printed, or written into DIR
                                         (BIRD, FRR and networkd files 640 in the daemon's group,
                                         wg-quick 600; the private key is a placeholder to replace)
  routes UUID --received|--exported [--offset N] [--page-size N]
                                         the routes the router accepted from the session, or sends
                                         to it, as BIRD shows them (a page: 100 by default)
  protocol UUID                          the session's BGP protocol on the router (show protocols all)
  history UUID [--range 24h|7d|30d]      RTT, traffic and routes over time (default: the last 24 h)

common: --url URL (or PEEROPS_URL), --context NAME (or PEEROPS_CONTEXT), --token TOKEN (default: the
        context's), -o table|wide|json|yaml (--json = -o json)`;

export const OPTIONS = {
  ...COMMON_OPTIONS,
  router: { type: 'string' },
  ipv6: { type: 'string' },
  ipv4: { type: 'string' },
  'link-local': { type: 'string' },
  endpoint: { type: 'string' },
  'no-endpoint': { type: 'boolean' },
  'public-key': { type: 'string' },
  mtu: { type: 'string' },
  'no-ipv4': { type: 'boolean' },
  mpbgp: { type: 'boolean' },
  'no-mpbgp': { type: 'boolean' },
  'extended-next-hop': { type: 'boolean' },
  'no-extended-next-hop': { type: 'boolean' },
  watch: { type: 'boolean' },
  format: { type: 'string' },
  out: { type: 'string' },
  received: { type: 'boolean' },
  exported: { type: 'boolean' },
  offset: { type: 'string' },
  'page-size': { type: 'string' },
  range: { type: 'string' },
} as const;

/** `--NAME` true, `--no-NAME` false, neither undefined; both is a usage error. */
function toggle(
  values: Partial<Record<'mpbgp' | 'no-mpbgp' | 'extended-next-hop' | 'no-extended-next-hop', boolean>>,
  name: 'mpbgp' | 'extended-next-hop',
): boolean | undefined {
  const on = values[name] === true;
  const off = values[`no-${name}`] === true;
  if (on && off) throw new CliError('USAGE', `--${name} and --no-${name} exclude each other`);
  return on ? true : off ? false : undefined;
}

interface ConfigAnswer {
  format: string;
  files: { name: string; content: string }[];
}

/** A timestamp to the second. */
const stamp = (iso: string): string => iso.replace(/\.\d+Z$/, 'Z');

/** BIRD's BGP state and since when, e.g. `Established since 2026-11-25T21:00:00Z`; `-` before a report. */
function bgp(s: SessionRecord): string {
  if (!s.bgpState) return '-';
  return s.bgpSince ? `${s.bgpState} since ${stamp(s.bgpSince)}` : s.bgpState;
}

/**
 * Who a session not up yet waits for, in words (docs/cli.md): an administrator while it is in review,
 * else who common/waiting.ts names (the portal says the same).
 */
function waitingWords(s: SessionRecord): string {
  if (s.status === SessionStatus.PENDING_REVIEW) return "an administrator's review (approve or reject)";
  if (!s.waiting) return '-';
  const since = s.waiting.since ? stamp(s.waiting.since) : '-';
  if (s.waiting.for === 'peer')
    return `the peer since ${since}: the router is ready; configure WireGuard and BGP with the generated files (peerops session config ${s.uuid} --format wg-quick|networkd|bird|frr)`;
  if (s.waiting.for === 'agent')
    return `the router's agent, silent since ${since}: it may be down; tell the network's operators`;
  return `the router since ${since}: its agent sets the session up (seconds)`;
}

/** The status column: a queued session's name says who it waits for. */
const statusCell = (s: SessionRecord): string =>
  s.waiting ? `${s.statusName} (waiting for ${s.waiting.for})` : s.statusName;

const DONE = { reject: 'rejected', disable: 'turned off', purge: 'purged' } as const;

/** An admin's decision in words (docs/cli.md), e.g. `rejected by admin AS4242420000 at …: reason`. */
function decisionWords(d: NonNullable<SessionRecord['decision']>): string {
  return `${DONE[d.action]} by ${d.by} at ${stamp(d.at)}: ${d.reason ?? 'no reason given'}`;
}

function intFlag(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^[0-9]+$/.test(value)) throw new CliError('USAGE', `--${name} must be a whole number`);
  return Number(value);
}

/**
 * A change in review (docs/api.md, modify): the router's status and each value it still runs where the
 * change differs, e.g. `ACTIVE until reviewed; ipv6 fd42:1::1 (asked: fd42:1::2)`.
 */
function approvedWords(s: SessionRecord, a: NonNullable<SessionRecord['approved']>): string {
  const fields = [
    'ipv6',
    'ipv6LinkLocal',
    'ipv4',
    'endpoint',
    'publicKey',
    'mtu',
    'mpbgp',
    'extendedNextHop',
  ] as const;
  const differing = fields
    .filter((f) => a[f] !== s[f])
    .map((f) => `${f} ${String(a[f] ?? '-')} (asked: ${String(s[f] ?? '-')})`);
  return [`${a.statusName} until reviewed`, ...differing].join('; ');
}

function describe(s: SessionRecord): string {
  const rows: [string, string][] = [
    ['uuid', s.uuid],
    ['router', `${s.router} (${s.routerName})`],
    ['status', `${s.status} ${s.statusName}`],
    ['waiting for', waitingWords(s)],
    ['bgp', bgp(s)],
    ['last handshake', s.lastHandshake ?? '-'],
    ['network asn', s.networkAsn ? String(s.networkAsn) : '-'],
    ['ipv6', s.ipv6 || '-'],
    ['link-local', s.ipv6LinkLocal],
    ['ipv4', s.ipv4 ?? '-'],
    ['public key', s.publicKey],
    ['endpoint', s.endpoint ?? '-'],
    ['mtu', String(s.mtu)],
    ['mp-bgp', s.mpbgp ? 'yes' : 'no'],
    ['extended next hop', s.extendedNextHop ? 'yes' : 'no'],
    ['interface', s.interface],
    ['server endpoint', s.serverEndpoint],
    ['server public key', s.serverPublicKey ?? '-'],
    ['server link-local', s.serverLinkLocal ?? '-'],
  ];
  if (s.approved) rows.push(['on the router', approvedWords(s, s.approved)]);
  if (s.adopted) {
    const a = s.adopted;
    rows.push(['adopted', `from ${a.files.join(', ')} by ${a.by} at ${stamp(a.at)}`]);
    rows.push(['kept names', `interface ${a.interface}, BIRD protocols ${a.protocols.join(', ')}`]);
  }
  if (s.lastError) rows.push(['last error', `${s.lastError.code}: ${s.lastError.message}`]);
  if (s.decision) rows.push(['decision', decisionWords(s.decision)]);
  if (s.decision?.until) rows.push(['shown until', `${stamp(s.decision.until)}, then removed`]);
  return rows.map(([k, v]) => `${k.padEnd(18)}${showable(v)}`).join('\n');
}

/**
 * What `list --watch` tells changes of, by name. Metrics and handshakes move at every report of the agent
 * and would bury the rest.
 */
const WATCHED: Record<string, (s: SessionRecord) => string> = {
  status: statusCell,
  bgp: (s) => s.bgpState ?? '-',
  'last error': (s) => (s.lastError ? `${s.lastError.code}: ${s.lastError.message}` : '-'),
  endpoint: (s) => s.endpoint ?? '-',
  mtu: (s) => String(s.mtu),
};

/** One line per session that came, went or changed from `before` to `after` (docs/cli.md, --watch). */
function changes(before: SessionRecord[], after: SessionRecord[], at: string): string[] {
  const old = new Map(before.map((s) => [s.uuid, s]));
  const lines: string[] = [];
  for (const s of after) {
    const was = old.get(s.uuid);
    old.delete(s.uuid);
    const what =
      was === undefined
        ? [`new, ${statusCell(s)}`]
        : Object.entries(WATCHED).flatMap(([name, get]) =>
            get(was) === get(s) ? [] : [`${name} ${get(was)} -> ${get(s)}`],
          );
    if (what.length > 0) lines.push(`${at}  ${s.uuid}  ${s.router}  AS${s.asn}  ${what.join(', ')}`);
  }
  for (const s of old.values()) lines.push(`${at}  ${s.uuid}  ${s.router}  AS${s.asn}  gone`);
  return lines.map((line) => showable(line));
}

/** A dropped stream is asked for again after this; the controller suggests as much (`retry:`). */
const RECONNECT_MS = 3000;

/**
 * `list --watch`, after the list `shown`: the controller's live updates (docs/api.md, Live updates) until
 * it ends the stream for the token (exit 1) or the user stops it; a lost connection is opened again.
 */
async function watchList(client: Client, format: Format, shown: SessionRecord[]): Promise<number> {
  let last = shown;
  for (;;) {
    try {
      for await (const e of client.events('/session/events')) {
        if (e.event === 'end') {
          const end = JSON.parse(e.data) as { code: string; detail: string };
          throw new CliError(end.code, end.detail);
        }
        if (e.event !== 'sessions') continue;
        const { sessions } = JSON.parse(e.data) as { sessions: SessionRecord[] };
        if (format === 'json' || format === 'yaml') {
          // one document per change, whole: a program reading them needs no state
          if (JSON.stringify(sessions) !== JSON.stringify(last)) {
            if (format === 'yaml') console.log('---');
            output(format, { sessions }, () => '');
          }
        } else for (const line of changes(last, sessions, stamp(new Date().toISOString()))) console.log(line);
        last = sessions;
      }
    } catch (err) {
      if (!(err instanceof CliError) || err.code !== 'UNREACHABLE') throw err;
      console.error(`${err.message}; trying again in ${RECONNECT_MS / 1000} s`);
    }
    await sleep(RECONNECT_MS);
  }
}

export async function main(argv: string[]): Promise<number> {
  return run(async () => {
    const { values, positionals } = parseFlags(argv, OPTIONS);
    const [action, uuid] = positionals;
    if (values.help || !action) {
      console.log(USAGE);
      return values.help ? 0 : 2;
    }
    if (!(ACTIONS as readonly string[]).includes(action))
      throw unknownWord('session action', action, ACTIONS);
    if (values.watch && action !== 'list') throw new CliError('USAGE', '--watch goes with list only');
    const format = outputFormat(values);
    const client = await Client.create({ url: values.url, token: values.token, context: values.context });
    const list = async () =>
      (await client.post<{ sessions: SessionRecord[] }>('/session', { action: 'list' })).sessions;
    const needUuid = async (): Promise<string> => {
      if (!uuid) throw new CliError('USAGE', `${action} needs the session UUID`);
      return resolveUuid(uuid, async () => (await list()).map((s) => s.uuid));
    };
    switch (action) {
      case 'list': {
        const sessions = await list();
        const res = { sessions };
        // the last error, or else why an admin rejected, turned off or purged it
        const error = (s: SessionRecord) =>
          s.lastError
            ? `${s.lastError.code}: ${s.lastError.message}`.slice(0, 60)
            : s.decision
              ? `${DONE[s.decision.action]}: ${s.decision.reason ?? 'no reason given'}`.slice(0, 60)
              : null;
        output(
          format,
          res,
          () =>
            sessions.length === 0
              ? 'no sessions'
              : table(
                  ['UUID', 'ROUTER', 'ASN', 'STATUS', 'BGP', 'IPV6', 'ENDPOINT', 'MTU', 'LAST ERROR'],
                  sessions.map((s) => [
                    s.uuid,
                    s.router,
                    s.asn,
                    statusCell(s),
                    s.bgpState ?? '-',
                    s.ipv6 || '-',
                    s.endpoint,
                    s.mtu,
                    error(s),
                  ]),
                ),
          () =>
            sessions.length === 0
              ? 'no sessions'
              : table(
                  // wide: what configuring your side needs, too
                  [
                    'UUID',
                    'ROUTER',
                    'ASN',
                    'STATUS',
                    'BGP',
                    'LAST HANDSHAKE',
                    'IPV6',
                    'LINK-LOCAL',
                    'ENDPOINT',
                    'MTU',
                    'INTERFACE',
                    'SERVER ENDPOINT',
                    'LAST ERROR',
                  ],
                  sessions.map((s) => [
                    s.uuid,
                    s.router,
                    s.asn,
                    statusCell(s),
                    bgp(s),
                    s.lastHandshake ?? '-',
                    s.ipv6 || '-',
                    s.ipv6LinkLocal,
                    s.endpoint,
                    s.mtu,
                    s.interface,
                    s.serverEndpoint,
                    error(s),
                  ]),
                ),
        );
        return values.watch ? watchList(client, format, sessions) : 0;
      }
      case 'show': {
        const id = await needUuid();
        const s = (await list()).find((x) => x.uuid === id);
        if (!s) throw new CliError('SESSION_NOT_FOUND', englishText('session.notFound', { uuid: id }));
        output(format, s, () => describe(s));
        return 0;
      }
      case 'create': {
        const missing = ['router', 'ipv6', 'link-local', 'public-key'].filter(
          (k) => values[k as keyof typeof values] === undefined,
        );
        if (missing.length)
          throw new CliError('USAGE', `create needs ${missing.map((m) => `--${m}`).join(', ')}`);
        const body: Record<string, unknown> = {
          action: 'create',
          router: values.router,
          ipv6: values.ipv6,
          linkLocal: values['link-local'],
          publicKey: values['public-key'],
        };
        if (values.endpoint !== undefined) body.endpoint = values.endpoint;
        if (values.ipv4 !== undefined) body.ipv4 = values.ipv4;
        const mtu = intFlag('mtu', values.mtu);
        if (mtu !== undefined) body.mtu = mtu;
        if (values['no-endpoint'] || values['no-ipv4'])
          throw new CliError('USAGE', 'create takes --endpoint and --ipv4, or leaves them out');
        const mpbgp = toggle(values, 'mpbgp');
        if (mpbgp !== undefined) body.mpbgp = mpbgp;
        const enh = toggle(values, 'extended-next-hop');
        if (enh !== undefined) body.extendedNextHop = enh;
        const res = await client.post<Record<string, string | number>>('/session', body);
        output(format, res, () =>
          [
            `created session ${res.uuid} (${res.statusName})`,
            `configure your side with:`,
            `  endpoint    ${res.serverEndpoint}`,
            `  public key  ${res.serverPublicKey}`,
            `  link-local  ${res.serverLinkLocal}`,
            ...(res.serverIpv4 ? [`  ipv4        ${res.serverIpv4} (the far end of your tunnel IPv4)`] : []),
            `or get the files: peerops session config ${res.uuid} --format wg-quick|networkd|bird|frr`,
          ].join('\n'),
        );
        return 0;
      }
      case 'modify': {
        const body: Record<string, unknown> = { action: 'modify', uuid: await needUuid() };
        if (values.router !== undefined)
          throw new CliError('USAGE', 'a session stays on its router: delete it and create one on the other');
        const nullable = { endpoint: 'endpoint', ipv4: 'ipv4' } as const;
        for (const [flag, field] of Object.entries(nullable) as [keyof typeof nullable, string][]) {
          if (values[flag] !== undefined && values[`no-${flag}`])
            throw new CliError('USAGE', `--${flag} and --no-${flag} exclude each other`);
          if (values[flag] !== undefined) body[field] = values[flag];
          if (values[`no-${flag}`]) body[field] = null;
        }
        if (values['public-key'] !== undefined) body.publicKey = values['public-key'];
        if (values['link-local'] !== undefined) body.linkLocal = values['link-local'];
        if (values.ipv6 !== undefined) body.ipv6 = values.ipv6;
        const mtu = intFlag('mtu', values.mtu);
        if (mtu !== undefined) body.mtu = mtu;
        const mpbgp = toggle(values, 'mpbgp');
        if (mpbgp !== undefined) body.mpbgp = mpbgp;
        const enh = toggle(values, 'extended-next-hop');
        if (enh !== undefined) body.extendedNextHop = enh;
        if (Object.keys(body).length === 2)
          throw new CliError(
            'USAGE',
            'modify needs something to change: --public-key, --link-local, --ipv6, --ipv4/--no-ipv4, --endpoint/--no-endpoint, --mtu, --[no-]mpbgp or --[no-]extended-next-hop',
          );
        const res = await client.post<SessionRecord>('/session', body);
        output(format, res, () => describe(res));
        return 0;
      }
      case 'config': {
        const id = await needUuid();
        if (values.format === undefined)
          throw new CliError('USAGE', `config needs --format ${PEER_CONFIG_FORMATS.join('|')}`);
        const wanted = PEER_CONFIG_FORMATS.find((f) => f === values.format);
        if (wanted === undefined) throw unknownWord('format', values.format, PEER_CONFIG_FORMATS);
        const res = await client.post<ConfigAnswer>('/session', {
          action: 'config',
          uuid: id,
          format: wanted,
        });
        if (values.out !== undefined) {
          const written = await writeConfigFiles(values.out, wanted, res.files);
          output(format, { ...res, written: written.map((w) => w.path) }, () =>
            written.map((w) => `wrote ${w.path} (${w.note})`).join('\n'),
          );
        } else
          output(format, res, () =>
            res.files.length === 1
              ? (res.files[0]?.content ?? '').trimEnd()
              : res.files.map((f) => `# ---- ${f.name}\n${f.content.trimEnd()}`).join('\n\n'),
          );
        return 0;
      }
      case 'routes': {
        if (values.received === values.exported)
          throw new CliError('USAGE', 'routes needs one of --received or --exported');
        const offset = intFlag('offset', values.offset);
        const limit = intFlag('page-size', values['page-size']);
        const res = await client.post<LgAnswer>('/lg', {
          op: 'routes',
          session: await needUuid(),
          direction: values.received ? 'received' : 'exported',
          ...(offset !== undefined ? { offset } : {}),
          ...(limit !== undefined ? { limit } : {}),
        });
        output(format, res, () => lgText(res));
        return 0;
      }
      case 'protocol': {
        const res = await client.post<LgAnswer>('/lg', { op: 'protocol', session: await needUuid() });
        output(format, res, () => lgText(res));
        return 0;
      }
      case 'history': {
        const range = values.range ?? '24h';
        if (!(HISTORY_RANGE_NAMES as readonly string[]).includes(range))
          throw unknownWord('range', range, HISTORY_RANGE_NAMES);
        const id = await needUuid();
        const res = await client.get<SessionHistoryResponse>(
          `/session/${id}/history?range=${encodeURIComponent(range)}`,
        );
        output(format, res, () => historyTable(res));
        return 0;
      }
      case 'delete':
      case 'restart': {
        const res = await client.post<SessionRecord | { uuid: string; deleted: true }>('/session', {
          action,
          uuid: await needUuid(),
        });
        output(format, res, () => ('deleted' in res ? `session ${res.uuid} removed` : describe(res)));
        return 0;
      }
      default:
        throw unknownWord('session action', action, ACTIONS);
    }
  });
}
