/**
 * `POST /session` (docs/api.md, User API): list, create, modify, delete, restart, config; the list's live
 * updates are session-events.ts. A user sees and changes only its own ASN's sessions; an admin sees all.
 * Create's admission rules are the store's (common/rules); config's files are common/peer-config's.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { peerConfig } from '../../common/peer-config/index.ts';
import { fieldAtFault, fieldError, problem } from '../../common/messages.ts';
import { sessionOptions } from '../../common/schema.ts';
import type { ForgeConflict } from '../../common/schema.ts';
import { interfaceName } from '../../common/naming.ts';
import { transition } from '../../common/state-machine.ts';
import { statusName } from '../../common/status.ts';
import type { Registry } from '../auth/login/registry.ts';
import { routeObjectErrors } from '../registry/routes.ts';
import {
  ADDRESSING_FIELDS,
  autoApproves,
  modifyNeedsReview,
  peerAddressRangeErrors,
} from '../../common/rules/index.ts';
import type { Router, Session, Store } from '../store/store.ts';
import { actorOf, applyTrigger, findOwned, owns } from './actions.ts';
import type { Identity } from '../auth/jwt.ts';
import { caller, requireUser } from './auth.ts';
import { EncodedAnswers, sendEncoded, type EncodedAnswer } from './encoding.ts';
import { SessionActionAnswer, SessionActions, type SessionModifyBody } from './schemas.ts';
import { SessionRecordTexts } from './session-records.ts';
import { listTopics, sessionEventRoutes } from './session-events.ts';
import { serverEndpoint, sessionRecord } from './views.ts';

function resolveRouter(store: Store, ref: string): Router {
  const router = store.getRouter(ref) ?? store.listRouters().find((r) => r.spec.uuid === ref.toLowerCase());
  if (!router) throw problem('router.notFound', { name: ref });
  return router;
}

/**
 * With a DN42 registry (the one login reads), a create's peer addresses must be the caller's ASN's by the
 * registry's route objects and filter (routeObjectErrors). Asked before the store's write, since the registry is read
 * from disk or a git mirror; only about addresses the policy allows: the store refuses the others and
 * says why (a special-purpose address, outside peerAddressRanges).
 */
async function assertRouteObjects(
  registry: Registry | undefined,
  store: Store,
  asn: number,
  router: Router,
  body: { ipv6?: string | undefined; ipv4?: string | undefined },
): Promise<void> {
  if (!registry?.files) return;
  if (peerAddressRangeErrors(body, store.policyFor(router.name)).length > 0) return;
  const errors = await routeObjectErrors(registry, asn, body);
  if (errors.length > 0) throw problem('request.fieldRefused', fieldAtFault(errors), errors);
}

/** The spec fields a modify can change (docs/api.md, modify). */
const MODIFIABLE = [...ADDRESSING_FIELDS, 'mtu'] as const;

/** A spec with its options' defaults filled in, so that a modify to the default value is no change. */
const settled = (spec: Session['spec']) => ({ ...spec, ...sessionOptions(spec) });

/** The spec after a modify's changes; `endpoint` or `ipv4` null removes it. */
function modifiedSpec(
  spec: Session['spec'],
  changes: Omit<SessionModifyBody, 'action' | 'uuid'>,
): Session['spec'] {
  const { endpoint, ipv4, ...set } = changes;
  const next: Session['spec'] = { ...spec, ...set };
  if (endpoint === null) delete next.endpoint;
  else if (endpoint !== undefined) next.endpoint = endpoint;
  if (ipv4 === null) delete next.ipv4;
  else if (ipv4 !== undefined) next.ipv4 = ipv4;
  return next;
}

/** Lists kept: one per ASN that asked lately (the admins' one among them), the least recent dropped. */
const LIST_CACHE_SIZE = 1024;

