/**
 * `peerops admin …`: `token` mints a JWT from the controller's key in the data dir (operator access to the
 * data dir is the root of trust); `session`, `router`, `policy` and `store` drive the admin API over HTTP.
 *
 * Over 500 lines: one command family with five areas, each a thin parse → request → print; the
 * shared table and client code lives in cli/client.ts.
 */
import { readFile } from 'node:fs/promises';
import { formatEndpoint, prefixProblem } from '../common/net.ts';
import { announcesNoPrefix, NO_OWN_PREFIX_WARNING } from '../common/rules/policy.ts';
import { SessionStatus } from '../common/status.ts';
import { showable } from '../common/text.ts';
import {
  checkUrl,
  CliError,
  Client,
  COMMON_OPTIONS,
  DEFAULT_URL,
  type Format,
  output,
  outputFormat,
  parseFlags,
  resolveUuid,
  run,
  table,
  unknownWord,
} from './client.ts';
import { conditionsCell, conditionsTable, conditionWarnings, type ConditionsOf } from './conditions.ts';
import { contextName, saveContext } from './config.ts';
import type {
  AdminRouterRecord as AdminRouter,
  AdminSessionRecord as SessionRecord,
} from '../controller/api/responses.ts';
import type { StoreStatusAnswer } from '../controller/api/store-status.ts';
import { saidText } from '../common/messages.ts';

const USAGE = `usage: peerops admin <area> <action> [options]

  token --data DIR --asn N [--admin] [--ttl SECONDS] [--save]
        mint a JWT with the controller's key (<DIR>/jwt-ed25519.pem, DIR from --data or PEEROPS_DATA;
        or PEEROPS_JWT_KEY_FILE); the key must exist (peerops serve creates it on first start).
        Prints the token, and its id on stderr
  token revoke ID | token revoke --asn N   revoke one token by its id, or every token of an ASN so far
  token list                               the revoked tokens and ASNs
  session list [--router R] [--asn N] [--status CODE|NAME]   (e.g. 3 or PENDING_REVIEW)
  session approve|reject|disable|enable UUID [--reason TEXT]
  session purge UUID --reason TEXT   end a session stuck in QUEUED_FOR_DELETE (its agent never tore it down)
  router list
  router add NAME --spec FILE | --display-name .. --node-id .. --region .. --endpoint-host ..
             --public-key .. --link-local .. --loopback-ipv6 .. and/or --loopback-ipv4 .. [--location ..]
             [--provider ..] [--dn42-region NAME] [--max-sessions N] [--auto-approve] [--not-accepting]
  router update NAME [same fields as add] [--clear FIELD ...]
        --clear (repeatable) removes an optional field: location, provider, dn42-region, max-sessions,
        port-range (back to the default), loopback-ipv4 or loopback-ipv6 (the other one stays)
  router remove NAME
  router rotate-token NAME
  policy get [--router R]
  policy set [--router R] [--spec FILE] [--dn42-asn N] [--own-prefix PREFIX ...] [--rpki HOST:PORT ...]
             [--block ASN ...] [--unblock ASN ...] [--max-pending N]
             [--allow-private-endpoints | --no-allow-private-endpoints]
             [--review-key-changes | --no-review-key-changes]
        --own-prefix (repeatable, IPv4 and IPv6): the network's own prefixes, announced to peers; the
        flags give the whole list
        with --spec the policy is replaced: what FILE leaves out is removed (FILE: a spec, or get --json)
  policy patch [--router R] [--spec FILE] [the flags of set]
        merges FILE (a JSON Merge Patch, RFC 7386: null removes a field) and the flags into the policy
  store status   the store's conditions, the manifests it skips with why (docs/store.md), and the
                 changes forge edits replaced, with the branch keeping each (docs/gitops.md)
  store clear-conflict ID   an admin resolved that forge conflict: no longer listed

common: --url URL (or PEEROPS_URL), --context NAME (or PEEROPS_CONTEXT), --token TOKEN (default: the
        context's), -o table|wide|json|yaml (--json = -o json)
token --save saves the token as a context (AS<asn>@<host>, or --context NAME) and makes it current`;

