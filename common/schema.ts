/**
 * The one definition of every resource kind. These TypeBox schemas are plain JSON Schema: ajv validates
 * requests and manifests with them, TypeScript derives the types from them (Static), and the OpenAPI
 * document and the CRD openAPIV3Schema are generated from them. Keep them CRD-compatible: no $ref,
 * no patternProperties, enums as `enum`.
 */
import Type, { type Static } from 'typebox';
import { ALL_STATUS_CODES, statusName, type SessionStatusCode, type SessionStatusName } from './status.ts';
import { UNPRINTABLE_CLASS } from './text.ts';

export const API_GROUP = 'peerops.dev';
export const API_VERSION = 'v1alpha1';
export const GROUP_VERSION = `${API_GROUP}/${API_VERSION}`;

// ---- field types (formats are registered in validate.ts) ----

/** One line of printable text (common/text.ts says what is refused and why). */
export const Line = (maxLength: number) =>
  Type.String({ minLength: 1, maxLength, pattern: `^[^${UNPRINTABLE_CLASS}]*$` });

/** A Line without `"` and `\\` as well: a name that goes into a BIRD comment or a quoted string. */
const Text = (maxLength: number) =>
  Type.String({ minLength: 1, maxLength, pattern: `^[^${UNPRINTABLE_CLASS}"\\\\]*$` });

export const RouterName = Type.String({ pattern: '^[a-z][a-z0-9-]{0,30}$', maxLength: 31 });
export const Asn = Type.Integer({ minimum: 1, maximum: 4294967295 });
export const Uuid = Type.String({ format: 'uuid', maxLength: 36 });
export const Ipv6 = Type.String({ format: 'ipv6', maxLength: 45 });
export const Ipv4 = Type.String({ format: 'ipv4', maxLength: 15 });
export const LinkLocal = Type.String({ format: 'link-local', maxLength: 45 });
export const WireGuardKey = Type.String({ format: 'wireguard-key', minLength: 44, maxLength: 44 });
export const Endpoint = Type.String({ format: 'endpoint', maxLength: 261 });
export const Host = Type.String({ format: 'host', maxLength: 253 });
export const Port = Type.Integer({ minimum: 1, maximum: 65535 });
/**
 * What a session leaves out means these (docs/api.md, create): ajv fills them in where it validates, and
 * sessionOptions() where a typed value still has them optional.
 */
export const SESSION_DEFAULTS = { mtu: 1420, mpbgp: true, extendedNextHop: true } as const;
export const Mtu = Type.Integer({ minimum: 1280, maximum: 9000, default: SESSION_DEFAULTS.mtu });
export const Ipv4Prefix = Type.String({ format: 'ipv4-prefix', maxLength: 18 });
export const Ipv6Prefix = Type.String({ format: 'ipv6-prefix', maxLength: 49 });
export const Timestamp = Type.String({ format: 'date-time', maxLength: 40 });
/** The codes and names of common/status.ts, typed as their literals; the codes are 0..8 without gaps. */
export const StatusCode = Type.Unsafe<SessionStatusCode>(
  Type.Integer({ minimum: Math.min(...ALL_STATUS_CODES), maximum: Math.max(...ALL_STATUS_CODES) }),
);
export const StatusNameField = Type.Unsafe<SessionStatusName>(
  Type.String({ enum: ALL_STATUS_CODES.map((code) => statusName(code)) }),
);

/**
 * `metadata` of a manifest file in the git store: only these keys (docs/store.md, "What the store
 * refuses"). A Kubernetes object's metadata (resourceVersion, uid, managedFields) is the API server's
 * ObjectMeta and is never checked against this schema (docs/kubernetes.md).
 */
export const Metadata = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 63 }),
    labels: Type.Optional(Type.Record(Type.String(), Type.String())),
    annotations: Type.Optional(Type.Record(Type.String(), Type.String())),
  },
  { additionalProperties: false },
);

// ---- Router ----

/**
 * The DN42 region communities (64511, 41..57) by name (docs/routing-policy.md, "DN42 communities"). The
 * router's `dn42Region` names one; the agent receives the number. `region` stays free display text.
 */
