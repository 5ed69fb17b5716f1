/**
 * The validating admission webhook of the Kubernetes store. The API server asks it before it stores a
 * Router, PeeringSession or RoutingPolicy that someone other than the controller writes (kubectl, Flux,
 * Argo CD), and it answers with the rules that span objects, which a CRD's schema cannot say: the rules
 * the REST API, the git store's merge and `peerops validate` apply (one session per ASN and router, a known
 * router, free listen port, unique uuids and node ids, blocked ASNs, peer addresses). The webhook
 * configuration exempts the controller's own writes: its store checks them where it writes.
 *
 * It judges against this replica's index (list + watch), so two objects applied within the same moment
 * are each judged without the other, as two replicas' creates are.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type, { type Static } from 'typebox';
import type { FieldError } from '../../common/errors.ts';
import { sessionName } from '../../common/naming.ts';
import {
  PolicySpec as PolicySpecSchema,
  RouterSpec as RouterSpecSchema,
  SessionSpec as SessionSpecSchema,
  type PolicySpec,
  type RouterSpec,
  type SessionSpec,
} from '../../common/schema.ts';
import { validate } from '../../common/validate.ts';
import {
  policyWarnings,
  routerNameErrors,
  routerSetErrors,
  sessionAddressingErrors,
  sessionIpv6Errors,
  sessionSetErrors,
  type SessionSetFacts,
} from '../../common/rules/index.ts';
import type { Store } from '../store/store.ts';
import { fieldError } from '../../common/messages.ts';

const StoredObject = Type.Object({
  metadata: Type.Object({ name: Type.String({ maxLength: 253 }) }),
  spec: Type.Unknown(),
});
type StoredObject = Static<typeof StoredObject>;

/** The part of an `admission.k8s.io/v1` AdmissionReview this webhook reads. */
const AdmissionReview = Type.Object({
  apiVersion: Type.Literal('admission.k8s.io/v1'),
  kind: Type.Literal('AdmissionReview'),
  request: Type.Object({
    uid: Type.String({ minLength: 1, maxLength: 128 }),
    kind: Type.Object({ kind: Type.String({ maxLength: 63 }) }),
    operation: Type.String({ maxLength: 16 }),
    // null for a DELETE (object) and for a CREATE (oldObject)
    object: Type.Optional(Type.Union([StoredObject, Type.Null()])),
    oldObject: Type.Optional(Type.Union([StoredObject, Type.Null()])),
  }),
});
type AdmissionReview = Static<typeof AdmissionReview>;

/** What the API server is told: `errors` refuse the object, `warnings` reach the writer (kubectl prints them). */
interface Verdict {
  errors: FieldError[];
  warnings: string[];
}

/** What the rules that span objects read about one session (sessionSetErrors), from the store's objects. */
function sessionSetFacts(store: Store, spec: SessionSpec): SessionSetFacts {
  const uuidHolder = store.getSession(spec.uuid)?.name;
  return {
    router: store.getRouter(spec.router)?.spec,
    policy: store.policyFor(spec.router),
    portHolders: store
      .listSessions({ router: spec.router })
      .filter((s) => s.spec.listenPort === spec.listenPort)
      .map((s) => s.name),
    uuidHolders: uuidHolder === undefined ? [] : [uuidHolder],
  };
}

function sessionErrors(store: Store, name: string, input: unknown): FieldError[] {
  const checked = validate<SessionSpec>(SessionSpecSchema, input, '/spec');
  if (!checked.ok) return checked.errors;
  const spec = checked.value;
  const errors: FieldError[] = sessionIpv6Errors(spec, '/spec');
  const expected = sessionName(spec.asn, spec.router);
  if (name !== expected) errors.push(fieldError('/metadata/name', 'field.sessionName', { expected }));
  const facts = sessionSetFacts(store, spec);
  errors.push(...sessionSetErrors(name, spec, facts));
  if (facts.router) {
    const network = { routers: store.listRouters(), sessions: store.listSessions() };
    errors.push(...sessionAddressingErrors(name, spec, facts.router, facts.policy, network, '/spec'));
  }
  return errors;
}

