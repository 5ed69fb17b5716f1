/**
 * Rules every store back end enforces the same way, whatever holds the data: router names, router-set
 * uniqueness (uuid, nodeId), and the session fields that never change; and a session's addressing
 * against its router and policy. The git store applies the addressing rules to manifests merged in git,
 * and `peerops validate` the router-set and addressing rules to a GitOps checkout.
 */
import { ProblemError, type FieldError } from '../../common/errors.ts';
import {
  DN42_PEER_ADDRESS_RANGES,
  inRanges,
  isLowOrderKey,
  sameWireGuardKey,
  specialPurposeProblem,
  wireGuardKeyId,
  type Family,
} from '../../common/net.ts';
import { meshListenPort, sessionName } from '../../common/naming.ts';
import { transition } from '../../common/state-machine.ts';
import { SessionStatus, statusName } from '../../common/status.ts';
import {
  RouterName,
  SessionSpec as SessionSpecSchema,
  type PolicySpec,
  type RouterSpec,
  type SessionSpec,
  type SessionSpecInput,
  type SessionStatusRecord,
} from '../../common/schema.ts';
import { validate, validateOrThrow } from '../../common/validate.ts';
import type { Session, Store } from './store.ts';

const NAME_RULE = 'must be 1-31 characters: a-z, 0-9 and -, starting with a letter';

/** The error of an invalid router (or policy) name, at `pointer`. */
export function routerNameErrors(name: string, pointer = '/name'): FieldError[] {
  return validate(RouterName, name).ok ? [] : [{ pointer, message: NAME_RULE }];
}

/** INVALID_REQUEST unless `name` is a valid router (or policy) name. */
export function assertRouterName(name: string, what = 'router name'): void {
  const errors = routerNameErrors(name);
  if (errors.length > 0) throw new ProblemError('INVALID_REQUEST', `${what} ${NAME_RULE}`, errors);
}

/**
 * The ports a router's mesh tunnels listen on: 33000 + the other router's nodeId, nodeId 1-4095
 * (docs/decisions.md, "Mesh ports and interfaces"). A session port there could not be bound.
 */
const MESH_PORTS = { min: meshListenPort(1), max: meshListenPort(4095) };

/**
 * Rules on one router's own fields: a port range with min ≤ max, clear of the mesh ports. `prefix` is
 * where the fields sit (`/spec` in a manifest or an update body, `''` in an add body).
 */
export function routerSpecErrors(spec: RouterSpec, prefix = '/spec'): FieldError[] {
  const range = spec.portRange;
  if (!range) return [];
  if (range.min > range.max)
    return [{ pointer: `${prefix}/portRange/min`, message: `must be at most max (${range.max})` }];
  if (range.min <= MESH_PORTS.max && range.max >= MESH_PORTS.min)
    return [
      {
        pointer: `${prefix}/portRange`,
        message: `must stay clear of the mesh ports ${MESH_PORTS.min}-${MESH_PORTS.max}`,
      },
    ];
  return [];
}

/**
 * Router-level rules: routerSpecErrors, then what must differ between routers: uuid, nodeId and each
 * loopback (the mesh carries loopbacks in Babel and runs iBGP between them: two routers with one
 * address would capture each other's traffic, docs/routing-policy.md).
 */
export function routerSetErrors(
  name: string,
  spec: RouterSpec,
  routers: Iterable<{ name: string; spec: RouterSpec }>,
  prefix = '/spec',
): FieldError[] {
  return [...routerSpecErrors(spec, prefix), ...routerConflicts(name, spec, routers, prefix)];
}