export const sessionRoutes: FastifyPluginAsyncTypebox<{
  store: Store;
  registry?: Registry | undefined;
  /** Whether a router's autoApprove may take effect here (common/rules/sessions.ts, autoApproves). */
  autoApproveAllowed: boolean;
}> = async (app, opts) => {
  const { store, registry, autoApproveAllowed } = opts;
  const record = (s: Session, conflict: ForgeConflict | undefined) =>
    sessionRecord(
      s,
      store.getRouter(s.spec.router),
      store.policyFor(s.spec.router).dn42Asn ?? null,
      conflict,
    );
  const view = (s: Session) => record(s, store.forgeConflictOf?.(s.spec.uuid));
  const records = new SessionRecordTexts(store, (s, conflict) => JSON.stringify(record(s, conflict)));
  const lists = new EncodedAnswers<Session[]>(LIST_CACHE_SIZE, {
    encode: (sessions) => ({ json: records.list(sessions) }),
  });

  /**
   * The list answer, encoded: rebuilt when the caller's sessions (live fields included), a router's spec
   * or a policy changed, as the store's change feed tells; most users ask far more often than that. A
   * rebuild re-encodes only the records that changed (session-records.ts).
   */
  function listAnswer(identity: Identity): EncodedAnswer {
    const admin = identity.role === 'admin';
    const revision = Math.max(...listTopics(identity).map((topic) => store.revision(topic)));
    return lists.get(admin ? 'admin' : `AS${identity.asn}`, revision, () =>
      (admin ? store.listSessions() : store.listSessions({ asn: identity.asn }))
        .filter((s) => owns(identity, s))
        .sort(
          (a, b) =>
            (a.spec.createdAt ?? '').localeCompare(b.spec.createdAt ?? '') || a.name.localeCompare(b.name),
        ),
    );
  }
  await app.register(sessionEventRoutes, { store, listAnswer });

  app.post(
    '/session',
    {
      onRequest: [app.identify, app.rateLimit, requireUser],
      schema: {
        operationId: 'session',
        summary: 'Session actions of the calling ASN (admins: every session)',
        description:
          'One body per action, chosen by `action` (each has an example). `modify` needs at least one field to change.',
        body: SessionActions,
        response: { 200: SessionActionAnswer },
      },
    },
    async (request, reply) => {
      const identity = caller(request);
      const { body } = request;
      // bytes built from the same records the schema describes (SessionListResponse)
      if (body.action === 'list')
        return sendEncoded(reply, request.headers['accept-encoding'], listAnswer(identity));
      // the changes' author and time, which a list (most requests) has no use for
      const actor = actorOf(identity);
      const now = new Date().toISOString();
      switch (body.action) {
        case 'create': {
          // Only the reference is resolved here: every admission rule (limits, blocked ASN, addresses) is
          // the store's, checked inside its write queue so it holds under concurrency (docs/store.md).
          const router = resolveRouter(store, body.router);
          await assertRouteObjects(registry, store, identity.asn, router, body);
          const outcome = transition(undefined, {
            kind: 'create',
            autoApprove: autoApproves(router.spec, autoApproveAllowed),
          });
          if (outcome.result !== 'status') throw new Error('create cannot remove');
          const input = {
            asn: identity.asn,
            router: router.name,
            ipv6: body.ipv6,
            linkLocal: body.linkLocal,
            publicKey: body.publicKey,
            ...sessionOptions(body),
            restartGeneration: 0,
            ...(body.ipv4 !== undefined ? { ipv4: body.ipv4 } : {}),
            ...(body.endpoint !== undefined ? { endpoint: body.endpoint } : {}),
          };
          const session = await store.createSession(
            input,
            { code: outcome.to, name: statusName(outcome.to), lastTransitionTime: now },
            actor,
            `create session AS${identity.asn} on ${router.name}`,
          );
          return {
            uuid: session.spec.uuid,
            status: session.status.code,
            statusName: statusName(session.status.code),
            serverEndpoint: serverEndpoint(router, session.spec.listenPort),
            serverPublicKey: router.spec.publicKey,
            serverLinkLocal: router.spec.linkLocal,
            ...(session.spec.ipv4 && router.spec.loopback.ipv4
              ? { serverIpv4: router.spec.loopback.ipv4 }
              : {}),
            listenPort: session.spec.listenPort,
            interface: interfaceName(session.spec.listenPort),
            networkAsn: store.policyFor(router.name).dn42Asn ?? null,
          };
        }
        case 'modify': {
          const { action: _action, uuid, ...changes } = body;
          if (Object.keys(changes).length === 0)
            throw problem('session.modifyNothing', {}, [fieldError('/', 'field.modifyNothing')]);
          const current = findOwned(store, identity, uuid);
          // The status check first (a refused modify stays refused); then a modify that changes nothing
          // writes nothing and leaves the session as it is, instead of sending it through setup again.
          transition(current.status.code, { kind: 'modify' });
          const next = modifiedSpec(current.spec, changes);
          if (MODIFIABLE.every((f) => settled(current.spec)[f] === settled(next)[f])) return view(current);
          // new peer addresses meet the registry as a create's do; every other rule is the store's
          const router = store.getRouter(current.spec.router);
          if (router && (next.ipv6 !== current.spec.ipv6 || next.ipv4 !== current.spec.ipv4))
            await assertRouteObjects(registry, store, current.spec.asn, router, next);
          const updated = await store.updateSession(
            uuid,
            (s) => {
              if (!owns(identity, s)) throw problem('session.notFound', { uuid });
              const after = modifiedSpec(s.spec, changes);
              const on = store.getRouter(s.spec.router);
              const review =
                identity.role !== 'admin' &&
                on !== undefined &&
                modifyNeedsReview(
                  s.spec,
                  after,
                  autoApproves(on.spec, autoApproveAllowed),
                  store.policyFor(s.spec.router),
                );
              return applyTrigger(s, { kind: 'modify', review }, now, () => after);
            },
            actor,
            `modify session ${current.name}`,
          );
          if (!updated) throw problem('session.notFound', { uuid });
          return view(updated);
        }
        case 'restart': {
          const current = findOwned(store, identity, body.uuid);
          const updated = await store.updateSession(
            body.uuid,
            (s) => {
              if (!owns(identity, s)) throw problem('session.notFound', { uuid: body.uuid });
              return applyTrigger(s, { kind: 'restart' }, now, (spec) => ({
                ...spec,
                restartGeneration: (spec.restartGeneration ?? 0) + 1,
              }));
            },
            actor,
            `restart session ${current.name}`,
          );
          if (!updated) throw problem('session.notFound', { uuid: body.uuid });
          return view(updated);
        }
        case 'config': {
          const session = findOwned(store, identity, body.uuid);
          const router = store.getRouter(session.spec.router);
          if (!router) throw problem('session.routerGone', { router: session.spec.router });
          const networkAsn = store.policyFor(router.name).dn42Asn;
          if (networkAsn === undefined) throw problem('policy.noNetworkAsn');
          const { spec } = session;
          const files = peerConfig(body.format, {
            session: { ...spec, ...sessionOptions(spec) },
            router: {
              name: router.name,
              displayName: router.spec.displayName,
              endpointHost: router.spec.endpointHost,
              publicKey: router.spec.publicKey,
              linkLocal: router.spec.linkLocal,
              ipv4: router.spec.loopback.ipv4,
            },
            networkAsn,
          });
          return { format: body.format, files };
        }
        case 'delete': {
          const current = findOwned(store, identity, body.uuid);
          const updated = await store.updateSession(
            body.uuid,
            (s) => {
              if (!owns(identity, s)) throw problem('session.notFound', { uuid: body.uuid });
              return applyTrigger(s, { kind: 'delete' }, now);
            },
            actor,
            `delete session ${current.name}`,
          );
          return updated ? view(updated) : { uuid: body.uuid, deleted: true as const };
        }
      }
    },
  );
};