export const DN42_REGIONS = {
  eu: 41,
  'na-east': 42,
  'na-central': 43,
  'na-west': 44,
  'central-america': 45,
  'sa-east': 46,
  'sa-west': 47,
  'africa-north': 48,
  'africa-south': 49,
  'asia-south': 50,
  'asia-southeast': 51,
  'asia-east': 52,
  pacific: 53,
  antarctica: 54,
  'asia-north': 55,
  'asia-west': 56,
  'central-asia': 57,
} as const;
export type Dn42RegionName = keyof typeof DN42_REGIONS;
export const DN42_REGION_NAMES = Object.keys(DN42_REGIONS) as Dn42RegionName[];

export const Dn42Region = Type.String({
  enum: DN42_REGION_NAMES,
  description: 'DN42 region community (64511, 41..57) by name: eu = 41 ... central-asia = 57',
});

/** The community number of a region name; a legacy number read unvalidated passes through. */
export function dn42RegionCode(region: string | number | undefined): number | null {
  if (region === undefined) return null;
  if (typeof region === 'number') return region;
  return Object.hasOwn(DN42_REGIONS, region) ? DN42_REGIONS[region as Dn42RegionName] : null;
}

/**
 * A router spec as stored before regions had names held `dn42Region` as the community number: the
 * number of a named region becomes its name, so such manifests keep loading (docs/operator-guide.md,
 * "Register a router"). Anything else is left for validation to refuse. Returns the input when unchanged.
 */
export function upgradeRouterSpec<T>(spec: T): T {
  if (spec === null || typeof spec !== 'object') return spec;
  const code = (spec as { dn42Region?: unknown }).dn42Region;
  if (typeof code !== 'number') return spec;
  const name = DN42_REGION_NAMES.find((n) => DN42_REGIONS[n] === code);
  return name === undefined ? spec : { ...spec, dn42Region: name };
}

export const RouterSpec = Type.Object(
  {
    uuid: Uuid,
    displayName: Text(64),
    nodeId: Type.Integer({ minimum: 1, maximum: 4095, description: 'Unique per network; sets mesh ports' }),
    region: Type.String({ pattern: '^[a-z0-9][a-z0-9-]{0,31}$' }),
    location: Type.Optional(Text(64)),
    provider: Type.Optional(Text(64)),
    dn42Region: Type.Optional(Dn42Region),
    endpointHost: Host,
    publicKey: WireGuardKey,
    linkLocal: LinkLocal,
    loopback: Type.Object(
      { ipv4: Type.Optional(Ipv4), ipv6: Type.Optional(Ipv6) },
      { additionalProperties: false },
    ),
    portRange: Type.Optional(
      Type.Object(
        { min: Port, max: Port },
        { additionalProperties: false, default: { min: 30000, max: 32767 } },
      ),
    ),
    maxSessions: Type.Optional(Type.Integer({ minimum: 0, maximum: 100000 })),
    acceptingSessions: Type.Optional(Type.Boolean({ default: true })),
    autoApprove: Type.Optional(Type.Boolean({ default: false })),
    agentTokenSha256: Type.Optional(Type.String({ pattern: '^[0-9a-f]{64}$' })),
  },
  { additionalProperties: false },
);

/** A message's catalogue key (common/messages.ts; docs/api.md, Errors, Message keys). */
export const MessageKey = Type.String({ maxLength: 64, pattern: '^[a-zA-Z][a-zA-Z0-9.-]*$' });
/** The parameters of a keyed message: a few named values, filled into its sentence. */
export const MessageParams = (value = Type.String({ maxLength: 256 })) =>
  Type.Record(Type.String({ maxLength: 32 }), value, { maxProperties: 8 });

/**
 * A status condition, Kubernetes' shape (metav1.Condition), so kstatus, `kubectl wait --for=condition=`,
 * Flux and Argo CD read it: `Ready`, `Reconciling` and `Stalled` (common/conditions.ts), and the agent's
 * node-level ones (`ConfigApplied`) on routers.
 */
export const Condition = Type.Object(
  {
    type: Type.String({ minLength: 1, maxLength: 316, pattern: '^[A-Za-z][A-Za-z0-9_.\\-/]*$' }),
    status: Type.Union([Type.Literal('True'), Type.Literal('False'), Type.Literal('Unknown')]),
    reason: Type.String({
      minLength: 1,
      maxLength: 1024,
      pattern: '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$',
    }),
    message: Type.String({ maxLength: 32768 }),
    /** The catalogue key of `message` and its parameters (docs/api.md, Errors, Message keys). */
    key: Type.Optional(MessageKey),
    params: Type.Optional(MessageParams()),
    lastTransitionTime: Timestamp,
    observedGeneration: Type.Optional(Type.Integer({ minimum: 0 })),
  },
  { additionalProperties: false },
);

