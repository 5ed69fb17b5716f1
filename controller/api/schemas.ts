/**
 * Request and response bodies of the user and admin APIs, built from the resource fields of
 * common/schema.ts (one definition per field). The agent bodies live in common/agent-api.ts. The routes
 * name these in their fastify `schema`; /openapi.json is generated from those (openapi.ts).
 *
 * A multi-action body is `Actions([...])`: one object schema per action, told apart by `action`. Adding
 * an action is one schema in the route's list here and one `case` in its handler (the compiler insists).
 */
import Type, { type Static, type TObject, type TUnion, type TUnsafe } from 'typebox';
import { PEER_CONFIG_FORMATS, type PeerConfigFormat } from '../../common/peer-config/index.ts';
import {
  Asn,
  BgpState,
  Decision,
  Endpoint,
  Ipv4,
  Ipv6,
  LastError,
  Line,
  LinkLocal,
  Mtu,
  PolicySpec,
  Port,
  RouterName,
  RouterSpec,
  RouterStatus,
  SessionMetrics,
  StatusCode,
  StatusNameField,
  Timestamp,
  Uuid,
  WireGuardKey,
} from '../../common/schema.ts';
import { mergePatchSchema } from '../../common/merge-patch.ts';
import { withoutDefaults } from '../../common/validate.ts';

const Reason = Line(500);

/**
 * A multi-action body (docs/api.md, Conventions): `oneOf` the variants with `action` as discriminator.
 * The request type is the union of the variants; validation.ts picks the variant by `action` first, so
 * an unknown action is INVALID_ACTION and a bad field is INVALID_REQUEST naming it.
 */
export function Actions<T extends TObject[]>(variants: [...T]): TUnsafe<Static<TUnion<T>>> {
  return Type.Unsafe<Static<TUnion<T>>>({ oneOf: variants, discriminator: { propertyName: 'action' } });
}

/** Sample values of the examples (valid under their formats; the addresses are DN42's). */
const EXAMPLE = {
  uuid: '4d7c9a3e-1f2b-4c5d-8e9f-0a1b2c3d4e5f',
  publicKey: 'xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=',
  ipv6: 'fd42:4242:2601:ac12::1',
  linkLocal: 'fe80::1:1234',
  ipv4: '172.20.53.97',
  endpoint: 'peer.example.net:51820',
} as const;

/** `router` of create: the router's UUID or its name (docs/api.md, create). */
const RouterRef = Type.Union([Uuid, RouterName]);

export const SessionList = Type.Object(
  { action: Type.Literal('list') },
  { additionalProperties: false, examples: [{ action: 'list' }] },
);
export const SessionCreate = Type.Object(
  {
    action: Type.Literal('create'),
    router: RouterRef,
    ipv6: Ipv6,
    linkLocal: LinkLocal,
    ipv4: Type.Optional(Ipv4),
    endpoint: Type.Optional(Endpoint),
    publicKey: WireGuardKey,
    mtu: Type.Optional(Mtu),
    mpbgp: Type.Optional(Type.Boolean()),
    extendedNextHop: Type.Optional(Type.Boolean()),
  },
  {
    additionalProperties: false,
    examples: [
      {
        action: 'create',
        router: 'fra1',
        ipv6: EXAMPLE.ipv6,
        linkLocal: EXAMPLE.linkLocal,
        ipv4: EXAMPLE.ipv4,
        endpoint: EXAMPLE.endpoint,
        publicKey: EXAMPLE.publicKey,
      },
    ],
  },
);
// Partial updates carry no defaults: a field left out keeps its value.
export const SessionModify = withoutDefaults(
  Type.Object(
    {
      action: Type.Literal('modify'),
      uuid: Uuid,
      endpoint: Type.Optional(Type.Union([Endpoint, Type.Null()])),
      mtu: Type.Optional(Mtu),
    },
    {
      additionalProperties: false,
      // the handler refuses a modify with neither, in words (a schema's anyOf would name both as missing)
      description:
        'Needs `endpoint` or `mtu` (or both): `endpoint` null removes the endpoint. The session is set up again.',
      examples: [{ action: 'modify', uuid: EXAMPLE.uuid, endpoint: EXAMPLE.endpoint, mtu: 1400 }],
    },
  ),
);
export const SessionUuidAction = <A extends string>(action: A) =>
  Type.Object(
    { action: Type.Literal(action), uuid: Uuid },
    { additionalProperties: false, examples: [{ action, uuid: EXAMPLE.uuid }] },
  );
