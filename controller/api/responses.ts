/**
 * The bodies of the user and admin APIs' answers, built from the resource fields of common/schema.ts. The
 * routes name them in their `schema` (through schemas.ts); the portal takes its types from here with a
 * type-only import (web/api.ts), so this module imports nothing but schemas, nothing of Node.
 */
import Type, { type Static } from 'typebox';
import { PEER_CONFIG_FORMATS, type PeerConfigFormat } from '../../common/peer-config/formats.ts';
import {
  Adopted,
  Asn,
  BgpState,
  Decision,
  Endpoint,
  Ipv4,
  LastError,
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
  Ipv6,
} from '../../common/schema.ts';

/** A `config` format (docs/user-guide.md, "Configure your side"). */
export const PeerConfigFormatField = Type.Unsafe<PeerConfigFormat>({
  type: 'string',
  enum: [...PEER_CONFIG_FORMATS],
});

/**
 * The peer's DN42 IPv6 as records show it: a string, empty for an adopted session that has none (docs/api.md,
 * Adoptions), as the records' other text fields are.
 */
const RecordIpv6 = Type.Union([Ipv6, Type.Literal('')]);

/** A session's addresses, key and options as records name them: the session's and its approved copy's. */
const RecordSpec = {
  ipv6: RecordIpv6,
  ipv6LinkLocal: LinkLocal,
  ipv4: Type.Union([Ipv4, Type.Null()]),
  endpoint: Type.Union([Endpoint, Type.Null()]),
  publicKey: WireGuardKey,
  mtu: Mtu,
  mpbgp: Type.Boolean(),
  extendedNextHop: Type.Boolean(),
};

export const SessionRecord = Type.Object({
  uuid: Uuid,
  router: RouterName,
  routerName: Type.String(),
  asn: Asn,
  status: StatusCode,
  statusName: StatusNameField,
  ...RecordSpec,
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
   * While a modify waits for review (status 3) on a session its router runs: the values the router keeps
   * running, named as above, and the status the session has there (docs/api.md, modify); null otherwise.
   */
  approved: Type.Union([
    Type.Object({
      ...RecordSpec,
      status: StatusCode,
      statusName: StatusNameField,
    }),
    Type.Null(),
  ]),
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
  /** Set when the session was adopted from a router's hand-made files: from which, by whom, when. */
  adopted: Type.Union([Adopted, Type.Null()]),
});
export type SessionRecord = Static<typeof SessionRecord>;

export const SessionListResponse = Type.Object({ sessions: Type.Array(SessionRecord) });
/** A message's catalogue key and parameters (common/messages.ts; docs/api.md, Errors, Message keys). */
export const MessageKeyFields = {
  key: Type.Optional(
    Type.String({ description: 'the catalogue key of the message, stable across versions' }),
  ),
  params: Type.Optional(Type.Record(Type.String(), Type.Union([Type.String(), Type.Number()]))),
};

/** A field error: where, why, and the why's catalogue key. */
export const FieldErrorRecord = Type.Object({
  pointer: Type.String(),
  message: Type.String(),
  ...MessageKeyFields,
});
/**
 * A session as the admin list shows it: the record, and what the current policy would refuse of it
 * (pointers as in a create body; empty when nothing). Users' records do not carry it.
 */
export const AdminSessionRecord = Type.Object({
  ...SessionRecord.properties,
  policyViolations: Type.Array(FieldErrorRecord),
});
export type AdminSessionRecord = Static<typeof AdminSessionRecord>;
/** The orders of the admin list's pages (docs/api.md, Admin API, list). */
export const LIST_SORT_KEYS = ['asn', 'status', 'router', 'bgp', 'age'] as const;
export type ListSortKey = (typeof LIST_SORT_KEYS)[number];
export const ListSortField = Type.Unsafe<ListSortKey>({ type: 'string', enum: [...LIST_SORT_KEYS] });
export const AdminSessionListResponse = Type.Object({
  sessions: Type.Array(AdminSessionRecord),
  /** A page's answer (`limit` given): how many sessions the filters keep, and how many there are. */
  matched: Type.Optional(Type.Integer({ minimum: 0 })),
  total: Type.Optional(Type.Integer({ minimum: 0 })),
});
export type AdminSessionListResponse = Static<typeof AdminSessionListResponse>;
/** The review of one session: its record and what the DN42 registry says (controller/registry/review.ts). */
export const AdminSessionReviewResponse = Type.Object({
  session: AdminSessionRecord,
  /** Null where the login source has no registry files (a users file). */
  registry: Type.Union([
    Type.Object({
      found: Type.Boolean(),
      asName: Type.Union([Type.String(), Type.Null()]),
      mntBy: Type.Array(Type.String()),
      adminC: Type.Array(Type.String()),
      techC: Type.Array(Type.String()),
      addresses: Type.Array(
        Type.Object({
          field: Type.Union([Type.Literal('ipv6'), Type.Literal('ipv4')]),
          address: Type.String(),
          objects: Type.Array(
            Type.Object({
              type: Type.Union([Type.Literal('route'), Type.Literal('route6')]),
              prefix: Type.String(),
              origins: Type.Array(Asn),
              counts: Type.Boolean(),
            }),
          ),
          problem: Type.Union([Type.String(), Type.Null()]),
        }),
      ),
    }),
    Type.Null(),
  ]),
});
export type AdminSessionReviewResponse = Static<typeof AdminSessionReviewResponse>;
export const AsNamesResponse = Type.Object({
  asNames: Type.Array(Type.Object({ asn: Asn, asName: Type.Union([Type.String(), Type.Null()]) })),
});
export type AsNamesResponse = Static<typeof AsNamesResponse>;
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