function routerConflicts(
  name: string,
  spec: RouterSpec,
  routers: Iterable<{ name: string; spec: RouterSpec }>,
  prefix: string,
): FieldError[] {
  const errors: FieldError[] = [];
  for (const other of routers) {
    if (other.name === name) continue;
    if (other.spec.uuid === spec.uuid) {
      errors.push({ pointer: `${prefix}/uuid`, message: `uuid is already used by router ${other.name}` });
    }
    if (other.spec.nodeId === spec.nodeId) {
      errors.push({
        pointer: `${prefix}/nodeId`,
        message: `nodeId ${spec.nodeId} is already used by router ${other.name}`,
      });
    }
    for (const family of ['ipv4', 'ipv6'] as const) {
      const address = spec.loopback[family];
      if (address === undefined) continue;
      if (address === other.spec.loopback.ipv4 || address === other.spec.loopback.ipv6)
        errors.push({
          pointer: `${prefix}/loopback/${family}`,
          message: `${address} is already the loopback of router ${other.name}`,
        });
    }
  }
  return errors;
}

/**
 * The policy for one router: its own policy over the default, field by field, except `blockedAsns`,
 * which adds to the default's list (a router's list must not unblock an ASN the network blocks).
 */
export function mergePolicies(base: PolicySpec | undefined, own: PolicySpec | undefined): PolicySpec {
  const merged: PolicySpec = { ...base, ...own };
  if (base?.blockedAsns && own?.blockedAsns)
    merged.blockedAsns = [...new Set([...base.blockedAsns, ...own.blockedAsns])];
  return merged;
}

/** The policy a store holds for one router (mergePolicies), or the default alone without a router. */
export function mergedPolicy(store: Pick<Store, 'getPolicy'>, router: string | undefined): PolicySpec {
  return mergePolicies(
    store.getPolicy('default')?.spec,
    router === undefined ? undefined : store.getPolicy(router)?.spec,
  );
}

/**
 * The first status of a session that came without one, merged into the GitOps repo (git) or applied by
 * kubectl/Flux/Argo CD (Kubernetes): PENDING_REVIEW, or QUEUED_FOR_SETUP where the default policy says a
 * merge is an approval (DESIGN 4), since `at`.
 */
export function mergedSessionStatus(mergeIsApproval: boolean, at: string | undefined): SessionStatusRecord {
  const outcome = transition(undefined, { kind: 'merge', mergeIsApproval });
  const code = outcome.result === 'status' ? outcome.to : SessionStatus.PENDING_REVIEW;
  return { code, name: statusName(code), ...(at !== undefined ? { lastTransitionTime: at } : {}) };
}

/** The fields of its own that sessionAddressingErrors judges, besides asn and router (which never change). */
export const ADDRESSING_FIELDS = [
  'ipv6',
  'ipv4',
  'linkLocal',
  'publicKey',
  'mpbgp',
  'extendedNextHop',
] as const;

/** The fields of a session that `sessionAddressingErrors` judges (a create body or a stored spec). */
export type SessionAddressing = Pick<
  SessionSpec,
  'asn' | 'router' | 'ipv6' | 'ipv4' | 'linkLocal' | 'publicKey' | 'mpbgp' | 'extendedNextHop'
>;

/**
 * The other routers and sessions a session's peer addresses and key are compared with. `sessions` may hold
 * only the neighbours (neighbourIndex): every session with one of its addresses, and every session on its
 * router with its WireGuard key (those without router and publicKey are compared by address only).
 */
export interface NetworkView {
  routers: Iterable<{ name: string; spec: RouterSpec }>;
  sessions: Iterable<{
    name: string;
    spec: Pick<SessionSpec, 'asn' | 'ipv6' | 'ipv4'> & Partial<Pick<SessionSpec, 'router' | 'publicKey'>>;
  }>;
}

/**
 * A session's addressing against its router, the policy merged for that router and the rest of the
 * network. The API refuses a create that breaks it, the git store skips such a merged manifest and
 * `peerops validate` reports it; `prefix` is where the fields sit (`''` in a body, `/spec` in a manifest).
 */
export function sessionAddressingErrors(
  name: string,
  spec: SessionAddressing,
  router: RouterSpec,
  policy: PolicySpec,
  network: NetworkView,
  prefix = '',
): FieldError[] {
  return [
    ...sessionPolicyErrors(spec, router, policy, prefix),
    ...peerAddressErrors(name, spec, policy.ownPrefixes, network, prefix),
    ...sessionKeyErrors(name, spec, router, network, prefix),
  ];
}

