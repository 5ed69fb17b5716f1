/**
 * The one catalogue of the controller's words (docs/api.md, Errors, Message keys): each refusal and each
 * field error has a stable key, its error code, and its one English sentence with `{name}` placeholders.
 * The store, the rules, the API and the CLI make these errors only through `fault` and `problem`, so a
 * sentence is written once; the answer carries the key and its parameters beside the English text, and
 * the portal renders the key from its own catalogues (web/i18n/problems.ts), English from this one.
 */
import { DomainError, ProblemError, type ErrorCode, type FieldError } from './errors.ts';

/** A refusal's entry: the code it is answered with, and its English sentence. */
interface Refusal {
  code: ErrorCode;
  text: string;
}

export const REFUSALS = {
  'session.notFound': { code: 'SESSION_NOT_FOUND', text: 'no session {uuid}' },
  'session.exists': {
    code: 'SESSION_EXISTS',
    text: 'AS{asn} already has a session ({name}) on {router}; delete it first',
  },
  'session.fieldFixed': { code: 'INVALID_REQUEST', text: 'session {field} cannot change' },
  'session.pendingLimit': {
    code: 'CONFLICT',
    text: 'AS{asn} already has {pending} session(s) awaiting review (limit {limit}); wait for a review',
  },
  'session.transition': {
    code: 'INVALID_STATE',
    text: '{action} is not allowed for a session in status {status} ({statusName})',
  },
  'session.modifyNothing': { code: 'INVALID_REQUEST', text: 'modify needs at least one field to change' },
  'session.needsExisting': { code: 'INVALID_STATE', text: '{action} needs an existing session' },
  'session.asnBlocked': {
    code: 'ASN_BLOCKED',
    text: 'AS{asn} is blocked by the policy of router {router}; contact an administrator',
  },
  'router.notFound': { code: 'ROUTER_NOT_FOUND', text: 'no router {name}' },
  'router.exists': { code: 'CONFLICT', text: 'router {name} already exists' },
  'router.notAccepting': { code: 'ROUTER_FULL', text: 'router {name} is not accepting new sessions' },
  'router.full': {
    code: 'ROUTER_FULL',
    text: 'router {name} has reached its maximum of {max} sessions',
  },
  'policy.notFound': { code: 'NOT_FOUND', text: 'no policy {name}' },
  'route.notFound': { code: 'NOT_FOUND', text: 'no route {method} {path}' },
  'auth.tokenRequired': { code: 'INVALID_TOKEN', text: 'a Bearer JWT is required; log in first' },
  'auth.tokenInvalid': { code: 'INVALID_TOKEN', text: 'the token is not valid' },
  'auth.tokenRevoked': { code: 'INVALID_TOKEN', text: 'the token was revoked; log in again' },
  'auth.adminOnly': { code: 'FORBIDDEN', text: 'this action needs an admin token' },
  'auth.cookieInvalid': {
    code: 'INVALID_TOKEN',
    text: 'the portal sign-in cookie is not valid; log in again',
  },
  'auth.cookieNeedsCsrf': {
    code: 'INVALID_TOKEN',
    text: 'the portal sign-in cookie is used only with its x-peerops-csrf header; a Bearer token needs neither',
  },
  'auth.cookieIdle': {
    code: 'INVALID_TOKEN',
    text: 'the portal sign-in was idle for more than {minutes} min; log in again',
  },
  'login.noCookies': {
    code: 'INVALID_REQUEST',
    text: 'cookie: this login issues no sign-in cookies; leave cookie out',
  },
  'request.invalidField': { code: 'INVALID_REQUEST', text: '{what} {pointer}: {reason}' },
  /** A rule's refusal of a field the schema took (addresses, the endpoint, route objects). */
  'request.fieldRefused': { code: 'INVALID_REQUEST', text: '{pointer}: {reason}' },
  'request.notActionObject': {
    code: 'INVALID_REQUEST',
    text: 'the request body must be a JSON object with an "action" field',
  },
  'request.tooDeep': {
    code: 'INVALID_REQUEST',
    text: 'the request body is nested more than {depth} levels deep (objects and arrays)',
  },
  'action.missing': { code: 'INVALID_ACTION', text: '"action" is missing; one of: {allowed}' },
  'action.unknown': { code: 'INVALID_ACTION', text: 'unknown action; one of: {allowed}' },
  'request.emptyBody': {
    code: 'INVALID_REQUEST',
    text: 'the request body is empty; a JSON object is expected',
  },
  'request.notJson': { code: 'INVALID_REQUEST', text: 'the request body is not valid JSON' },
  'request.invalid': { code: 'INVALID_REQUEST', text: 'the request is not valid ({reason})' },
  'request.tooLarge': {
    code: 'PAYLOAD_TOO_LARGE',
    text: 'the request body is larger than the limit (64 KiB)',
  },
  'request.mediaType': {
    code: 'UNSUPPORTED_MEDIA_TYPE',
    text: 'the request body must be application/json',
  },
  'request.rateLimited': { code: 'RATE_LIMITED', text: 'too many requests; wait for X-RateLimit-Reset' },
  'near.rateLimited': {
    code: 'RATE_LIMITED',
    text: 'at most {limit} new nearest-router measurements a minute; an endpoint measured in the last {minutes} minutes is answered again at once',
  },
  internal: { code: 'INTERNAL', text: 'internal error; the operator can find it in the log' },
} as const satisfies Record<string, Refusal>;