export const SessionDelete = SessionUuidAction('delete');
export const SessionRestart = SessionUuidAction('restart');
/** `config`: the peer's side of a session as files (docs/user-guide.md, "Configure your side"). */
const PeerConfigFormat = Type.Unsafe<PeerConfigFormat>({ type: 'string', enum: [...PEER_CONFIG_FORMATS] });
export const SessionConfig = Type.Object(
  { action: Type.Literal('config'), uuid: Uuid, format: PeerConfigFormat },
  { additionalProperties: false, examples: [{ action: 'config', uuid: EXAMPLE.uuid, format: 'wg-quick' }] },
);

export const AdminSessionList = Type.Object(
  {
    action: Type.Literal('list'),
    router: Type.Optional(RouterName),
    asn: Type.Optional(Asn),
    status: Type.Optional(StatusCode),
  },
  { additionalProperties: false, examples: [{ action: 'list', router: 'fra1', status: 3 }] },
);
export const AdminSessionAction = <A extends string>(action: A) =>
  Type.Object(
    { action: Type.Literal(action), uuid: Uuid, reason: Type.Optional(Reason) },
    {
      additionalProperties: false,
      examples: [{ action, uuid: EXAMPLE.uuid, reason: 'checked the registry' }],
    },
  );
/** Closes a session stuck in QUEUED_FOR_DELETE; the reason is required: the audit record, and its owner reads it. */
export const AdminSessionPurge = Type.Object(
  { action: Type.Literal('purge'), uuid: Uuid, reason: Reason },
  {
    additionalProperties: false,
    description:
      'Closes a session in status 5 (QUEUED_FOR_DELETE) whose agent never tore it down: status 8 (PURGED), which holds nothing on the router; the commit records the admin and the reason, and the owner sees them (`status.decision`).',
    examples: [{ action: 'purge', uuid: EXAMPLE.uuid, reason: 'router fra1 was decommissioned' }],
  },
);

/**
 * Router fields an admin writes; uuid is generated when absent and fixed after, the token hash never comes
 * from a client (rotate-token makes it).
 */
const { agentTokenSha256: _hash, uuid: _uuid, ...writableRouterFields } = RouterSpec.properties;
export const AdminRouterAdd = Type.Object(
  { action: Type.Literal('add'), name: RouterName, uuid: Type.Optional(Uuid), ...writableRouterFields },
  {
    additionalProperties: false,
    examples: [
      {
        action: 'add',
        name: 'fra1',
        displayName: 'Frankfurt 1',
        nodeId: 1,
        region: 'eu-central',
        endpointHost: 'fra1.example.net',
        publicKey: EXAMPLE.publicKey,
        linkLocal: 'fe80::1',
        loopback: { ipv4: '172.20.53.1', ipv6: 'fd42:4242:2601::1' },
      },
    ],
  },
);
export const AdminRouterUpdate = Type.Object(
  {
    action: Type.Literal('update'),
    name: RouterName,
    // Partial drops the object's options: unknown fields (uuid, agentTokenSha256 too) are refused again
    spec: withoutDefaults(Type.Partial(Type.Object(writableRouterFields), { additionalProperties: false })),
  },
  {
    additionalProperties: false,
    examples: [{ action: 'update', name: 'fra1', spec: { maxSessions: 200, acceptingSessions: true } }],
  },
);
export const AdminRouterName = <A extends string>(action: A) =>
  Type.Object(
    { action: Type.Literal(action), name: RouterName },
    { additionalProperties: false, examples: [{ action, name: 'fra1' }] },
  );
export const AdminRouterList = Type.Object(
  { action: Type.Literal('list') },
  { additionalProperties: false, examples: [{ action: 'list' }] },
);

export const AdminPolicyGet = Type.Object(
  { action: Type.Literal('get'), name: Type.Optional(Type.Union([Type.Literal('default'), RouterName])) },
  { additionalProperties: false, examples: [{ action: 'get', name: 'default' }] },
);
export const AdminPolicySet = Type.Object(
  {
    action: Type.Literal('set'),
    name: Type.Optional(Type.Union([Type.Literal('default'), RouterName])),
    spec: PolicySpec,
  },
  {
    additionalProperties: false,
    description: 'Replaces the whole policy: a field left out is removed (patch changes single fields).',
    examples: [{ action: 'set', spec: { dn42Asn: 4242420000, blockedAsns: [4242429999] } }],
  },
);
export const AdminPolicyPatch = Type.Object(
  {
    action: Type.Literal('patch'),
    name: Type.Optional(Type.Union([Type.Literal('default'), RouterName])),
    spec: mergePatchSchema(PolicySpec),
  },
  {
    additionalProperties: false,
    description:
      'Merges spec into the stored policy as a JSON Merge Patch (RFC 7386): a field given replaces the stored one, objects merge field by field, arrays replace whole, null removes the field.',
    examples: [{ action: 'patch', name: 'fra1', spec: { blockedAsns: null } }],
  },
);

