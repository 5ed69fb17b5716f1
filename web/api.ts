/**
 * The controller's REST API (docs/api.md) as the portal calls it: same origin, JSON bodies. The sign-in is
 * an HttpOnly cookie the controller sets at login, which no script here can read; each request repeats
 * the readable CSRF cookie's value in a header (docs/login.md, The portal's sign-in).
 */
import type {
  AdminRouterRecord,
  AdminSessionListResponse,
  AdminSessionReviewResponse,
  AsNamesResponse,
  CreateResponse,
  ListSortKey,
  NearRoutersResponse,
  NetworkResponse,
  PolicyRecord,
  PublicRouter,
  SessionConfigResponse,
  SessionRecord,
} from '../controller/api/responses.ts';
import type { PeerConfigFormat } from '../common/peer-config/formats.ts';
import type { LgAnswer, LgRequest } from '../common/looking-glass.ts';
import type { HistoryRangeName, SessionHistoryResponse } from '../common/history.ts';
import { serverEvents } from '../common/event-stream.ts';
import type { FieldError, Keyed } from '../common/errors.ts';
import { localText } from './i18n/problems/index.ts';

export type { FieldError } from '../common/errors.ts';

/** A problem+json answer (docs/api.md, Errors). */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly errors: FieldError[];
  /** The catalogue key of the detail (docs/api.md, Errors, Message keys), when the answer had one. */
  readonly keyed: Partial<Keyed>;
  constructor(
    status: number,
    code: string,
    detail: string,
    errors: FieldError[] = [],
    keyed: Partial<Keyed> = {},
  ) {
    super(detail);
    this.status = status;
    this.code = code;
    this.errors = errors;
    this.keyed = keyed;
  }
  /** The detail in the reader's language. */
  text(): string {
    return localText({ message: this.message, ...this.keyed });
  }
  /** The message of the field at `pointer` (`/ipv6`) in the reader's language, if the API named it. */
  field(pointer: string): string | undefined {
    return this.errors
      .filter((e) => under(e, pointer))
      .map(localText)
      .join('; ');
  }
  /** Whether the answer named fields, each under one of `pointers` (those a form shows errors beside). */
  onlyAt(pointers: readonly string[]): boolean {
    return this.errors.length > 0 && this.errors.every((e) => pointers.some((p) => under(e, p)));
  }
}

/** A field error is the field's at `pointer` when it names that field or a part of it. */
const under = (e: FieldError, pointer: string) =>
  e.pointer === pointer || e.pointer.startsWith(`${pointer}/`);

/**
 * The answers' bodies are the API's own schemas (controller/api/responses.ts), imported as types only: the
 * bundle gains nothing, and a field the controller adds or changes shows here at once.
 */
export type {
  AdminRouterRecord,
  AdminSessionListResponse,
  AdminSessionRecord,
  AdminSessionReviewResponse,
  CreateResponse,
  ListSortKey,
  PolicyRecord,
  NetworkResponse,
  PublicRouter,
  SessionConfigResponse,
  SessionRecord,
} from '../controller/api/responses.ts';
export type { Condition } from '../common/schema.ts';
export type Decision = NonNullable<SessionRecord['decision']>;
export type ForgeConflictNote = NonNullable<SessionRecord['forgeConflict']>;

export type AdminAction = 'approve' | 'reject' | 'disable' | 'enable' | 'purge';

/** The admin list's parameters of one page (docs/api.md, Admin API, list). */
export interface AdminListQuery {
  search?: string;
  status?: number;
  router?: string;
  sort: ListSortKey;
  descending: boolean;
  offset: number;
  limit: number;
}

/** A router's fields an admin writes (docs/api.md, router add): its spec without uuid and token hash. */
export type RouterFields = Omit<AdminRouterRecord['spec'], 'uuid' | 'agentTokenSha256'>;
/** A router update's fields: those given replace the stored ones, null clears an optional one. */
export type RouterUpdate = { [K in keyof RouterFields]?: RouterFields[K] | null };

/** The revocation list of `POST /admin/token` list. */
export interface Revocations {
  tokens: { id: string; asn: number; expiresAt: string }[];
  asns: { asn: number; issuedUntil: string }[];
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
  expiresAt: string;
  role: 'user' | 'admin';
  asn: number;
}

