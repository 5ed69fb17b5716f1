/**
 * The notification events (docs/notifications.md): their names, who may receive each, their payload,
 * and the one reading of a session's status change as an event. Pure. The store derives them from each
 * write's state change and keeps them in its outbox with that change (store.ts, outbox); notify delivers.
 */
import { createHash } from 'node:crypto';
import { SessionStatus, isTerminal } from '../../../common/status.ts';
import type { ForgeConflict, SessionSpec } from '../../../common/schema.ts';
import type { Router, Session } from '../store.ts';

export const EVENT_TYPES = [
  'session.created',
  'session.pending_review',
  'session.approved',
  'session.rejected',
  'session.active',
  'session.error',
  'session.setup_failed',
  'session.deleted',
  'router.agent_offline',
  'store.forge_conflict',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** Events only admins' hooks receive: a peer learns of its own sessions' decisions and states. */
const ADMIN_ONLY: ReadonlySet<EventType> = new Set([
  'session.created',
  'session.pending_review',
  'router.agent_offline',
  'store.forge_conflict',
]);

/** The session as an event carries it: what identifies it and where it stands, nothing secret. */
export interface EventSession {
  uuid: string;
  name: string;
  asn: number;
  router: string;
  status: string;
  lastError: { code: string; message: string } | null;
}

export interface NotificationEvent {
  /** Stable for the same change seen twice (a receiver can drop a repeat by it). */
  id: string;
  type: EventType;
  /** ISO time of the change (the status's lastTransitionTime where there is one). */
  occurredAt: string;
  session?: EventSession;
  router?: { name: string; lastHeartbeat: string | null };
  /** Why: a rejection's reason, an offline agent's last heartbeat, what a forge edit replaced. */
  reason?: string;
  /** A change the store acknowledged that a forge edit replaced (docs/gitops.md), and where it is kept. */
  conflict?: ForgeConflict;
}

/** May a hook of this scope receive the event? Admin hooks: everything; an ASN's hook: its sessions' events. */
export function visibleTo(hook: { asn: number | null }, event: NotificationEvent): boolean {
  if (hook.asn === null) return true;
  return !ADMIN_ONLY.has(event.type) && event.session?.asn === hook.asn;
}

function eventId(...parts: string[]): string {
  return createHash('sha256').update(parts.join('\n')).digest('hex').slice(0, 32);
}

/**
 * A session as events read it: a stored one, or what a status file alone tells of one whose spec is gone
 * (git store: a manifest removed on the forge).
 */
export interface EventSource {
  name: string;
  spec: Pick<SessionSpec, 'uuid' | 'asn' | 'router'> & { createdAt?: string };
  status: Session['status'];
}

export function eventSession(session: EventSource): EventSession {
  return {
    uuid: session.spec.uuid,
    name: session.name,
    asn: session.spec.asn,
    router: session.spec.router,
    status: session.status.name,
    lastError: session.status.lastError ?? null,
  };
}

export function sessionEvent(
  type: EventType,
  session: EventSource,
  at: string,
  reason?: string,
): NotificationEvent {
  return {
    id: eventId(type, session.spec.uuid, at),
    type,
    occurredAt: at,
    session: eventSession(session),
    ...(reason !== undefined ? { reason } : {}),
  };
}

export function agentOfflineEvent(router: Router, at: string): NotificationEvent {
  const last = router.status.lastHeartbeat ?? null;
  return {
    id: eventId('router.agent_offline', router.name, last ?? 'never'),
    type: 'router.agent_offline',
    occurredAt: at,
    router: { name: router.name, lastHeartbeat: last },
    reason: last === null ? 'no heartbeat yet' : `no heartbeat since ${last}`,
  };
}

/** A change a forge edit replaced (the git store's rebuild, docs/gitops.md): told to admins once. */
export function forgeConflictEvent(conflict: ForgeConflict): NotificationEvent {
  return {
    id: eventId('store.forge_conflict', conflict.id),
    type: 'store.forge_conflict',
    occurredAt: conflict.detectedAt,
    conflict,
    reason:
      `an edit on the forge (${conflict.forgeCommit.slice(0, 7)}) replaced the change of ${conflict.path} ` +
      `by ${conflict.actor} at ${conflict.at}; kept on branch ${conflict.branch}`,
  };
}

/** The event a status moving from `before` (undefined: new) to `after` means, if any. */
function statusEventType(before: number | undefined, after: number): EventType | undefined {
  if (before === after) return undefined;
  switch (after) {
    // a new session, or one a modify sent back to review (docs/api.md, modify)
    case SessionStatus.PENDING_REVIEW:
      return 'session.pending_review';
    case SessionStatus.QUEUED_FOR_SETUP:
      return before === SessionStatus.PENDING_REVIEW ? 'session.approved' : undefined;
    case SessionStatus.ACTIVE:
      return 'session.active';
    case SessionStatus.ERROR:
      return 'session.error';
    case SessionStatus.SETUP_FAILED:
      return 'session.setup_failed';
    default:
      return undefined;
  }
}

/**
 * The events between two readings of one session. `before` undefined: it appeared; `after` undefined: it
 * is gone (`session.deleted`, whatever removed it). A rejection (an admin's, or the reconciler's of a
 * request whose router is gone) is the move to REJECTED, its reason in the status's decision, told once
 * by the leader as every change; REJECTED and PURGED are the session gone from its router
 * (`session.deleted` then, nothing when the record itself goes: docs/api.md, Decisions).
 */
export function sessionEvents(
  before: EventSource | undefined,
  after: EventSource | undefined,
  now: string,
): NotificationEvent[] {
  if (after === undefined) {
    if (before === undefined || isTerminal(before.status.code)) return [];
    return [sessionEvent('session.deleted', before, now)];
  }
  if (isTerminal(after.status.code)) {
    if (before === undefined || before.status.code === after.status.code) return [];
    const at = after.status.decision?.at ?? after.status.lastTransitionTime ?? now;
    const rejected =
      after.status.code === SessionStatus.REJECTED
        ? [sessionEvent('session.rejected', after, at, after.status.decision?.reason)]
        : [];
    return [...rejected, sessionEvent('session.deleted', after, at)];
  }
  const at = after.status.lastTransitionTime ?? now;
  const events: NotificationEvent[] = [];
  if (before === undefined) events.push(sessionEvent('session.created', after, after.spec.createdAt ?? at));
  // a modify in review rejected: the session stays on its router with its approved spec (docs/api.md)
  if (before?.status.approved && !after.status.approved && after.status.decision?.action === 'reject')
    return [sessionEvent('session.rejected', after, after.status.decision.at, after.status.decision.reason)];
  // while a change waits for review, what the router reports of the session it runs is told as ever
  const [wasHeld, isHeld] = [before?.status.approved, after.status.approved];
  const type =
    wasHeld && isHeld
      ? statusEventType(wasHeld.status, isHeld.status)
      : statusEventType(before?.status.code, after.status.code);
  if (type) events.push(sessionEvent(type, after, at));
  return events;
}

/**
 * The events of one write's change to the session stored under a name: `before` as it was, `after` as
 * the write leaves it. Another uuid under the same name (a forge replaced the manifest) is the old
 * session gone and a new one come.
 */
export function changeEvents(
  before: EventSource | undefined,
  after: EventSource | undefined,
  now = new Date().toISOString(),
): NotificationEvent[] {
  if (before && after && before.spec.uuid !== after.spec.uuid)
    return [...sessionEvents(before, undefined, now), ...sessionEvents(undefined, after, now)];
  if (before && after && before.status === after.status) return [];
  return sessionEvents(before, after, now);
}
