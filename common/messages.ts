/**
 * The one catalogue of the controller's words (docs/api.md, Errors, Message keys): each refusal and each
 * field error has a stable key, its error code, and its one English sentence with `{name}` placeholders.
 * The store, the rules, the API and the CLI make these errors only through `fault` and `problem`, so a
 * sentence is written once; the answer carries the key and its parameters beside the English text, and
 * the portal renders the key from its own catalogues (web/i18n/problems.ts), English from this one.
 * Over 600 lines: one table on purpose, so that each sentence is found, reviewed and translated in one place.
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
  'session.deletedMeanwhile': { code: 'SESSION_NOT_FOUND', text: 'session {name} was deleted meanwhile' },
  'session.routerGone': {
    code: 'INVALID_STATE',
    text: 'router {router} of this session no longer exists',
  },
  'session.breaksPolicy': {
    code: 'INVALID_STATE',
    text: '{action}: session {name} breaks the current policy: {pointer}: {reason}; reject it, or change the policy',
  },
  'session.registryMoved': {
    code: 'INVALID_STATE',
    text: '{action}: session {name}: the registry no longer gives its addresses to AS{asn}: {pointer}: {reason}; reject it',
  },
  'session.noListenPort': {
    code: 'ROUTER_FULL',
    text: 'router {router} has no free listen port for AS{asn}',
  },
  'session.portTaken': { code: 'CONFLICT', text: 'port {port} is used by session {owner}' },
  'router.invalidName': {
    code: 'INVALID_REQUEST',
    text: '{what} must be 1-31 characters: a-z, 0-9 and -, starting with a letter',
  },
  'router.invalidField': { code: 'INVALID_REQUEST', text: 'router {name} {pointer}: {reason}' },
  'router.conflict': { code: 'CONFLICT', text: 'router {name}: {reason}' },
  'router.inUseOne': {
    code: 'INVALID_STATE',
    text: 'router {name} still has 1 session: {sessions}. Delete it first (peerops session delete UUID, or admin session reject in PENDING_REVIEW)',
  },
  'router.inUseOneDeleting': {
    code: 'INVALID_STATE',
    text: "router {name} still has 1 session: {sessions}. The one in QUEUED_FOR_DELETE waits for the router's agent to tear it down: if it will not, purge it (peerops admin session purge UUID --reason TEXT)",
  },
  'router.inUse': {
    code: 'INVALID_STATE',
    text: 'router {name} still has {count} sessions: {sessions}. Delete them first (peerops session delete UUID, or admin session reject in PENDING_REVIEW)',
  },
  'router.inUseDeleting': {
    code: 'INVALID_STATE',
    text: "router {name} still has {count} sessions: {sessions}. The {count} in QUEUED_FOR_DELETE wait for the router's agent to tear them down: if it will not, purge them (peerops admin session purge UUID --reason TEXT)",
  },
  'router.inUseMixed': {
    code: 'INVALID_STATE',
    text: "router {name} still has {count} sessions: {sessions}. Delete the {others} not yet deleted first (peerops session delete UUID, or admin session reject in PENDING_REVIEW); the {stuck} in QUEUED_FOR_DELETE wait for the router's agent to tear them down: if it will not, purge them (peerops admin session purge UUID --reason TEXT)",
  },
  'router.noPortClaim': { code: 'STORE_UNAVAILABLE', text: 'cannot claim a listen port on router {router}' },
  'router.agentTokenHash': {
    code: 'INVALID_REQUEST',
    text: 'agent token hash must be 64 hex digits',
  },
  'policy.noNetworkAsn': {
    code: 'INVALID_STATE',
    text: "the network's ASN is not set (the policy's dn42Asn): ask its operator",
  },
  'policy.noDn42Asn': {
    code: 'CONFLICT',
    text: 'the routing policy sets no dn42Asn yet; an admin sets it with `admin policy set`',
  },
  'policy.defaultNeedsAsn': {
    code: 'INVALID_REQUEST',
    text: "policy default /spec/dn42Asn: the default policy must set dn42Asn (the network's own ASN): agents build their BIRD config with it",
  },
  'admin.patchInvalid': { code: 'INVALID_REQUEST', text: 'patch {pointer}: {reason}' },
  'admin.updateInvalid': { code: 'INVALID_REQUEST', text: 'update {pointer}: {reason}' },
  'agent.foreignSessions': {
    code: 'SESSION_NOT_FOUND',
    text: "the report names {count} session(s) that are not this router's; nothing recorded",
  },
  'agent.wrongInterface': { code: 'INVALID_REQUEST', text: 'interface must be {interface}' },
  'agent.meshInvalid': { code: 'INVALID_REQUEST', text: 'mesh status {pointer}: {reason}' },
  'agent.tokenInvalid': {
    code: 'INVALID_TOKEN',
    text: "the agent token is missing or is not this router's token",
  },
  'auth.tokenExpired': { code: 'INVALID_TOKEN', text: 'the token has expired; log in again' },
  'auth.tokenNoId': {
    code: 'INVALID_TOKEN',
    text: 'the token has no id (issued by a release before token ids); log in again',
  },
  'auth.claimsInvalid': { code: 'INVALID_TOKEN', text: 'the token claims are not valid' },
  'auth.asnBlocked': {
    code: 'ASN_BLOCKED',
    text: "AS{asn} is blocked by the network's policy; its tokens can only be revoked. Contact an administrator",
  },
  'events.asnBlocked': { code: 'ASN_BLOCKED', text: "AS{asn} is blocked by the network's policy" },
  'events.tooManyStreams': {
    code: 'RATE_LIMITED',
    text: 'AS{asn} has {max} live update streams open already; close one first',
  },
  'login.notSetUp': {
    code: 'NOT_FOUND',
    text: 'login is not set up on this controller (no PEEROPS_REGISTRY); ask its operator for a token (`peerops admin token`)',
  },
  'login.redisUnreachable': { code: 'STORE_UNAVAILABLE', text: 'login: Redis is unreachable ({reason})' },
  'login.registryUnreadable': { code: 'REGISTRY_UNAVAILABLE', text: 'the registry cannot be read: {reason}' },
  'login.tooManyFailures': {
    code: 'RATE_LIMITED',
    text: 'too many failed logins from this address; retry in {seconds} s',
  },
  'login.asnBlocked': { code: 'ASN_BLOCKED', text: 'AS{asn} is blocked; contact an administrator' },
  'login.asnUnknown': { code: 'NOT_FOUND', text: 'AS{asn} is not in the registry' },
  'login.noUsableKey': {
    code: 'AUTH_FAILED',
    text: 'no maintainer of AS{asn} lists a key peerops can check: add an auth line with an {types}, pgp-fingerprint or PGPKEY key{skipped}',
  },
  'login.notChallenge': {
    code: 'AUTH_FAILED',
    text: 'login for AS{asn} failed: challenge is not a peerops login challenge',
  },
  'login.challengeAltered': {
    code: 'AUTH_FAILED',
    text: 'login for AS{asn} failed: challenge text was altered',
  },
  'login.challengeUnknown': {
    code: 'AUTH_FAILED',
    text: 'login for AS{asn} failed: challenge is unknown or was altered (not issued by this service); request a new one',
  },
  'login.challengeHost': {
    code: 'AUTH_FAILED',
    text: 'login for AS{asn} failed: challenge was issued for host {host}',
  },
  'login.challengeAsn': {
    code: 'AUTH_FAILED',
    text: 'login for AS{asn} failed: challenge was issued for AS{issuedAsn}',
  },
  'login.challengeExpired': {
    code: 'AUTH_FAILED',
    text: 'login for AS{asn} failed: challenge expired; request a new one',
  },
  'login.challengeUsed': {
    code: 'AUTH_FAILED',
    text: 'login for AS{asn} failed: challenge is unknown or already used; request a new one',
  },
  'login.signatureRefused': { code: 'AUTH_FAILED', text: 'login for AS{asn} failed: {reason}' },
  'login.signatureUnknownForm': {
    code: 'AUTH_FAILED',
    text: 'login for AS{asn} failed: signature is neither an armored SSH signature nor an OpenPGP signature',
  },
  'login.sshKeyNotListed': {
    code: 'AUTH_FAILED',
    text: 'login for AS{asn} failed: the signing SSH key is not listed by any maintainer of this ASN',
  },
  'login.pgpKeyNeeded': {
    code: 'AUTH_FAILED',
    text: 'login for AS{asn} failed: send the armored public key in publicKey: the maintainers list a pgp-fingerprint',
  },
  'login.pgpNoKey': {
    code: 'AUTH_FAILED',
    text: 'login for AS{asn} failed: no OpenPGP key listed by a maintainer of this ASN matches',
  },
  'login.notTheChallenge': {
    code: 'AUTH_FAILED',
    text: 'login for AS{asn} failed: the signed text is not the challenge',
  },
  'webhook.invalidUrl': { code: 'INVALID_REQUEST', text: '/url: {reason}' },
  'webhook.limitAdmins': { code: 'CONFLICT', text: 'at most {max} webhooks for admins; delete one first' },
  'webhook.limitAsn': { code: 'CONFLICT', text: 'at most {max} webhooks per ASN; delete one first' },
  'webhook.notFound': { code: 'NOT_FOUND', text: 'no webhook {id}' },
  'webhook.notSaved': {
    code: 'STORE_UNAVAILABLE',
    text: 'the data directory refuses writes ({reason}): the webhook was not saved, try again later',
  },
  'forge.noWebhook': {
    code: 'NOT_FOUND',
    text: 'no forge webhook on this controller (set PEEROPS_GIT_WEBHOOK_SECRET with the git store)',
  },
  'forge.badSignature': {
    code: 'AUTH_FAILED',
    text: 'the webhook signature does not match: send X-Hub-Signature-256, X-Gitea-Signature or X-Gitlab-Token made with the shared secret',
  },
  'forge.noConflicts': {
    code: 'NOT_FOUND',
    text: 'the {backend} store follows no forge: it has no conflicts',
  },
  'forge.conflictNotFound': { code: 'NOT_FOUND', text: '/id: no unresolved forge conflict {id}' },
  'forge.writeConflict': {
    code: 'FORGE_CONFLICT',
    text: '{reason}; nothing of this write was applied: read the manifest again and retry',
  },
  'forge.writeUnavailable': {
    code: 'FORGE_UNAVAILABLE',
    text: '{reason}; nothing of this write was applied, try again',
  },
  'lg.invalidTarget': { code: 'INVALID_REQUEST', text: '/target: {target} {reason}' },
  'lg.foreignSession': { code: 'INVALID_REQUEST', text: '/session: is a session of router {router}' },
  'lg.busy': {
    code: 'RATE_LIMITED',
    text: 'router {router} is running {max} looking-glass queries already; retry in a few seconds',
  },
  'lg.notAnswered': {
    code: 'ROUTER_UNAVAILABLE',
    text: "router {router}'s agent took the query but did not answer within {seconds} s",
  },
  'lg.notTaken': {
    code: 'ROUTER_UNAVAILABLE',
    text: "router {router}'s agent did not take the query within {seconds} s: is it connected?",
  },
  'history.prometheusUnavailable': {
    code: 'HISTORY_UNAVAILABLE',
    text: 'the session history cannot be read from Prometheus: {reason}',
  },
  'lg.stopped': {
    code: 'ROUTER_UNAVAILABLE',
    text: 'the controller stopped before router {router} answered',
  },
  'registry.filterUnreadable': { code: 'REGISTRY_UNAVAILABLE', text: "the registry's {reason}" },
  'store.busy': { code: 'STORE_UNAVAILABLE', text: 'the store repository is busy: {reason}; try again' },
  'store.readOnly': { code: 'STORE_UNAVAILABLE', text: '{reason}; nothing was saved, try again later' },
  'store.closed': { code: 'STORE_UNAVAILABLE', text: 'the store is closed' },
  'store.writeUnfinished': {
    code: 'STORE_UNAVAILABLE',
    text: 'the store could not finish the write: {reason}',
  },
  'store.crdOutdated': {
    code: 'STORE_UNAVAILABLE',
    text: 'the PeeringSession CRD in the cluster is older than this controller (it has a status subresource): apply the CRDs of this release first, kubectl apply -f crds/ (docs/kubernetes.md, Install with Helm)',
  },
  'store.kubernetesRefused': {
    code: 'INVALID_REQUEST',
    text: '{what}: the API server refused it ({reason})',
  },
  'store.kubernetesError': { code: 'STORE_UNAVAILABLE', text: '{what}: Kubernetes API error ({reason})' },
  'token.invalidField': { code: 'INVALID_REQUEST', text: '{pointer}: {reason}' },
  'portal.fileNotFound': { code: 'NOT_FOUND', text: 'no portal file /{path}' },
  'reference.missing': { code: 'NOT_FOUND', text: 'this build has no API reference page ({reason})' },
  'request.noHost': { code: 'INVALID_REQUEST', text: 'an HTTP/1.1 request must have a Host header' },
  'request.headersTooLarge': { code: 'INVALID_REQUEST', text: 'the request headers are larger than 16 KiB' },
  'request.timeout': { code: 'INVALID_REQUEST', text: 'the request did not arrive in full in time' },
  'request.notHttp': { code: 'INVALID_REQUEST', text: 'the request is not valid HTTP/1.1' },
  'request.pathSegmentTooLong': {
    code: 'INVALID_REQUEST',
    text: 'a path segment is longer than 100 characters; no route has such a name (FST_ERR_MAX_PARAM_LENGTH)',
  },
  'request.badUrl': {
    code: 'INVALID_REQUEST',
    text: 'the URL has a percent-encoding that does not decode (FST_ERR_BAD_URL)',
  },
  'request.wholeInvalid': { code: 'INVALID_REQUEST', text: '{what} is invalid' },
  /**
   * fastify's other client errors, one key per code their status means (controller/api/problem.ts); the
   * sentence is request.invalid's, the fastify code says which.
   */
  'request.unauthenticated': { code: 'INVALID_TOKEN', text: 'the request is not valid ({reason})' },
  'request.forbidden': { code: 'FORBIDDEN', text: 'the request is not valid ({reason})' },
  'request.notFound': { code: 'NOT_FOUND', text: 'the request is not valid ({reason})' },
  'request.conflict': { code: 'CONFLICT', text: 'the request is not valid ({reason})' },
  'request.rateLimitedFor': {
    code: 'RATE_LIMITED',
    text: 'more than {points} requests a minute; retry after {seconds} seconds',
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
  'field.empty': 'must not be empty',
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
  'field.pattern.routerName':
    'must be a name of lower-case letters, digits and -, starting with a letter, at most 31 (such as fra1)',
  'field.pattern.region':
    'must be lower-case letters, digits and -, starting with a letter or digit, at most 32 (such as eu-central)',
  'field.pattern.sha256': 'must be 64 lower-case hexadecimal digits (a SHA-256)',
  'field.pattern.conditionType':
    'must be a letter, then letters, digits, _, ., - or / (such as ConfigApplied)',
  'field.pattern.conditionReason':
    'must be a letter, then letters, digits, _, , or :, not ending in , or : (such as AgentSilent)',
  'field.printableNoQuotes':
    'must be one line of printable text: no control, format (zero-width, bidi) or private-use characters, no line breaks, no " or \\',
  'field.prefixForm.ipv4':
    'must be an IPv4 prefix such as 172.20.0.0/14: four decimal numbers 0-255 without leading zeros, / and a length 0-32',
  'field.prefixForm.ipv6':
    'must be an IPv6 prefix such as fd00::/8: an IPv6 address, / and a length 0-128 without leading zeros',
  'field.prefixBits': 'has bits set after /{length}: the network is {network} (or give a longer length)',
  'field.lgPrefix': 'is a prefix; ping and traceroute take one address',
  'field.lgNotAddress': 'is not an IPv4 or IPv6 address',
  'field.lgOutsideDn42': "is outside DN42's ranges ({ranges})",
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
  'field.autoApproveUnchecked':
    'would approve sessions whose addresses nothing checks: set PEEROPS_REGISTRY to a DN42 registry (its route objects check them), or PEEROPS_AUTO_APPROVE_WITHOUT_REGISTRY=true to trust every peer',
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
  'field.nameRule': 'must be 1-31 characters: a-z, 0-9 and -, starting with a letter',
  'field.portRangeOrder': 'must be at most max ({max})',
  'field.meshPorts': 'must stay clear of the mesh ports {min}-{max}',
  'field.uuidOfRouter': 'uuid is already used by router {router}',
  'field.nodeIdTaken': 'nodeId {nodeId} is already used by router {router}',
  'field.loopbackTaken': '{address} is already the loopback of router {router}',
  'field.identityTaken': '{field} {value} is already used by router {router}',
  'field.unknownRouter': "names an unknown router '{router}'",
  'field.sessionPortTaken': 'port {port} on router {router} is already used by session {session}',
  'field.adoptNeedsAddress':
    "is required: a session has the peer's {field}, which the hand-made files do not name; add it to the plan (peerops adopt -o json > plan.json) and apply that (--apply --plan plan.json)",
  'field.ipv6UnlessAdopted':
    "is required: only a session adopted from a router's hand-made files (with `adopted`) may leave out the peer's DN42 IPv6",
  'field.adoptedInterfaceTaken':
    'interface {interface} on router {router} is already used by session {session}',
  'field.uuidOfSession': 'uuid is already used by session {session}',
  'field.defaultNeedsAsn': "the default policy must set dn42Asn (the network's own ASN)",
  'field.defaultNeedsAsnForAgents':
    "the default policy must set dn42Asn (the network's own ASN): agents build their BIRD config with it",
  'field.routerUuidFixed':
    "cannot change: a router's uuid is fixed once it is added (sessions name their router by it)",
  'field.setByRotate': 'is set only by rotate-token, which answers the new agent token once',
  'field.routerFieldRequired': 'cannot be cleared: every router has one; give a new value instead',
  'field.notInLayout':
    'file path is not part of the layout (routers/<name>.yaml, sessions/<router>/as<asn>.yaml, policy/<name>.yaml)',
  'field.outsideLayout':
    'is outside the repository layout ({layout}): the store never reads it; move it, or give it another extension',
  'field.fileTooLarge': 'is {bytes} bytes; this file may hold at most {max} ({maxText})',
  'field.yamlTooDeep': 'nests deeper than {depth} levels; no manifest needs more',
  'field.yamlTooDeepAt': 'line {line}: nests deeper than {depth} levels; no manifest needs more',
  'field.yamlAnchor':
    'line {line}: YAML {form}: anchors and aliases are not allowed, a manifest spells out every value',
  'field.notYaml': 'not valid YAML: {reason}',
  'field.notMapping': 'must be a YAML mapping (a manifest)',
  'field.pathMismatch': 'must be {expected} for a file at {path}',
  'field.secondSession': 'a second session for AS{asn} on router {router} (first in {first})',
  'field.noDefaultPolicy': 'is missing: the network needs a default policy',
  'field.noFreePort': 'router {router} has no free listen port',
  'field.dn42PortTaken':
    'router {router} has no free listen port: AS{asn} gets port {port} (20000 + ASN % 10000), already used by session {session}',
  'field.unreadable': 'unreadable: {reason}',
  'field.submodule':
    'is a submodule (gitlink): the store reads only regular files here, a submodule never reaches it',
  'field.symlink': 'is a symbolic link: the store reads only regular files here, never what a link points to',
  'field.sessionName': 'must be {expected} (one session per ASN and router)',
  'field.notThisRouter': 'is not a session of router {router}',
  'field.notThisInterface': "is not this session's interface {interface}",
  'field.meshSelf': '{router} is this router itself, not a mesh peer',
  'field.meshTwice': '{router} is listed twice',
  'field.meshUnknown': '{router} is not a router of this network',
  'field.lgOtherRouter': 'is a session of router {router}, not {asked}',
  'field.notUrl': 'not a URL',
  'field.urlCredentials': 'must not hold a user name or password; authenticate by the signature',
  'field.urlTarget': 'host {host} {reason}: no delivery would be made',
  'field.specialAddress': 'is {what} ({prefix}), which no peer can own',
  'field.mappedAddress': 'is an IPv4-mapped address ({prefix}): give the IPv4 address {ipv4} as ipv4',
  'field.unreachableAddress': 'is {what} ({prefix})',
  'field.privateAddress': 'is {what} ({prefix}), which only {allowedBy} allows',
  'field.embeddedAddress': 'is {what} of {ipv4}, which {reason}',
  'field.localhostName': 'names this machine (localhost, a loopback name)',
  'field.routeAnycast':
    "{address} is an anycast address: {type} {prefix} has origins {origins}, and a tunnel address must be one network's own",
  'field.routeNoOrigin':
    "{address} is no network's: {type} {prefix}, the most specific route object covering it, has no origin",
  'field.routeOfOther':
    "{address} is AS{holder}'s: {type} {prefix} is the most specific route object covering it",
  'field.routeOfOtherOverOwn':
    "{address} is AS{holder}'s: {type} {prefix} is the most specific route object covering it (your {ownType} {ownPrefix} is less specific)",
  'field.routeNone': 'no {type} object in the registry gives {address} to AS{asn}',
  'field.routeNoneCounts': 'no {type} object in the registry gives {address} to AS{asn} ({objects})',
  'field.hex64': 'must be 64 hex digits',
  'field.noForgeConflict': 'no unresolved forge conflict {id}',
  'field.portUsed': 'is used by session {owner}',
  'field.notAsn': 'must be an ASN, 1..4294967295',
  'field.notTokenId': 'is not a token id (<asn>.<expiry>.<16 characters>, as peerops admin token prints it)',
  'field.expiryTooLate': 'names an expiry later than any token lives (366 days)',
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
  'lastError.registryRefused':
    'adopted as DISABLED: the DN42 registry refuses {pointer}: {reason}; fix the registry or the session, then enable it',
  'lastError.bgpDown':
    "WireGuard handshakes (the tunnel is up) but BGP is not Established: check the BGP settings on the peer's side (neighbor {neighbor} as {asn} on its tunnel interface, local as {peerAsn}, multiprotocol and extended next hop as the session says)",
} as const;