let onExpired: () => void = () => undefined;

/** Called when the controller refuses the sign-in (expired, revoked, idle): the page then shows the login. */
export function onSignInEnded(ended: () => void): void {
  onExpired = ended;
}

/** The CSRF cookie's value (`__Host-` over TLS), or undefined when this browser is not signed in. */
export function csrfToken(): string | undefined {
  for (const part of document.cookie.split(';')) {
    const [name, value] = part.trim().split('=');
    if ((name === '__Host-peerops_csrf' || name === 'peerops_csrf') && value) return value;
  }
  return undefined;
}

/** The headers of every request: the CSRF value when signed in. */
function authHeaders(): Record<string, string> {
  const csrf = csrfToken();
  return csrf ? { 'x-peerops-csrf': csrf } : {};
}

async function request<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
  const auth = authHeaders();
  const headers: Record<string, string> = { accept: 'application/json', ...auth };
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers,
      credentials: 'same-origin',
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
  } catch {
    throw new ApiError(0, 'UNREACHABLE', 'the controller cannot be reached');
  }
  return answer<T>(res, Object.keys(auth).length > 0);
}

/**
 * A JSON answer, or the ApiError of a refusal. An INVALID_TOKEN one to a signed-in request also ends the
 * login (the answer has cleared the cookies already, so `signedIn` says what the request carried).
 */
async function answer<T>(res: Response, signedIn: boolean): Promise<T> {
  const data = (await res.json().catch(() => undefined)) as
    ({ code?: string; detail?: string; errors?: FieldError[] } & Partial<Keyed>) | undefined;
  if (!res.ok) {
    const err = new ApiError(
      res.status,
      data?.code ?? 'INTERNAL',
      data?.detail ?? res.statusText,
      data?.errors,
      { key: data?.key, params: data?.params },
    );
    if (err.code === 'INVALID_TOKEN' && signedIn) onExpired();
    throw err;
  }
  return data as T;
}

/** What a modify may change (docs/api.md, modify): the fields given; `null` drops endpoint or ipv4. */
export interface SessionChanges {
  publicKey?: string;
  linkLocal?: string;
  ipv6?: string;
  ipv4?: string | null;
  endpoint?: string | null;
  mtu?: number;
  mpbgp?: boolean;
  extendedNextHop?: boolean;
}

