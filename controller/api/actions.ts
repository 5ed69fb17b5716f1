/**
 * Helpers shared by the user, admin and agent routes: multi-action dispatch, actors, ownership and the
 * one way a status changes (through common/state-machine.ts).
 */
import type { Static, TSchema } from 'typebox';
import { ProblemError } from '../../common/errors.ts';
import { transition, type Outcome, type Trigger } from '../../common/state-machine.ts';
import { statusName, type SessionStatusCode } from '../../common/status.ts';
import { checkOrThrow, validateOrThrow, type Checked } from '../../common/validate.ts';
import type { SessionStatusRecord } from '../../common/schema.ts';
import type { Identity } from '../auth/jwt.ts';
import type { Actor, Session, SessionChange, Store } from '../store/store.ts';

/**
 * The deepest nesting of objects and arrays a request body may have (docs/api.md, Conventions, Bodies).
 * JSON nested thousands deep is small (`[[[[…` fits 30,000 levels in 64 KiB) and parses (JSON.parse and
 * secure-json-parse are iterative), but a recursive walk over it overflows the stack: a 500. The number
 * guard below is the first walk of every body and stops at this depth; the deepest real body (a policy,
 * an admission review with managedFields) is under 20 levels.
 */
export const MAX_JSON_DEPTH = 64;

function tooDeep(): ProblemError {
  return new ProblemError(
    'INVALID_REQUEST',
    `the request body is nested more than ${MAX_JSON_DEPTH} levels deep (objects and arrays)`,
  );
}

/**
 * JSON numbers beyond 2^53 lose precision silently (an ASN or a byte count would change on the way in):
 * they are refused wherever they appear, before any schema sees them.
 */
export function assertSafeNumbers(value: unknown): void {
  const path = unsafeNumberPath(value);
  if (path === undefined) return;
  const pointer = path.map((k) => `/${String(k).replace(/~/g, '~0').replace(/\//g, '~1')}`).join('') || '/';
  throw new ProblemError('INVALID_REQUEST', `${pointer}: number out of range`, [
    { pointer, message: `must be at most ${Number.MAX_SAFE_INTEGER} in magnitude` },
  ]);
}

/**
 * The path to the first unsafe number, or undefined; pointers are built only for a refusal. Bounded:
 * a value nested deeper than MAX_JSON_DEPTH is refused as it is reached, before any deeper recursion,
 * so this walk is the depth check of every body too (one walk instead of two on the agents' hot path).
 */
function unsafeNumberPath(value: unknown, depth = 0): (string | number)[] | undefined {
  if (typeof value === 'number')
    return Number.isFinite(value) && Math.abs(value) <= Number.MAX_SAFE_INTEGER ? undefined : [];
  if (value === null || typeof value !== 'object') return undefined;
  if (depth >= MAX_JSON_DEPTH) throw tooDeep();
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const path = unsafeNumberPath(value[i], depth + 1);
      if (path) return [i, ...path];
    }
    return undefined;
  }
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    const path = unsafeNumberPath((value as Record<string, unknown>)[key], depth + 1);
    if (path) return [key, ...path];
  }
  return undefined;
}

/** validateOrThrow after the number and depth guard: the one way a request body is read. */
export function parseBody<T>(schema: TSchema, body: unknown, what: string): T {
  assertSafeNumbers(body);
  return validateOrThrow<T>(schema, body, what);
}

/** The agent's hot path (heartbeats, reports): the number guard, then the schema on the parsed body itself. */
export function parseAgentBody<S extends TSchema>(
  schema: S,
  body: unknown,
  what: string,
): Checked<Static<S>> {
  assertSafeNumbers(body);
  return checkOrThrow(schema, body, what);
}

/** Picks the action's schema and validates the body with it: INVALID_ACTION before INVALID_REQUEST. */
export function parseAction<T extends { action: string }>(body: unknown, table: Record<string, TSchema>): T {
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw new ProblemError(
      'INVALID_REQUEST',
      'the request body must be a JSON object with an "action" field',
    );
  const action = (body as { action?: unknown }).action;
  const names = Object.keys(table).join(', ');
  if (action === undefined) throw new ProblemError('INVALID_ACTION', `"action" is missing; one of: ${names}`);
  if (typeof action !== 'string' || !Object.hasOwn(table, action))
    throw new ProblemError('INVALID_ACTION', `unknown action; one of: ${names}`, [
      { pointer: '/action', message: `must be one of: ${names}` },
    ]);
  return parseBody<T>(table[action] as TSchema, body, action);
}

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
  if (!session || !owns(identity, session)) throw new ProblemError('SESSION_NOT_FOUND', `no session ${uuid}`);
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
  if (lastError) record.lastError = lastError;
  return record;
}

/**
 * The store change a trigger makes. `spec` edits the spec (modify, restart); lastError is kept unless the
 * session is queued for setup again, which clears it.
 */
export function applyTrigger(
  session: Session,
  trigger: Trigger,
  now: string,
  editSpec?: (spec: Session['spec'], outcome: Outcome) => Session['spec'],
): SessionChange {
  const from = session.status.code as SessionStatusCode;
  const outcome = transition(from, trigger);
  if (outcome.result === 'removed') return { delete: true };
  const keepError = outcome.to === from ? session.status.lastError : undefined;
  const spec = editSpec ? editSpec(session.spec, outcome) : session.spec;
  return { spec, status: statusRecord(outcome.to, session.status, now, keepError) };
}