// ---- responses ----

export const SessionRecord = Type.Object({
  uuid: Uuid,
  router: RouterName,
  routerName: Type.String(),
  asn: Asn,
  status: StatusCode,
  statusName: StatusNameField,
  ipv6: Ipv6,
  ipv6LinkLocal: LinkLocal,
  ipv4: Type.Union([Ipv4, Type.Null()]),
  endpoint: Type.Union([Endpoint, Type.Null()]),
  publicKey: WireGuardKey,
  mtu: Mtu,
  mpbgp: Type.Boolean(),
  extendedNextHop: Type.Boolean(),
  listenPort: Port,
  interface: Type.String(),
  serverEndpoint: Type.String(),
  /** The router's WireGuard public key and link-local (its BGP neighbour); null when the router is gone. */
  serverPublicKey: Type.Union([WireGuardKey, Type.Null()]),
  serverLinkLocal: Type.Union([LinkLocal, Type.Null()]),
  createdAt: Type.Union([Timestamp, Type.Null()]),
  lastTransitionTime: Type.Union([Timestamp, Type.Null()]),
  lastError: Type.Union([LastError, Type.Null()]),
  /**
   * The admin's last reject, disable or purge of the session, with the reason (docs/api.md, Decisions);
   * `until`: when a REJECTED or PURGED session is removed. Null when none stands.
   */
  decision: Type.Union([
    Type.Object({ ...Decision.properties, until: Type.Optional(Timestamp) }, { additionalProperties: false }),
    Type.Null(),
  ]),
  metrics: Type.Union([SessionMetrics, Type.Null()]),
  bgpState: BgpState,
  bgpSince: Type.Union([Timestamp, Type.Null()]),
  lastHandshake: Type.Union([Timestamp, Type.Null()]),
  /**
   * Who a queued session waits for (common/waiting.ts; docs/api.md, Waiting): `peer` (the router is ready,
   * BIRD tries to connect and the peer's side does not answer), `router` (its agent sets it up) or
   * `agent` (the router's agent has not reported for longer than two heartbeat intervals); null otherwise.
   */
  waiting: Type.Union([
    Type.Object({
      for: Type.String({ enum: ['peer', 'router', 'agent'] }),
      since: Type.Union([Timestamp, Type.Null()]),
    }),
    Type.Null(),
  ]),
  networkAsn: Type.Union([Asn, Type.Null()]),
  /**
   * A change of this session the API acknowledged that an edit on the forge replaced (docs/gitops.md,
   * "When the forge and the API change the same file"): the forge's version is the session now, the
   * replaced one is kept on `branch` of the forge. Null when there is none unresolved of the last 7 days.
   */
  forgeConflict: Type.Union([
    Type.Object(
      {
        id: Type.String(),
        /** When the replaced change was made. */
        at: Timestamp,
        /** The store's commit that made it, and the forge's commit whose version won. */
        commit: Type.String(),
        forgeCommit: Type.String(),
        branch: Type.String(),
        message: Type.String(),
      },
      { additionalProperties: false },
    ),
    Type.Null(),
  ]),
});
export type SessionRecord = Static<typeof SessionRecord>;

export const SessionListResponse = Type.Object({ sessions: Type.Array(SessionRecord) });
const FieldErrorRecord = Type.Object({ pointer: Type.String(), message: Type.String() });
/**
 * A session as the admin list shows it: the record, and what the current policy would refuse of it
 * (pointers as in a create body; empty when nothing). Users' records do not carry it.
 */
export const AdminSessionRecord = Type.Object({
  ...SessionRecord.properties,
  policyViolations: Type.Array(FieldErrorRecord),
});
export type AdminSessionRecord = Static<typeof AdminSessionRecord>;
export const AdminSessionListResponse = Type.Object({ sessions: Type.Array(AdminSessionRecord) });
export const CreateResponse = Type.Object({
  uuid: Uuid,
  status: StatusCode,
  statusName: StatusNameField,
  serverEndpoint: Type.String(),
  serverPublicKey: WireGuardKey,
  serverLinkLocal: LinkLocal,
  /** The router's tunnel IPv4 (its IPv4 loopback), when the session has an IPv4: the far end of yours. */
  serverIpv4: Type.Optional(Ipv4),
  listenPort: Port,
  interface: Type.String(),
  /** The network's own ASN (the routing policy's dn42Asn): the peer's BGP neighbour ASN. */
  networkAsn: Type.Union([Asn, Type.Null()]),
});
export const DeletedResponse = Type.Object({ uuid: Uuid, deleted: Type.Literal(true) });