/**
 * The field errors' sentences: what a peer reads beside the field the pointer names (ajv's own wording,
 * "must NOT have fewer than 44 characters", said nothing a peer could act on).
 */
export const FIELD_MESSAGES = {
  'field.required': 'is required',
  'field.unknown': 'is not a known field',
  'field.tooShort': 'must be at least {min} characters long',
  'field.tooLong': 'must be at most {max} characters long',
  'field.tooFew': 'must have at least {min} entries',
  'field.tooMany': 'must have at most {max} entries',
  'field.atLeast': 'must be {limit} or more',
  'field.atMost': 'must be {limit} or less',
  'field.above': 'must be more than {limit}',
  'field.below': 'must be less than {limit}',
  'field.oneOf': 'must be one of {allowed}',
  'field.pattern': 'has characters or a form that is not allowed',
  'field.printable':
    'must be one line of printable text: no control, format (zero-width, bidi) or private-use characters, no line breaks',
  'field.notString': 'must be text',
  'field.notInteger': 'must be a whole number',
  'field.notNumber': 'must be a number',
  'field.notBoolean': 'must be true or false',
  'field.notObject': 'must be a JSON object',
  'field.notArray': 'must be a list',
  'field.notNull': 'must be null',
  'field.duplicates': 'must not list an entry twice',
  'field.cannotChange': 'cannot change',
  'field.asnBlocked': 'AS{asn} is blocked by the policy of router {router}',
  'field.modifyNothing':
    'give a field to change: publicKey, linkLocal, ipv6, ipv4, endpoint, mtu, mpbgp or extendedNextHop',
  'field.unsafeNumber': 'must be at most {max} in magnitude',
  'field.anycast':
    "is in DN42's anycast service range {range} (shared services such as the anycast DNS, announced by several networks): it cannot be one peer's tunnel address",
  'field.outsidePolicyRanges': "must be inside {ranges} (the policy's peerAddressRanges.{family})",
  'field.outsideDn42':
    "must be inside DN42's {ranges} (the default while the policy sets no peerAddressRanges.{family})",
  'field.lowOrderKey':
    'is not a usable WireGuard public key (a low-order point, such as the all-zero key): no peer holds its private key',
  'field.routerKey': "is the router's own WireGuard key; give the public key of your side of the tunnel",
  'field.keyTaken': 'is already the key of session {session} on router {router}',
  'field.routerLinkLocal': "collides with the router's own link-local {linkLocal}",
  'field.enhNeedsMpbgp': 'extended next hop carries IPv4 over MP-BGP; it needs mpbgp true',
  'field.noIpv4Side':
    'without MP-BGP and without an IPv4 address the IPv4 side has no session; set mpbgp or give ipv4',
  'field.noIpv4NextHop': 'IPv4 routes over MP-BGP need an IPv4 next hop: give ipv4 or enable extendedNextHop',
  'field.routerLoopback': 'is the loopback of router {router}',
  'field.ownPrefix': "lies in this network's own prefixes ({prefixes})",
  'field.addressTaken': "is the address of AS{asn}'s session {session}",
  'field.notDecimal': 'must be a whole number written in decimal digits',
  'field.format.ipv6': 'must be an IPv6 address',
  'field.format.ipv4': 'must be an IPv4 address',
  'field.format.link-local': 'must be an IPv6 link-local address (fe80::/10)',
  'field.format.wireguard-key': 'must be a WireGuard key: base64 of exactly 32 bytes',
  'field.format.endpoint':
    'must be host:port with a host name or IP literal (IPv6 in brackets) and a port 1-65535',
  'field.format.host': 'must be a host name or an IP address',
  'field.format.ipv4-prefix': 'must be an IPv4 prefix such as 172.20.0.0/14',
  'field.format.ipv6-prefix': 'must be an IPv6 prefix such as fd00::/8',
  'field.format.uuid': 'must be a UUID',
  'field.format.date-time': 'must be an ISO 8601 timestamp',
  'field.invalid': 'is not valid',
} as const;

