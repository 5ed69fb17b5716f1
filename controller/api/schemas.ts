/**
 * Request and response bodies of the user and admin APIs, built from the resource fields of
 * common/schema.ts (one definition per field). The agent bodies live in common/agent-api.ts.
 */
import Type, { type Static, type TSchema } from 'typebox';
import {
  Asn,
  BgpState,
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

/** `router` of create: the router's UUID (SPEC.md 2.2) or its name. */
const RouterRef = Type.Union([Uuid, RouterName]);

export const SessionList = Type.Object({ action: Type.Literal('list') }, { additionalProperties: false });
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
  { additionalProperties: false },
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
    { additionalProperties: false },
  ),
);
export const SessionUuidAction = (action: string) =>
  Type.Object({ action: Type.Literal(action), uuid: Uuid }, { additionalProperties: false });
export const SessionDelete = SessionUuidAction('delete');
export const SessionRestart = SessionUuidAction('restart');

export const AdminSessionList = Type.Object(
  {
    action: Type.Literal('list'),
    router: Type.Optional(RouterName),
    asn: Type.Optional(Asn),
    status: Type.Optional(StatusCode),
  },
  { additionalProperties: false },
);
export const AdminSessionAction = (action: string) =>
  Type.Object(
    { action: Type.Literal(action), uuid: Uuid, reason: Type.Optional(Reason) },
    { additionalProperties: false },
  );
/** Removes a session stuck in QUEUED_FOR_DELETE; the reason is required: it is the audit record. */
export const AdminSessionPurge = Type.Object(
  { action: Type.Literal('purge'), uuid: Uuid, reason: Reason },
  {
    additionalProperties: false,
    description:
      'Removes a session in status 5 (QUEUED_FOR_DELETE) whose agent never tore it down; the commit records the admin and the reason.',
  },
);

/**
 * Router fields an admin writes; uuid is generated when absent and fixed after, the token hash never comes
 * from a client (rotate-token makes it).
 */
const { agentTokenSha256: _hash, uuid: _uuid, ...writableRouterFields } = RouterSpec.properties;
export const AdminRouterAdd = Type.Object(
  { action: Type.Literal('add'), name: RouterName, uuid: Type.Optional(Uuid), ...writableRouterFields },
  { additionalProperties: false },
);
export const AdminRouterUpdate = Type.Object(
  {
    action: Type.Literal('update'),
    name: RouterName,
    // Partial drops the object's options: unknown fields (uuid, agentTokenSha256 too) are refused again
    spec: withoutDefaults(Type.Partial(Type.Object(writableRouterFields), { additionalProperties: false })),
  },
  { additionalProperties: false },
);
export const AdminRouterName = (action: string) =>
  Type.Object({ action: Type.Literal(action), name: RouterName }, { additionalProperties: false });
export const AdminRouterList = Type.Object({ action: Type.Literal('list') }, { additionalProperties: false });

export const AdminPolicyGet = Type.Object(
  { action: Type.Literal('get'), name: Type.Optional(Type.Union([Type.Literal('default'), RouterName])) },
  { additionalProperties: false },
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
  createdAt: Type.Union([Timestamp, Type.Null()]),
  lastTransitionTime: Type.Union([Timestamp, Type.Null()]),
  lastError: Type.Union([LastError, Type.Null()]),
  metrics: Type.Union([SessionMetrics, Type.Null()]),
  bgpState: BgpState,
  bgpSince: Type.Union([Timestamp, Type.Null()]),
  lastHandshake: Type.Union([Timestamp, Type.Null()]),
  networkAsn: Type.Union([Asn, Type.Null()]),
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
  networkAsn: Type.Union([Asn, Type.Null()]),
});
export const RoutersResponse = Type.Object({ routers: Type.Array(PublicRouter) });

/** A router as the admin API shows it: its spec without the token hash, its status. */
export const AdminRouterRecord = Type.Object({
  name: RouterName,
  spec: Type.Omit(RouterSpec, ['agentTokenSha256']),
  status: RouterStatus,
  hasAgentToken: Type.Boolean(),
});
/** The agent token is in an answer only here, once: add and rotate-token. */
export const ADMIN_ROUTER_RESPONSES = {
  list: Type.Object({ routers: Type.Array(AdminRouterRecord) }),
  add: Type.Object({ router: AdminRouterRecord, agentToken: Type.String() }),
  update: Type.Object({ router: AdminRouterRecord }),
  remove: Type.Object({ name: RouterName, removed: Type.Literal(true) }),
  'rotate-token': Type.Object({ name: RouterName, agentToken: Type.String() }),
};
const PolicyRecord = Type.Object({
  name: Type.Union([Type.Literal('default'), RouterName]),
  spec: PolicySpec,
});
export const ADMIN_POLICY_RESPONSES = { get: PolicyRecord, set: PolicyRecord, patch: PolicyRecord };

export const Problem = Type.Object({
  type: Type.String(),
  title: Type.String(),
  status: Type.Integer(),
  code: Type.String(),
  detail: Type.String(),
  errors: Type.Optional(Type.Array(Type.Object({ pointer: Type.String(), message: Type.String() }))),
});

export type ActionTable = Record<string, TSchema>;