export const AREAS = {
  token: ['revoke', 'list'],
  session: ['list', 'approve', 'reject', 'disable', 'enable', 'purge'],
  router: ['list', 'add', 'update', 'remove', 'rotate-token'],
  policy: ['get', 'set', 'patch'],
  store: ['status', 'clear-conflict'],
} as const;

/** The server's token lifetimes (controller/auth/jwt.ts; docs/cli.md): 60 s to 366 days. */
export const TTL_MIN = 60;
export const TTL_MAX = 366 * 24 * 3600;

export const OPTIONS = {
  ...COMMON_OPTIONS,
  data: { type: 'string' },
  asn: { type: 'string' },
  admin: { type: 'boolean' },
  ttl: { type: 'string' },
  save: { type: 'boolean' },
  router: { type: 'string' },
  status: { type: 'string' },
  reason: { type: 'string' },
  spec: { type: 'string' },
  'display-name': { type: 'string' },
  'node-id': { type: 'string' },
  region: { type: 'string' },
  'dn42-region': { type: 'string' },
  location: { type: 'string' },
  provider: { type: 'string' },
  'endpoint-host': { type: 'string' },
  'public-key': { type: 'string' },
  'link-local': { type: 'string' },
  'loopback-ipv4': { type: 'string' },
  'loopback-ipv6': { type: 'string' },
  'max-sessions': { type: 'string' },
  'auto-approve': { type: 'boolean' },
  'no-auto-approve': { type: 'boolean' },
  'not-accepting': { type: 'boolean' },
  accepting: { type: 'boolean' },
  clear: { type: 'string', multiple: true },
  'dn42-asn': { type: 'string' },
  'own-prefix': { type: 'string', multiple: true },
  rpki: { type: 'string', multiple: true },
  block: { type: 'string', multiple: true },
  unblock: { type: 'string', multiple: true },
  'max-pending': { type: 'string' },
  'allow-private-endpoints': { type: 'boolean' },
  'no-allow-private-endpoints': { type: 'boolean' },
  'review-key-changes': { type: 'boolean' },
  'no-review-key-changes': { type: 'boolean' },
} as const;

type Values = ReturnType<typeof parseFlags<typeof OPTIONS>>['values'];

function int(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value.replace(/^AS/i, ''));
  if (!/^(AS)?[0-9]+$/i.test(value) || !Number.isSafeInteger(n))
    throw new CliError('USAGE', `--${name} must be a whole number`);
  return n;
}

async function readSpec(file: string | undefined): Promise<Record<string, unknown>> {
  if (!file) return {};
  try {
    const value: unknown = JSON.parse(await readFile(file, 'utf8'));
    if (!value || typeof value !== 'object' || Array.isArray(value)) throw new Error('not a JSON object');
    return value as Record<string, unknown>;
  } catch (err) {
    throw new CliError('USAGE', `--spec ${file}: ${(err as Error).message}`);
  }
}

/**
 * A policy file: a spec, or what `policy get --json` prints (`{name, spec}`), so that one can be edited and
 * given back. A policy spec has no field `spec`, so the two cannot be mistaken for each other.
 */
async function readPolicyFile(
  file: string,
  name: string | undefined,
): Promise<{ name?: string; spec: Record<string, unknown> }> {
  const value = await readSpec(file);
  if (!Object.hasOwn(value, 'spec')) return { spec: value };
  const { name: named, spec, ...rest } = value;
  const extra = Object.keys(rest);
  if (extra.length > 0 || !spec || typeof spec !== 'object' || Array.isArray(spec))
    throw new CliError(
      'USAGE',
      `--spec ${file}: a policy spec, or {"name", "spec"} as policy get --json prints`,
    );
  if (named !== undefined && typeof named !== 'string')
    throw new CliError('USAGE', `--spec ${file}: "name" must be a policy name`);
  if (named !== undefined && name !== undefined && named !== name)
    throw new CliError('USAGE', `--spec ${file} holds policy ${named}, not ${name} (--router)`);
  return { ...(named !== undefined ? { name: named } : {}), spec: spec as Record<string, unknown> };
}