/** What every kind's status carries for Kubernetes tools: its conditions and the generation they judged. */
const Observed = {
  conditions: Type.Optional(Type.Array(Condition, { maxItems: 16 })),
  observedGeneration: Type.Optional(Type.Integer({ minimum: 0 })),
};

export const MeshPeerState = Type.Object(
  {
    router: RouterName,
    lastHandshake: Type.Optional(Type.Union([Timestamp, Type.Null()])),
    rtt: Type.Optional(Type.Union([Type.Number({ minimum: 0 }), Type.Null()])),
    rxBytes: Type.Optional(Type.Integer({ minimum: 0 })),
    txBytes: Type.Optional(Type.Integer({ minimum: 0 })),
    reachable: Type.Boolean(),
  },
  { additionalProperties: false },
);

/** BIRD's BGP states; null before the agent reported one. */
export const BgpState = Type.Union([
  Type.String({ enum: ['Idle', 'Connect', 'Active', 'OpenSent', 'OpenConfirm', 'Established'] }),
  Type.Null(),
]);

export const RouterStatus = Type.Object(
  {
    lastHeartbeat: Type.Optional(Timestamp),
    agentVersion: Type.Optional(Type.String({ maxLength: 64 })),
    uptime: Type.Optional(Type.Integer({ minimum: 0 })),
    meshPublicKey: Type.Optional(WireGuardKey),
    meshPeers: Type.Optional(Type.Array(MeshPeerState, { maxItems: 4096 })),
    meshUpdatedAt: Type.Optional(Timestamp),
    /** Seconds between the agent's heartbeats, as it says (absent: 30); silence is judged by it. */
    heartbeatInterval: Type.Optional(Type.Integer({ minimum: 1, maximum: 3600 })),
    ...Observed,
  },
  { additionalProperties: false },
);

export const RouterManifest = Type.Object(
  {
    apiVersion: Type.Literal(GROUP_VERSION),
    kind: Type.Literal('Router'),
    metadata: Metadata,
    spec: RouterSpec,
    status: Type.Optional(RouterStatus),
  },
  { additionalProperties: false },
);

// ---- PeeringSession ----

/**
 * The names an adopted session keeps on its router (docs/agent.md, Adopting a running router): the
 * hand-made WireGuard interface (Linux's and wg-quick's name rules, and not `.` or `..`) and the BIRD
 * protocols (BIRD's symbol rules; [0] carries the IPv6 or only neighbor, [1] the IPv4 one when not
 * MP-BGP), the files they came from, and the tunnel's own key when it is not the router's. What an
 * adoption request and the agent carry: the controller adds who and when (`Adopted`).
 */
export const AdoptedNames = {
  files: Type.Array(Type.String({ minLength: 2, maxLength: 1024, pattern: `^/[^${UNPRINTABLE_CLASS}]*$` }), {
    minItems: 1,
    maxItems: 8,
  }),
  interface: Type.String({ pattern: '^[A-Za-z0-9_=+-][A-Za-z0-9_.=+-]{0,14}$', maxLength: 15 }),
  protocols: Type.Array(Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]{0,63}$', maxLength: 64 }), {
    minItems: 1,
    maxItems: 2,
  }),
  publicKey: Type.Optional(WireGuardKey),
};

/** A session taken over from a router's hand-made files: the kept names, and who adopted it when. */
export const Adopted = Type.Object(
  {
    /** The actor who applied the adoption (as a Decision's `by`); set by the controller, never a client. */
    by: Type.String({ minLength: 1, maxLength: 128 }),
    at: Timestamp,
    ...AdoptedNames,
  },
  { additionalProperties: false },
);
export type Adopted = Static<typeof Adopted>;

