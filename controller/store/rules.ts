/**
 * Rules every store back end enforces the same way, whatever holds the data: router names, router-set
 * uniqueness (uuid, nodeId), and the session fields that never change; and a session's addressing
 * against its router and policy. The git store applies the addressing rules to manifests merged in git,
 * and `peerops validate` the router-set and addressing rules to a GitOps checkout.
 */
import { ProblemError, type FieldError } from '../../common/errors.ts';
import { inRanges } from '../../common/net.ts';
import { sessionName } from '../../common/naming.ts';
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

/** Router-level rules: unique uuid and nodeId across routers. */
export function routerSetErrors(
  name: string,
  spec: RouterSpec,
  routers: Iterable<{ name: string; spec: RouterSpec }>,
): FieldError[] {
  const errors: FieldError[] = [];
  for (const other of routers) {
    if (other.name === name) continue;
    if (other.spec.uuid === spec.uuid) {
      errors.push({ pointer: '/spec/uuid', message: `uuid is already used by router ${other.name}` });
    }
    if (other.spec.nodeId === spec.nodeId) {
      errors.push({
        pointer: '/spec/nodeId',
        message: `nodeId ${spec.nodeId} is already used by router ${other.name}`,
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

/** The fields of a session that `sessionAddressingErrors` judges (a create body or a stored spec). */
export type SessionAddressing = Pick<
  SessionSpec,
  'asn' | 'ipv6' | 'ipv4' | 'linkLocal' | 'mpbgp' | 'extendedNextHop'
>;

/** The other routers and sessions a session's peer addresses are compared with. */
export interface NetworkView {
  routers: Iterable<{ name: string; spec: RouterSpec }>;
  sessions: Iterable<{ name: string; spec: Pick<SessionSpec, 'asn' | 'ipv6' | 'ipv4'> }>;
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
  ];
}

/**
 * Peer addresses in the policy's ranges, a link-local that is not the router's own, and the MP-BGP /
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
  if (!inRanges(spec.ipv6, policy.peerAddressRanges?.ipv6))
    at('ipv6', `must be inside ${policy.peerAddressRanges?.ipv6?.join(', ')}`);
  if (spec.ipv4 !== undefined && !inRanges(spec.ipv4, policy.peerAddressRanges?.ipv4))
    at('ipv4', `must be inside ${policy.peerAddressRanges?.ipv4?.join(', ')}`);
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

/** CONFLICT when router `name` with `spec` would share a uuid or nodeId with another router. */
export function assertNoRouterConflicts(
  name: string,
  spec: RouterSpec,
  routers: Iterable<{ name: string; spec: RouterSpec }>,
): void {
  const errors = routerSetErrors(name, spec, routers);
  if (errors.length > 0) throw new ProblemError('CONFLICT', `router ${name}: ${errors[0]?.message}`, errors);
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
