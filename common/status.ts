/** Session status codes (docs/api.md, Session status). The numbers are the wire format; never renumber. */
export const SessionStatus = {
  DISABLED: 0,
  ACTIVE: 1,
  ERROR: 2,
  PENDING_REVIEW: 3,
  QUEUED_FOR_SETUP: 4,
  QUEUED_FOR_DELETE: 5,
  SETUP_FAILED: 6,
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

export const ALL_STATUS_CODES = Object.values(SessionStatus) as SessionStatusCode[];
