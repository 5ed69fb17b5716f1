/**
 * The controller's REST API (docs/api.md) as the portal calls it: same origin, JSON bodies, the token in
 * an Authorization header. The token lives only in this page's memory (docs/decisions.md, "Portal").
 */
import type { WaitingView } from '../common/waiting.ts';
import { serverEvents } from '../common/event-stream.ts';

export interface FieldError {
  pointer: string;
  message: string;
}

/** A problem+json answer (docs/api.md, Errors). */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly errors: FieldError[];
  constructor(status: number, code: string, detail: string, errors: FieldError[] = []) {
    super(detail);
    this.status = status;
    this.code = code;
    this.errors = errors;
  }
  /** The message of the field at `pointer` (`/ipv6`), if the API named it. */
  field(pointer: string): string | undefined {
    return this.errors
      .filter((e) => e.pointer === pointer || e.pointer.startsWith(`${pointer}/`))
      .map((e) => e.message)
      .join('; ');
  }
}

export interface Metrics {
  rtt?: number | null;
  rxBytes?: number | null;
  txBytes?: number | null;
  routesImported?: number | null;
  at?: string;
}

export interface Decision {
  action: 'reject' | 'disable' | 'purge';
  reason?: string;
  by: string;
  at: string;
  /** When a REJECTED or PURGED record is removed. */
  until?: string;
}

export interface ForgeConflictNote {
  id: string;
  /** When the replaced change was made. */
  at: string;
  forgeCommit: string;
  /** The branch of the forge that keeps the replaced version. */
  branch: string;
}

export interface SessionRecord {
  uuid: string;
  router: string;
  routerName: string;
  asn: number;
  status: number;
  statusName: string;
  ipv6: string;
  ipv6LinkLocal: string;
  ipv4: string | null;
  endpoint: string | null;
  publicKey: string;
  mtu: number;
  mpbgp: boolean;
  extendedNextHop: boolean;
  listenPort: number;
  interface: string;
  serverEndpoint: string;
  /** The router's WireGuard public key and link-local; absent from older controllers. */
  serverPublicKey?: string | null;
  serverLinkLocal?: string | null;
  createdAt: string | null;
  lastTransitionTime: string | null;
  lastError: { code: string; message: string; at?: string } | null;
  /** The admin's reject, disable or purge with its reason (docs/api.md, Decisions); absent from older controllers. */
  decision?: Decision | null;
  /** A change of the owner's a forge edit replaced (docs/api.md, Forge conflicts); absent from older controllers. */
  forgeConflict?: ForgeConflictNote | null;
  metrics: Metrics | null;
  /** Live state reported by the router's agent; absent from controllers before it, null until reported. */
  bgpState?: string | null;
  bgpSince?: string | null;
  lastHandshake?: string | null;
  /** Who a queued session waits for (docs/api.md, Waiting); absent from older controllers. */
  waiting?: WaitingView | null;
  networkAsn?: number;
  /** Admin list only: what the current policy would refuse of the session. */
  policyViolations?: FieldError[];
}

export interface PublicRouter {
  name: string;
  uuid: string;
  displayName: string;
  region: string;
  location: string | null;
  endpointHost: string;
  publicKey: string;
  linkLocal: string;
  accepting: boolean;
  networkAsn?: number;
  /** Free places before the router's maxSessions, where the controller tells them. */
  freeSlots?: number | null;
}

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

export interface AdminRouter {
  name: string;
  spec: PublicRouter & {
    provider?: string;
    maxSessions?: number;
    acceptingSessions?: boolean;
    autoApprove?: boolean;
  };
  status: { lastHeartbeat?: string; agentVersion?: string; uptime?: number; conditions?: Condition[] };
  conditions?: Condition[];
  hasAgentToken: boolean;
}

export interface CreateAnswer {
  uuid: string;
  status: number;
  statusName: string;
  serverEndpoint: string;
  serverPublicKey: string;
  serverLinkLocal: string;
  serverIpv4?: string;
  listenPort: number;
  interface: string;
  networkAsn?: number;
}

/** A key the signature may come from (docs/login.md, Which keys count). */
export interface ChallengeMethod {
  type: string;
  mntner: string;
  /** An SSH key's base64 blob. */
  key?: string;
  /** The OpenPGP primary key's fingerprint, lower-case hex (pgp-fingerprint, pgp-key-cert). */
  fingerprint?: string;
  keyCert?: string;
  /** A key-cert whose registry copy expired: it verifies with the owner's renewed key as publicKey. */
  expired?: string;
}

/** A maintainer's line no signature can come from, and the controller's reason. */
export interface SkippedLine {
  mntner: string;
  line: string;
  reason: string;
}

export interface Challenge {
  challenge: string;
  host: string;
  asn: number;
  expiresAt: string;
  namespace: string;
  methods: ChallengeMethod[];
  skipped: SkippedLine[];
}

export interface Login {
  token: string;
  expiresAt: string;
  role: 'user' | 'admin';
  asn: number;
}

export interface ConfigAnswer {
  format: string;
  files: { name: string; content: string }[];
}