export const PublicRouter = Type.Object({
  name: RouterName,
  uuid: Uuid,
  displayName: Type.String(),
  region: Type.String(),
  location: Type.Union([Type.String(), Type.Null()]),
  endpointHost: Type.String(),
  publicKey: WireGuardKey,
  linkLocal: LinkLocal,
  accepting: Type.Boolean(),
  /** Places left before the router's maxSessions; null when it sets no limit. */
  freeSlots: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]),
  networkAsn: Type.Union([Asn, Type.Null()]),
});
export type PublicRouter = Static<typeof PublicRouter>;
export const RoutersResponse = Type.Object(
  { routers: Type.Array(PublicRouter) },
  {
    examples: [
      {
        routers: [
          {
            name: 'fra1',
            uuid: EXAMPLE.uuid,
            displayName: 'Frankfurt 1',
            region: 'eu-central',
            location: 'Frankfurt, DE',
            endpointHost: 'fra1.example.net',
            publicKey: EXAMPLE.publicKey,
            linkLocal: 'fe80::1',
            accepting: true,
            freeSlots: 37,
            networkAsn: 4242420000,
          },
        ],
      },
    ],
  },
);

/** A router as the admin API shows it: its spec without the token hash, its status. */
export const AdminRouterRecord = Type.Object({
  name: RouterName,
  spec: Type.Omit(RouterSpec, ['agentTokenSha256']),
  status: RouterStatus,
  hasAgentToken: Type.Boolean(),
});
/** The agent token is in an answer only here, once: add and rotate-token. */
const AdminRouterAnswers = [
  Type.Object({ routers: Type.Array(AdminRouterRecord) }, { title: 'list' }),
  Type.Object({ router: AdminRouterRecord, agentToken: Type.String() }, { title: 'add' }),
  Type.Object({ router: AdminRouterRecord }, { title: 'update' }),
  Type.Object({ name: RouterName, removed: Type.Literal(true) }, { title: 'remove' }),
  Type.Object({ name: RouterName, agentToken: Type.String() }, { title: 'rotate-token' }),
];
const PolicyRecord = Type.Object({
  name: Type.Union([Type.Literal('default'), RouterName]),
  spec: PolicySpec,
});

/** The session answer of every action but list and delete: one record, or a deleted stub. */
const SessionAnswer = Type.Union([SessionRecord, DeletedResponse]);
const SessionConfigResponse = Type.Object({
  format: PeerConfigFormat,
  files: Type.Array(Type.Object({ name: Type.String(), content: Type.String() })),
});

// ---- the multi-action routes: one list of actions each ----

export const SessionActions = Actions([
  SessionList,
  SessionCreate,
  SessionModify,
  SessionDelete,
  SessionRestart,
  SessionConfig,
]);
export const SessionActionAnswer = Type.Union([
  SessionListResponse,
  CreateResponse,
  SessionAnswer,
  SessionConfigResponse,
]);

export const AdminSessionActions = Actions([
  AdminSessionList,
  AdminSessionAction('approve'),
  AdminSessionAction('reject'),
  AdminSessionAction('disable'),
  AdminSessionAction('enable'),
  AdminSessionPurge,
]);
export const AdminSessionAnswer = Type.Union([AdminSessionListResponse, SessionAnswer]);

export const AdminRouterActions = Actions([
  AdminRouterList,
  AdminRouterAdd,
  AdminRouterUpdate,
  AdminRouterName('remove'),
  AdminRouterName('rotate-token'),
]);
export const AdminRouterAnswer = Type.Union(AdminRouterAnswers);

export const AdminPolicyActions = Actions([AdminPolicyGet, AdminPolicySet, AdminPolicyPatch]);
export const AdminPolicyAnswer = PolicyRecord;

export const Problem = Type.Object({
  type: Type.String(),
  title: Type.String(),
  status: Type.Integer(),
  code: Type.String(),
  detail: Type.String(),
  errors: Type.Optional(Type.Array(Type.Object({ pointer: Type.String(), message: Type.String() }))),
});
