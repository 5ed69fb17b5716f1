/**
 * `POST /admin/adoptions` (docs/api.md, Adoptions): the sessions of a `peerops adopt` plan, created as a
 * create would be, marked adopted by the caller, each answered on its own. They arrive awaiting review
 * (docs/decisions.md, "Adopted sessions wait for review"); one the DN42 registry refuses arrives DISABLED
 * with the reason. Every other rule is the store's, as for a create.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type, { type Static } from 'typebox';
import { isProblem } from '../../common/errors.ts';
import type { FieldError } from '../../common/errors.ts';
import { fieldError } from '../../common/messages.ts';
import {
  AdoptedNames,
  Asn,
  Endpoint,
  Ipv4,
  Ipv6,
  LinkLocal,
  Mtu,
  Port,
  RouterName,
  sessionOptions,
  WireGuardKey,
} from '../../common/schema.ts';
import { interfaceName } from '../../common/naming.ts';
import { transition } from '../../common/state-machine.ts';
import { SessionStatus, statusName } from '../../common/status.ts';
import type { Registry } from '../auth/login/registry.ts';
import { adoptionRefusal } from '../registry/adoption.ts';
import type { Session, Store } from '../store/store.ts';
import { actorOf } from './actions.ts';
import { caller, requireAdmin } from './auth.ts';
import { FieldErrorRecord } from './responses.ts';

/** A plan's session as `peerops adopt -o json` prints it (agent/adopt/plan.ts, PlannedSession). */
const PlannedSession = Type.Object(
  {
    asn: Asn,
    router: RouterName,
    listenPort: Port,
    publicKey: WireGuardKey,
    endpoint: Type.Optional(Endpoint),
    mtu: Type.Optional(Mtu),
    // optional in a plan (a hand-made protocol may lack it); an adopted session needs the link-local it
    // peers over, answered per session. The DN42 IPv6 it may lack (docs/api.md, Adoptions)
    linkLocal: Type.Optional(LinkLocal),
    ipv6: Type.Optional(Ipv6),
    ipv4: Type.Optional(Ipv4),
    mpbgp: Type.Optional(Type.Boolean()),
    extendedNextHop: Type.Optional(Type.Boolean()),
    adopted: Type.Object(AdoptedNames, { additionalProperties: false }),
  },
  { additionalProperties: false },
);
type PlannedSession = Static<typeof PlannedSession>;

/** Sessions per request: a router's hand-made peers, hundreds at most (bench:adopt plans 200). */
const MAX_SESSIONS = 1000;
/** 1000 sessions of ~600 bytes each; the API's other bodies keep the 64 KiB default. */
const BODY_LIMIT = 1024 * 1024;

export const AdoptionsBody = Type.Object(
  { sessions: Type.Array(PlannedSession, { minItems: 1, maxItems: MAX_SESSIONS }) },
  {
    additionalProperties: false,
    examples: [
      {
        sessions: [
          {
            asn: 4242422601,
            router: 'fra1',
            listenPort: 32601,
            publicKey: 'xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=',
            endpoint: 'peer.example.net:22601',
            linkLocal: 'fe80::2601',
            ipv6: 'fd42:4242:2601:ac12::1',
            mpbgp: true,
            extendedNextHop: true,
            adopted: {
              interface: 'wg_2601',
              protocols: ['dn42_2601'],
              files: ['/etc/wireguard/wg_2601.conf', '/etc/bird/peers/as4242422601.conf'],
            },
          },
        ],
      },
    ],
  },
);

const AdoptionOutcome = Type.Object({
  /** The plan's session this answers, by its position. */
  index: Type.Integer({ minimum: 0 }),
  asn: Type.Integer(),
  router: Type.String(),
  interface: Type.String(),
  /** created; unchanged: the router already has a session adopted from this interface; refused. */
  outcome: Type.Union([Type.Literal('created'), Type.Literal('unchanged'), Type.Literal('refused')]),
  uuid: Type.Optional(Type.String()),
  status: Type.Optional(Type.Integer()),
  statusName: Type.Optional(Type.String()),
  /** Why a created session is DISABLED (the registry's refusal), or why one was refused. */
  message: Type.Optional(Type.String()),
  errors: Type.Optional(Type.Array(FieldErrorRecord)),
});
type AdoptionOutcome = Static<typeof AdoptionOutcome>;

export const AdoptionsAnswer = Type.Object({
  created: Type.Integer({ minimum: 0 }),
  unchanged: Type.Integer({ minimum: 0 }),
  refused: Type.Integer({ minimum: 0 }),
  sessions: Type.Array(AdoptionOutcome),
});

/** The session on the router that already owns this hand-made interface, adopted or peerops's own name. */
function interfaceOwner(store: Store, router: string, iface: string): Session | undefined {
  return store
    .listSessions({ router })
    .find((s) => s.spec.adopted?.interface === iface || interfaceName(s.spec.listenPort) === iface);
}