/**
 * Router fields from flags, on top of --spec. `loopback` is what a single --loopback-ipv4/-ipv6 flag is
 * added to (update: the router's own, so that giving one family keeps the other).
 */
async function routerSpec(
  v: Values,
  loopbackBase?: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const spec = await readSpec(v.spec);
  const set = (key: string, value: unknown) => {
    if (value !== undefined) spec[key] = value;
  };
  set('displayName', v['display-name']);
  set('nodeId', int('node-id', v['node-id']));
  set('region', v.region);
  set('dn42Region', v['dn42-region']);
  set('location', v.location);
  set('provider', v.provider);
  set('endpointHost', v['endpoint-host']);
  set('publicKey', v['public-key']);
  set('linkLocal', v['link-local']);
  set('maxSessions', int('max-sessions', v['max-sessions']));
  if (v['auto-approve']) spec.autoApprove = true;
  if (v['no-auto-approve']) spec.autoApprove = false;
  if (v['not-accepting']) spec.acceptingSessions = false;
  if (v.accepting) spec.acceptingSessions = true;
  if (v['loopback-ipv4'] !== undefined || v['loopback-ipv6'] !== undefined) {
    const loopback = { ...((spec.loopback as Record<string, unknown>) ?? loopbackBase ?? {}) };
    if (v['loopback-ipv4'] !== undefined) loopback.ipv4 = v['loopback-ipv4'];
    if (v['loopback-ipv6'] !== undefined) loopback.ipv6 = v['loopback-ipv6'];
    spec.loopback = loopback;
  }
  return spec;
}

/** What `router update --clear` takes: the spec field it clears (null in the update), or a loopback family. */
const CLEARABLE: Record<string, string> = {
  location: 'location',
  provider: 'provider',
  'dn42-region': 'dn42Region',
  'max-sessions': 'maxSessions',
  'port-range': 'portRange',
  'loopback-ipv4': 'loopback',
  'loopback-ipv6': 'loopback',
};

/**
 * `spec` with the --clear fields cleared: null for a spec field (docs/api.md, router update), the
 * loopback without that family (update replaces loopback whole; `loopbackBase` is the stored one).
 */
function clearFields(
  spec: Record<string, unknown>,
  clear: readonly string[],
  loopbackBase: Record<string, unknown> | undefined,
): Record<string, unknown> {
  const out = { ...spec };
  for (const flag of clear) {
    const field = CLEARABLE[flag];
    if (field === undefined) throw unknownWord('--clear', flag, Object.keys(CLEARABLE));
    if (field !== 'loopback') {
      out[field] = null;
      continue;
    }
    const loopback = { ...((out.loopback as Record<string, unknown>) ?? loopbackBase ?? {}) };
    delete loopback[flag === 'loopback-ipv4' ? 'ipv4' : 'ipv6'];
    out.loopback = loopback;
  }
  return out;
}

/** --status as a code (3) or a name (PENDING_REVIEW, pending_review). */
function statusCode(value: string): number {
  if (/^\d+$/.test(value)) return Number(value);
  const code = (SessionStatus as Record<string, number>)[value.toUpperCase()];
  if (code === undefined)
    throw new CliError(
      'USAGE',
      `--status: one of ${Object.entries(SessionStatus)
        .map(([n, c]) => `${c} ${n}`)
        .join(', ')}`,
    );
  return code;
}