/**
 * The ranges a session's `family` address must lie in: the policy's peerAddressRanges of that family, or
 * DN42's own (DN42_PEER_ADDRESS_RANGES) where the policy sets none (docs/operator-guide.md, the policy).
 */
export function peerAddressRanges(policy: PolicySpec, family: Family): readonly string[] {
  const own = policy.peerAddressRanges?.[family];
  return own && own.length > 0 ? own : DN42_PEER_ADDRESS_RANGES[family];
}

/**
 * Peer addresses a peer can own: never a special-purpose address (loopback, multicast, link-local,
 * documentation, an IPv4-mapped IPv6 address …, whatever the policy says), and inside the policy's ranges
 * (peerAddressRanges). They need nothing but the policy, so the API also runs them before it asks the
 * registry about the addresses.
 */
export function peerAddressRangeErrors(
  spec: Pick<SessionSpec, 'ipv6' | 'ipv4'>,
  policy: PolicySpec,
  prefix = '',
): FieldError[] {
  const errors: FieldError[] = [];
  for (const family of ['ipv6', 'ipv4'] as const) {
    const address = spec[family];
    if (address === undefined) continue;
    const at = (message: string) => errors.push({ pointer: `${prefix}/${family}`, message });
    const special = specialPurposeProblem(address);
    if (special !== undefined) {
      at(special);
      continue;
    }
    const ranges = peerAddressRanges(policy, family);
    if (!inRanges(address, ranges))
      at(
        policy.peerAddressRanges?.[family]?.length
          ? `must be inside ${ranges.join(', ')} (the policy's peerAddressRanges.${family})`
          : `must be inside DN42's ${ranges.join(', ')} (the default while the policy sets no peerAddressRanges.${family})`,
      );
  }
  return errors;
}

/**
 * A session's WireGuard key must be one a peer holds the private half of: not a low-order point (the
 * all-zero key), not the router's own key (WireGuard refuses a peer with the interface's key), and not the
 * key of another session on the same router (two tunnels would claim one peer).
 */
function sessionKeyErrors(
  name: string,
  spec: Pick<SessionSpec, 'router' | 'publicKey'>,
  router: RouterSpec,
  network: NetworkView,
  prefix: string,
): FieldError[] {
  const at = (message: string) => [{ pointer: `${prefix}/publicKey`, message }];
  if (isLowOrderKey(spec.publicKey))
    return at(
      'is not a usable WireGuard public key (a low-order point, such as the all-zero key): no peer holds its private key',
    );
  if (sameWireGuardKey(spec.publicKey, router.publicKey))
    return at("is the router's own WireGuard key; give the public key of your side of the tunnel");
  const id = wireGuardKeyId(spec.publicKey);
  for (const other of network.sessions)
    if (
      other.name !== name &&
      other.spec.router === spec.router &&
      other.spec.publicKey !== undefined &&
      (other.spec.publicKey === spec.publicKey || wireGuardKeyId(other.spec.publicKey) === id)
    )
      return at(`is already the key of session ${other.name} on router ${spec.router}`);
  return [];
}

/**
 * Peer addresses a peer can own (peerAddressRangeErrors), a link-local that is not the router's own, and the MP-BGP /
 * extended next hop / IPv4 combination that gives the IPv4 side a session.
 */