/**
 * The messages of the conditions the controller judges (docs/kubernetes.md, Conditions) and of the
 * agent's own node conditions (BirdRunning, ConfigApplied). `{error}` and `{why}` carry the session's
 * last error or the admin's reason with their leading `: `, or nothing.
 */
export const CONDITION_MESSAGES = {
  'condition.established': "the router's agent reports the tunnel and BGP session up",
  'condition.nothingNeedsPerson': 'nothing needs a person',
  'condition.nothingUntilChange': 'nothing to do until the session changes',
  'condition.notApproved': 'an administrator has not approved the session yet',
  'condition.awaitingReview': 'waiting for an administrator to approve or reject it',
  'condition.waitingForPeer': "the router is ready and waits for the peer's side since {since}",
  'condition.peerSilent': "BIRD tries to connect; the peer's side does not answer yet",
  'condition.awaitingSetup': "waiting for the router's agent to set up the tunnel and BGP session",
  'condition.settingUp': "the router's agent sets up the tunnel and BGP session",
  'condition.awaitingTeardown': "waiting for the router's agent to tear the session down",
  'condition.tearingDown': "the router's agent tears the session down",
  'condition.failed': 'the session failed{error}',
  'condition.retrying': "the router's agent retries{error}",
  'condition.setupFailed': 'setting up the session failed{error}',
  'condition.agentStopped': 'the agent stopped trying',
  'condition.setupFailedStalled': 'setup failed{error}; fix the cause and restart the session',
  'condition.rejected': 'an administrator rejected the request{why}',
  'condition.purged': 'an administrator purged the session{why}',
  'condition.disabled': 'the session is disabled',
  'condition.agentReports': "the router's agent reports",
  'condition.agentApplies': 'the agent applies changes as they come',
  'condition.noHeartbeat': "no heartbeat from the router's agent since {since}",
  'condition.policyAccepted': 'the controller applies this policy',
  'condition.nothingToDo': 'nothing to do',
  // the agent's node conditions (agent/agent.ts), keyed once the controller says it takes keys (docs/agent.md)
  'condition.birdAnswers': 'BIRD answers',
  'condition.birdDown': 'BIRD does not answer on {socket}: {error}',
  'condition.configApplied': 'BIRD runs the configuration the agent rendered',
  'condition.configRefused': 'BIRD refused the configuration: {where}{error}',
} as const;

