/**
 * The session status transitions of docs/architecture.md (the life of a session), as one pure function. Every caller (REST API,
 * admin API, agent reports, reconciler) asks here; a pair that is not in the table is INVALID_STATE.
 */
import type { DomainError } from './errors.ts';
import { fault } from './messages.ts';
import { SessionStatus as S, statusName, type SessionStatusCode } from './status.ts';

export type Trigger =
  | { kind: 'create'; autoApprove: boolean }
  | { kind: 'merge'; mergeIsApproval: boolean }
  | { kind: 'approve' }
  | { kind: 'reject' }
  /** `review`: the change waits for an admin's review (docs/api.md, modify: which changes do). */
  | { kind: 'modify'; review?: boolean }
  | { kind: 'restart' }
  | { kind: 'delete' }
  | { kind: 'disable' }
  | { kind: 'enable' }
  /** Admin only: a session whose agent never tore it down is closed without it (docs/api.md). */
  | { kind: 'purge' }
  | { kind: 'report'; status: SessionStatusCode };

export type TriggerKind = Trigger['kind'];

export type Outcome =
  /** The session moves to (or stays in) `to`. */
  | { result: 'status'; to: SessionStatusCode; restart: boolean }
  /** The session is removed from the store. */
  | { result: 'removed' };

const to = (code: SessionStatusCode, restart = false): Outcome => ({ result: 'status', to: code, restart });
const removed: Outcome = { result: 'removed' };

type Table = Partial<Record<SessionStatusCode, Outcome>>;

const USER_AND_ADMIN: Record<Exclude<TriggerKind, 'create' | 'merge' | 'report'>, Table> = {
  approve: { [S.PENDING_REVIEW]: to(S.QUEUED_FOR_SETUP) },
  // terminal: shown to the owner with the reason, removed by delete or after TERMINAL_RETENTION_MS
  reject: { [S.PENDING_REVIEW]: to(S.REJECTED) },
  modify: {
    [S.ACTIVE]: to(S.QUEUED_FOR_SETUP),
    [S.ERROR]: to(S.QUEUED_FOR_SETUP),
    [S.SETUP_FAILED]: to(S.QUEUED_FOR_SETUP),
    [S.PENDING_REVIEW]: to(S.PENDING_REVIEW),
    [S.QUEUED_FOR_SETUP]: to(S.QUEUED_FOR_SETUP),
    [S.DISABLED]: to(S.DISABLED),
  },
  restart: {
    [S.ACTIVE]: to(S.QUEUED_FOR_SETUP, true),
    [S.ERROR]: to(S.QUEUED_FOR_SETUP, true),
    [S.SETUP_FAILED]: to(S.QUEUED_FOR_SETUP, true),
  },
  delete: {
    [S.DISABLED]: to(S.QUEUED_FOR_DELETE),
    [S.ACTIVE]: to(S.QUEUED_FOR_DELETE),
    [S.ERROR]: to(S.QUEUED_FOR_DELETE),
    [S.QUEUED_FOR_SETUP]: to(S.QUEUED_FOR_DELETE),
    [S.SETUP_FAILED]: to(S.QUEUED_FOR_DELETE),
    [S.PENDING_REVIEW]: removed,
    [S.REJECTED]: removed,
    [S.PURGED]: removed,
  },
  disable: {
    [S.ACTIVE]: to(S.DISABLED),
    [S.ERROR]: to(S.DISABLED),
    [S.QUEUED_FOR_SETUP]: to(S.DISABLED),
    [S.SETUP_FAILED]: to(S.DISABLED),
  },
  enable: { [S.DISABLED]: to(S.QUEUED_FOR_SETUP) },
  purge: { [S.QUEUED_FOR_DELETE]: to(S.PURGED) },
};

/**
 * A modify that needs a review: the session leaves the router and waits for an admin, as a create does;
 * a disabled session stays disabled (enable queues it for setup, and enable checks the policy).
 */
const MODIFY_FOR_REVIEW: Table = {
  [S.ACTIVE]: to(S.PENDING_REVIEW),
  [S.ERROR]: to(S.PENDING_REVIEW),
  [S.SETUP_FAILED]: to(S.PENDING_REVIEW),
  [S.QUEUED_FOR_SETUP]: to(S.PENDING_REVIEW),
  [S.PENDING_REVIEW]: to(S.PENDING_REVIEW),
  [S.DISABLED]: to(S.DISABLED),
};

/** Agent reports: current status → reported status → outcome. */
const REPORTS: Partial<Record<SessionStatusCode, Table>> = {
  // ERROR from a setup: configured on the router, but BGP not Established after the grace (docs/agent.md);
  // SETUP_FAILED → QUEUED_FOR_SETUP: a retried setup worked and waits for BGP, its old error cleared.
  // QUEUED_FOR_SETUP → QUEUED_FOR_SETUP: configured, BGP not Established yet; the report carries BIRD's
  // state (the router waits for the peer: common/waiting.ts).
  [S.QUEUED_FOR_SETUP]: {
    [S.QUEUED_FOR_SETUP]: to(S.QUEUED_FOR_SETUP),
    [S.ACTIVE]: to(S.ACTIVE),
    [S.SETUP_FAILED]: to(S.SETUP_FAILED),
    [S.ERROR]: to(S.ERROR),
  },
  [S.SETUP_FAILED]: {
    [S.SETUP_FAILED]: to(S.SETUP_FAILED),
    [S.ACTIVE]: to(S.ACTIVE),
    [S.ERROR]: to(S.ERROR),
    [S.QUEUED_FOR_SETUP]: to(S.QUEUED_FOR_SETUP),
  },
  [S.ACTIVE]: { [S.ERROR]: to(S.ERROR), [S.ACTIVE]: to(S.ACTIVE) },
  [S.ERROR]: { [S.ACTIVE]: to(S.ACTIVE), [S.ERROR]: to(S.ERROR) },
  [S.QUEUED_FOR_DELETE]: { [S.DISABLED]: removed },
};

/** The outcome of `trigger` on a session in status `from` (undefined: a new session). Throws INVALID_STATE. */
export function transition(from: SessionStatusCode | undefined, trigger: Trigger): Outcome {
  if (trigger.kind === 'create' || trigger.kind === 'merge') {
    if (from !== undefined) throw invalid(from, trigger);
    const approved = trigger.kind === 'create' ? trigger.autoApprove : trigger.mergeIsApproval;
    return to(approved ? S.QUEUED_FOR_SETUP : S.PENDING_REVIEW);
  }
  if (from === undefined) throw fault('session.needsExisting', { action: trigger.kind });
  const outcome =
    trigger.kind === 'report'
      ? REPORTS[from]?.[trigger.status]
      : trigger.kind === 'modify' && trigger.review
        ? MODIFY_FOR_REVIEW[from]
        : USER_AND_ADMIN[trigger.kind][from];
  if (!outcome) throw invalid(from, trigger);
  return outcome;
}

/** Is the trigger allowed from this status? (For listing the actions a client may offer.) */
export function allowed(from: SessionStatusCode, trigger: Trigger): boolean {
  try {
    transition(from, trigger);
    return true;
  } catch {
    return false;
  }
}

function invalid(from: SessionStatusCode, trigger: Trigger): DomainError {
  const what =
    trigger.kind === 'report'
      ? `a report of status ${trigger.status} (${statusName(trigger.status)})`
      : trigger.kind;
  return fault('session.transition', { action: what, status: from, statusName: statusName(from) });
}