function sessionPolicyErrors(
  spec: SessionAddressing,
  router: RouterSpec,
  policy: PolicySpec,
  prefix = '',
): FieldError[] {
  const errors: FieldError[] = [];
  const at = (field: string, message: string) => errors.push({ pointer: `${prefix}/${field}`, message });
  errors.push(...peerAddressRangeErrors(spec, policy, prefix));
  if (spec.linkLocal === router.linkLocal)
    at('linkLocal', `collides with the router's own link-local ${router.linkLocal}`);
  const mpbgp = spec.mpbgp ?? true;
  const enh = spec.extendedNextHop ?? true;
  if (enh && !mpbgp) at('extendedNextHop', 'extended next hop carries IPv4 over MP-BGP; it needs mpbgp true');
  if (!mpbgp && spec.ipv4 === undefined)
    at(
      'mpbgp',
      'without MP-BGP and without an IPv4 address the IPv4 side has no session; set mpbgp or give ipv4',
    );
  if (mpbgp && !enh && spec.ipv4 === undefined)
    at(
      'extendedNextHop',
      'IPv4 routes over MP-BGP need an IPv4 next hop: give ipv4 or enable extendedNextHop',
    );
  return errors;
}

/**
 * A session's peer addresses become routes into its tunnel on the router (`ip route replace <ipv6> dev
 * wg_<port>`, `peer <ipv4>/32`), which win over what BIRD installs. So they must not be a router's
 * loopback (that would capture the iBGP mesh), lie in the network's own prefixes, or be another ASN's
 * session address (that would capture its traffic). The same ASN may use one address on several routers.
 */
function peerAddressErrors(
  name: string,
  spec: Pick<SessionSpec, 'asn' | 'ipv6' | 'ipv4'>,
  ownPrefixes: PolicySpec['ownPrefixes'],
  network: NetworkView,
  prefix: string,
): FieldError[] {
  const errors: FieldError[] = [];
  const routers = [...network.routers];
  const check = (field: 'ipv6' | 'ipv4', address: string | undefined) => {
    if (address === undefined) return;
    const at = (message: string) => errors.push({ pointer: `${prefix}/${field}`, message });
    const router = routers.find((r) => r.spec.loopback.ipv6 === address || r.spec.loopback.ipv4 === address);
    if (router) return at(`is the loopback of router ${router.name}`);
    if (ownPrefixes?.[field]?.length && inRanges(address, ownPrefixes[field]))
      return at(`lies in this network's own prefixes (${ownPrefixes[field]?.join(', ')})`);
    for (const other of network.sessions)
      if (other.name !== name && other.spec.asn !== spec.asn && other.spec[field] === address)
        return at(`is the address of AS${other.spec.asn}'s session ${other.name}`);
  };
  check('ipv6', spec.ipv6);
  check('ipv4', spec.ipv4);
  return errors;
}

/**
 * sessionAddressingErrors as the refusal of a create (INVALID_REQUEST naming the first field). The stores
 * run it where they write, so that two creates from different ASNs for one address cannot both pass.
 */
export function assertSessionAddressing(
  name: string,
  spec: SessionAddressing,
  router: RouterSpec,
  policy: PolicySpec,
  network: NetworkView,
): void {
  const errors = sessionAddressingErrors(name, spec, router, policy, network);
  if (errors.length > 0)
    throw new ProblemError('INVALID_REQUEST', `${errors[0]?.pointer}: ${errors[0]?.message}`, errors);
}

type Neighbour = { name: string; spec: SessionSpec };

/**
 * Sessions indexed by peer address and by router and key: the NetworkView of one session's neighbours
 * (what sessionAddressingErrors compares it with), so that judging every session of a large network (the
 * admin list) does not compare each with all.
 */
export function neighbourIndex(
  routers: readonly { name: string; spec: RouterSpec }[],
  sessions: Iterable<Neighbour>,
): (spec: Pick<SessionSpec, 'router' | 'ipv6' | 'ipv4' | 'publicKey'>) => NetworkView {
  const byAddress = new Map<string, Neighbour[]>();
  const byKey = new Map<string, Neighbour[]>();
  const add = (map: Map<string, Neighbour[]>, key: string, s: Neighbour) => {
    const list = map.get(key);
    if (list) list.push(s);
    else map.set(key, [s]);
  };
  const keyOf = (spec: Pick<SessionSpec, 'router' | 'publicKey'>) =>
    `${spec.router} ${wireGuardKeyId(spec.publicKey)}`;
  for (const s of sessions) {
    add(byAddress, s.spec.ipv6, s);
    if (s.spec.ipv4 !== undefined) add(byAddress, s.spec.ipv4, s);
    add(byKey, keyOf(s.spec), s);
  }
  return (spec) => ({
    routers,
    sessions: new Set([
      ...(byAddress.get(spec.ipv6) ?? []),
      ...((spec.ipv4 !== undefined && byAddress.get(spec.ipv4)) || []),
      ...(byKey.get(keyOf(spec)) ?? []),
    ]),
  });
}

