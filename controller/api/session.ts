/**
 * `POST /session` (SPEC.md 2.1–2.4, 4.1): list, create, modify, delete, restart. A user sees and changes
 * only its own ASN's sessions; an admin sees all. Create runs the policy checks before the store write.
 */
import type { FastifyInstance } from 'fastify';
import type { Static } from 'typebox';
import { ProblemError } from '../../common/errors.ts';
import { interfaceName, sessionName } from '../../common/naming.ts';
import { transition } from '../../common/state-machine.ts';
import { SessionStatus, statusName, type SessionStatusCode } from '../../common/status.ts';
import type { Identity } from '../auth/jwt.ts';
import { mergedPolicy } from '../store/rules.ts';
import type { Router, Store } from '../store/store.ts';
import { actorOf, applyTrigger, findOwned, owns, parseAction } from './actions.ts';
import { requireUser } from './auth.ts';
import {
  CreateResponse,
  DeletedResponse,
  SessionCreate,
  SessionDelete,
  SessionList,
  SessionListResponse,
  SessionModify,
  SessionRecord,
  SessionRestart,
} from './schemas.ts';
import { serverEndpoint, sessionRecord } from './views.ts';

export const SESSION_ACTIONS = {
  list: SessionList,
  create: SessionCreate,
  modify: SessionModify,
  delete: SessionDelete,
  restart: SessionRestart,
};

type Body =
  | Static<typeof SessionList>
  | Static<typeof SessionCreate>
  | Static<typeof SessionModify>
  | { action: 'delete' | 'restart'; uuid: string };

function resolveRouter(store: Store, ref: string): Router {
  const router = store.getRouter(ref) ?? store.listRouters().find((r) => r.spec.uuid === ref.toLowerCase());
  if (!router) throw new ProblemError('ROUTER_NOT_FOUND', `no router ${ref}`);
  return router;
}

/**
 * The checks of a create that concern the caller (blocked ASN, one session per router, capacity, pending
 * reviews). The peer addresses are the store's to check (assertSessionAddressing), where it writes.
 */
function checkCreate(store: Store, identity: Identity, router: Router): void {
  const policy = mergedPolicy(store, router.name);
  const asn = identity.asn;
  if (policy.blockedAsns?.includes(asn))
    throw new ProblemError('ASN_BLOCKED', `AS${asn} is blocked on this network; contact an administrator`);
  if (router.spec.acceptingSessions === false)
    throw new ProblemError('ROUTER_FULL', `router ${router.name} is not accepting new sessions`);
  const onRouter = store.listSessions({ router: router.name });
  if (onRouter.some((s) => s.spec.asn === asn))
    throw new ProblemError(
      'SESSION_EXISTS',
      `AS${asn} already has a session (${sessionName(asn, router.name)}) on ${router.name}; delete it first`,
    );
  if (router.spec.maxSessions !== undefined && onRouter.length >= router.spec.maxSessions)
    throw new ProblemError(
      'ROUTER_FULL',
      `router ${router.name} has reached its maximum of ${router.spec.maxSessions} sessions`,
    );
  if (policy.maxPendingPerAsn !== undefined) {
    const pending = store
      .listSessions({ asn })
      .filter((s) => s.status.code === SessionStatus.PENDING_REVIEW).length;
    if (pending >= policy.maxPendingPerAsn)
      throw new ProblemError(
        'CONFLICT',
        `AS${asn} already has ${pending} session${pending === 1 ? '' : 's'} awaiting review (limit ${policy.maxPendingPerAsn}); wait for a review`,
      );
  }
}

export async function sessionRoutes(app: FastifyInstance, opts: { store: Store }): Promise<void> {
  const { store } = opts;
  const view = (s: Parameters<typeof sessionRecord>[0]) => sessionRecord(s, store.getRouter(s.spec.router));

  app.post(
    '/session',
    {
      preHandler: requireUser,
      config: {
        docs: {
          summary: 'Session actions of the calling ASN (admins: every session)',
          auth: 'user',
          actions: SESSION_ACTIONS,
          responses: {
            list: SessionListResponse,
            create: CreateResponse,
            modify: SessionRecord,
            delete: DeletedResponse,
            restart: SessionRecord,
          },
        },
      },
    },
    async (request) => {
      const identity = request.identity as Identity;
      const body = parseAction<Body>(request.body, SESSION_ACTIONS);
      const actor = actorOf(identity);
      const now = new Date().toISOString();
      switch (body.action) {
        case 'list': {
          const sessions = (
            identity.role === 'admin' ? store.listSessions() : store.listSessions({ asn: identity.asn })
          )
            .filter((s) => owns(identity, s))
            .sort(
              (a, b) =>
                (a.spec.createdAt ?? '').localeCompare(b.spec.createdAt ?? '') ||
                a.name.localeCompare(b.name),
            );
          return { sessions: sessions.map(view) };
        }
        case 'create': {
          const router = resolveRouter(store, body.router);
          checkCreate(store, identity, router);
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
            mtu: body.mtu ?? 1420,
            mpbgp: body.mpbgp ?? true,
            extendedNextHop: body.extendedNextHop ?? true,
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
            statusName: statusName(session.status.code as SessionStatusCode),
            serverEndpoint: serverEndpoint(router, session.spec.listenPort),
            serverPublicKey: router.spec.publicKey,
            serverLinkLocal: router.spec.linkLocal,
            ...(session.spec.ipv4 && router.spec.loopback.ipv4
              ? { serverIpv4: router.spec.loopback.ipv4 }
              : {}),
            listenPort: session.spec.listenPort,
            interface: interfaceName(session.spec.listenPort),
          };
        }
        case 'modify': {
          if (body.endpoint === undefined && body.mtu === undefined)
            throw new ProblemError('INVALID_REQUEST', 'modify needs endpoint or mtu (or both)', [
              { pointer: '/', message: 'give endpoint (null: none) or mtu' },
            ]);
          const current = findOwned(store, identity, body.uuid);
          // The status check first (a refused modify stays refused); then a modify that changes nothing
          // writes nothing and leaves the session as it is, instead of sending it through setup again.
          transition(current.status.code as SessionStatusCode, { kind: 'modify' });
          const unchanged =
            (body.endpoint === undefined || (body.endpoint ?? undefined) === current.spec.endpoint) &&
            (body.mtu === undefined || body.mtu === current.spec.mtu);
          if (unchanged) return view(current);
          const updated = await store.updateSession(
            body.uuid,
            (s) => {
              if (!owns(identity, s)) throw new ProblemError('SESSION_NOT_FOUND', `no session ${body.uuid}`);
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
          if (!updated) throw new ProblemError('SESSION_NOT_FOUND', `no session ${body.uuid}`);
          return view(updated);
        }
        case 'restart': {
          const current = findOwned(store, identity, body.uuid);
          const updated = await store.updateSession(
            body.uuid,
            (s) => {
              if (!owns(identity, s)) throw new ProblemError('SESSION_NOT_FOUND', `no session ${body.uuid}`);
              return applyTrigger(s, { kind: 'restart' }, now, (spec) => ({
                ...spec,
                restartGeneration: (spec.restartGeneration ?? 0) + 1,
              }));
            },
            actor,
            `restart session ${current.name}`,
          );
          if (!updated) throw new ProblemError('SESSION_NOT_FOUND', `no session ${body.uuid}`);
          return view(updated);
        }
        case 'delete': {
          const current = findOwned(store, identity, body.uuid);
          const updated = await store.updateSession(
            body.uuid,
            (s) => {
              if (!owns(identity, s)) throw new ProblemError('SESSION_NOT_FOUND', `no session ${body.uuid}`);
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
}
