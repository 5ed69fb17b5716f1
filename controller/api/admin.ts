/**
 * The admin API (docs/api.md, Admin API), multi-action like /session, admin JWT only:
 * `/admin/session` (approve, reject, disable, enable, purge, list, review, as-names), `/admin/router` (list, add, update,
 * remove, rotate-token; add and rotate-token answer the agent token once), `/admin/policy` (get, set,
 * patch).
 */
import { randomUUID } from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { ProblemError } from '../../common/errors.ts';
import { fieldAtFault, fieldError, type FieldMessageKey, problem } from '../../common/messages.ts';
import { mergePatch, replaceFields } from '../../common/merge-patch.ts';
import { PolicySpec, RouterSpec } from '../../common/schema.ts';
import type { SessionStatusCode } from '../../common/status.ts';
import { validate, validateOrThrow } from '../../common/validate.ts';
import { newAgentToken } from '../auth/agent-token.ts';
import { assertNoRouterConflicts, assertPolicyAllows, policyJudge } from '../../common/rules/index.ts';
import type { Session, Store } from '../store/store.ts';
import type { Registry } from '../auth/login/registry.ts';
import { asNames, registryReview } from '../registry/review.ts';
import { assertRoutesStillHold } from '../registry/routes.ts';
import { actorOf, applyTrigger } from './actions.ts';
import { listPage } from './admin-list.ts';
import { caller, requireAdmin } from './auth.ts';
import {
  AdminPolicyActions,
  AdminPolicyAnswer,
  AdminRouterActions,
  AdminRouterAnswer,
  AdminSessionActions,
  AdminSessionAnswer,
  CLEARABLE_ROUTER_FIELDS,
} from './schemas.ts';
import { adminRouter, sessionRecord } from './views.ts';

/** The stored policy with a merge patch applied (RFC 7386), validated; pointers into the request's spec. */
function patchedPolicy(stored: PolicySpec | undefined, patch: unknown): PolicySpec {
  const result = validate<PolicySpec>(PolicySpec, mergePatch(stored ?? {}, patch), '/spec');
  if (!result.ok) throw problem('admin.patchInvalid', fieldAtFault(result.errors), result.errors);
  return result.value;
}

/** Fields of a router that update never sets: INVALID_REQUEST naming them, with what to do instead. */
const FIXED_ROUTER_FIELDS: Record<string, FieldMessageKey> = {
  uuid: 'field.routerUuidFixed',
  agentTokenSha256: 'field.setByRotate',
};

/** Checked before the schema of /admin/router, which would call these only "not a known field". */
function fixedRouterFieldsProblem(body: unknown): ProblemError | undefined {
  if (body === null || typeof body !== 'object' || (body as { action?: unknown }).action !== 'update')
    return undefined;
  const spec = (body as { spec?: unknown }).spec;
  if (spec === null || typeof spec !== 'object') return undefined;
  const errors = Object.keys(FIXED_ROUTER_FIELDS)
    .filter((field) => Object.hasOwn(spec, field))
    .map((field) => fieldError(`/spec/${field}`, FIXED_ROUTER_FIELDS[field] as FieldMessageKey));
  // null clears an optional field; every router has the others, and the schema would say only "not null"
  for (const [field, value] of Object.entries(spec))
    if (
      value === null &&
      Object.hasOwn(RouterSpec.properties, field) &&
      !Object.hasOwn(FIXED_ROUTER_FIELDS, field)
    )
      if (!CLEARABLE_ROUTER_FIELDS.includes(field))
        errors.push(fieldError(`/spec/${field}`, 'field.routerFieldRequired'));
  return errors.length > 0 ? problem('admin.updateInvalid', fieldAtFault(errors), errors) : undefined;
}

/** How many sessions are in each status, in status order; a status without any is left out. */
function statusCounts(sessions: readonly { status: { code: SessionStatusCode } }[]) {
  const counts = new Map<SessionStatusCode, number>();
  for (const s of sessions) counts.set(s.status.code, (counts.get(s.status.code) ?? 0) + 1);
  return [...counts].sort((a, b) => a[0] - b[0]).map(([status, count]) => ({ status, count }));
}