/**
 * A session's lastError as the agent or the controller words it (docs/agent.md, What a session's status
 * means). The agent's message may say more (BIRD's own words, since when BGP was up); the key's sentence
 * is what holds in every case.
 */
export const LAST_ERRORS = {
  'lastError.setupFailed': 'the agent could not set the session up',
  'lastError.error': 'session in error',
  'lastError.birdDown':
    "BIRD on the router does not answer ({reason}): the session is down on the router's side; its operators see the router not Ready (BirdDown)",
  'lastError.tunnelRecreated':
    "the router's WireGuard tunnel {interface} was gone and was made anew: it comes back by itself; if it stays so, check the peer's WireGuard (its endpoint and public key for this router, our endpoint port {port})",
  'lastError.noHandshake':
    "no WireGuard handshake with the peer: check the peer's WireGuard (its endpoint and public key for this router, our endpoint port {port}, the tunnel up on its side)",
  'lastError.bgpDown':
    "WireGuard handshakes (the tunnel is up) but BGP is not Established: check the BGP settings on the peer's side (neighbor {neighbor} as {asn} on its tunnel interface, local as {peerAsn}, multiprotocol and extended next hop as the session says)",
} as const;

export type RefusalKey = keyof typeof REFUSALS;
export type FieldMessageKey = keyof typeof FIELD_MESSAGES;
export type LastErrorKey = keyof typeof LAST_ERRORS;
export type MessageKey = RefusalKey | FieldMessageKey | LastErrorKey;
export type MessageParams = Record<string, string | number>;

/** Every key the controller can put in an answer: what each portal catalogue must have. */
export const MESSAGE_KEYS: readonly MessageKey[] = [
  ...(Object.keys(REFUSALS) as RefusalKey[]),
  ...(Object.keys(FIELD_MESSAGES) as FieldMessageKey[]),
  ...(Object.keys(LAST_ERRORS) as LastErrorKey[]),
];

/** The English sentence of `key`, its `{name}` placeholders filled from `params`. */
export function englishText(key: MessageKey, params: MessageParams = {}): string {
  const text =
    key in REFUSALS
      ? REFUSALS[key as RefusalKey].text
      : key in LAST_ERRORS
        ? LAST_ERRORS[key as LastErrorKey]
        : FIELD_MESSAGES[key as FieldMessageKey];
  return fill(text, params);
}

/** `{name}` placeholders filled from `params`; one the params lack stays as written. */
export function fill(text: string, params: MessageParams): string {
  return text.replace(/\{([\w-]+)\}/g, (whole, name: string) =>
    Object.hasOwn(params, name) ? String(params[name]) : whole,
  );
}

/** The names of the placeholders a sentence uses, each once, in order. */
export function placeholders(text: string): string[] {
  return [...new Set([...text.matchAll(/\{([\w-]+)\}/g)].map((m) => m[1] ?? ''))];
}

/** The parameters of request.fieldRefused for the first of `errors`: where and why. */
export function fieldAtFault(errors: FieldError[]): MessageParams {
  return { pointer: errors[0]?.pointer ?? '/', reason: errors[0]?.message ?? '' };
}

/** A field error with its key: the one way to name a field's problem. */
export function fieldError(pointer: string, key: FieldMessageKey, params: MessageParams = {}): FieldError {
  const error: FieldError = { pointer, message: englishText(key, params), key };
  if (Object.keys(params).length > 0) error.params = params;
  return error;
}

/** The refusal `key` as the store and the rules throw it (no HTTP). */
export function fault(key: RefusalKey, params: MessageParams = {}, errors?: FieldError[]): DomainError {
  return new DomainError(REFUSALS[key].code, englishText(key, params), errors, { key, params });
}

/** The refusal `key` as the API layer throws it, with the HTTP status of its code. */
export function problem(key: RefusalKey, params: MessageParams = {}, errors?: FieldError[]): ProblemError {
  return new ProblemError(REFUSALS[key].code, englishText(key, params), errors, { key, params });
}
