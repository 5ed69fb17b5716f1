/**
 * The rules on sessions as objects: the first status of a merged one, admission of a new one (every
 * rule, in the order docs/api.md gives), what an update may change and which change waits for a review,
 * and the rules spanning manifests
 * (unknown router, blocked ASN, a port or uuid held twice).
 */
import type { DomainError, FieldError } from '../errors.ts';
import { fault, fieldAtFault, fieldError } from '../messages.ts';
import { sessionName } from '../naming.ts';
import {
  SessionSpec as SessionSpecSchema,
  type PolicySpec,
  type RouterSpec,
  type SessionSpec,
  type SessionSpecInput,
  type SessionStatusRecord,
} from '../schema.ts';
import { transition } from '../state-machine.ts';
import { isTerminal, SessionStatus, statusName } from '../status.ts';
import { validateOrThrow } from '../validate.ts';
import { assertSessionAddressing, type NetworkView } from './addressing.ts';
import { blockedAsnError } from './policy.ts';

/**
 * The first status of a session that came without one, merged into the GitOps repo (git) or applied by
 * kubectl/Flux/Argo CD (Kubernetes): PENDING_REVIEW, or QUEUED_FOR_SETUP where the default policy says a
 * merge is an approval (docs/architecture.md), since `at`. An adopted session waits for review whatever
 * the policy, as one adopted through the API does (docs/gitops.md, "Adopted sessions by pull request").
 */
export function mergedSessionStatus(
  mergeIsApproval: boolean,
  at: string | undefined,
  adopted: boolean,
): SessionStatusRecord {
  const outcome = transition(undefined, { kind: 'merge', mergeIsApproval: mergeIsApproval && !adopted });
  const code = outcome.result === 'status' ? outcome.to : SessionStatus.PENDING_REVIEW;
  return { code, name: statusName(code), ...(at !== undefined ? { lastTransitionTime: at } : {}) };
}

/** Does a manifest's spec hold every field the store fills in (uuid, listenPort, createdAt, adoption's who and when)? */
export function isCompleteSpec(spec: SessionSpecInput): spec is SessionSpec {
  return (
    spec.uuid !== undefined &&
    spec.listenPort !== undefined &&
    spec.createdAt !== undefined &&
    (spec.adopted === undefined || (spec.adopted.by !== undefined && spec.adopted.at !== undefined))
  );
}

/** A session as the admission rules count it: stored, or (Kubernetes) being created by this replica. */
export interface AdmissionSession {
  name: string;
  spec: Pick<SessionSpec, 'asn' | 'router' | 'ipv6' | 'ipv4'>;
  /** Its status code, or the first status a create in flight will store. */
  status: { code: number };
}

/**
 * What assertAdmission judges a new session against, gathered by the store from its index plus the
 * creates it has let through and not yet indexed, inside its serialised write, so that creates sent at
 * once are each judged with the ones before them (docs/store.md, docs/kubernetes.md).
 */
export interface AdmissionFacts {
  /** The spec of the session's router; undefined when there is no such router. */
  router: RouterSpec | undefined;
  /** The policy merged for that router (mergedPolicy). */
  policy: PolicySpec;
  /** The sessions on the router, each name once. */
  onRouter: Iterable<AdmissionSession>;
  /** The sessions of the ASN, each name once. */
  ofAsn: Iterable<AdmissionSession>;
  /** What the address rules compare with (it may hold only the sessions near the new addresses). */
  network: NetworkView;
}

/** The one wording of SESSION_EXISTS, also for a create another replica won (AlreadyExists). */
export function sessionExistsError(asn: number, router: string): DomainError {
  return fault('session.exists', { asn, name: sessionName(asn, router), router });
}

/**
 * Every rule a new session must meet to be admitted, in the order docs/api.md gives (Create: the checks):
 * its DN42 IPv6 unless adopted (sessionIpv6Errors), a known router, an ASN not blocked, a router accepting sessions, no session of this ASN on it yet, the
 * router below maxSessions, the ASN below maxPendingPerAsn sessions awaiting review, then the addressing
 * (assertSessionAddressing). `spec` is schema-checked. Returns the router's spec.
 */
export function assertAdmission(facts: AdmissionFacts, spec: SessionSpec): RouterSpec {
  const { asn, router: routerName } = spec;
  const missing = sessionIpv6Errors(spec);
  if (missing.length > 0) throw fault('request.fieldRefused', fieldAtFault(missing), missing);
  const { router, policy } = facts;
  if (!router) throw fault('router.notFound', { name: routerName });
  if (policy.blockedAsns?.includes(asn)) {
    throw fault('session.asnBlocked', { asn, router: routerName }, [
      blockedAsnError('/asn', asn, routerName),
    ]);
  }
  if (router.acceptingSessions === false) throw fault('router.notAccepting', { name: routerName });
  const name = sessionName(asn, routerName);
  let onRouter = 0;
  for (const s of facts.onRouter) {
    // a REJECTED or PURGED record counts against no limit; a new create replaces it (docs/api.md, Decisions)
    if (isTerminal(s.status.code)) continue;
    if (s.name === name || s.spec.asn === asn) throw sessionExistsError(asn, routerName);
    onRouter++;
  }
  if (router.maxSessions !== undefined && onRouter >= router.maxSessions)
    throw fault('router.full', { name: routerName, max: router.maxSessions });
  if (policy.maxPendingPerAsn !== undefined) {
    let pending = 0;
    for (const s of facts.ofAsn)
      if (s.name !== name && s.status.code === SessionStatus.PENDING_REVIEW) pending++;
    if (pending >= policy.maxPendingPerAsn)
      throw fault('session.pendingLimit', { asn, pending, limit: policy.maxPendingPerAsn });
  }
  assertSessionAddressing(name, spec, router, policy, facts.network);
  return router;
}