function routerErrors(store: Store, name: string, input: unknown): FieldError[] {
  const errors = routerNameErrors(name, '/metadata/name');
  const checked = validate<RouterSpec>(RouterSpecSchema, input, '/spec');
  if (!checked.ok) return [...errors, ...checked.errors];
  return [...errors, ...routerSetErrors(name, checked.value, store.listRouters())];
}

function policyErrors(input: unknown): FieldError[] {
  const checked = validate<PolicySpec>(PolicySpecSchema, input, '/spec');
  return checked.ok ? [] : checked.errors;
}

/** Advice that does not refuse the policy: it may be written before the router it names. */
function policyAdvice(store: Store, name: string, input: unknown): string[] {
  const advice = policyWarnings(name, input as PolicySpec).map((w) => `${w.pointer}: ${w.message}`);
  if (name !== 'default' && !store.getRouter(name))
    advice.push(`names no router: it applies to the sessions of router ${name} once that router exists`);
  return advice;
}

function errorsOf(store: Store, kind: string, object: StoredObject): FieldError[] {
  const name = object.metadata.name;
  if (kind === 'PeeringSession') return sessionErrors(store, name, object.spec);
  if (kind === 'Router') return routerErrors(store, name, object.spec);
  if (kind === 'RoutingPolicy') return policyErrors(object.spec);
  return [];
}

const sameError = (a: FieldError, b: FieldError) => a.pointer === b.pointer && a.message === b.message;

/**
 * The verdict on one review. A create must keep every rule. An update may keep a fault the old object
 * already had (a session whose ASN a later policy blocks can still be relabelled or edited) but may not
 * add one; a session's uuid never changes, as in the REST API.
 */
function review(store: Store, request: AdmissionReview['request']): Verdict {
  const { object, oldObject, operation, kind } = request;
  if ((operation !== 'CREATE' && operation !== 'UPDATE') || !object) return { errors: [], warnings: [] };
  let errors = errorsOf(store, kind.kind, object);
  if (operation === 'UPDATE' && oldObject) {
    const before = errorsOf(store, kind.kind, oldObject);
    errors = errors.filter((e) => !before.some((b) => sameError(e, b)));
    const uuid = (spec: unknown) => (spec as { uuid?: unknown } | null)?.uuid;
    if (kind.kind === 'PeeringSession' && uuid(object.spec) !== uuid(oldObject.spec))
      errors.push(fieldError('/spec/uuid', 'field.cannotChange'));
  }
  const warnings =
    kind.kind === 'RoutingPolicy' && errors.length === 0
      ? policyAdvice(store, object.metadata.name, object.spec)
      : [];
  return { errors, warnings };
}

/** `/spec/ipv6` → `spec.ipv6`, the field path Kubernetes clients show. */
const fieldPath = (pointer: string) => pointer.slice(1).replaceAll('/', '.').replaceAll('~1', '/');

/** The AdmissionReview answer; a refusal is 422 Invalid with one cause per field, as the API server's own. */
function admissionResponse(uid: string, verdict: Verdict) {
  const response: Record<string, unknown> = { uid, allowed: verdict.errors.length === 0 };
  if (verdict.warnings.length > 0) response['warnings'] = verdict.warnings;
  if (verdict.errors.length > 0)
    response['status'] = {
      code: 422,
      reason: 'Invalid',
      message: verdict.errors.map((e) => `${fieldPath(e.pointer)}: ${e.message}`).join('; '),
      details: {
        causes: verdict.errors.map((e) => ({
          type: 'FieldValueInvalid',
          field: fieldPath(e.pointer),
          message: e.message,
        })),
      },
    };
  return { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response };
}

export const admissionRoutes: FastifyPluginAsyncTypebox<{ store: Store }> = async (app, opts) => {
  // Only the API server calls it, over TLS on the webhook's own port: no token, no rate limit.
  app.post('/validate', { schema: { body: AdmissionReview } }, async (request) => {
    const { body } = request;
    const verdict = review(opts.store, body.request);
    if (verdict.errors.length > 0)
      request.log.info(
        { kind: body.request.kind.kind, operation: body.request.operation, errors: verdict.errors },
        'admission refused',
      );
    return admissionResponse(body.request.uid, verdict);
  });
};