/** How a router is shown to people (the router list, the nearest routers, the network map). */
const RouterShown = {
  displayName: Type.String(),
  region: Type.String(),
  location: Type.Union([Type.String(), Type.Null()]),
};

export const PublicRouter = Type.Object({
  name: RouterName,
  uuid: Uuid,
  ...RouterShown,
  endpointHost: Type.String(),
  publicKey: WireGuardKey,
  linkLocal: LinkLocal,
  accepting: Type.Boolean(),
  /** Places left before the router's maxSessions; null when it sets no limit. */
  freeSlots: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]),
  networkAsn: Type.Union([Asn, Type.Null()]),
});
export type PublicRouter = Static<typeof PublicRouter>;

/** A router as the admin API shows it: its spec without the token hash, its status. */
export const AdminRouterRecord = Type.Object({
  name: RouterName,
  spec: Type.Omit(RouterSpec, ['agentTokenSha256']),
  status: RouterStatus,
  hasAgentToken: Type.Boolean(),
  /**
   * Whether the spec's autoApprove takes effect on this controller: false where it is off, or set where no
   * DN42 registry's route objects check addresses and the operator has not opted in (docs/api.md, router add).
   */
  autoApproveHolds: Type.Boolean(),
  /** In list only: how many of the router's sessions are in each status, statuses without any left out. */
  sessionsByStatus: Type.Optional(
    Type.Array(Type.Object({ status: StatusCode, count: Type.Integer({ minimum: 1 }) })),
  ),
});

export const PolicyRecord = Type.Object({
  name: Type.Union([Type.Literal('default'), RouterName]),
  spec: PolicySpec,
});

export const SessionConfigResponse = Type.Object({
  format: PeerConfigFormatField,
  files: Type.Array(Type.Object({ name: Type.String(), content: Type.String() })),
});

export type AdminRouterRecord = Static<typeof AdminRouterRecord>;
export type CreateResponse = Static<typeof CreateResponse>;
export type PolicyRecord = Static<typeof PolicyRecord>;
export type SessionConfigResponse = Static<typeof SessionConfigResponse>;

/** GET /routers/near: the accepting routers by their measured RTT to a peer's endpoint, nearest first. */
export const NearRoutersResponse = Type.Object(
  {
    endpoint: Endpoint,
    measuredAt: Timestamp,
    routers: Type.Array(
      Type.Object({
        name: RouterName,
        ...RouterShown,
        /** Mean RTT in ms of the router's ping to the endpoint; null: none answered (`problem` says why). */
        rtt: Type.Union([Type.Number({ minimum: 0 }), Type.Null()]),
        problem: Type.Optional(Type.String()),
      }),
    ),
  },
  {
    examples: [
      {
        endpoint: 'peer.example.org:51820',
        measuredAt: '2026-01-01T12:00:00.000Z',
        routers: [
          { name: 'fra1', displayName: 'Frankfurt 1', region: 'eu-central', location: null, rtt: 8.2 },
          {
            name: 'nyc1',
            displayName: 'New York 1',
            region: 'na-east',
            location: null,
            rtt: null,
            problem: "router nyc1's agent did not take the query within 10 s: is it connected?",
          },
        ],
      },
    ],
  },
);
export type NearRoutersResponse = Static<typeof NearRoutersResponse>;

/** GET /network: every router with what its Ready says, for anyone logged in (docs/api.md, Network). */
export const NetworkResponse = Type.Object(
  {
    routers: Type.Array(
      Type.Object({
        name: RouterName,
        ...RouterShown,
        accepting: Type.Boolean(),
        /** ready; notReady (`reason`: AgentNotReporting, BirdDown, …); neverReported: no agent report yet. */
        state: Type.Union([Type.Literal('ready'), Type.Literal('notReady'), Type.Literal('neverReported')]),
        reason: Type.Union([Type.String(), Type.Null()]),
        lastHeartbeat: Type.Union([Timestamp, Type.Null()]),
        /** Sessions on the router that are up (ACTIVE). */
        activeSessions: Type.Integer({ minimum: 0 }),
      }),
    ),
  },
  {
    examples: [
      {
        routers: [
          {
            name: 'fra1',
            displayName: 'Frankfurt 1',
            region: 'eu-central',
            location: 'Frankfurt',
            accepting: true,
            state: 'ready',
            reason: 'AgentReporting',
            lastHeartbeat: '2026-01-01T12:00:00.000Z',
            activeSessions: 12,
          },
        ],
      },
    ],
  },
);
export type NetworkResponse = Static<typeof NetworkResponse>;
