/**
 * The machine error codes (docs/api.md, Errors) and the HTTP status the API answers each with. The store
 * and the rules throw DomainError, which knows no HTTP; controller/api/problem.ts turns any DomainError
 * into RFC 9457 problem details with the status of this table, in one place.
 */
import type { MessageKey, MessageParams } from './messages.ts';

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
  /** Synchronous push mode: the forge changed the manifest this write changed; nothing was applied. */
  FORGE_CONFLICT: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  RATE_LIMITED: 429,
  INTERNAL: 500,
  STORE_UNAVAILABLE: 503,
  /** Synchronous push mode: the forge did not take the write within the wait; nothing was applied. */
  FORGE_UNAVAILABLE: 503,
  /** The login registry (DN42 registry checkout, git mirror or users file) cannot be read. */
  REGISTRY_UNAVAILABLE: 503,
  /** A router's agent did not take or answer a looking-glass query in time (docs/api.md, Looking glass). */
  ROUTER_UNAVAILABLE: 503,
  /** `--history-prometheus`: Prometheus did not answer a history query in time (docs/kubernetes.md). */
  HISTORY_UNAVAILABLE: 503,
} as const;

export type ErrorCode = keyof typeof ErrorCodes;

/** The catalogue entry a message was made from (common/messages.ts), for clients in other languages. */
export interface Keyed {
  key: MessageKey;
  params: MessageParams;
}

/** One field-level problem: a JSON pointer into the request or manifest, and why it is wrong. */
export interface FieldError {
  pointer: string;
  message: string;
  /** The catalogue key of `message` and its parameters (common/messages.ts). */
  key: MessageKey;
  params?: MessageParams;
}

/** A refusal by a rule or the store: a machine code, a sentence for people, the fields at fault. */
export class DomainError extends Error {
  readonly code: ErrorCode;
  readonly errors: FieldError[] | undefined;
  /** The catalogue entry the message was made from (common/messages.ts: `fault`, `problem`). */
  readonly keyed: Keyed;

  constructor(code: ErrorCode, detail: string, errors: FieldError[] | undefined, keyed: Keyed) {
    super(detail);
    this.name = 'DomainError';
    this.code = code;
    this.errors = errors;
    this.keyed = keyed;
  }
}

/** A DomainError as the API answers it: with its HTTP status (the API layer's own refusals throw these). */
export class ProblemError extends DomainError {
  readonly status: number;

  constructor(code: ErrorCode, detail: string, errors: FieldError[] | undefined, keyed: Keyed) {
    super(code, detail, errors, keyed);
    this.name = 'ProblemError';
    this.status = ErrorCodes[code];
  }

  /** The problem the API answers for a domain error. */
  static of(err: DomainError): ProblemError {
    return err instanceof ProblemError ? err : new ProblemError(err.code, err.message, err.errors, err.keyed);
  }
}

/** Whether `err` is a refusal with a machine code (of the store, a rule or the API), `code` if given. */
export function isProblem(err: unknown, code?: ErrorCode): err is DomainError {
  return err instanceof DomainError && (code === undefined || err.code === code);
}