async function mintToken(v: Values): Promise<number> {
  const data = v.data ?? process.env.PEEROPS_DATA;
  if (!data && !process.env.PEEROPS_JWT_KEY_FILE)
    throw new CliError('USAGE', 'token needs --data DIR (or PEEROPS_DATA, or PEEROPS_JWT_KEY_FILE)');
  const asn = int('asn', v.asn);
  if (asn === undefined) throw new CliError('USAGE', 'token needs --asn N');
  const ttl = int('ttl', v.ttl);
  if (ttl !== undefined && (ttl < TTL_MIN || ttl > TTL_MAX))
    throw new CliError('USAGE', `--ttl must be ${TTL_MIN}..${TTL_MAX} seconds (1 minute to 366 days)`);
  const { TokenIssuer, defaultKeyPath } = await import('../controller/auth/jwt.ts');
  const keyFile = process.env.PEEROPS_JWT_KEY_FILE || defaultKeyPath(data ?? '.');
  let issued;
  try {
    // the controller's key or nothing: a new key's tokens would be refused by the controller
    const issuer = await TokenIssuer.fromExistingFile(keyFile);
    issued = issuer.issueToken(asn, v.admin ? 'admin' : 'user', ttl);
  } catch (err) {
    throw new CliError('INVALID_REQUEST', (err as Error).message);
  }
  if (v.save) {
    const url = checkUrl(v.url ?? (process.env.PEEROPS_URL || undefined) ?? DEFAULT_URL);
    const name = v.context ?? contextName(asn, url);
    const { file } = await saveContext({ name, url, token: issued.token });
    console.error(`token saved to ${file} as context ${name} (now current)`);
  }
  // stdout is the token alone (TOKEN=$(peerops admin token …)); the id, which revokes it, beside it
  if (format(v) === 'table' || format(v) === 'wide')
    console.error(`token id ${issued.id} (peerops admin token revoke ${issued.id})`);
  output(format(v), { ...issued, role: v.admin ? 'admin' : 'user', asn }, () => issued.token);
  return 0;
}

interface RevokedToken {
  id: string;
  asn: number;
  expiresAt: string;
}
interface RevokedAsn {
  asn: number;
  issuedUntil: string;
}

/** `admin token revoke|list` (POST /admin/token; docs/login.md, Revoking tokens). */
async function tokenCommand(
  client: Client,
  action: string,
  id: string | undefined,
  v: Values,
): Promise<number> {
  if (action === 'list') {
    const res = await client.post<{ tokens: RevokedToken[]; asns: RevokedAsn[] }>('/admin/token', {
      action: 'list',
    });
    output(format(v), res, () =>
      table(
        ['REVOKED', 'ASN', 'UNTIL'],
        [
          ...res.asns.map((a) => [`every token issued until ${a.issuedUntil}`, a.asn, '']),
          ...res.tokens.map((t) => [t.id, t.asn, t.expiresAt]),
        ],
      ),
    );
    return 0;
  }
  if (action !== 'revoke') throw unknownWord('admin token action', action, AREAS.token);
  const asn = int('asn', v.asn);
  if ((id === undefined) === (asn === undefined))
    throw new CliError('USAGE', 'token revoke needs a token id or --asn N (not both)');
  if (asn !== undefined) {
    const res = await client.post<{ revoked: RevokedAsn }>('/admin/token', { action: 'revoke-asn', asn });
    output(format(v), res, () => `every token of AS${asn} issued until ${res.revoked.issuedUntil} revoked`);
    return 0;
  }
  const res = await client.post<{ revoked: RevokedToken }>('/admin/token', { action: 'revoke', id });
  output(format(v), res, () => `token ${res.revoked.id} of AS${res.revoked.asn} revoked`);
  return 0;
}

function format(v: Values): Format {
  return outputFormat(v);
}