export const SessionSpec = Type.Object(
  {
    uuid: Uuid,
    asn: Asn,
    router: RouterName,
    /**
     * The peer's DN42 IPv6. Only an adopted session may lack it: a hand-made peer that speaks BGP over
     * the link-local alone (sessionSetErrors; docs/api.md, Adoptions). The REST create requires it.
     */
    ipv6: Type.Optional(Ipv6),
    linkLocal: LinkLocal,
    ipv4: Type.Optional(Ipv4),
    endpoint: Type.Optional(Endpoint),
    publicKey: WireGuardKey,
    mtu: Mtu,
    mpbgp: Type.Optional(Type.Boolean({ default: SESSION_DEFAULTS.mpbgp })),
    extendedNextHop: Type.Optional(Type.Boolean({ default: SESSION_DEFAULTS.extendedNextHop })),
    listenPort: Port,
    restartGeneration: Type.Optional(Type.Integer({ minimum: 0, default: 0 })),
    createdAt: Type.Optional(Timestamp),
    /** Set when the session was adopted from hand-made files (docs/api.md, Adoptions). */
    adopted: Type.Optional(Adopted),
  },
  { additionalProperties: false },
);

/** A session's MTU and BGP options, with SESSION_DEFAULTS for what it leaves out. */
export function sessionOptions(spec: { mtu?: number; mpbgp?: boolean; extendedNextHop?: boolean }): {
  mtu: number;
  mpbgp: boolean;
  extendedNextHop: boolean;
} {
  return {
    mtu: spec.mtu ?? SESSION_DEFAULTS.mtu,
    mpbgp: spec.mpbgp ?? SESSION_DEFAULTS.mpbgp,
    extendedNextHop: spec.extendedNextHop ?? SESSION_DEFAULTS.extendedNextHop,
  };
}

export const SessionMetrics = Type.Object(
  {
    rtt: Type.Union([Type.Number({ minimum: 0 }), Type.Null()]),
    rxBytes: Type.Integer({ minimum: 0 }),
    txBytes: Type.Integer({ minimum: 0 }),
    routesImported: Type.Integer({ minimum: 0 }),
    /** Routes exported to the peer (absent from older agents). */
    routesExported: Type.Optional(Type.Integer({ minimum: 0 })),
    /** The session tunnel's last WireGuard handshake; null when there was none. */
    lastHandshake: Type.Optional(Type.Union([Timestamp, Type.Null()])),
    at: Timestamp,
  },
  { additionalProperties: false },
);

export const LastError = Type.Object(
  {
    code: Type.String({ maxLength: 64 }),
    message: Type.String({ maxLength: 4096 }),
    key: Type.Optional(MessageKey),
    params: Type.Optional(MessageParams()),
  },
  { additionalProperties: false },
);

/**
 * An admin's decision on a session (reject, disable, purge) with its reason, shown to the session's owner
 * (docs/api.md, Decisions). It stays while the status it led to does.
 */
export const Decision = Type.Object(
  {
    action: Type.Union([Type.Literal('reject'), Type.Literal('disable'), Type.Literal('purge')]),
    reason: Type.Optional(Type.String({ maxLength: 500 })),
    /** The actor, e.g. `admin AS4242420000`, or `controller` (a request whose router was removed). */
    by: Type.String({ maxLength: 128 }),
    at: Timestamp,
  },
  { additionalProperties: false },
);

/**
 * The spec fields a modify can change, as an admin last approved them (docs/api.md, modify): what the
 * router keeps running while a change of them waits for review.
 */
export const ApprovedSpec = Type.Object(
  {
    ...Type.Pick(SessionSpec, ['ipv6', 'linkLocal', 'ipv4', 'endpoint', 'publicKey', 'mtu']).properties,
    // required here: the approved copy holds the values in force, defaults applied
    mpbgp: Type.Boolean(),
    extendedNextHop: Type.Boolean(),
  },
  { additionalProperties: false },
);
export type ApprovedSpec = Static<typeof ApprovedSpec>;

export const SessionStatusSchema = Type.Object(
  {
    code: StatusCode,
    name: StatusNameField,
    interface: Type.Optional(Type.String({ pattern: '^wg_[0-9]{1,5}$' })),
    lastError: Type.Optional(LastError),
    decision: Type.Optional(Decision),
    lastTransitionTime: Type.Optional(Timestamp),
    metrics: Type.Optional(SessionMetrics),
    /** BIRD's BGP state as the agent last reported it, and since when. */
    bgpState: Type.Optional(BgpState),
    bgpSince: Type.Optional(Type.Union([Timestamp, Type.Null()])),
    /**
     * Set while the session is configured on the router and BIRD tries to connect without an answer from
     * the peer's side, since the agent first reported it so (common/waiting.ts; docs/api.md, Waiting).
     */
    waiting: Type.Optional(
      Type.Object({ for: Type.Literal('peer'), since: Timestamp }, { additionalProperties: false }),
    ),
    /**
     * Set while a modify waits for review (status 3) on a session its router runs: the spec the router
     * keeps running and the status it has there, which agents are served and report against until the
     * admin's approve or reject (common/approved-spec.ts; docs/api.md, modify).
     */
    approved: Type.Optional(
      Type.Object({ spec: ApprovedSpec, status: StatusCode }, { additionalProperties: false }),
    ),
    ...Observed,
  },
  { additionalProperties: false },
);

