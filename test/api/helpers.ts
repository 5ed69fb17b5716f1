/**
 * A controller on the real git store in a temp dir, built in-process (fastify inject) or listening on
 * loopback. Tokens come from the real Ed25519 issuer; routers are added through the admin API.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import pino from 'pino';
import { buildApp, type AppOptions } from '../../controller/app.ts';
import { loadConfig, type Config } from '../../controller/config.ts';
import { TokenIssuer, loadOrCreateKey } from '../../controller/auth/jwt.ts';
import { createGitStore } from '../../controller/store/git/index.ts';
import type { Store } from '../../controller/store/store.ts';
import type { PlannedSession } from '../../agent/adopt/plan.ts';

export const ADMIN_ASN = 4242420000;
export const USER_ASN = 4242421234;
export const OTHER_ASN = 4242425678;

export function wgKey(): string {
  return randomBytes(32).toString('base64');
}

let nodeIds = 0;
export function routerFields(name: string, extra: Record<string, unknown> = {}) {
  const id = ++nodeIds;
  return {
    name,
    displayName: `Router ${name}`,
    nodeId: id,
    region: 'eu-central',
    location: 'Frankfurt',
    provider: 'lab',
    endpointHost: `${name}.example.net`,
    publicKey: wgKey(),
    linkLocal: 'fe80::1',
    loopback: { ipv4: `172.20.0.${id}`, ipv6: `fd00::${id}` },
    ...extra,
  };
}

/** Peer addresses differ per call: two ASNs may not share one (rules.ts, sessionAddressingErrors). */
let peerAddresses = 0x100;

/**
 * A plan's session as `peerops adopt -o json` prints it, on fra1 with a hand-made tunnel `iface` and
 * protocol `dn42_<last three digits of the ASN>`; `extra` sets or removes (undefined) fields.
 */
export function plannedSession(
  asn: number,
  port: number,
  iface: string,
  extra: Partial<Record<keyof PlannedSession, unknown>> = {},
): PlannedSession {
  return {
    asn,
    router: 'fra1',
    listenPort: port,
    publicKey: wgKey(),
    linkLocal: 'fe80::2',
    mpbgp: true,
    extendedNextHop: true,
    adopted: {
      interface: iface,
      protocols: [`dn42_${asn % 1000}`],
      files: [`/etc/wireguard/${iface}.conf`, `/etc/bird/peers/as${asn}.conf`],
    },
    ...extra,
  } as PlannedSession;
}

export function sessionFields(router: string, extra: Record<string, unknown> = {}) {
  return {
    action: 'create',
    router,
    ipv6: `fd42:1234::${(peerAddresses++).toString(16)}`,
    linkLocal: 'fe80::1234',
    endpoint: 'peer.example.org:51820',
    publicKey: wgKey(),
    mtu: 1420,
    ...extra,
  };
}

export interface Harness {
  app: FastifyInstance;
  store: Store;
  tokens: TokenIssuer;
  dir: string;
  config: Config;
  admin: string;
  user: string;
  other: string;
  /** POST with a bearer token and a JSON body. */
  post(url: string, token: string | undefined, body: unknown): Promise<LightMyRequestResponse>;
  get(url: string, token?: string, headers?: Record<string, string>): Promise<LightMyRequestResponse>;
  addRouter(name: string, extra?: Record<string, unknown>): Promise<string>;
  close(): Promise<void>;
}