async function sessionCommand(
  client: Client,
  action: string,
  arg: string | undefined,
  v: Values,
): Promise<number> {
  if (action === 'list') {
    const body: Record<string, unknown> = { action: 'list' };
    if (v.router !== undefined) body.router = v.router;
    if (v.asn) body.asn = int('asn', v.asn);
    if (v.status) body.status = statusCode(v.status);
    const res = await client.post<{ sessions: SessionRecord[] }>('/admin/session', body);
    const flagged = res.sessions.flatMap((s) =>
      (s.policyViolations ?? []).map((e) => `  ${s.uuid} ${e.pointer}: ${e.message}`),
    );
    output(format(v), res, () =>
      [
        table(
          ['UUID', 'ROUTER', 'ASN', 'STATUS', 'IPV6', 'IPV4', 'ENDPOINT', 'CREATED', 'POLICY'],
          res.sessions.map((s) => [
            s.uuid,
            s.router,
            s.asn,
            s.statusName,
            s.ipv6 || '-',
            s.ipv4,
            s.endpoint,
            s.createdAt,
            s.policyViolations?.length ? 'violated' : 'ok',
          ]),
        ),
        // a policy tightened after these were stored: approve and enable refuse them (docs/api.md)
        ...(flagged.length > 0 ? ['', 'policy violations:', ...flagged] : []),
      ].join('\n'),
    );
    return 0;
  }
  if (!(AREAS.session as readonly string[]).includes(action))
    throw unknownWord('admin session action', action, AREAS.session);
  if (!arg) throw new CliError('USAGE', `${action} needs the session UUID`);
  // the reason is the audit record of a session removed without its agent (docs/cli.md)
  if (action === 'purge' && !v.reason) throw new CliError('USAGE', 'purge needs --reason TEXT');
  const res = await client.post<{ uuid: string; statusName?: string; deleted?: boolean }>('/admin/session', {
    action,
    uuid: await resolveUuid(arg, async () =>
      (await client.post<{ sessions: SessionRecord[] }>('/admin/session', { action: 'list' })).sessions.map(
        (s) => s.uuid,
      ),
    ),
    ...(v.reason ? { reason: v.reason } : {}),
  });
  output(format(v), res, () =>
    res.deleted ? `session ${res.uuid} removed` : `session ${res.uuid}: ${res.statusName}`,
  );
  return 0;
}

/** A router's AUTO-APPROVE cell: set but without effect here is said, not shown as on. */
function autoApproveCell(r: AdminRouter): string {
  if (r.autoApproveHolds) return 'yes';
  return r.spec.autoApprove ? 'no (set; needs a registry)' : 'no';
}

/** Each router's name and reported conditions, as cli/conditions.ts shows them. */
function conditionsOf(routers: AdminRouter[]): ConditionsOf[] {
  return routers.map((r) => ({ name: r.name, conditions: r.status.conditions }));
}

async function routerCommand(
  client: Client,
  action: string,
  name: string | undefined,
  v: Values,
): Promise<number> {
  if (action === 'list') {
    const res = await client.post<{ routers: AdminRouter[] }>('/admin/router', { action: 'list' });
    output(
      format(v),
      res,
      () =>
        table(
          [
            'NAME',
            'NODE',
            'REGION',
            'ENDPOINT HOST',
            'ACCEPTING',
            'AUTO-APPROVE',
            'AGENT',
            'LAST HEARTBEAT',
            'CONDITIONS',
          ],
          res.routers.map((r) => [
            r.name,
            r.spec.nodeId,
            r.spec.region,
            r.spec.endpointHost,
            r.spec.acceptingSessions === false ? 'no' : 'yes',
            autoApproveCell(r),
            r.status.agentVersion,
            r.status.lastHeartbeat,
            conditionsCell(r.status.conditions),
          ]),
        ) + conditionWarnings(conditionsOf(res.routers)),
      () =>
        // wide: where the router is and what it holds, for planning capacity
        table(
          [
            'NAME',
            'UUID',
            'NODE',
            'REGION',
            'LOCATION',
            'PROVIDER',
            'ENDPOINT HOST',
            'LOOPBACK IPV6',
            'LOOPBACK IPV4',
            'MAX SESSIONS',
            'ACCEPTING',
            'AUTO-APPROVE',
            'AGENT',
            'LAST HEARTBEAT',
            'CONDITIONS',
          ],
          res.routers.map((r) => [
            r.name,
            r.spec.uuid,
            r.spec.nodeId,
            r.spec.region,
            r.spec.location,
            r.spec.provider,
            r.spec.endpointHost,
            r.spec.loopback?.ipv6,
            r.spec.loopback?.ipv4,
            r.spec.maxSessions,
            r.spec.acceptingSessions === false ? 'no' : 'yes',
            autoApproveCell(r),
            r.status.agentVersion,
            r.status.lastHeartbeat,
            conditionsCell(r.status.conditions),
          ]),
        ) +
        conditionsTable(conditionsOf(res.routers), 'ROUTER') +
        conditionWarnings(conditionsOf(res.routers)),
    );
    return 0;
  }
  if (!(AREAS.router as readonly string[]).includes(action))
    throw unknownWord('admin router action', action, AREAS.router);
  if (!name) throw new CliError('USAGE', `router ${action} needs the router name`);
  switch (action) {
    case 'add': {
      const spec = await routerSpec(v);
      const loopback = spec.loopback as { ipv4?: unknown; ipv6?: unknown } | undefined;
      if (loopback?.ipv4 === undefined && loopback?.ipv6 === undefined)
        throw new CliError(
          'USAGE',
          "router add needs --loopback-ipv6 and/or --loopback-ipv4 (the router's own DN42 addresses)",
        );
      const res = await client.post<{ router: AdminRouter; agentToken: string }>('/admin/router', {
        action: 'add',
        name,
        ...spec,
      });
      output(format(v), res, () =>
        [
          `router ${name} added (uuid ${res.router.spec.uuid})`,
          `agent token (shown once, put it in the agent's controlPlane.token):`,
          res.agentToken,
        ].join('\n'),
      );
      return 0;
    }
    case 'update': {
      // update replaces loopback whole: one family's flag (or --clear) alone would drop the other
      const clear = v.clear ?? [];
      let loopbackBase: Record<string, unknown> | undefined;
      if (
        (v['loopback-ipv4'] === undefined) !== (v['loopback-ipv6'] === undefined) ||
        clear.some((c) => c.startsWith('loopback-'))
      ) {
        const { routers } = await client.post<{ routers: AdminRouter[] }>('/admin/router', {
          action: 'list',
        });
        loopbackBase = routers.find((r) => r.name === name)?.spec.loopback;
      }
      const res = await client.post<{ router: AdminRouter }>('/admin/router', {
        action: 'update',
        name,
        spec: clearFields(await routerSpec(v, loopbackBase), clear, loopbackBase),
      });
      output(format(v), res, () => `router ${name} updated`);
      return 0;
    }
    case 'remove': {
      const res = await client.post('/admin/router', { action: 'remove', name });
      output(format(v), res, () => `router ${name} removed`);
      return 0;
    }
    case 'rotate-token': {
      const res = await client.post<{ agentToken: string }>('/admin/router', {
        action: 'rotate-token',
        name,
      });
      output(format(v), res, () =>
        [`new agent token for ${name} (shown once; the old one no longer works):`, res.agentToken].join('\n'),
      );
      return 0;
    }
    default:
      throw unknownWord('admin router action', action, AREAS.router);
  }
}