export const adoptionRoutes: FastifyPluginAsyncTypebox<{
  store: Store;
  /** The DN42 registry logins read: a session whose addresses it refuses is adopted DISABLED. */
  registry?: Registry | undefined;
}> = async (app, opts) => {
  const { store, registry } = opts;

  /** One planned session: created, found already adopted, or refused with the fields at fault. */
  async function adopt(
    planned: PlannedSession,
    index: number,
    by: ReturnType<typeof actorOf>,
    at: string,
  ): Promise<AdoptionOutcome> {
    const here = `/sessions/${index}`;
    const base = {
      index,
      asn: planned.asn,
      router: planned.router,
      interface: planned.adopted.interface,
    };
    const refused = (errors: FieldError[], message?: string): AdoptionOutcome => ({
      ...base,
      outcome: 'refused',
      message: message ?? `${errors[0]?.pointer}: ${errors[0]?.message}`,
      errors,
    });
    const router = store.getRouter(planned.router);
    if (!router)
      return refused([fieldError(`${here}/router`, 'field.unknownRouter', { router: planned.router })]);
    const owner = interfaceOwner(store, router.name, planned.adopted.interface);
    if (owner?.spec.adopted?.interface === planned.adopted.interface && owner.spec.asn === planned.asn)
      return {
        ...base,
        outcome: 'unchanged',
        uuid: owner.spec.uuid,
        status: owner.status.code,
        statusName: statusName(owner.status.code),
      };
    if (owner)
      return refused([
        fieldError(`${here}/adopted/interface`, 'field.adoptedInterfaceTaken', {
          interface: planned.adopted.interface,
          router: router.name,
          session: owner.name,
        }),
      ]);
    // the minimum is the link-local: every session's BGP neighbour [0] and its tunnel's own address
    // (docs/decisions.md, "An adopted session needs its link-local, not its DN42 IPv6")
    const { linkLocal } = planned;
    if (linkLocal === undefined)
      return refused([fieldError(`${here}/linkLocal`, 'field.adoptNeedsAddress', { field: 'linkLocal' })]);
    const spec = {
      asn: planned.asn,
      router: router.name,
      linkLocal,
      ...(planned.ipv6 !== undefined ? { ipv6: planned.ipv6 } : {}),
      publicKey: planned.publicKey,
      ...sessionOptions(planned),
      restartGeneration: 0,
      listenPort: planned.listenPort,
      ...(planned.ipv4 !== undefined ? { ipv4: planned.ipv4 } : {}),
      ...(planned.endpoint !== undefined ? { endpoint: planned.endpoint } : {}),
      adopted: { by: by.name, at, ...planned.adopted },
    };
    // the registry as a create meets it (session.ts), but a refusal keeps the session, DISABLED with why
    const refusal = await adoptionRefusal(registry, spec, store.policyFor(router.name));
    const review = transition(undefined, { kind: 'create', autoApprove: false });
    if (review.result !== 'status') throw new Error('create cannot remove');
    const code = refusal ? SessionStatus.DISABLED : review.to;
    try {
      const session = await store.createSession(
        spec,
        {
          code,
          name: statusName(code),
          lastTransitionTime: at,
          ...(refusal ? { lastError: refusal } : {}),
        },
        by,
        `adopt session AS${planned.asn} on ${router.name} from ${planned.adopted.interface}`,
      );
      return {
        ...base,
        outcome: 'created',
        uuid: session.spec.uuid,
        status: session.status.code,
        statusName: statusName(session.status.code),
        ...(session.status.lastError ? { message: session.status.lastError.message } : {}),
      };
    } catch (err) {
      // the store's refusals (port taken, address clash, limits) are this session's, not the request's
      if (!isProblem(err) || err.code === 'STORE_UNAVAILABLE') throw err;
      const errors = (err.errors ?? []).map((e) => ({ ...e, pointer: `${here}${e.pointer}` }));
      return refused(errors, err.message);
    }
  }

  app.post(
    '/admin/adoptions',
    {
      onRequest: [app.identify, app.rateLimit, requireAdmin],
      bodyLimit: BODY_LIMIT,
      schema: {
        operationId: 'adminAdoptions',
        summary: "Create the sessions of a router's adoption plan, marked adopted",
        description:
          'The `sessions` of `peerops adopt -o json`. Each is answered on its own: created (awaiting review, or DISABLED ' +
          'with the reason when the registry refuses its addresses), unchanged (already adopted from that interface), ' +
          'or refused with the fields at fault; the others are applied.',
        body: AdoptionsBody,
        response: { 200: AdoptionsAnswer },
      },
    },
    async (request) => {
      const by = actorOf(caller(request));
      const at = new Date().toISOString();
      const sessions: AdoptionOutcome[] = [];
      // one after the other: a plan may hold two sessions the store must judge against each other
      for (const [index, planned] of request.body.sessions.entries())
        sessions.push(await adopt(planned, index, by, at));
      const count = (o: AdoptionOutcome['outcome']) => sessions.filter((s) => s.outcome === o).length;
      return {
        created: count('created'),
        unchanged: count('unchanged'),
        refused: count('refused'),
        sessions,
      };
    },
  );
};