/**
 * What the current policy says of a stored session: the rules a create of it would meet now
 * (sessionAddressingErrors, and an ASN the policy blocks), pointers as in a create body. A policy tightened
 * after a session was stored does not remove it; the admin list shows these as `policyViolations`, and
 * approve and enable refuse the session with them (docs/api.md).
 */
export function policyViolations(
  session: Neighbour,
  router: RouterSpec | undefined,
  policy: PolicySpec,
  network: NetworkView,
): FieldError[] {
  const errors: FieldError[] = [];
  if (policy.blockedAsns?.includes(session.spec.asn))
    errors.push({
      pointer: '/asn',
      message: `AS${session.spec.asn} is blocked by the policy of router ${session.spec.router}`,
    });
  // a session of a removed router is the reconciler's (docs/architecture.md), not a policy matter
  if (router) errors.push(...sessionAddressingErrors(session.name, session.spec, router, policy, network));
  return errors;
}

/**
 * INVALID_STATE when the current policy no longer allows the session (policyViolations): approve and
 * enable would queue it for setup. INVALID_STATE rather than INVALID_REQUEST because the request is
 * right and the stored session is what breaks the rule; the errors name its fields as a create would.
 */
export function assertPolicyAllows(
  store: Pick<Store, 'listRouters' | 'listSessions' | 'getPolicy'>,
  session: Neighbour,
  action: string,
): void {
  const errors = policyJudge(store)(session);
  if (errors.length > 0)
    throw new ProblemError(
      'INVALID_STATE',
      `${action}: session ${session.name} breaks the current policy: ${errors[0]?.pointer}: ${errors[0]?.message}; reject it, or change the policy`,
      errors,
    );
}

/** policyViolations for the sessions of one store, with its routers, policies and sessions read once. */
export function policyJudge(
  store: Pick<Store, 'listRouters' | 'listSessions' | 'getPolicy'>,
): (session: Neighbour) => FieldError[] {
  const routers = store.listRouters();
  const byName = new Map(routers.map((r) => [r.name, r.spec]));
  const neighbours = neighbourIndex(routers, store.listSessions());
  const policies = new Map<string, PolicySpec>();
  return (session) => {
    const name = session.spec.router;
    let policy = policies.get(name);
    if (!policy) policies.set(name, (policy = mergedPolicy(store, name)));
    return policyViolations(session, byName.get(name), policy, neighbours(session.spec));
  };
}

/** A session as the admission rules count it: stored, or (Kubernetes) being created by this replica. */
export interface AdmissionSession {
  name: string;
  spec: Pick<SessionSpec, 'asn' | 'router' | 'ipv6' | 'ipv4'>;
  /** Its status code, or the first status a create in flight will store. */
  status: { code: number };
}

/**
 * What assertAdmission reads. Each store answers from its index plus the creates it has let through and
 * not yet indexed, and calls it inside its serialised write, so that creates sent at once are each judged
 * with the ones before them (docs/store.md, docs/kubernetes.md).
 */
export interface AdmissionView {
  router(name: string): RouterSpec | undefined;
  /** The policy merged for a router (mergedPolicy). */
  policyFor(router: string): PolicySpec;
  /** The sessions on a router, each name once. */
  sessionsOn(router: string): Iterable<AdmissionSession>;
  /** The sessions of an ASN, each name once. */
  sessionsOf(asn: number): Iterable<AdmissionSession>;
  /** What the address rules compare with (it may hold only the sessions near the new addresses). */
  network: NetworkView;
}