export async function startHarness(
  overrides: Partial<Config> = {},
  /** `/login` and, with a DN42 registry, the route-object check of create (docs/api.md). */
  login?: AppOptions['login'],
): Promise<Harness> {
  const dir = await mkdtemp(join(tmpdir(), 'peerops-api-'));
  // As `peerops serve` opens it: the real git store (its writes timed for the store-latency metric).
  const store = createGitStore({
    dir: join(dir, 'store.git'),
    logger: pino({ level: 'silent' }),
    observationFlushMs: 600_000,
  });
  await store.start();
  const tokens = new TokenIssuer(await loadOrCreateKey(join(dir, 'jwt-ed25519.pem')));
  const config: Config = {
    ...loadConfig({ data: dir, listen: '127.0.0.1:0' }, {}),
    rateLimit: { perMinute: 100_000, agentPerMinute: 100_000 },
    ...overrides,
  };
  const app = await buildApp({ store, tokens, config, logger: false, ...(login ? { login } : {}) });
  await app.ready();
  const bearer = (asn: number, role: 'user' | 'admin') => tokens.issueToken(asn, role).token;
  const h: Harness = {
    app,
    store,
    tokens,
    dir,
    config,
    admin: bearer(ADMIN_ASN, 'admin'),
    user: bearer(USER_ASN, 'user'),
    other: bearer(OTHER_ASN, 'user'),
    post: (url, token, body) =>
      app.inject({
        method: 'POST',
        url,
        headers: {
          'content-type': 'application/json',
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        },
        payload: JSON.stringify(body),
      }),
    get: (url, token, headers = {}) =>
      app.inject({
        method: 'GET',
        url,
        headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
      }),
    async addRouter(name, extra = {}) {
      const res = await h.post('/admin/router', h.admin, { action: 'add', ...routerFields(name, extra) });
      if (res.statusCode !== 200) throw new Error(`add router ${name}: ${res.statusCode} ${res.body}`);
      return (res.json() as { agentToken: string }).agentToken;
    },
    async close() {
      await app.close();
      await store.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
  return h;
}

let nextAsn = 4242423000;

/** Moves sessions through the API: user create, admin actions, agent reports. Each session gets its own ASN. */
export function driver(h: Harness, router: string, agentToken: string) {
  const owners = new Map<string, string>();
  const freshUser = (): string => h.tokens.issueToken(nextAsn++, 'user').token;
  const d = {
    freshUser,
    async create(token: string = freshUser(), extra: Record<string, unknown> = {}): Promise<string> {
      const res = await h.post('/session', token, sessionFields(router, extra));
      if (res.statusCode !== 200) throw new Error(`create: ${res.statusCode} ${res.body}`);
      const uuid = (res.json() as { uuid: string }).uuid;
      owners.set(uuid, token);
      return uuid;
    },
    ownerToken: (uuid: string): string => owners.get(uuid) ?? h.user,
    admin: (action: string, uuid: string, reason?: string) =>
      h.post('/admin/session', h.admin, { action, uuid, ...(reason ? { reason } : {}) }),
    user: (action: string, uuid: string, extra: Record<string, unknown> = {}, token?: string) =>
      h.post('/session', token ?? d.ownerToken(uuid), { action, uuid, ...extra }),
    report(uuid: string, status: number, message?: string) {
      const s = h.store.getSession(uuid);
      return h.post(`/agent/${router}/modify`, agentToken, {
        uuid,
        status,
        interface: `wg_${s?.spec.listenPort ?? 0}`,
        ...(message ? { message } : {}),
      });
    },
    /** A report with BIRD's state, as agent/reconcile/steps.ts sends it; `since` becomes bgpSince. */
    reportBgp(uuid: string, status: number, bgpState: string, since?: Date) {
      return h.post(`/agent/${router}/modify`, agentToken, {
        uuid,
        status,
        interface: `wg_${h.store.getSession(uuid)?.spec.listenPort ?? 0}`,
        bgpState,
        ...(since ? { bgpSince: since.toISOString() } : {}),
      });
    },
    status: (uuid: string) => h.store.getSession(uuid)?.status.code,
    /** A session in the given status, reached through the API. */
    async inStatus(code: number): Promise<string> {
      const uuid = await d.create();
      if (code === 3) return uuid;
      await expectOk(d.admin('approve', uuid));
      if (code === 4) return uuid;
      if (code === 6) {
        await expectOk(d.report(uuid, 6, 'bird: syntax error'));
        return uuid;
      }
      await expectOk(d.report(uuid, 1));
      if (code === 1) return uuid;
      if (code === 2) await expectOk(d.report(uuid, 2, 'handshake stale'));
      if (code === 0) await expectOk(d.admin('disable', uuid));
      if (code === 5) await expectOk(d.user('delete', uuid));
      return uuid;
    },
  };
  return d;
}

export async function expectOk(p: Promise<LightMyRequestResponse>): Promise<LightMyRequestResponse> {
  const res = await p;
  if (res.statusCode !== 200) throw new Error(`expected 200, got ${res.statusCode}: ${res.body}`);
  return res;
}

/** The problem code of a response (and a check that it is problem+json without a stack). */
export function problem(res: LightMyRequestResponse): { status: number; code: string; detail: string } {
  const body = res.json() as { status: number; code: string; detail: string };
  if (!String(res.headers['content-type']).startsWith('application/problem+json'))
    throw new Error(`not problem+json: ${res.headers['content-type']} ${res.body}`);
  if (/\bat .*\.ts:\d+/.test(res.body)) throw new Error(`stack trace leaked: ${res.body}`);
  return { status: res.statusCode, code: body.code, detail: body.detail };
}
