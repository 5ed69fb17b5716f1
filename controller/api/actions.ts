/**
 * Helpers shared by the user, admin and agent routes: actors, ownership and the one way a status
 * changes (through common/state-machine.ts).
 */
import { problem } from '../../common/messages.ts';
import { transition, type Outcome, type Trigger } from '../../common/state-machine.ts';
import { approvedAfterModify, isApproved, withApproved } from '../../common/approved-spec.ts';
import { SessionStatus, statusName, type SessionStatusCode } from '../../common/status.ts';
import type { Decision, SessionStatusRecord } from '../../common/schema.ts';
import type { Identity } from '../auth/jwt.ts';
import type { Actor, Session, SessionChange, Store } from '../store/store.ts';

export function actorOf(identity: Identity): Actor {
  return identity.role === 'admin'
    ? { name: `admin AS${identity.asn}`, role: 'admin', asn: identity.asn }
    : { name: `AS${identity.asn}`, role: 'user', asn: identity.asn };
}

/** May this identity see and change the session? Users: only their ASN's; admins: all. */
export function owns(identity: Identity, session: Session): boolean {
  return identity.role === 'admin' || session.spec.asn === identity.asn;
}

/** The session, or SESSION_NOT_FOUND (also for another ASN's session: existence is not revealed). */
export function findOwned(store: Store, identity: Identity, uuid: string): Session {
  const session = store.getSession(uuid);
  if (!session || !owns(identity, session)) throw problem('session.notFound', { uuid: uuid });
  return session;
}

export function statusRecord(
  code: SessionStatusCode,
  previous: SessionStatusRecord | undefined,
  now: string,
  lastError?: SessionStatusRecord['lastError'],
): SessionStatusRecord {
  const record: SessionStatusRecord = {
    code,
    name: statusName(code),
    lastTransitionTime:
      previous && previous.code === code && previous.lastTransitionTime ? previous.lastTransitionTime : now,
  };
  if (previous?.interface) record.interface = previous.interface;
  if (previous?.metrics) record.metrics = previous.metrics;
  if (previous?.bgpState !== undefined) record.bgpState = previous.bgpState;
  if (previous?.bgpSince !== undefined) record.bgpSince = previous.bgpSince;
  // still waiting for the peer after a change that leaves the status (a modify of a queued session)
  if (previous?.waiting && previous.code === code) record.waiting = previous.waiting;
  if (lastError) record.lastError = lastError;
  // an admin's decision stays as long as the status it led to (a modify of a DISABLED session keeps it)
  if (previous?.decision && previous.code === code) record.decision = previous.decision;
  return record;
}

/**
 * The store change a trigger makes. `spec` edits the spec (modify, restart); lastError is kept unless the
 * session is queued for setup again, which clears it. `decision`: an admin's reject, disable or purge,
 * stored in the status for the owner to read (docs/api.md, Decisions).
 */
export function applyTrigger(
  session: Session,
  trigger: Trigger,
  now: string,
  editSpec?: (spec: Session['spec'], outcome: Outcome) => Session['spec'],
  decision?: Decision,
): SessionChange {
  const from = session.status.code;
  const outcome = transition(from, trigger);
  const held = session.status.approved;
  // A modify in review on a session its router runs (common/approved-spec.ts): reject takes the change
  // back, delete tears down what runs; either way the approved spec is the session's again.
  if (held && (trigger.kind === 'reject' || trigger.kind === 'delete')) {
    const spec = withApproved(session.spec, held.spec);
    const status =
      trigger.kind === 'reject'
        ? backOnRouter(session.status, held.status, now)
        : statusRecord(SessionStatus.QUEUED_FOR_DELETE, session.status, now);
    if (decision) status.decision = decision;
    return { spec, status };
  }
  if (outcome.result === 'removed') return { delete: true };
  const spec = editSpec ? editSpec(session.spec, outcome) : session.spec;
  // a modify that asks for the approved values again needs no review: the session is as the router runs it
  if (held && trigger.kind === 'modify' && isApproved(spec, held.spec))
    return { spec: withApproved(spec, held.spec), status: backOnRouter(session.status, held.status, now) };
  const keepError = outcome.to === from ? session.status.lastError : undefined;
  const status = statusRecord(outcome.to, session.status, now, keepError);
  const approved = trigger.kind === 'modify' ? approvedAfterModify(session, outcome.to) : undefined;
  if (approved) status.approved = approved;
  if (decision) status.decision = decision;
  return { spec, status };
}

/** The record of a session out of review with the status its router reported for it meanwhile. */
function backOnRouter(
  status: SessionStatusRecord,
  code: SessionStatusCode,
  now: string,
): SessionStatusRecord {
  const { approved: _approved, ...rest } = status;
  return statusRecord(code, { ...rest, code, name: statusName(code) }, now, status.lastError);
}
