/**
 * The rules on routers, whatever holds them (the git store, the Kubernetes store, `peerops validate` on a
 * GitOps checkout, the admission webhook): names, a router's own fields, what must differ between
 * routers, and that a router in use is not removed.
 */
import { DomainError, type FieldError } from '../errors.ts';
import { meshListenPort } from '../naming.ts';
import { RouterName, type RouterSpec, type SessionSpec, type SessionStatusRecord } from '../schema.ts';
import { SessionStatus } from '../status.ts';
import { validate } from '../validate.ts';

const NAME_RULE = 'must be 1-31 characters: a-z, 0-9 and -, starting with a letter';

/** The error of an invalid router (or policy) name, at `pointer`. */
export function routerNameErrors(name: string, pointer = '/name'): FieldError[] {
  return validate(RouterName, name).ok ? [] : [{ pointer, message: NAME_RULE }];
}

/** INVALID_REQUEST unless `name` is a valid router (or policy) name. */
export function assertRouterName(name: string, what = 'router name'): void {
  const errors = routerNameErrors(name);
  if (errors.length > 0) throw new DomainError('INVALID_REQUEST', `${what} ${NAME_RULE}`, errors);
}

/**
 * The ports a router's mesh tunnels listen on: 33000 + the other router's nodeId, nodeId 1-4095
 * (docs/decisions.md, "Mesh ports and interfaces"). A session port there could not be bound.
 */
const MESH_PORTS = { min: meshListenPort(1), max: meshListenPort(4095) };

/**
 * Rules on one router's own fields: a port range with min ≤ max, clear of the mesh ports. `prefix` is
 * where the fields sit (`/spec` in a manifest or an update body, `''` in an add body).
 */
export function routerSpecErrors(spec: RouterSpec, prefix = '/spec'): FieldError[] {
  const range = spec.portRange;
  if (!range) return [];
  if (range.min > range.max)
    return [{ pointer: `${prefix}/portRange/min`, message: `must be at most max (${range.max})` }];
  if (range.min <= MESH_PORTS.max && range.max >= MESH_PORTS.min)
    return [
      {
        pointer: `${prefix}/portRange`,
        message: `must stay clear of the mesh ports ${MESH_PORTS.min}-${MESH_PORTS.max}`,
      },
    ];
  return [];
}

/**
 * Router-level rules: routerSpecErrors, then what must differ between routers: uuid, nodeId and each
 * loopback (the mesh carries loopbacks in Babel and runs iBGP between them: two routers with one
 * address would capture each other's traffic, docs/routing-policy.md).
 */
export function routerSetErrors(
  name: string,
  spec: RouterSpec,
  routers: Iterable<{ name: string; spec: RouterSpec }>,
  prefix = '/spec',
): FieldError[] {
  return [...routerSpecErrors(spec, prefix), ...routerConflicts(name, spec, routers, prefix)];
}

function routerConflicts(
  name: string,
  spec: RouterSpec,
  routers: Iterable<{ name: string; spec: RouterSpec }>,
  prefix: string,
): FieldError[] {
  const errors: FieldError[] = [];
  for (const other of routers) {
    if (other.name === name) continue;
    if (other.spec.uuid === spec.uuid) {
      errors.push({ pointer: `${prefix}/uuid`, message: `uuid is already used by router ${other.name}` });
    }
    if (other.spec.nodeId === spec.nodeId) {
      errors.push({
        pointer: `${prefix}/nodeId`,
        message: `nodeId ${spec.nodeId} is already used by router ${other.name}`,
      });
    }
    for (const family of ['ipv4', 'ipv6'] as const) {
      const address = spec.loopback[family];
      if (address === undefined) continue;
      if (address === other.spec.loopback.ipv4 || address === other.spec.loopback.ipv6)
        errors.push({
          pointer: `${prefix}/loopback/${family}`,
          message: `${address} is already the loopback of router ${other.name}`,
        });
    }
  }
  return errors;
}

/**
 * Router `name` with `spec` against routerSetErrors: INVALID_REQUEST for a rule on its own fields (port
 * range), else CONFLICT when it would share a uuid, nodeId or loopback with another router.
 */
export function assertNoRouterConflicts(
  name: string,
  spec: RouterSpec,
  routers: Iterable<{ name: string; spec: RouterSpec }>,
  prefix = '/spec',
): void {
  const own = routerSpecErrors(spec, prefix);
  if (own.length > 0)
    throw new DomainError('INVALID_REQUEST', `router ${name} ${own[0]?.pointer}: ${own[0]?.message}`, own);
  const errors = routerConflicts(name, spec, routers, prefix);
  if (errors.length > 0) throw new DomainError('CONFLICT', `router ${name}: ${errors[0]?.message}`, errors);
}

/** How many sessions assertRouterUnused names; the count says how many more there are. */
const NAMED_SESSIONS = 3;

/**
 * INVALID_STATE when sessions still use router `name` (removing it would strand them): the count, the
 * first few by name with uuid and status, and what to do. Both stores' deleteRouter throw it.
 */
export function assertRouterUnused(
  name: string,
  sessions: readonly { name: string; spec: SessionSpec; status: SessionStatusRecord }[],
): void {
  if (sessions.length === 0) return;
  const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
  const sorted = [...sessions].sort((a, b) => a.name.localeCompare(b.name));
  const named = sorted
    .slice(0, NAMED_SESSIONS)
    .map((s) => `${s.name} ${s.spec.uuid} (${s.status.name})`)
    .join(', ');
  const more = sorted.length > NAMED_SESSIONS ? ` and ${sorted.length - NAMED_SESSIONS} more` : '';
  const stuck = sessions.filter((s) => s.status.code === SessionStatus.QUEUED_FOR_DELETE).length;
  const others = sessions.length - stuck;
  const some = (n: number) => (n === 1 ? 'the one' : `the ${n}`);
  const todo: string[] = [];
  if (others > 0)
    todo.push(
      `delete ${stuck === 0 ? (others === 1 ? 'it' : 'them') : `${some(others)} not yet deleted`} first ` +
        '(peerops session delete UUID, or admin session reject in PENDING_REVIEW)',
    );
  if (stuck > 0) {
    const it = stuck === 1 ? 'it' : 'them';
    todo.push(
      `${some(stuck)} in QUEUED_FOR_DELETE ${stuck === 1 ? 'waits' : 'wait'} for the router's agent to ` +
        `tear ${it} down: if it will not, purge ${it} (peerops admin session purge UUID --reason TEXT)`,
    );
  }
  const advice = todo.join('; ');
  throw new DomainError(
    'INVALID_STATE',
    `router ${name} still has ${plural(sessions.length, 'session')}: ${named}${more}. ` +
      `${advice.charAt(0).toUpperCase()}${advice.slice(1)}`,
  );
}