export type ConfigFormat = 'wg-quick' | 'networkd' | 'bird' | 'frr';
export const CONFIG_FORMATS: ConfigFormat[] = ['wg-quick', 'networkd', 'bird', 'frr'];

let token: string | undefined;
let onExpired: () => void = () => undefined;

export function setToken(value: string | undefined, expired?: () => void): void {
  token = value;
  if (expired) onExpired = expired;
}

async function request<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (token) headers.authorization = `Bearer ${token}`;
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers,
      credentials: 'omit',
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
  } catch {
    throw new ApiError(0, 'UNREACHABLE', 'the controller cannot be reached');
  }
  return answer<T>(res);
}

/** A JSON answer, or the ApiError of a refusal (an INVALID_TOKEN one also ends the login). */
async function answer<T>(res: Response): Promise<T> {
  const data = (await res.json().catch(() => undefined)) as
    { code?: string; detail?: string; errors?: FieldError[] } | undefined;
  if (!res.ok) {
    const err = new ApiError(
      res.status,
      data?.code ?? 'INTERNAL',
      data?.detail ?? res.statusText,
      data?.errors,
    );
    if (err.code === 'INVALID_TOKEN' && token) onExpired();
    throw err;
  }
  return data as T;
}

export const api = {
  routers: () => request<{ routers: PublicRouter[]; networkAsn?: number }>('GET', '/routers'),
  challenge: (asn: number) => request<Challenge>('POST', '/login', { action: 'challenge', asn }),
  verify: (asn: number, challenge: string, signature: string, publicKey?: string) =>
    request<Omit<Login, 'asn'>>('POST', '/login', {
      action: 'verify',
      asn,
      challenge,
      signature,
      ...(publicKey ? { publicKey } : {}),
    }),
  /** Revokes the token of this login (docs/login.md, Revoking tokens). */
  logout: () => request<unknown>('POST', '/token', { action: 'revoke' }),
  sessions: () => request<{ sessions: SessionRecord[] }>('POST', '/session', { action: 'list' }),
  create: (body: Record<string, unknown>) =>
    request<CreateAnswer>('POST', '/session', { action: 'create', ...body }),
  modify: (uuid: string, changes: { endpoint?: string | null; mtu?: number }) =>
    request<SessionRecord>('POST', '/session', { action: 'modify', uuid, ...changes }),
  restart: (uuid: string) => request<SessionRecord>('POST', '/session', { action: 'restart', uuid }),
  remove: (uuid: string) =>
    request<SessionRecord | { deleted: true }>('POST', '/session', { action: 'delete', uuid }),
  config: (uuid: string, format: ConfigFormat) =>
    request<ConfigAnswer>('POST', '/session', { action: 'config', uuid, format }),
  adminSessions: (filter: { status?: number } = {}) =>
    request<{ sessions: SessionRecord[] }>('POST', '/admin/session', { action: 'list', ...filter }),
  adminSession: (action: 'approve' | 'reject', uuid: string, reason: string) =>
    request<unknown>('POST', '/admin/session', { action, uuid, ...(reason ? { reason } : {}) }),
  adminRouters: () => request<{ routers: AdminRouter[] }>('POST', '/admin/router', { action: 'list' }),
  policy: () =>
    request<{ name: string; spec: Record<string, unknown> }>('POST', '/admin/policy', { action: 'get' }),
};

/** A dropped stream is opened again after this, as the controller's `retry:` field says. */
const RECONNECT_MS = 3000;

/**
 * The caller's sessions, given to `onList` as the controller sends them: at once and at each change
 * (docs/api.md, Live updates), until `signal` aborts. fetch, not EventSource, which cannot send the
 * token. A dropped connection is opened again; the stream's end for the token (expired, revoked) ends
 * the login; a refusal rejects.
 */
export async function watchSessions(
  onList: (sessions: SessionRecord[]) => void,
  signal: AbortSignal,
): Promise<void> {
  while (!signal.aborted) {
    try {
      const res = await fetch('/session/events', {
        headers: { accept: 'text/event-stream', ...(token ? { authorization: `Bearer ${token}` } : {}) },
        credentials: 'omit',
        cache: 'no-store',
        signal,
      });
      // a refusal (the token, a block) rejects; a busy or failing controller is asked again
      if (!res.ok && res.status !== 429 && res.status < 500) await answer(res);
      if (res.ok && res.body)
        for await (const e of serverEvents(res.body)) {
          if (e.event === 'sessions') onList((JSON.parse(e.data) as { sessions: SessionRecord[] }).sessions);
          if (e.event !== 'end') continue;
          const end = JSON.parse(e.data) as { code: string; detail: string };
          if (end.code !== 'INVALID_TOKEN') throw new ApiError(403, end.code, end.detail);
          onExpired();
          return;
        }
    } catch (err) {
      if (err instanceof ApiError) throw err;
      // unreachable, dropped or aborted: the loop's condition tells
    }
    await new Promise((resolve) => setTimeout(resolve, RECONNECT_MS));
  }
}
