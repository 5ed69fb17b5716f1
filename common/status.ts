/** Session status codes (docs/api.md, Session status). The numbers are the wire format; never renumber. */
export const SessionStatus = {
  DISABLED: 0,
  ACTIVE: 1,
  ERROR: 2,
  PENDING_REVIEW: 3,
  QUEUED_FOR_SETUP: 4,
  QUEUED_FOR_DELETE: 5,
  SETUP_FAILED: 6,
  /** Terminal: an admin rejected the request; shown to its owner with the reason, then removed. */
  REJECTED: 7,
  /** Terminal: an admin purged a session its router never tore down; shown with the reason, then removed. */
  PURGED: 8,
} as const;

export type SessionStatusCode = (typeof SessionStatus)[keyof typeof SessionStatus];
export type SessionStatusName = keyof typeof SessionStatus;

const names = Object.fromEntries(Object.entries(SessionStatus).map(([name, code]) => [code, name])) as Record<
  SessionStatusCode,
  SessionStatusName
>;

export function statusName(code: SessionStatusCode): SessionStatusName {
  return names[code];
}

export function isStatusCode(value: unknown): value is SessionStatusCode {
  return typeof value === 'number' && Object.hasOwn(names, value);
}

export const ALL_STATUS_CODES = Object.values(SessionStatus);

/**
 * How long a terminal session (REJECTED, PURGED) stays visible to its owner before the reconciler
 * removes it (docs/api.md, Decisions): a week, so a peer who checks weekly still reads the reason.
 */
export const TERMINAL_RETENTION_MS = 7 * 24 * 3600 * 1000;

/** A terminal session holds nothing on its router and counts against no limit (docs/api.md, Decisions). */
export function isTerminal(code: number): boolean {
  return code === SessionStatus.REJECTED || code === SessionStatus.PURGED;
}
