/**
 * A session a modify sends back to review stays on its router with the spec last approved until an admin
 * decides (docs/api.md, modify): its status record keeps that spec and the status the session has on the
 * router (`status.approved`), agents are served them and report against them. These are the rules of
 * that copy; which status a trigger leads to is common/state-machine.ts.
 */
import { sessionOptions, type ApprovedSpec, type SessionSpec, type SessionStatusRecord } from './schema.ts';
import { isTerminal, SessionStatus, type SessionStatusCode } from './status.ts';

type Approved = NonNullable<SessionStatusRecord['approved']>;

/** The fields of a spec an admin's approval covers: those a modify can change. */
export function approvedSpecOf(spec: SessionSpec): ApprovedSpec {
  return {
    ipv6: spec.ipv6,
    linkLocal: spec.linkLocal,
    ...(spec.ipv4 !== undefined && { ipv4: spec.ipv4 }),
    ...(spec.endpoint !== undefined && { endpoint: spec.endpoint }),
    publicKey: spec.publicKey,
    ...sessionOptions(spec),
  };
}

/** `spec` with the approved values in place of the requested ones. */
export function withApproved(spec: SessionSpec, approved: ApprovedSpec): SessionSpec {
  const { ipv4: _ipv4, endpoint: _endpoint, ...rest } = spec;
  return { ...rest, ...approved };
}

/** Does `spec` ask for exactly what was approved (a change taken back)? */
export function isApproved(spec: SessionSpec, approved: ApprovedSpec): boolean {
  return (
    JSON.stringify(approvedSpecOf(spec)) === JSON.stringify(approvedSpecOf(withApproved(spec, approved)))
  );
}

/**
 * What the session's router should run: the spec and the status the agent is served; undefined when
 * nothing of the session belongs on the router (a request in review, REJECTED, PURGED).
 */
export function onRouter(session: {
  spec: SessionSpec;
  status: SessionStatusRecord;
}): { spec: SessionSpec; status: SessionStatusCode } | undefined {
  const { spec, status } = session;
  if (status.approved)
    return { spec: withApproved(spec, status.approved.spec), status: status.approved.status };
  if (status.code === SessionStatus.PENDING_REVIEW || isTerminal(status.code)) return undefined;
  return { spec, status: status.code };
}

/**
 * The copy a modify leaves, from a session in `from` holding `held` (if any), to status `to`: a session
 * the router runs (1, 2, 4, 6) sent to review keeps its spec there; one in review keeps the copy it
 * holds; anything else holds none.
 */
export function approvedAfterModify(
  before: { spec: SessionSpec; status: SessionStatusRecord },
  to: SessionStatusCode,
): Approved | undefined {
  if (to !== SessionStatus.PENDING_REVIEW) return undefined;
  if (before.status.approved) return before.status.approved;
  const running = onRouter(before);
  return running && { spec: approvedSpecOf(running.spec), status: running.status };
}
