/**
 * `POST /session` (docs/api.md, User API): list, create, modify, delete, restart, config; the list's live
 * updates are session-events.ts. A user sees and changes only its own ASN's sessions; an admin sees all.
 * Create's admission rules are the store's (common/rules); config's files are common/peer-config's.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { peerConfig } from '../../common/peer-config/index.ts';
import { ProblemError } from '../../common/errors.ts';
import { fieldAtFault, fieldError, problem } from '../../common/messages.ts';
import { sessionOptions } from '../../common/schema.ts';
import type { ForgeConflict } from '../../common/schema.ts';
import { interfaceName } from '../../common/naming.ts';
import { transition } from '../../common/state-machine.ts';
import { statusName } from '../../common/status.ts';
import type { Registry } from '../auth/login/registry.ts';
import { routeObjectErrors } from '../registry/routes.ts';
import { endpointErrors, mergedPolicy, peerAddressRangeErrors } from '../../common/rules/index.ts';
import type { Router, Session, Store } from '../store/store.ts';
import { actorOf, applyTrigger, findOwned, owns } from './actions.ts';
import type { Identity } from '../auth/jwt.ts';
import { caller, requireUser } from './auth.ts';
import { EncodedAnswers, sendEncoded, type EncodedAnswer } from './encoding.ts';
import { SessionActionAnswer, SessionActions } from './schemas.ts';
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
  body: { ipv6: string; ipv4?: string | undefined },
): Promise<void> {
  if (!registry?.files) return;
  if (peerAddressRangeErrors(body, mergedPolicy(store, router.name)).length > 0) return;
  const errors = await routeObjectErrors(registry, asn, body);
  if (errors.length > 0) throw problem('request.fieldRefused', fieldAtFault(errors), errors);
}

/** Lists kept: one per ASN that asked lately (the admins' one among them), the least recent dropped. */
const LIST_CACHE_SIZE = 1024;

export const sessionRoutes: FastifyPluginAsyncTypebox<{
  store: Store;
  registry?: Registry | undefined;
}> = async (app, opts) => {
  const { store, registry } = opts;
  const record = (s: Session, conflict: ForgeConflict | undefined) =>
    sessionRecord(
      s,
      store.getRouter(s.spec.router),
      mergedPolicy(store, s.spec.router).dn42Asn ?? null,
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
          'One body per action, chosen by `action` (each has an example). `modify` needs `endpoint` or `mtu`, or both.',
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
            autoApprove: router.spec.autoApprove ?? false,
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
            networkAsn: mergedPolicy(store, router.name).dn42Asn ?? null,
          };
        }
        case 'modify': {
          if (body.endpoint === undefined && body.mtu === undefined)
            throw problem('session.modifyNothing', {}, [fieldError('/', 'field.modifyNothing')]);
          const current = findOwned(store, identity, body.uuid);
          // The status check first (a refused modify stays refused); then a modify that changes nothing
          // writes nothing and leaves the session as it is, instead of sending it through setup again.
          transition(current.status.code, { kind: 'modify' });
          const unchanged =
            (body.endpoint === undefined || (body.endpoint ?? undefined) === current.spec.endpoint) &&
            (body.mtu === undefined || body.mtu === current.spec.mtu);
          if (unchanged) return view(current);
          // the create's endpoint rule (sessionAddressingErrors) for the new endpoint
          const endpointRefused = endpointErrors(
            body.endpoint ?? undefined,
            mergedPolicy(store, current.spec.router),
          );
          if (endpointRefused.length > 0)
            throw problem('request.fieldRefused', fieldAtFault(endpointRefused), endpointRefused);
          const updated = await store.updateSession(
            body.uuid,
            (s) => {
              if (!owns(identity, s)) throw problem('session.notFound', { uuid: body.uuid });
              return applyTrigger(s, { kind: 'modify' }, now, (spec) => {
                const next = { ...spec };
                if (body.endpoint === null) delete next.endpoint;
                else if (body.endpoint !== undefined) next.endpoint = body.endpoint;
                if (body.mtu !== undefined) next.mtu = body.mtu;
                return next;
              });
            },
            actor,
            `modify session ${current.name}`,
          );
          if (!updated) throw problem('session.notFound', { uuid: body.uuid });
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
          if (!router)
            throw new ProblemError(
              'INVALID_STATE',
              `router ${session.spec.router} of this session no longer exists`,
            );
          const networkAsn = mergedPolicy(store, router.name).dn42Asn;
          if (networkAsn === undefined)
            throw new ProblemError(
              'INVALID_STATE',
              "the network's ASN is not set (the policy's dn42Asn): ask its operator",
            );
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
