/**
 * The rules on routers, whatever holds them (the git store, the Kubernetes store, `peerops validate` on a
 * GitOps checkout, the admission webhook): names, a router's own fields, what must differ between
 * routers, and that a router in use is not removed.
 */
import { type FieldError } from '../errors.ts';
import { meshListenPort } from '../naming.ts';
import { RouterName, type RouterSpec, type SessionSpec, type SessionStatusRecord } from '../schema.ts';
import { SessionStatus } from '../status.ts';
import { validate } from '../validate.ts';
import { fault, fieldAtFault, fieldError } from '../messages.ts';

/** The error of an invalid router (or policy) name, at `pointer`. */
export function routerNameErrors(name: string, pointer = '/name'): FieldError[] {
  return validate(RouterName, name).ok ? [] : [fieldError(pointer, 'field.nameRule')];
}

/** INVALID_REQUEST unless `name` is a valid router (or policy) name. */
export function assertRouterName(name: string, what = 'router name'): void {
  const errors = routerNameErrors(name);
  if (errors.length > 0) throw fault('router.invalidName', { what }, errors);
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
    return [fieldError(`${prefix}/portRange/min`, 'field.portRangeOrder', { max: range.max })];
  if (range.min <= MESH_PORTS.max && range.max >= MESH_PORTS.min)
    return [fieldError(`${prefix}/portRange`, 'field.meshPorts', MESH_PORTS)];
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
      errors.push(fieldError(`${prefix}/uuid`, 'field.uuidOfRouter', { router: other.name }));
    }
    if (other.spec.nodeId === spec.nodeId) {
      errors.push(
        fieldError(`${prefix}/nodeId`, 'field.nodeIdTaken', { nodeId: spec.nodeId, router: other.name }),
      );
    }
    for (const family of ['ipv4', 'ipv6'] as const) {
      const address = spec.loopback[family];
      if (address === undefined) continue;
      if (address === other.spec.loopback.ipv4 || address === other.spec.loopback.ipv6)
        errors.push(
          fieldError(`${prefix}/loopback/${family}`, 'field.loopbackTaken', { address, router: other.name }),
        );
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
  if (own.length > 0) throw fault('router.invalidField', { name, ...fieldAtFault(own) }, own);
  const errors = routerConflicts(name, spec, routers, prefix);
  if (errors.length > 0) throw fault('router.conflict', { name, reason: errors[0]?.message ?? '' }, errors);
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
  const sorted = [...sessions].sort((a, b) => a.name.localeCompare(b.name));
  const named = sorted
    .slice(0, NAMED_SESSIONS)
    .map((s) => `${s.name} ${s.spec.uuid} (${s.status.name})`)
    .join(', ');
  const count = sessions.length;
  const stuck = sessions.filter((s) => s.status.code === SessionStatus.QUEUED_FOR_DELETE).length;
  const others = count - stuck;
  const params = { name, count, sessions: count > NAMED_SESSIONS ? `${named}, …` : named, stuck, others };
  // what to do depends on whether the sessions still wait for a delete or for the agent's teardown
  if (count === 1) throw fault(stuck === 1 ? 'router.inUseOneDeleting' : 'router.inUseOne', params);
  throw fault(
    stuck === 0 ? 'router.inUse' : others === 0 ? 'router.inUseDeleting' : 'router.inUseMixed',
    params,
  );
}