export type RefusalKey = keyof typeof REFUSALS;
export type FieldMessageKey = keyof typeof FIELD_MESSAGES;
/**
 * Why `peerops adopt` leaves a tunnel or a BGP protocol as it is (docs/agent.md, Adopting a running
 * router): `{what}` names it and the file it came from.
 */
export const ADOPT_MESSAGES = {
  'adopt.unsupportedTunnel':
    '{what}: tunnel kind {kind} is not WireGuard; peerops runs WireGuard tunnels only',
  'adopt.noTunnel': '{what}: neighbor {neighbor} is on no tunnel this router has',
  'adopt.portOutsideRange': '{what}: listen port {port} is outside the router port range {min}-{max}',
  'adopt.noListenPort': '{what}: the tunnel has no fixed ListenPort, so the peer cannot reach a known port',
  'adopt.noPeerKey': '{what}: the tunnel has no [Peer] public key',
  'adopt.twoAsns': '{what}: its protocols name two ASNs ({asns}); one tunnel is one peer',
} as const;

export type LastErrorKey = keyof typeof LAST_ERRORS;
export type AdoptMessageKey = keyof typeof ADOPT_MESSAGES;
export type ConditionMessageKey = keyof typeof CONDITION_MESSAGES;
export type MessageKey = RefusalKey | FieldMessageKey | LastErrorKey | ConditionMessageKey | AdoptMessageKey;
export type MessageParams = Record<string, string | number>;