export const SessionManifest = Type.Object(
  {
    apiVersion: Type.Literal(GROUP_VERSION),
    kind: Type.Literal('PeeringSession'),
    metadata: Metadata,
    spec: SessionSpec,
    status: Type.Optional(SessionStatusSchema),
  },
  { additionalProperties: false },
);

// ---- RoutingPolicy ----

export const RpkiServer = Type.Object({ host: Host, port: Port }, { additionalProperties: false });

export const PolicySpec = Type.Object(
  {
    dn42Asn: Type.Optional(Asn),
    rpkiServers: Type.Optional(Type.Array(RpkiServer, { maxItems: 16 })),
    ownPrefixes: Type.Optional(
      Type.Object(
        {
          ipv4: Type.Optional(Type.Array(Ipv4Prefix, { maxItems: 256 })),
          ipv6: Type.Optional(Type.Array(Ipv6Prefix, { maxItems: 256 })),
        },
        { additionalProperties: false },
      ),
    ),
    /** Which peer addresses a session may use (the `ipv6` and `ipv4` fields of a session). */
    peerAddressRanges: Type.Optional(
      Type.Object(
        {
          ipv4: Type.Optional(Type.Array(Ipv4Prefix, { maxItems: 64 })),
          ipv6: Type.Optional(Type.Array(Ipv6Prefix, { maxItems: 64 })),
        },
        { additionalProperties: false },
      ),
    ),
    /**
     * Whether a session's `endpoint` may be a private address (RFC 1918, unique local): only where the
     * routers reach peers over a private network (docs/routing-policy.md).
     */
    allowPrivateEndpoints: Type.Optional(Type.Boolean()),
    importLimit: Type.Optional(
      Type.Object(
        {
          ipv4: Type.Optional(Type.Integer({ minimum: 1, maximum: 10000000 })),
          ipv6: Type.Optional(Type.Integer({ minimum: 1, maximum: 10000000 })),
          action: Type.Optional(Type.String({ enum: ['block', 'disable', 'restart', 'warn'] })),
        },
        { additionalProperties: false },
      ),
    ),
    communities: Type.Optional(
      Type.Object(
        {
          enabled: Type.Optional(Type.Boolean({ default: true })),
          bandwidth: Type.Optional(Type.Integer({ minimum: 21, maximum: 29 })),
          crypto: Type.Optional(Type.Integer({ minimum: 31, maximum: 34 })),
        },
        { additionalProperties: false },
      ),
    ),
    blockedAsns: Type.Optional(Type.Array(Asn, { maxItems: 100000 })),
    mergeIsApproval: Type.Optional(Type.Boolean({ default: false })),
    /**
     * Whether a peer's change of an approved session's WireGuard key waits for an admin's review (a
     * peer address change always follows the router's autoApprove; docs/api.md, modify).
     */
    reviewKeyChanges: Type.Optional(Type.Boolean()),
    maxPendingPerAsn: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000 })),
    autoUpdate: Type.Optional(
      Type.Object(
        {
          enabled: Type.Optional(Type.Boolean()),
          channel: Type.Optional(Type.String({ enum: ['stable', 'beta', 'dev'] })),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);

/** A policy's status: whether the controller accepted the generation it holds. */
export const PolicyStatus = Type.Object({ ...Observed }, { additionalProperties: false });

export const PolicyManifest = Type.Object(
  {
    apiVersion: Type.Literal(GROUP_VERSION),
    kind: Type.Literal('RoutingPolicy'),
    metadata: Metadata,
    spec: PolicySpec,
    status: Type.Optional(PolicyStatus),
  },
  { additionalProperties: false },
);

export type RouterSpec = Static<typeof RouterSpec>;
export type RouterStatus = Static<typeof RouterStatus>;
export type Condition = Static<typeof Condition>;
export type RouterManifest = Static<typeof RouterManifest>;
export type MeshPeerState = Static<typeof MeshPeerState>;
export type SessionSpec = Static<typeof SessionSpec>;
export type SessionStatusRecord = Static<typeof SessionStatusSchema>;
export type Decision = Static<typeof Decision>;
export type SessionMetrics = Static<typeof SessionMetrics>;
export type SessionManifest = Static<typeof SessionManifest>;
export type PolicySpec = Static<typeof PolicySpec>;
export type PolicyStatus = Static<typeof PolicyStatus>;
export type PolicyManifest = Static<typeof PolicyManifest>;
export type RpkiServer = Static<typeof RpkiServer>;

export type Manifest = RouterManifest | SessionManifest | PolicyManifest;
export type Kind = Manifest['kind'];

/** The kinds, with the plural used in CRD names and REST paths. */
export const KINDS = {
  Router: { schema: RouterManifest, spec: RouterSpec, plural: 'routers', status: RouterStatus },
  PeeringSession: {
    schema: SessionManifest,
    spec: SessionSpec,
    plural: 'peeringsessions',
    status: SessionStatusSchema,
  },
  RoutingPolicy: {
    schema: PolicyManifest,
    spec: PolicySpec,
    plural: 'routingpolicies',
    status: PolicyStatus,
  },
} as const;

// ---- relaxed input for manifests arriving from git (the store allocates what is missing) ----

/**
 * An `adopted` block as `peerops adopt --out` or `--pull-request` writes it: the kept names; the store
 * fills in `by` and `at` from the merge that brought it (docs/gitops.md, "Adopted sessions by pull request").
 */
export const AdoptedInput = Type.Object(
  { by: Type.Optional(Adopted.properties.by), at: Type.Optional(Timestamp), ...AdoptedNames },
  { additionalProperties: false },
);
export type AdoptedInput = Static<typeof AdoptedInput>;

/**
 * A session spec as people write it in a pull request: the store allocates uuid, listenPort and createdAt,
 * and an adoption's `by` and `at`.
 */
export const SessionSpecInput = Type.Object(
  {
    ...SessionSpec.properties,
    uuid: Type.Optional(Uuid),
    listenPort: Type.Optional(Port),
    adopted: Type.Optional(AdoptedInput),
  },
  { additionalProperties: false },
);

export const SessionManifestInput = Type.Object(
  {
    apiVersion: Type.Literal(GROUP_VERSION),
    kind: Type.Literal('PeeringSession'),
    metadata: Metadata,
    spec: SessionSpecInput,
    status: Type.Optional(SessionStatusSchema),
  },
  { additionalProperties: false },
);

export type SessionSpecInput = Static<typeof SessionSpecInput>;

// ---- forge conflicts (docs/gitops.md, "When the forge and the API change the same file") ----

const CommitOid = Type.String({ pattern: '^[0-9a-f]{40}$' });

/**
 * A change the store acknowledged that an edit on the forge replaced when the store rebuilt its commits
 * on the forge's tip: the forge's version stays, the store's is kept on `branch` on the forge.
 */
export const ForgeConflict = Type.Object(
  {
    /** Stable for the same commit and file (a rebuild seen twice records it once). */
    id: Type.String({ pattern: '^[0-9a-f]{12}$' }),
    path: Type.String({ maxLength: 256 }),
    /** The session the file is, when it is a session's manifest. */
    session: Type.Optional(
      Type.Object(
        { name: Type.String({ maxLength: 128 }), uuid: Type.Optional(Uuid), asn: Asn },
        { additionalProperties: false },
      ),
    ),
    /** When the store committed the change (the write was answered then). */
    at: Timestamp,
    /** When the rebuild found the forge's version had replaced it. */
    detectedAt: Timestamp,
    /** The store's commit whose change of `path` was replaced. */
    commit: CommitOid,
    /** Who asked for it (the commit's Peerops-Actor trailer, or its author). */
    actor: Type.String({ maxLength: 128 }),
    /** The forge's tip whose version of `path` won. */
    forgeCommit: CommitOid,
    /** The branch on the forge holding the store's version on top of `forgeCommit`. */
    branch: Type.String({ maxLength: 200 }),
    keptCommit: CommitOid,
  },
  { additionalProperties: false },
);
export type ForgeConflict = Static<typeof ForgeConflict>;
