/**
 * The machine error codes of SPEC.md section 7 and DESIGN.md section 3, with their HTTP statuses.
 * Every failure the controller answers is a ProblemError rendered as RFC 9457 problem details.
 */
export const ErrorCodes = {
  INVALID_REQUEST: 400,
  INVALID_ACTION: 400,
  INVALID_TOKEN: 401,
  AUTH_FAILED: 401,
  FORBIDDEN: 403,
  ASN_BLOCKED: 403,
  SESSION_NOT_FOUND: 404,
  ROUTER_NOT_FOUND: 404,
  NOT_FOUND: 404,
  SESSION_EXISTS: 409,
  INVALID_STATE: 409,
  ROUTER_FULL: 409,
  CONFLICT: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  RATE_LIMITED: 429,
  INTERNAL: 500,
  STORE_UNAVAILABLE: 503,
  /** The login registry (DN42 registry checkout, git mirror or users file) cannot be read. */
  REGISTRY_UNAVAILABLE: 503,
} as const;

export type ErrorCode = keyof typeof ErrorCodes;

/** One field-level problem: a JSON pointer into the request or manifest, and why it is wrong. */
export interface FieldError {
  pointer: string;
  message: string;
}

export class ProblemError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly errors: FieldError[] | undefined;

  constructor(code: ErrorCode, detail: string, errors?: FieldError[]) {
    super(detail);
    this.name = 'ProblemError';
    this.code = code;
    this.status = ErrorCodes[code];
    this.errors = errors;
  }
}

export function isProblem(err: unknown, code?: ErrorCode): err is ProblemError {
  return err instanceof ProblemError && (code === undefined || err.code === code);
}
