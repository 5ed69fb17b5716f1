/**
 * Rules every store back end enforces the same way, whatever holds the data: router names, router-set
 * uniqueness (uuid, nodeId), and the session fields that never change. `peerops validate` applies the
 * router-set rule to a GitOps checkout too.
 */
import { ProblemError, type FieldError } from '../../common/errors.ts';
import {
  RouterName,
  SessionSpec as SessionSpecSchema,
  type RouterSpec,
  type SessionSpec,
} from '../../common/schema.ts';
import { validate, validateOrThrow } from '../../common/validate.ts';
import type { Session } from './store.ts';

const NAME_RULE = 'must be 1-31 characters: a-z, 0-9 and -, starting with a letter';

/** INVALID_REQUEST unless `name` is a valid router (or policy) name. */
export function assertRouterName(name: string, what = 'router name'): void {
  if (!validate(RouterName, name).ok)
    throw new ProblemError('INVALID_REQUEST', `${what} ${NAME_RULE}`, [
      { pointer: '/name', message: NAME_RULE },
    ]);
}

/** Router-level rules: unique uuid and nodeId across routers. */
export function routerSetErrors(
  name: string,
  spec: RouterSpec,
  routers: Iterable<{ name: string; spec: RouterSpec }>,
): FieldError[] {
  const errors: FieldError[] = [];
  for (const other of routers) {
    if (other.name === name) continue;
    if (other.spec.uuid === spec.uuid) {
      errors.push({ pointer: '/spec/uuid', message: `uuid is already used by router ${other.name}` });
    }
    if (other.spec.nodeId === spec.nodeId) {
      errors.push({
        pointer: '/spec/nodeId',
        message: `nodeId ${spec.nodeId} is already used by router ${other.name}`,
      });
    }
  }
  return errors;
}

/** CONFLICT when router `name` with `spec` would share a uuid or nodeId with another router. */
export function assertNoRouterConflicts(
  name: string,
  spec: RouterSpec,
  routers: Iterable<{ name: string; spec: RouterSpec }>,
): void {
  const errors = routerSetErrors(name, spec, routers);
  if (errors.length > 0) throw new ProblemError('CONFLICT', `router ${name}: ${errors[0]?.message}`, errors);
}

/** The validated new spec of a session; INVALID_REQUEST when it changes uuid, asn or router. */
export function checkedSessionSpec(current: Session, next: SessionSpec): SessionSpec {
  const spec = validateOrThrow<SessionSpec>(SessionSpecSchema, next, 'session');
  for (const field of ['uuid', 'asn', 'router'] as const) {
    if (spec[field] !== current.spec[field]) {
      throw new ProblemError('INVALID_REQUEST', `session ${field} cannot change`, [
        { pointer: `/${field}`, message: 'cannot change' },
      ]);
    }
  }
  return spec;
}