/** The one wording of SESSION_EXISTS, also for a create another replica won (AlreadyExists). */
export function sessionExistsError(asn: number, router: string): ProblemError {
  return new ProblemError(
    'SESSION_EXISTS',
    `AS${asn} already has a session (${sessionName(asn, router)}) on ${router}; delete it first`,
  );
}

/**
 * Every rule a new session must meet to be admitted, in the order docs/api.md gives (Create: the checks):
 * a known router, an ASN not blocked, a router accepting sessions, no session of this ASN on it yet, the
 * router below maxSessions, the ASN below maxPendingPerAsn sessions awaiting review, then the addressing
 * (assertSessionAddressing). `spec` is schema-checked. Returns the router's spec.
 */
export function assertAdmission(view: AdmissionView, spec: SessionSpec): RouterSpec {
  const { asn, router: routerName } = spec;
  const router = view.router(routerName);
  if (!router) throw new ProblemError('ROUTER_NOT_FOUND', `router ${routerName} does not exist`);
  const policy = view.policyFor(routerName);
  if (policy.blockedAsns?.includes(asn))
    throw new ProblemError('ASN_BLOCKED', `AS${asn} is blocked on this network; contact an administrator`);
  if (router.acceptingSessions === false)
    throw new ProblemError('ROUTER_FULL', `router ${routerName} is not accepting new sessions`);
  const name = sessionName(asn, routerName);
  let onRouter = 0;
  for (const s of view.sessionsOn(routerName)) {
    if (s.name === name || s.spec.asn === asn) throw sessionExistsError(asn, routerName);
    onRouter++;
  }
  if (router.maxSessions !== undefined && onRouter >= router.maxSessions)
    throw new ProblemError(
      'ROUTER_FULL',
      `router ${routerName} has reached its maximum of ${router.maxSessions} sessions`,
    );
  if (policy.maxPendingPerAsn !== undefined) {
    let pending = 0;
    for (const s of view.sessionsOf(asn))
      if (s.name !== name && s.status.code === SessionStatus.PENDING_REVIEW) pending++;
    if (pending >= policy.maxPendingPerAsn)
      throw new ProblemError(
        'CONFLICT',
        `AS${asn} already has ${pending} session${pending === 1 ? '' : 's'} awaiting review (limit ${policy.maxPendingPerAsn}); wait for a review`,
      );
  }
  assertSessionAddressing(name, spec, router, policy, view.network);
  return router;
}

/**
 * Router `name` with `spec` against routerSetErrors: INVALID_REQUEST for a rule on its own fields (port
 * range), else CONFLICT when it would share a uuid, nodeId or loopback with another router.
 */
export function assertNoRouterConflicts(
  name: string,
  spec: RouterSpec,
  routers: Iterable<{ name: string; spec: RouterSpec }>,
  prefix = '/spec',
): void {
  const own = routerSpecErrors(spec, prefix);
  if (own.length > 0)
    throw new ProblemError('INVALID_REQUEST', `router ${name} ${own[0]?.pointer}: ${own[0]?.message}`, own);
  const errors = routerConflicts(name, spec, routers, prefix);
  if (errors.length > 0) throw new ProblemError('CONFLICT', `router ${name}: ${errors[0]?.message}`, errors);
}

/** How many sessions assertRouterUnused names; the count says how many more there are. */
const NAMED_SESSIONS = 3;

/**
 * INVALID_STATE when sessions still use router `name` (removing it would strand them): the count, the
 * first few by name with uuid and status, and what to do. Both stores' deleteRouter throw it.
 */