export const adminRoutes: FastifyPluginAsyncTypebox<{
  store: Store;
  /** The DN42 registry logins read: approve and enable re-check a session's route objects in it. */
  registry?: Registry | undefined;
  /** Whether a router's autoApprove may take effect here (common/rules/sessions.ts, autoApproves). */
  autoApproveAllowed: boolean;
}> = async (app, opts) => {
  const { store } = opts;
  /** Setting autoApprove where it could not take effect is refused, not stored to be ignored. */
  const assertAutoApproveHolds = (pointer: string) => {
    if (opts.autoApproveAllowed) return;
    const errors = [fieldError(pointer, 'field.autoApproveUnchecked')];
    throw problem('request.fieldRefused', fieldAtFault(errors), errors);
  };
  let policyWrites: Promise<unknown> = Promise.resolve();
  // what the current policy would refuse of a session (a policy tightened after it was stored)
  const policyViolations = () => {
    const judge = policyJudge(store.listRouters(), store.listPolicies());
    return (s: Session) => judge(s, store.neighbours(s.spec));
  };
  const view = (s: Parameters<typeof sessionRecord>[0]) =>
    sessionRecord(
      s,
      store.getRouter(s.spec.router),
      store.policyFor(s.spec.router).dn42Asn ?? null,
      store.forgeConflictOf?.(s.spec.uuid),
    );

  app.post(
    '/admin/session',
    {
      onRequest: [app.identify, app.rateLimit, requireAdmin],
      schema: {
        operationId: 'adminSession',
        summary: 'Review and operate every session',
        description:
          'One body per action, chosen by `action`: list, review, as-names, approve, reject, disable, enable, purge. ' +
          'Approve and enable refuse a session the current policy refuses, or whose addresses the registry no longer gives its ASN.',
        body: AdminSessionActions,
        response: { 200: AdminSessionAnswer },
      },
    },
    async (request) => {
      const identity = caller(request);
      const { body } = request;
      if (body.action === 'list') {
        const filter: { router?: string; asn?: number } = {};
        if (body.router !== undefined) {
          // A mistyped router name is an error, not a router without sessions.
          if (!store.getRouter(body.router)) throw problem('router.notFound', { name: body.router });
          filter.router = body.router;
        }
        if (body.asn !== undefined) filter.asn = body.asn;
        const { page, matched } = listPage(store.listSessions(filter), (name) => store.getRouter(name), body);
        const violations = policyViolations();
        const sessions = page.map((s) => ({ ...view(s), policyViolations: violations(s) }));
        // counts only in a page's answer: the whole list's stays as clients have read it
        if (body.limit === undefined) return { sessions };
        return { sessions, matched, total: store.listSessions().length };
      }
      if (body.action === 'as-names') {
        const names = opts.registry ? await asNames(opts.registry, body.asns) : new Map<number, null>();
        return { asNames: body.asns.map((asn) => ({ asn, asName: names.get(asn) ?? null })) };
      }
      if (body.action === 'review') {
        const s = store.getSession(body.uuid);
        if (!s) throw problem('session.notFound', { uuid: body.uuid });
        const registry = opts.registry ? await registryReview(opts.registry, s.spec) : undefined;
        return {
          session: { ...view(s), policyViolations: policyViolations()(s) },
          registry: registry ?? null,
        };
      }
      const current = store.getSession(body.uuid);
      if (!current) throw problem('session.notFound', { uuid: body.uuid });
      // the registry is read from disk or a git mirror: before the store's write, as a create does
      if (opts.registry && (body.action === 'approve' || body.action === 'enable'))
        await assertRoutesStillHold(opts.registry, current, body.action);
      const now = new Date().toISOString();
      const actor = actorOf(identity);
      const why = body.reason ? `: ${body.reason}` : '';
      // reject, disable and purge tell the owner why (docs/api.md, Decisions)
      const decision =
        body.action === 'reject' || body.action === 'disable' || body.action === 'purge'
          ? { action: body.action, by: actor.name, at: now, ...(body.reason ? { reason: body.reason } : {}) }
          : undefined;
      // purge: the commit says what was skipped, the router's agent never confirmed the teardown
      const what =
        body.action === 'purge' ? ` (QUEUED_FOR_DELETE, not torn down by router ${current.spec.router})` : '';
      const updated = await store.updateSession(
        body.uuid,
        (s) => {
          const change = applyTrigger(s, { kind: body.action }, now, undefined, decision);
          // both queue the session for setup: not while the current policy refuses it (docs/api.md)
          if (body.action === 'approve' || body.action === 'enable')
            assertPolicyAllows(s, policyViolations()(s), body.action);
          return change;
        },
        actor,
        `${body.action} session ${current.name}${what}${why}`,
      );
      if (body.action === 'purge')
        request.log.warn(
          { session: current.name, uuid: body.uuid, actor: actor.name, reason: body.reason },
          'session purged',
        );
      return updated ? view(updated) : { uuid: body.uuid, deleted: true as const };
    },
  );

  app.post(
    '/admin/router',
    {
      onRequest: [app.identify, app.rateLimit, requireAdmin],
      preValidation: (request, _reply, done) => done(fixedRouterFieldsProblem(request.body)),
      schema: {
        operationId: 'adminRouter',
        summary: 'Manage routers and their agent tokens',
        description:
          'One body per action, chosen by `action`: list, add, update, remove, rotate-token. ' +
          'Add and rotate-token answer the agent token, once.',
        body: AdminRouterActions,
        response: { 200: AdminRouterAnswer },
      },
    },
    async (request) => {
      const actor = actorOf(caller(request));
      const { body } = request;
      switch (body.action) {
        case 'list':
          // the counts, not the sessions: a routers page at 10,000 sessions reads a few bytes per router
          return {
            routers: store.listRouters().map((r) => ({
              ...adminRouter(r, opts.autoApproveAllowed),
              sessionsByStatus: statusCounts(store.listSessions({ router: r.name })),
            })),
          };
        case 'add': {
          const { action: _action, name, ...fields } = body;
          if (fields.autoApprove === true) assertAutoApproveHolds('/autoApprove');
          const spec = validateOrThrow<RouterSpec>(
            RouterSpec,
            { ...fields, uuid: fields.uuid ?? randomUUID() },
            'router',
          );
          // here for pointers into this body (/portRange/min); the store checks again as it writes
          assertNoRouterConflicts(name, spec, store.listRouters(), '');
          const { token, sha256 } = newAgentToken();
          const created = await store.createRouter(name, { ...spec, agentTokenSha256: sha256 }, actor);
          await store.setAgentTokenHash(name, sha256, actor);
          return {
            router: adminRouter(store.getRouter(name) ?? created, opts.autoApproveAllowed),
            agentToken: token,
          };
        }
        case 'update': {
          const current = store.getRouter(body.name);
          if (!current) throw problem('router.notFound', { name: body.name });
          // turning it on: a form that sends the router's stored fields back is not refused for them
          if (body.spec.autoApprove === true && current.spec.autoApprove !== true)
            assertAutoApproveHolds('/spec/autoApprove');
          const updated = await store.updateRouter(
            body.name,
            (spec) => validateOrThrow<RouterSpec>(RouterSpec, replaceFields(spec, body.spec), 'router'),
            actor,
            `update router ${body.name}: ${Object.keys(body.spec).join(', ') || 'nothing'}`,
          );
          return { router: adminRouter(updated, opts.autoApproveAllowed) };
        }
        case 'remove':
          if (!store.getRouter(body.name)) throw problem('router.notFound', { name: body.name });
          await store.deleteRouter(body.name, actor);
          return { name: body.name, removed: true };
        case 'rotate-token': {
          if (!store.getRouter(body.name)) throw problem('router.notFound', { name: body.name });
          const { token, sha256 } = newAgentToken();
          await store.setAgentTokenHash(body.name, sha256, actor);
          return { name: body.name, agentToken: token };
        }
      }
    },
  );

  app.post(
    '/admin/policy',
    {
      onRequest: [app.identify, app.rateLimit, requireAdmin],
      schema: {
        operationId: 'adminPolicy',
        summary: 'Read and write the routing policy',
        description:
          'One body per action, chosen by `action`: get, set (replaces the policy), patch (JSON Merge Patch). ' +
          '`name` is `default` or a router with an override.',
        body: AdminPolicyActions,
        response: { 200: AdminPolicyAnswer },
      },
    },
    async (request) => {
      const identity = caller(request);
      const { body } = request;
      const name = body.name ?? 'default';
      if (name !== 'default' && !store.getRouter(name)) throw problem('router.notFound', { name });
      if (body.action === 'get') return { name, spec: store.getPolicy(name)?.spec ?? {} };
      // One write at a time: a patch reads the stored policy, and two at once would lose one's fields.
      const write = policyWrites.then(async () => {
        const spec =
          body.action === 'set' ? body.spec : patchedPolicy(store.getPolicy(name)?.spec, body.spec);
        // Without the network's ASN no agent gets a BIRD config (bird-config and config answer CONFLICT).
        if (name === 'default' && spec.dn42Asn === undefined)
          throw problem('policy.defaultNeedsAsn', {}, [
            fieldError('/spec/dn42Asn', 'field.defaultNeedsAsnForAgents'),
          ]);
        return store.putPolicy(name, spec, actorOf(identity));
      });
      policyWrites = write.catch(() => undefined);
      const saved = await write;
      return { name: saved.name, spec: saved.spec };
    },
  );
};
