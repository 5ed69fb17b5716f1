/**
 * Bodies of the agent endpoints (docs/api.md, Agent API). The controller validates
 * requests and serialises responses with these schemas; the agent builds requests and checks responses
 * with them. Units: rtt milliseconds (fractional), uptime seconds, timestamps ISO 8601 UTC.
 */
import Type, { type Static, type TString } from 'typebox';
import {
  AdoptedNames,
  Asn,
  BgpState,
  Condition,
  Endpoint,
  Ipv4,
  Ipv4Prefix,
  Ipv6,
  Ipv6Prefix,
  Line,
  LinkLocal,
  MeshPeerState,
  MessageKey,
  MessageParams,
  Mtu,
  Port,
  RouterName,
  RpkiServer,
  StatusCode,
  StatusNameField,
  Timestamp,
  Uuid,
  WireGuardKey,
} from './schema.ts';

// ---- agent → controller ----

export const HeartbeatBody = Type.Object(
  {
    version: Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9._+-]+$' }),
    uptime: Type.Integer({ minimum: 0 }),
    meshPublicKey: Type.Optional(WireGuardKey),
    /**
     * The node's conditions (`ConfigApplied`: False when BIRD refused a file no session owns, an
     * operator's local.d file or the main config, naming file and line). Absent from older agents.
     */
    conditions: Type.Optional(Type.Array(Condition, { maxItems: 16 })),
    /**
     * Seconds between the agent's heartbeats: the controller calls the router not Ready when 1.5 of them
     * pass without one (docs/agent.md). Absent from older agents: 30, the interval the controller hands out.
     */
    heartbeatInterval: Type.Optional(Type.Integer({ minimum: 1, maximum: 3600 })),
  },
  { additionalProperties: false },
);

export const ReportBody = Type.Object(
  {
    sessions: Type.Array(
      Type.Object(
        {
          uuid: Uuid,
          rtt: Type.Union([Type.Number({ minimum: 0 }), Type.Null()]),
          rxBytes: Type.Integer({ minimum: 0 }),
          txBytes: Type.Integer({ minimum: 0 }),
          routesImported: Type.Integer({ minimum: 0 }),
          /** Routes BIRD exports to the peer (absent from older agents): in the session's history and metrics. */
          routesExported: Type.Optional(Type.Integer({ minimum: 0 })),
          /** The tunnel's last WireGuard handshake; null when none (absent from older agents). */
          lastHandshake: Type.Optional(Type.Union([Timestamp, Type.Null()])),
        },
        { additionalProperties: false },
      ),
      { maxItems: 10000 },
    ),
  },
  { additionalProperties: false },
);

export const ModifyBody = Type.Object(
  {
    uuid: Uuid,
    status: StatusCode,
    interface: Type.String({ pattern: '^wg_[0-9]{1,5}$' }),
    /**
     * Why setup failed (status 6) or the session is in error (status 2): BIRD's or the kernel's words, made
     * one printable line by the agent (common/text.ts oneLine); stored and shown to the session's owner.
     */
    message: Type.Optional(Line(4096)),
    /** The catalogue key of `message` and its parameters, when the agent's words have one (common/messages.ts). */
    key: Type.Optional(MessageKey),
    // one printable line each, as `message`
    params: Type.Optional(MessageParams(Line(256))),
    /** BIRD's BGP state of the session and since when the agent sees it (absent from older agents). */
    bgpState: Type.Optional(BgpState),
    bgpSince: Type.Optional(Type.Union([Timestamp, Type.Null()])),
  },
  { additionalProperties: false },
);

export const MeshStatusBody = Type.Object(
  { peers: Type.Array(MeshPeerState, { maxItems: 4096 }) },
  { additionalProperties: false },
);

export const Ack = Type.Object({ ok: Type.Literal(true) }, { additionalProperties: true });

/**
 * The answer to a heartbeat. `conditionKeys`: this controller stores a node condition's `key` and
 * `params`; an agent sends them only after an answer says so, since an older controller refuses a
 * heartbeat naming them (docs/agent.md, Upgrade order). An older agent reads the answer as an Ack.
 */