/** A field's problem as a rule finds it, before it is placed at a pointer (fieldError). */
export interface FieldSaid {
  key: FieldMessageKey;
  params: MessageParams;
}

/** Every key the controller can put in an answer: what each portal catalogue must have. */
export const MESSAGE_KEYS: readonly MessageKey[] = [
  ...(Object.keys(REFUSALS) as RefusalKey[]),
  ...(Object.keys(FIELD_MESSAGES) as FieldMessageKey[]),
  ...(Object.keys(LAST_ERRORS) as LastErrorKey[]),
  ...(Object.keys(CONDITION_MESSAGES) as ConditionMessageKey[]),
  ...(Object.keys(ADOPT_MESSAGES) as AdoptMessageKey[]),
];

/** The English sentence of `key`, its `{name}` placeholders filled from `params`. */
export function englishText(key: MessageKey, params: MessageParams = {}): string {
  const text =
    key in REFUSALS
      ? REFUSALS[key as RefusalKey].text
      : key in LAST_ERRORS
        ? LAST_ERRORS[key as LastErrorKey]
        : key in CONDITION_MESSAGES
          ? CONDITION_MESSAGES[key as ConditionMessageKey]
          : key in ADOPT_MESSAGES
            ? ADOPT_MESSAGES[key as AdoptMessageKey]
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

/** The longest parameter a stored condition keeps (common/schema.ts, MessageParams). */
const CONDITION_PARAM_LENGTH = 256;

/**
 * A condition's message with its key (common/conditions.ts): the parameters as text cut to what a
 * condition stores (common/schema.ts, Condition); the message keeps them whole.
 */
export function conditionMessage(
  key: ConditionMessageKey,
  params: MessageParams = {},
): { message: string; key: ConditionMessageKey; params?: Record<string, string> } {
  const message = englishText(key, params);
  const cut = (value: string) =>
    value.length > CONDITION_PARAM_LENGTH ? `${value.slice(0, CONDITION_PARAM_LENGTH - 1)}…` : value;
  const entries = Object.entries(params).map(([name, value]): [string, string] => [name, cut(String(value))]);
  return entries.length > 0 ? { message, key, params: Object.fromEntries(entries) } : { message, key };
}

/** The English sentence of a rule's finding. */
export function saidText(said: FieldSaid): string {
  return englishText(said.key, said.params);
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