export const api = {
  routers: () => request<{ routers: PublicRouter[] }>('GET', '/routers'),
  challenge: (asn: number) => request<Challenge>('POST', '/login', { action: 'challenge', asn }),
  verify: (asn: number, challenge: string, signature: string, publicKey?: string) =>
    request<Omit<Login, 'asn'>>('POST', '/login', {
      action: 'verify',
      asn,
      challenge,
      signature,
      ...(publicKey ? { publicKey } : {}),
      cookie: true,
    }),
  /** Who this browser is signed in as (after a reload, in a new tab). */
  current: () => request<Login>('POST', '/token', { action: 'current' }),
  /** Revokes the token of this sign-in and clears its cookies (docs/login.md, Revoking tokens). */
  logout: () => request<unknown>('POST', '/token', { action: 'revoke' }),
  sessions: () => request<{ sessions: SessionRecord[] }>('POST', '/session', { action: 'list' }),
  create: (body: Record<string, unknown>) =>
    request<CreateResponse>('POST', '/session', { action: 'create', ...body }),
  modify: (uuid: string, changes: SessionChanges) =>
    request<SessionRecord>('POST', '/session', { action: 'modify', uuid, ...changes }),
  restart: (uuid: string) => request<SessionRecord>('POST', '/session', { action: 'restart', uuid }),
  remove: (uuid: string) =>
    request<SessionRecord | { deleted: true }>('POST', '/session', { action: 'delete', uuid }),
  config: (uuid: string, format: PeerConfigFormat) =>
    request<SessionConfigResponse>('POST', '/session', { action: 'config', uuid, format }),
  /** A looking-glass query run by the router's agent (docs/api.md, Looking glass). */
  lg: (body: LgRequest) => request<LgAnswer>('POST', '/lg', body),
  network: () => request<NetworkResponse>('GET', '/network'),
  history: (uuid: string, range: HistoryRangeName) =>
    request<SessionHistoryResponse>(
      'GET',
      `/session/${encodeURIComponent(uuid)}/history?range=${encodeURIComponent(range)}`,
    ),
  near: (endpoint: string) =>
    request<NearRoutersResponse>('GET', `/routers/near?endpoint=${encodeURIComponent(endpoint)}`),
  /** One page of the admin list, searched, filtered and sorted by the controller (docs/api.md, list). */
  adminSessionPage: (q: AdminListQuery) =>
    request<Required<AdminSessionListResponse>>('POST', '/admin/session', { action: 'list', ...q }),
  adminSession: (action: AdminAction, uuid: string, reason: string) =>
    request<SessionRecord | { deleted: true }>('POST', '/admin/session', {
      action,
      uuid,
      ...(reason ? { reason } : {}),
    }),
  adminReview: (uuid: string) =>
    request<AdminSessionReviewResponse>('POST', '/admin/session', { action: 'review', uuid }),
  asNames: (asns: number[]) =>
    request<AsNamesResponse>('POST', '/admin/session', { action: 'as-names', asns }),
  adminRouters: () => request<{ routers: AdminRouterRecord[] }>('POST', '/admin/router', { action: 'list' }),
  /** Adds a router; the answer holds its agent token, this once (docs/api.md, router add). */
  addRouter: (name: string, spec: RouterFields) =>
    request<{ router: AdminRouterRecord; agentToken: string }>('POST', '/admin/router', {
      action: 'add',
      name,
      ...spec,
    }),
  updateRouter: (name: string, spec: RouterUpdate) =>
    request<{ router: AdminRouterRecord }>('POST', '/admin/router', { action: 'update', name, spec }),
  /** A new agent token for the router; the old one is refused from then on (docs/api.md, rotate-token). */
  rotateRouterToken: (name: string) =>
    request<{ name: string; agentToken: string }>('POST', '/admin/router', { action: 'rotate-token', name }),
  removeRouter: (name: string) =>
    request<{ name: string; removed: true }>('POST', '/admin/router', { action: 'remove', name }),
  /** `name`: `default`, or a router's override (docs/routing-policy.md). */
  policy: (name = 'default') => request<PolicyRecord>('POST', '/admin/policy', { action: 'get', name }),
  setPolicy: (name: string, spec: unknown) =>
    request<PolicyRecord>('POST', '/admin/policy', { action: 'set', name, spec }),
  /** What is revoked: single tokens, and every token of an ASN up to a time (docs/login.md, Tokens). */
  revocations: () => request<Revocations>('POST', '/admin/token', { action: 'list' }),
  revokeToken: (id: string) => request<unknown>('POST', '/admin/token', { action: 'revoke', id }),
  revokeAsn: (asn: number) => request<unknown>('POST', '/admin/token', { action: 'revoke-asn', asn }),
};

/** A dropped stream is opened again after this, as the controller's `retry:` field says. */
const RECONNECT_MS = 3000;

/**
 * The caller's sessions, given to `onList` as the controller sends them: at once and at each change
 * (docs/api.md, Live updates), until `signal` aborts. fetch, not EventSource, which cannot send the
 * CSRF header. A dropped connection is opened again; the stream's end for the token (expired, revoked) ends
 * the login; a refusal rejects.
 */
export async function watchSessions(
  onList: (sessions: SessionRecord[]) => void,
  signal: AbortSignal,
): Promise<void> {
  while (!signal.aborted) {
    try {
      const res = await fetch('/session/events', {
        headers: { accept: 'text/event-stream', ...authHeaders() },
        credentials: 'same-origin',
        cache: 'no-store',
        signal,
      });
      // a refusal (the token, a block) rejects; a busy or failing controller is asked again
      if (!res.ok && res.status !== 429 && res.status < 500) await answer(res, true);
      if (res.ok && res.body)
        for await (const e of serverEvents(res.body)) {
          if (e.event === 'sessions') onList((JSON.parse(e.data) as { sessions: SessionRecord[] }).sessions);
          if (e.event !== 'end') continue;
          const end = JSON.parse(e.data) as { code: string; detail: string } & Partial<Keyed>;
          if (end.code !== 'INVALID_TOKEN')
            throw new ApiError(403, end.code, end.detail, [], { key: end.key, params: end.params });
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
