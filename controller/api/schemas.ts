/**
 * Request and response bodies of the user and admin APIs, built from the resource fields of
 * common/schema.ts (one definition per field). The agent bodies live in common/agent-api.ts. The routes
 * name these in their fastify `schema`; /openapi.json is generated from those (openapi.ts).
 *
 * A multi-action body is `Actions([...])`: one object schema per action, told apart by `action`. Adding
 * an action is one schema in the route's list here and one `case` in its handler (the compiler insists).
 */
import Type, { type Static, type TObject, type TSchema, type TUnion, type TUnsafe } from 'typebox';
import {
  Asn,
  Endpoint,
  Ipv4,
  Ipv6,
  Line,
  LinkLocal,
  Mtu,
  PolicySpec,
  RouterName,
  RouterSpec,
  StatusCode,
  Uuid,
  WireGuardKey,
} from '../../common/schema.ts';
import { mergePatchSchema } from '../../common/merge-patch.ts';
import { withoutDefaults } from '../../common/validate.ts';
import {
  AdminRouterRecord,
  AdminSessionListResponse,
  AdminSessionReviewResponse,
  AsNamesResponse,
  CreateResponse,
  DeletedResponse,
  ListSortField,
  MessageKeyFields,
  PeerConfigFormatField,
  PolicyRecord,
  PublicRouter,
  SessionConfigResponse,
  SessionListResponse,
  SessionRecord,
} from './responses.ts';

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
      publicKey: Type.Optional(WireGuardKey),
      linkLocal: Type.Optional(LinkLocal),
      ipv6: Type.Optional(Ipv6),
      ipv4: Type.Optional(Type.Union([Ipv4, Type.Null()])),
      mpbgp: Type.Optional(Type.Boolean()),
      extendedNextHop: Type.Optional(Type.Boolean()),
    },
    {
      additionalProperties: false,
      // the handler refuses a modify with no field, in words (a schema's anyOf would name each as missing)
      description:
        'Needs at least one field to change; `endpoint` or `ipv4` null removes it. The new values meet the checks of a create; ' +
        "a new peer address follows the review rule of a create, a new key the policy's `reviewKeyChanges` (docs/api.md, modify).",
      examples: [
        { action: 'modify', uuid: EXAMPLE.uuid, endpoint: EXAMPLE.endpoint, mtu: 1400 },
        { action: 'modify', uuid: EXAMPLE.uuid, publicKey: EXAMPLE.publicKey },
      ],
    },
  ),
);
export type SessionModifyBody = Static<typeof SessionModify>;
export const SessionUuidAction = <A extends string>(action: A) =>
  Type.Object(
    { action: Type.Literal(action), uuid: Uuid },
    { additionalProperties: false, examples: [{ action, uuid: EXAMPLE.uuid }] },
  );
export const SessionDelete = SessionUuidAction('delete');
export const SessionRestart = SessionUuidAction('restart');
/** `config`: the peer's side of a session as files (docs/user-guide.md, "Configure your side"). */
export const SessionConfig = Type.Object(
  { action: Type.Literal('config'), uuid: Uuid, format: PeerConfigFormatField },
  { additionalProperties: false, examples: [{ action: 'config', uuid: EXAMPLE.uuid, format: 'wg-quick' }] },
);

/** The most records one page of the admin list holds (docs/api.md, Admin API, list). */
export const ADMIN_LIST_MAX_LIMIT = 200;
export const AdminSessionList = Type.Object(
  {
    action: Type.Literal('list'),
    router: Type.Optional(RouterName),
    asn: Type.Optional(Asn),
    status: Type.Optional(StatusCode),
    search: Type.Optional(Line(100)),
    sort: Type.Optional(ListSortField),
    descending: Type.Optional(Type.Boolean()),
    offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000 })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: ADMIN_LIST_MAX_LIMIT })),
  },
  {
    additionalProperties: false,
    description:
      'Without `limit`, every session the filters keep. With it, one page: `offset` skips that many of the ' +
      'order `sort` gives (ties by ASN then uuid), and the answer adds `matched` and `total`.',
    examples: [
      { action: 'list', router: 'fra1', status: 3 },
      { action: 'list', search: 'AS4242421', sort: 'age', descending: true, offset: 50, limit: 50 },
    ],
  },
);
export const AdminSessionAction = <A extends string>(action: A) =>
  Type.Object(
    { action: Type.Literal(action), uuid: Uuid, reason: Type.Optional(Reason) },
    {
      additionalProperties: false,
      examples: [{ action, uuid: EXAMPLE.uuid, reason: 'checked the registry' }],
    },
  );
export const AdminSessionReview = Type.Object(
  { action: Type.Literal('review'), uuid: Uuid },
  { additionalProperties: false, examples: [{ action: 'review', uuid: EXAMPLE.uuid }] },
);
/** The registry's as-name of up to one page of ASNs (the portal's admin table asks per page shown). */
export const AdminSessionAsNames = Type.Object(
  { action: Type.Literal('as-names'), asns: Type.Array(Asn, { minItems: 1, maxItems: 200 }) },
  { additionalProperties: false, examples: [{ action: 'as-names', asns: [4242421234] }] },
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
// The optional fields of a router: an update's null removes one (a JSON Merge Patch's null), which
// brings back its default where it has one (docs/api.md, router update).
const { location, provider, dn42Region, portRange, maxSessions, acceptingSessions, autoApprove, ...kept } =
  writableRouterFields;
const nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
const clearableRouterFields = {
  location: nullable(location),
  provider: nullable(provider),
  dn42Region: nullable(dn42Region),
  portRange: nullable(portRange),
  maxSessions: nullable(maxSessions),
  acceptingSessions: nullable(acceptingSessions),
  autoApprove: nullable(autoApprove),
};
/** The router fields an update clears with null; the others every router has. */
export const CLEARABLE_ROUTER_FIELDS = Object.keys(clearableRouterFields);
export const AdminRouterUpdate = Type.Object(
  {
    action: Type.Literal('update'),
    name: RouterName,
    // Partial drops the object's options: unknown fields (uuid, agentTokenSha256 too) are refused again
    spec: withoutDefaults(
      Type.Partial(Type.Object({ ...kept, ...clearableRouterFields }), { additionalProperties: false }),
    ),
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

/** The agent token is in an answer only here, once: add and rotate-token. */
const AdminRouterAnswers = [
  Type.Object({ routers: Type.Array(AdminRouterRecord) }, { title: 'list' }),
  Type.Object({ router: AdminRouterRecord, agentToken: Type.String() }, { title: 'add' }),
  Type.Object({ router: AdminRouterRecord }, { title: 'update' }),
  Type.Object({ name: RouterName, removed: Type.Literal(true) }, { title: 'remove' }),
  Type.Object({ name: RouterName, agentToken: Type.String() }, { title: 'rotate-token' }),
];
/** The session answer of every action but list and delete: one record, or a deleted stub. */
const SessionAnswer = Type.Union([SessionRecord, DeletedResponse]);
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
  AdminSessionReview,
  AdminSessionAsNames,
  AdminSessionAction('approve'),
  AdminSessionAction('reject'),
  AdminSessionAction('disable'),
  AdminSessionAction('enable'),
  AdminSessionPurge,
]);
export const AdminSessionAnswer = Type.Union([
  AdminSessionListResponse,
  AdminSessionReviewResponse,
  AsNamesResponse,
  SessionAnswer,
]);

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
  ...MessageKeyFields,
  errors: Type.Optional(
    Type.Array(Type.Object({ pointer: Type.String(), message: Type.String(), ...MessageKeyFields })),
  ),
});