export const HeartbeatAck = Type.Object(
  { ok: Type.Literal(true), conditionKeys: Type.Optional(Type.Boolean()) },
  { additionalProperties: true },
);

export const ModifyAck = Type.Object(
  {
    ok: Type.Literal(true),
    uuid: Uuid,
    status: StatusCode,
    statusName: StatusNameField,
    removed: Type.Boolean(),
  },
  { additionalProperties: false },
);

// ---- controller → agent ----

export const AgentSession = Type.Object(
  {
    uuid: Uuid,
    asn: Asn,
    status: StatusCode,
    statusName: StatusNameField,
    interface: Type.String({ pattern: '^wg_[0-9]{1,5}$' }),
    listenPort: Port,
    endpoint: Type.Union([Endpoint, Type.Null()]),
    publicKey: WireGuardKey,
    /** null: an adopted session without the peer's DN42 IPv6 (docs/agent.md, Adopting a running router). */
    ipv6: Type.Union([Ipv6, Type.Null()]),
    linkLocal: LinkLocal,
    ipv4: Type.Union([Ipv4, Type.Null()]),
    mtu: Mtu,
    mpbgp: Type.Boolean(),
    extendedNextHop: Type.Boolean(),
    restartGeneration: Type.Integer({ minimum: 0 }),
    /** The hand-made names the agent keeps for an adopted session (docs/agent.md, Adopting a running router). */
    adopted: Type.Optional(Type.Object(AdoptedNames, { additionalProperties: false })),
  },
  { additionalProperties: false },
);

export const AgentSessionsResponse = Type.Object(
  { revision: Type.String(), sessions: Type.Array(AgentSession) },
  { additionalProperties: false },
);