/**
 * A policy as `field  value` lines: nested fields by their dotted path (communities.enabled), lists on
 * one line, RPKI servers as host:port. Only what the policy sets; the rest is the defaults.
 */
function policyText(name: string, spec: Record<string, unknown>): string {
  const rows: [string, string][] = [['policy', name]];
  const item = (x: unknown): string =>
    x !== null && typeof x === 'object' && 'host' in x && 'port' in x
      ? formatEndpoint(x as { host: string; port: number })
      : typeof x === 'string' || typeof x === 'number' || typeof x === 'boolean'
        ? String(x)
        : JSON.stringify(x);
  const add = (field: string, value: unknown) => {
    if (Array.isArray(value)) rows.push([field, value.length ? value.map(item).join(', ') : '-']);
    else if (value !== null && typeof value === 'object')
      for (const [k, x] of Object.entries(value)) add(`${field}.${k}`, x);
    else rows.push([field, String(value)]);
  };
  for (const [field, value] of Object.entries(spec)) add(field, value);
  if (rows.length === 1) rows.push(['(nothing set)', 'the defaults apply']);
  const width = Math.max(...rows.map(([field]) => field.length)) + 2;
  return rows.map(([field, value]) => `${field.padEnd(width)}${showable(value)}`).join('\n');
}

type PolicyRecord = { name: string; spec: Record<string, unknown> };

/**
 * --own-prefix values as `ownPrefixes`, each read as the controller reads it (common/net.ts), so that a
 * bad one is refused naming the flag; the family is told by the address.
 */
