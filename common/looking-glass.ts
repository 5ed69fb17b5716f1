/**
 * The looking glass (docs/api.md, Looking glass): what a caller may ask a router, what the controller
 * hands the router's agent over the agent's own connection, and what the agent answers. No shell: each
 * operation is one fixed command whose only free argument is an address, a prefix or a session's
 * protocol (the address rule: looking-glass-target.ts, apart so that the portal's types need no address code).
 */
import Type, { type Static } from 'typebox';
import { RouterName, Uuid } from './schema.ts';

/** The longest a query runs on the router before the agent cuts it (docs/agent.md, Looking glass). */
export const LG_TIME_LIMIT_MS = 10_000;
/** The most output an answer carries; the rest is cut and `truncated` set. */
export const LG_OUTPUT_LIMIT_BYTES = 256 * 1024;
/**
 * Queries of one router waiting or running at once; more are refused (the per-router rate limit). The
 * controller holds its callers to it, and the agent's bird-lg-go proxy its own (docs/agent.md).
 */
export const LG_QUERIES_PER_ROUTER = 16;
/** Routes of a session per page (`routes`), and the most a caller may ask for. */
export const LG_PAGE_DEFAULT = 100;
export const LG_PAGE_MAX = 1000;

/** An address (ping, traceroute) or an address or prefix (route): checked by lgTargetProblem (looking-glass-target.ts). */
const Target = Type.String({
  minLength: 2,
  maxLength: 49,
  pattern: '^[0-9A-Fa-f:./]+$',
  description: 'an IPv4 or IPv6 address (route: or a prefix), inside DN42’s ranges for a peer',
  examples: ['fd42:4242:1::1'],
});

const Direction = Type.Union([Type.Literal('received'), Type.Literal('exported')], {
  description: 'received: the routes BIRD accepted from the session; exported: those it sends to it',
});

/** A caller's question, one body per operation (POST /lg). */
export const LgRequest = Type.Union(
  [
    Type.Object(
      { op: Type.Literal('ping'), router: RouterName, target: Target },
      { additionalProperties: false, examples: [{ op: 'ping', router: 'fra1', target: 'fd42:4242:1::1' }] },
    ),
    Type.Object(
      { op: Type.Literal('traceroute'), router: RouterName, target: Target },
      { additionalProperties: false },
    ),
    Type.Object(
      {
        op: Type.Literal('route'),
        router: RouterName,
        target: Target,
        /** Only the routes learned from this session (one of the caller's). */
        session: Type.Optional(Uuid),
      },
      { additionalProperties: false },
    ),
    Type.Object({ op: Type.Literal('protocol'), session: Uuid }, { additionalProperties: false }),
    Type.Object(
      {
        op: Type.Literal('routes'),
        session: Uuid,
        direction: Direction,
        offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 10_000_000 })),
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: LG_PAGE_MAX })),
      },
      { additionalProperties: false },
    ),
  ],
  {
    description: 'One looking-glass query, chosen by `op`',
    examples: [
      { op: 'ping', router: 'fra1', target: 'fd42:4242:1::1' },
      { op: 'routes', session: '4d7c9a3e-1f2b-4c5d-8e9f-0a1b2c3d4e5f', direction: 'received', limit: 100 },
    ],
  },
);
export type LgRequest = Static<typeof LgRequest>;

/** What the controller hands the agent: an operation with its checked arguments. */
export const LgQuery = Type.Object(
  {
    id: Type.String({ pattern: '^[A-Za-z0-9_-]{8,32}$' }),
    op: Type.Union([
      Type.Literal('ping'),
      Type.Literal('traceroute'),
      Type.Literal('route'),
      Type.Literal('protocol'),
      Type.Literal('routes'),
    ]),
    target: Type.Optional(Target),
    /** The session's WireGuard listen port: the agent names its BIRD protocols by it (agent/bird/names.ts). */
    listenPort: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535 })),
    direction: Type.Optional(Direction),
    offset: Type.Optional(Type.Integer({ minimum: 0 })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: LG_PAGE_MAX })),
  },
  { additionalProperties: false },
);
export type LgQuery = Static<typeof LgQuery>;

export const LgQueries = Type.Object(
  { queries: Type.Array(LgQuery, { maxItems: 64 }) },
  { additionalProperties: false },
);
export type LgQueries = Static<typeof LgQueries>;

/** What the session's filter did with a route: `rejected` ones BIRD keeps aside and does not use or send. */
export const LgRouteVerdict = Type.Union([Type.Literal('accepted'), Type.Literal('rejected')]);
export type LgRouteVerdict = Static<typeof LgRouteVerdict>;
/** BIRD's roa_check of the route's prefix and origin AS against the router's ROA tables. */
export const LgRoaState = Type.Union([
  Type.Literal('valid'),
  Type.Literal('invalid'),
  Type.Literal('unknown'),
]);
export type LgRoaState = Static<typeof LgRoaState>;

/** The agent's answer to one query, and what the caller gets back. */
export const LgAnswer = Type.Object(
  {
    /** The command's output as it printed it (BIRD's reply lines without their codes). */
    output: Type.String({ maxLength: LG_OUTPUT_LIMIT_BYTES + 256 }),
    /** The output was longer than the bound and was cut there. */
    truncated: Type.Boolean(),
    /** The command ran past the time bound and was stopped. */
    timedOut: Type.Boolean(),
    /** The program's exit status (ping, traceroute); absent for BIRD's answers. */
    exitCode: Type.Optional(Type.Integer()),
    /** routes: this page's place in the whole list. */
    page: Type.Optional(
      Type.Object(
        {
          offset: Type.Integer({ minimum: 0 }),
          limit: Type.Integer({ minimum: 1 }),
          total: Type.Integer({ minimum: 0 }),
        },
        { additionalProperties: false },
      ),
    ),
    /** routes: each route of this page, in the order of `output`, with the filter's verdict and ROA state. */
    routes: Type.Optional(
      Type.Array(
        Type.Object(
          { net: Type.String({ maxLength: 49 }), verdict: LgRouteVerdict, roa: LgRoaState },
          { additionalProperties: false },
        ),
        { maxItems: LG_PAGE_MAX },
      ),
    ),
  },
  {
    additionalProperties: false,
    examples: [
      {
        output: 'PING fd42:4242:1::1 56 data bytes\n…\n4 packets transmitted, 4 received, 0% packet loss',
        truncated: false,
        timedOut: false,
        exitCode: 0,
      },
    ],
  },
);
export type LgAnswer = Static<typeof LgAnswer>;