export function assertRouterUnused(
  name: string,
  sessions: readonly Pick<Session, 'name' | 'spec' | 'status'>[],
): void {
  if (sessions.length === 0) return;
  const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
  const sorted = [...sessions].sort((a, b) => a.name.localeCompare(b.name));
  const named = sorted
    .slice(0, NAMED_SESSIONS)
    .map((s) => `${s.name} ${s.spec.uuid} (${s.status.name})`)
    .join(', ');
  const more = sorted.length > NAMED_SESSIONS ? ` and ${sorted.length - NAMED_SESSIONS} more` : '';
  const stuck = sessions.filter((s) => s.status.code === SessionStatus.QUEUED_FOR_DELETE).length;
  const others = sessions.length - stuck;
  const some = (n: number) => (n === 1 ? 'the one' : `the ${n}`);
  const todo: string[] = [];
  if (others > 0)
    todo.push(
      `delete ${stuck === 0 ? (others === 1 ? 'it' : 'them') : `${some(others)} not yet deleted`} first ` +
        '(peerops session delete UUID, or admin session reject in PENDING_REVIEW)',
    );
  if (stuck > 0) {
    const it = stuck === 1 ? 'it' : 'them';
    todo.push(
      `${some(stuck)} in QUEUED_FOR_DELETE ${stuck === 1 ? 'waits' : 'wait'} for the router's agent to ` +
        `tear ${it} down: if it will not, purge ${it} (peerops admin session purge UUID --reason TEXT)`,
    );
  }
  const advice = todo.join('; ');
  throw new ProblemError(
    'INVALID_STATE',
    `router ${name} still has ${plural(sessions.length, 'session')}: ${named}${more}. ` +
      `${advice.charAt(0).toUpperCase()}${advice.slice(1)}`,
  );
}

/** The validated new spec of a session; INVALID_REQUEST when it changes uuid, asn or router. */
export function checkedSessionSpec(current: Session, next: SessionSpec): SessionSpec {
  const spec = validateOrThrow<SessionSpec>(SessionSpecSchema, next, 'session');
  for (const field of ['uuid', 'asn', 'router'] as const) {
    if (spec[field] !== current.spec[field]) {
      throw new ProblemError('INVALID_REQUEST', `session ${field} cannot change`, [
        { pointer: `/${field}`, message: 'cannot change' },
      ]);
    }
  }
  return spec;
}

// ---- rules that span objects: for manifests merged in git, `peerops validate` and the admission webhook ----

/** What the rules that span objects need to know about the others (git files or stored objects). */
export interface ManifestSet {
  router(name: string): RouterSpec | undefined;
  /** The policy for sessions on `router`: the default, with the router's own policy over it field by field. */
  policyFor(router: string): PolicySpec;
  /** Name of the session (other than `self`) holding this port on this router. */
  portOwner(router: string, port: number, self: string): string | undefined;
  /** Name of the session (other than `self`) with this uuid. */
  sessionUuidOwner(uuid: string, self: string): string | undefined;
}

export function sessionSetErrors(
  name: string,
  spec: SessionSpecInput | SessionSpec,
  set: ManifestSet,
): FieldError[] {
  const errors: FieldError[] = [];
  if (!set.router(spec.router)) {
    errors.push({ pointer: '/spec/router', message: `names an unknown router '${spec.router}'` });
  }
  if (set.policyFor(spec.router).blockedAsns?.includes(spec.asn)) {
    errors.push({
      pointer: '/spec/asn',
      message: `AS${spec.asn} is blocked by the policy of router ${spec.router}`,
    });
  }
  if (spec.listenPort !== undefined) {
    const owner = set.portOwner(spec.router, spec.listenPort, name);
    if (owner) {
      errors.push({
        pointer: '/spec/listenPort',
        message: `port ${spec.listenPort} on router ${spec.router} is already used by session ${owner}`,
      });
    }
  }
  if (spec.uuid !== undefined) {
    const owner = set.sessionUuidOwner(spec.uuid, name);
    if (owner) errors.push({ pointer: '/spec/uuid', message: `uuid is already used by session ${owner}` });
  }
  return errors;
}

/** Policy-level advice that the store tolerates but validate reports. */
export function policyWarnings(name: string, spec: PolicySpec): FieldError[] {
  if (name === 'default' && spec.dn42Asn === undefined) {
    return [
      { pointer: '/spec/dn42Asn', message: "the default policy must set dn42Asn (the network's own ASN)" },
    ];
  }
  return [];
}