function ownPrefixes(values: string[]): { ipv4: string[]; ipv6: string[] } {
  const own = { ipv4: new Set<string>(), ipv6: new Set<string>() };
  for (const prefix of values) {
    const family = prefix.includes(':') ? 'ipv6' : 'ipv4';
    const problem = prefixProblem(prefix, family);
    if (problem) throw new CliError('USAGE', `--own-prefix '${prefix}' ${saidText(problem)}`);
    own[family].add(prefix);
  }
  return { ipv4: [...own.ipv4], ipv6: [...own.ipv6] };
}

/**
 * --rpki, --block/--unblock (against `blocked`, the stored list), --dn42-asn, --own-prefix,
 * --max-pending, --[no-]allow-private-endpoints and --[no-]review-key-changes as spec fields.
 */
function policyFlags(v: Values, blocked: unknown): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  const asn = int('dn42-asn', v['dn42-asn']);
  if (asn !== undefined) fields.dn42Asn = asn;
  if (v['own-prefix']) fields.ownPrefixes = ownPrefixes(v['own-prefix']);
  if (v.rpki)
    fields.rpkiServers = v.rpki.map((hp) => {
      const m = /^(.+):([0-9]{1,5})$/.exec(hp);
      if (!m) throw new CliError('USAGE', `--rpki '${hp}' is not HOST:PORT`);
      return { host: (m[1] as string).replace(/^\[|\]$/g, ''), port: Number(m[2]) };
    });
  if (v.block || v.unblock) {
    const list = new Set(Array.isArray(blocked) ? (blocked as number[]) : []);
    for (const a of v.block ?? []) list.add(int('block', a) as number);
    for (const a of v.unblock ?? []) list.delete(int('unblock', a) as number);
    fields.blockedAsns = [...list].sort((a, b) => a - b);
  }
  const pending = int('max-pending', v['max-pending']);
  if (pending !== undefined) fields.maxPendingPerAsn = pending;
  if (v['allow-private-endpoints'] && v['no-allow-private-endpoints'])
    throw new CliError('USAGE', 'give --allow-private-endpoints or --no-allow-private-endpoints, not both');
  if (v['allow-private-endpoints']) fields.allowPrivateEndpoints = true;
  if (v['no-allow-private-endpoints']) fields.allowPrivateEndpoints = false;
  if (v['review-key-changes'] && v['no-review-key-changes'])
    throw new CliError('USAGE', 'give --review-key-changes or --no-review-key-changes, not both');
  if (v['review-key-changes']) fields.reviewKeyChanges = true;
  if (v['no-review-key-changes']) fields.reviewKeyChanges = false;
  return fields;
}

/** The warning of a default policy without an own prefix, on stderr: stdout stays the answer. */
function warnIfNoPrefix(policy: PolicyRecord): void {
  if (policy.name === 'default' && announcesNoPrefix(policy.spec))
    console.error(`warning: ${NO_OWN_PREFIX_WARNING}`);
}

async function policyCommand(client: Client, action: string, v: Values): Promise<number> {
  if (action === 'get') {
    const name = v.router ?? 'default';
    const res = await client.post<PolicyRecord>('/admin/policy', { action: 'get', name });
    output(format(v), res, () => policyText(res.name, res.spec));
    warnIfNoPrefix(res);
    return 0;
  }
  if (action !== 'set' && action !== 'patch') throw unknownWord('admin policy action', action, AREAS.policy);
  const edits = [
    'spec',
    'dn42-asn',
    'own-prefix',
    'rpki',
    'block',
    'unblock',
    'max-pending',
    'allow-private-endpoints',
    'no-allow-private-endpoints',
    'review-key-changes',
    'no-review-key-changes',
  ] as const;
  if (!edits.some((f) => v[f] !== undefined))
    throw new CliError(
      'USAGE',
      `policy ${action} needs --spec FILE or a field (${edits.map((f) => `--${f}`).join(', ')})`,
    );
  const file = v.spec ? await readPolicyFile(v.spec, v.router) : undefined;
  const name = v.router ?? file?.name ?? 'default';
  const stored = (await client.post<PolicyRecord>('/admin/policy', { action: 'get', name })).spec;
  if (action === 'patch') {
    // the controller merges (RFC 7386); --block/--unblock edit the list stored now
    const patch = { ...file?.spec, ...policyFlags(v, file?.spec.blockedAsns ?? stored.blockedAsns) };
    const res = await client.post<PolicyRecord>('/admin/policy', { action: 'patch', name, spec: patch });
    output(format(v), res, () => `policy ${name} patched: ${Object.keys(patch).join(', ')}`);
    warnIfNoPrefix(res);
    return 0;
  }
  // set replaces the whole policy: with --spec it is the file (and the flags); without, the stored one edited
  const base = file ? file.spec : stored;
  const spec = { ...base, ...policyFlags(v, base.blockedAsns) };
  const res = await client.post<PolicyRecord>('/admin/policy', { action: 'set', name, spec });
  const removed = Object.keys(stored).filter((field) => !Object.hasOwn(res.spec, field));
  output(format(v), res, () =>
    file
      ? [
          `policy ${name} replaced by ${v.spec}: set replaces the whole policy`,
          removed.length > 0
            ? `removed (not in the file): ${removed.join(', ')}`
            : 'no stored field was removed',
        ].join('\n')
      : `policy ${name} saved`,
  );
  warnIfNoPrefix(res);
  return 0;
}