/**
 * A session names the peer's DN42 IPv6 unless it was adopted: a hand-made peer may speak BGP over the
 * link-local alone (docs/api.md, Adoptions). The schema leaves `ipv6` optional for those; this is the rule
 * for the other sessions, where manifests arrive without the API (git files, Kubernetes objects). The
 * REST create's body requires the field itself.
 */
export function sessionIpv6Errors(
  spec: Pick<SessionSpecInput, 'ipv6' | 'adopted'>,
  prefix = '',
): FieldError[] {
  return spec.ipv6 === undefined && spec.adopted === undefined
    ? [fieldError(`${prefix}/ipv6`, 'field.ipv6UnlessAdopted')]
    : [];
}

/** The validated new spec of a session; INVALID_REQUEST when it changes uuid, asn or router. */
export function checkedSessionSpec(current: { spec: SessionSpec }, next: SessionSpec): SessionSpec {
  const spec = validateOrThrow<SessionSpec>(SessionSpecSchema, next, 'session');
  const missing = sessionIpv6Errors(spec);
  if (missing.length > 0) throw fault('request.fieldRefused', fieldAtFault(missing), missing);
  for (const field of ['uuid', 'asn', 'router'] as const) {
    if (spec[field] !== current.spec[field]) {
      throw fault('session.fieldFixed', { field }, [fieldError(`/${field}`, 'field.cannotChange')]);
    }
  }
  return spec;
}

/**
 * Whether a router's autoApprove takes effect. Auto-approval skips the review, and where no DN42
 * registry's route objects check a session's addresses (admin-minted tokens, a users file) the review is
 * the only check that they are the peer's own, while the router routes a session's `ipv6` into its
 * tunnel. So it holds only where `allowed`: route objects are checked, or the operator chose to trust
 * every peer (docs/operator-guide.md, section 4).
 */
export function autoApproves(router: Pick<RouterSpec, 'autoApprove'>, allowed: boolean): boolean {
  return (router.autoApprove ?? false) && allowed;
}

/**
 * Whether a peer's modify from `before` to `after` waits for an admin's review (docs/api.md, modify). A
 * new peer address (ipv6, or an ipv4 set or changed) is what the review of a create judges, so it follows
 * the router's autoApprove as it takes effect (`autoApproves`); a new WireGuard key waits only where the
 * policy's reviewKeyChanges says so (docs/decisions.md). Link-local, MTU, endpoint, the BGP options and
 * removing the IPv4 address stay inside the peer's own tunnel: never. An admin's modify is its own review
 * (the caller's matter).
 */
export function modifyNeedsReview(
  before: Pick<SessionSpec, 'ipv6' | 'ipv4' | 'publicKey'>,
  after: Pick<SessionSpec, 'ipv6' | 'ipv4' | 'publicKey'>,
  autoApprove: boolean,
  policy: Pick<PolicySpec, 'reviewKeyChanges'>,
): boolean {
  const newAddress = after.ipv6 !== before.ipv6 || (after.ipv4 !== undefined && after.ipv4 !== before.ipv4);
  if (newAddress && !autoApprove) return true;
  return after.publicKey !== before.publicKey && (policy.reviewKeyChanges ?? false);
}

// ---- rules that span objects: for manifests merged in git, `peerops validate` and the admission webhook ----

/**
 * What sessionSetErrors judges a session manifest against, gathered by its caller from what it holds
 * (the files of a tree, the store's index, the objects a webhook's replica lists) for that one session.
 */
export interface SessionSetFacts {
  /** The spec of the session's router; undefined when there is no such router. */
  router: RouterSpec | undefined;
  /** The policy merged for that router (mergePolicies): the default, the router's own over it. */
  policy: PolicySpec;
  /** Names of the sessions holding the session's listenPort on its router (it may be one of them). */
  portHolders: readonly string[];
  /** Names of the sessions with the session's uuid (it may be one of them). */
  uuidHolders: readonly string[];
}

/**
 * The rules spanning manifests, for one session `name` (a known router, an ASN not blocked there, a listen
 * port and a uuid no other session holds), judged against `facts` about that session.
 */
export function sessionSetErrors(
  name: string,
  spec: SessionSpecInput | SessionSpec,
  facts: SessionSetFacts,
): FieldError[] {
  const errors: FieldError[] = [];
  if (!facts.router) {
    errors.push(fieldError('/spec/router', 'field.unknownRouter', { router: spec.router }));
  }
  if (facts.policy.blockedAsns?.includes(spec.asn)) {
    errors.push(blockedAsnError('/spec/asn', spec.asn, spec.router));
  }
  if (spec.listenPort !== undefined) {
    const owner = facts.portHolders.find((holder) => holder !== name);
    if (owner) {
      errors.push(
        fieldError('/spec/listenPort', 'field.sessionPortTaken', {
          port: spec.listenPort,
          router: spec.router,
          session: owner,
        }),
      );
    }
  }
  if (spec.uuid !== undefined) {
    const owner = facts.uuidHolders.find((holder) => holder !== name);
    if (owner) errors.push(fieldError('/spec/uuid', 'field.uuidOfSession', { session: owner }));
  }
  return errors;
}