export const IbgpPeer = Type.Object(
  {
    router: RouterName,
    nodeId: Type.Integer({ minimum: 1 }),
    loopback: Type.Object(
      { ipv4: Type.Optional(Ipv4), ipv6: Type.Optional(Ipv6) },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);

/** One line of the DN42 registry's filter.txt / filter6.txt (common/dn42-filter.ts). */
const filterRule = (prefix: TString, bits: number) =>
  Type.Object(
    {
      nr: Type.Integer({ minimum: 0, maximum: 999_999_999 }),
      action: Type.Union([Type.Literal('permit'), Type.Literal('deny')]),
      prefix,
      minLength: Type.Integer({ minimum: 0, maximum: bits }),
      maxLength: Type.Integer({ minimum: 0, maximum: bits }),
    },
    { additionalProperties: false },
  );

/** The prefix filter the routers' BIRD applies to eBGP, each family's lines sorted by number. */
export const Dn42Filter = Type.Object(
  {
    ipv4: Type.Array(filterRule(Ipv4Prefix, 32), { maxItems: 1000 }),
    ipv6: Type.Array(filterRule(Ipv6Prefix, 128), { maxItems: 1000 }),
  },
  { additionalProperties: false },
);

export const BirdConfigResponse = Type.Object(
  {
    dn42Asn: Asn,
    rpkiServers: Type.Array(RpkiServer),
    ownPrefixes: Type.Object(
      { ipv4: Type.Array(Ipv4Prefix), ipv6: Type.Array(Ipv6Prefix) },
      { additionalProperties: false },
    ),
    importLimit: Type.Object(
      {
        ipv4: Type.Integer({ minimum: 1 }),
        ipv6: Type.Integer({ minimum: 1 }),
        action: Type.String({ enum: ['block', 'disable', 'restart', 'warn'] }),
      },
      { additionalProperties: false },
    ),
    communities: Type.Object(
      {
        enabled: Type.Boolean(),
        bandwidth: Type.Integer({ minimum: 21, maximum: 29 }),
        crypto: Type.Integer({ minimum: 31, maximum: 34 }),
        region: Type.Union([Type.Integer({ minimum: 41, maximum: 70 }), Type.Null()]),
      },
      { additionalProperties: false },
    ),
    routerId: Ipv4,
    loopback: Type.Object(
      { ipv4: Type.Optional(Ipv4), ipv6: Type.Optional(Ipv6) },
      { additionalProperties: false },
    ),
    /**
     * The registry's filter.txt / filter6.txt, sent only when they differ from the built-in copy
     * (common/dn42-filter.ts); absent, the agent renders that copy.
     */
    filter: Type.Optional(Dn42Filter),
    ibgpPeers: Type.Array(IbgpPeer),
    /**
     * The policy's allowPrivateEndpoints, sent only when true: the agent judges the addresses a session's
     * endpoint name resolves to by it (docs/agent.md).
     */
    allowPrivateEndpoints: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

export const MeshPeer = Type.Object(
  {
    router: RouterName,
    nodeId: Type.Integer({ minimum: 1 }),
    /** `host:port` of the peer's mesh tunnel towards this router. */
    endpoint: Endpoint,
    publicKey: WireGuardKey,
    linkLocal: LinkLocal,
    loopback: Type.Object(
      { ipv4: Type.Optional(Ipv4), ipv6: Type.Optional(Ipv6) },
      { additionalProperties: false },
    ),
    /** The port this router listens on for the tunnel to that peer. */
    listenPort: Port,
  },
  { additionalProperties: false },
);

export const MeshResponse = Type.Object({ peers: Type.Array(MeshPeer) }, { additionalProperties: false });

export const BootstrapConfigResponse = Type.Object(
  {
    node: Type.Object(
      {
        name: RouterName,
        id: Type.Integer({ minimum: 1 }),
        region: Type.String(),
        location: Type.String(),
        provider: Type.String(),
      },
      { additionalProperties: false },
    ),
    asn: Asn,
    loopback: Type.Object(
      { ipv4: Type.Optional(Ipv4), ipv6: Type.Optional(Ipv6) },
      { additionalProperties: false },
    ),
    tunnel: Type.Object(
      {
        dn42Ipv4: Type.String(),
        dn42Ipv6: Type.String(),
        dn42Ipv6LinkLocal: LinkLocal,
      },
      { additionalProperties: false },
    ),
    controlPlane: Type.Object(
      {
        heartbeatInterval: Type.Integer({ minimum: 1 }),
        syncInterval: Type.Integer({ minimum: 1 }),
        metricInterval: Type.Integer({ minimum: 1 }),
      },
      { additionalProperties: false },
    ),
    metric: Type.Object(
      {
        pingTimeout: Type.Integer({ minimum: 1 }),
        pingCount: Type.Integer({ minimum: 1 }),
        pingWorkers: Type.Integer({ minimum: 1 }),
      },
      { additionalProperties: false },
    ),
    autoUpdate: Type.Object(
      { enabled: Type.Boolean(), channel: Type.String({ enum: ['stable', 'beta', 'dev'] }) },
      { additionalProperties: false },
    ),
    meshPeers: Type.Array(MeshPeer),
    ibgpPeers: Type.Array(IbgpPeer),
  },
  { additionalProperties: false },
);

export type HeartbeatBody = Static<typeof HeartbeatBody>;
export type HeartbeatAck = Static<typeof HeartbeatAck>;
export type ReportBody = Static<typeof ReportBody>;
export type ModifyBody = Static<typeof ModifyBody>;
export type ModifyAck = Static<typeof ModifyAck>;
export type MeshStatusBody = Static<typeof MeshStatusBody>;
export type AgentSession = Static<typeof AgentSession>;
export type AgentSessionsResponse = Static<typeof AgentSessionsResponse>;
export type BirdConfigResponse = Static<typeof BirdConfigResponse>;
export type Dn42Filter = Static<typeof Dn42Filter>;
/** A rule of either family: the IPv4 and IPv6 lists hold the same shape. */
export type Dn42FilterRule = Dn42Filter['ipv4'][number];
export type IbgpPeer = Static<typeof IbgpPeer>;
export type MeshPeer = Static<typeof MeshPeer>;
export type MeshResponse = Static<typeof MeshResponse>;
export type BootstrapConfigResponse = Static<typeof BootstrapConfigResponse>;

/** Built-in RPKI fallback when a policy lists no servers (docs/routing-policy.md). */
export const FALLBACK_RPKI_SERVER = { host: 'rpki.burble.dn42', port: 8082 } as const;