/**
 * `store status`: the conditions, then each skipped manifest's problems as `path  reason  pointer: message`,
 * then each forge conflict. `store clear-conflict ID`: the same answer, without that conflict.
 */
async function storeCommand(
  client: Client,
  action: string,
  arg: string | undefined,
  v: Values,
): Promise<number> {
  let res: StoreStatusAnswer;
  if (action === 'status') res = await client.get<StoreStatusAnswer>('/admin/store');
  else if (action === 'clear-conflict') {
    if (!arg) throw new CliError('USAGE', 'admin store clear-conflict needs the ID that store status lists');
    res = await client.post<StoreStatusAnswer>('/admin/store/conflicts', { action: 'clear', id: arg });
  } else throw unknownWord('admin store action', action, AREAS.store);
  output(format(v), res, () => {
    const parts = [
      table(
        ['CONDITION', 'STATUS', 'REASON', 'SINCE', 'MESSAGE'],
        res.conditions.map((c) => [c.type, c.status, c.reason, c.lastTransitionTime, c.message]),
      ),
    ];
    const problems = res.skippedManifests.flatMap((m) =>
      m.errors.map((e) => [m.path, m.reason, `${e.pointer}: ${e.message}`]),
    );
    if (problems.length > 0) parts.push(table(['SKIPPED', 'REASON', 'PROBLEM'], problems));
    const conflicts = (res.forgeConflicts ?? []).map((c) => [
      c.id,
      c.path,
      c.session ? `${c.session.name} ${c.session.uuid ?? ''}`.trim() : '-',
      c.at,
      c.commit.slice(0, 12),
      c.actor,
      c.branch,
    ]);
    if (conflicts.length > 0)
      parts.push(
        table(['CONFLICT', 'FILE', 'SESSION', 'CHANGED', 'COMMIT', 'BY', 'KEPT ON BRANCH'], conflicts),
      );
    return parts.join('\n\n');
  });
  return 0;
}

export async function main(argv: string[]): Promise<number> {
  return run(async () => {
    const { values, positionals } = parseFlags(argv, OPTIONS);
    const [area, action, arg] = positionals;
    if (values.help || !area) {
      console.log(USAGE);
      return values.help ? 0 : 2;
    }
    if (!Object.hasOwn(AREAS, area)) throw unknownWord('admin area', area, Object.keys(AREAS));
    if (area === 'token' && !action) return mintToken(values);
    if (!action) throw new CliError('USAGE', `admin ${area} needs an action\n\n${USAGE}`);
    outputFormat(values);
    const client = await Client.create({ url: values.url, token: values.token, context: values.context });
    switch (area) {
      case 'token':
        return tokenCommand(client, action, arg, values);
      case 'session':
        return sessionCommand(client, action, arg, values);
      case 'router':
        return routerCommand(client, action, arg, values);
      case 'policy':
        return policyCommand(client, action, values);
      case 'store':
        return storeCommand(client, action, arg, values);
      default:
        throw unknownWord('admin area', area, Object.keys(AREAS));
    }
  });
}
