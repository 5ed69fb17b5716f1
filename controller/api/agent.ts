/**
 * The agent endpoints (docs/api.md, Agent API), each opened only by the token of the router in its path. Sessions carry an ETag (a hash of the body, so replicas agree) and support a long poll
 * (`?wait=<s>` with If-None-Match). Reports are limited to the calling router's sessions: a batch naming
 * any other session is refused whole.
 */
import { createHash } from 'node:crypto';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import Type from 'typebox';
import {
  AgentSessionsResponse,
  BirdConfigResponse,
  BootstrapConfigResponse,
  FALLBACK_RPKI_SERVER,
  HeartbeatBody,
  MeshResponse,
  MeshStatusBody,
  ModifyAck,
  ModifyBody,
  ReportBody,
  Ack,
  HeartbeatAck,
  type AgentSession,
} from '../../common/agent-api.ts';
import { DEFAULT_HEARTBEAT_INTERVAL_S } from '../../common/conditions.ts';
import { type FieldError } from '../../common/errors.ts';
import {
  englishText,
  fieldAtFault,
  fieldError,
  type FieldMessageKey,
  type LastErrorKey,
  problem,
} from '../../common/messages.ts';
import { RouterName } from '../../common/schema.ts';
import { isoNow } from '../../common/clock.ts';
import { interfaceName } from '../../common/naming.ts';
import { transition } from '../../common/state-machine.ts';
import { waitingAfterReport } from '../../common/waiting.ts';
import { SessionStatus, statusName, type SessionStatusCode } from '../../common/status.ts';
import { dn42RegionCode, type PolicySpec, type SessionStatusRecord } from '../../common/schema.ts';
import type { Config } from '../config.ts';
import { communitiesOf, importLimitOf } from '../../common/rules/index.ts';
import { topics } from '../store/change-feed.ts';
import type { Router, Store } from '../store/store.ts';
import { counter } from '../metrics.ts';
import { statusRecord } from './actions.ts';
import { requireAgent } from './auth.ts';
import { EncodedAnswers, etagMatches, sendEncoded, type Encoding } from './encoding.ts';
import { PeerLists } from './peer-lists.ts';
import { apiValidatorCompiler, type CheckedTypeProvider } from './validation.ts';
import { agentSession } from './views.ts';
import type { RegistryFilter } from '../registry/filter.ts';
import type { SessionHistory } from '../history/session-history.ts';

/**
 * A router's sessions as its agent sees them; the ETag is a hash of the sessions' JSON, which the body
 * carries as it is.
 */
function sessionsEncoding(sessions: AgentSession[]): Encoding {
  const json = JSON.stringify(sessions);
  const hash = createHash('sha256').update(json).digest('base64url').slice(0, 27);
  return { json: `{"revision":${JSON.stringify(hash)},"sessions":${json}}`, etag: `"${hash}"` };
}

/**
 * Waiting long polls woken by a change of their router's sessions, by whether the answer then differed
 * (`unchanged`: a status change the agent does not see, a pending session; the poll waits on).
 */
const longPollWakeups = counter({
  name: 'peerops_long_poll_wakeups_total',
  help: 'Waiting agent long polls woken by a change to their sessions, by whether the answer changed',
  labelNames: ['answer'] as const,
});

export interface AgentRouteOptions {
  store: Store;
  config: Pick<Config, 'agentAutoUpdate' | 'maxLongPollSeconds' | 'rateLimit'>;
  /** Aborted when the server shuts down: releases every long poll. */
  shutdown: AbortSignal;
  /** The prefix filter sent in bird-config: the registry's, or the built-in copy. */
  filter: RegistryFilter;
  /** Where each report's samples are kept for the sessions' graphs. */
  history: SessionHistory;
}

/** `:router` of every agent path. */
const RouterParams = Type.Object({ router: Type.Unsafe<string>({ ...RouterName, examples: ['fra1'] }) });

const routerId = (router: Router): string =>
  router.spec.loopback.ipv4 ?? `0.0.${router.spec.nodeId >> 8}.${router.spec.nodeId & 255}`;

/** The network's ASN; an agent can neither bootstrap nor render BIRD before an admin sets it. */
type LastError = NonNullable<SessionStatusRecord['lastError']>;

/**
 * The lastError of a report: the agent's words with their catalogue key when it sent one, else the one
 * kept from before, else the catalogue's default (common/messages.ts).
 */
function reportedError(body: ModifyBody, fallback: LastErrorKey, kept?: LastError): Omit<LastError, 'code'> {
  const said = body.message !== undefined ? body : kept;
  if (said?.message === undefined) return { message: englishText(fallback), key: fallback };
  return {
    message: said.message,
    ...(said.key !== undefined && { key: said.key }),
    ...(said.params !== undefined && { params: said.params }),
  };
}

function networkAsn(policy: PolicySpec): number {
  if (policy.dn42Asn === undefined) throw problem('policy.noDn42Asn');
  return policy.dn42Asn;
}

/** The object `head` encoded up to the value of a last field `field`: `{…,"field":`. */
function upTo(head: object, field: string): string {
  const fields = JSON.stringify(head).slice(1, -1);
  return `{${fields}${fields === '' ? '' : ','}${JSON.stringify(field)}:`;
}

/** Sends encoded JSON as it is (fastify's serializer passes bytes with a JSON content type through). */
const sendJson = (reply: FastifyReply, json: Buffer): FastifyReply =>
  reply.type('application/json; charset=utf-8').send(json);

const NOT_MODIFIED = Type.Unsafe<void>({
  description: 'Not Modified: the ETag in If-None-Match is still current',
});

export const agentRoutes: FastifyPluginAsync<AgentRouteOptions> = async (plugin, opts) => {
  const { store, config, shutdown } = opts;
  // Bodies are checked as they are, without validate's copy: the agents' requests are the hot path.
  plugin.setValidatorCompiler(apiValidatorCompiler('check'));
  const app = plugin.withTypeProvider<CheckedTypeProvider>();
  // Every route here needs the agent token of the router in its path. The check comes after the limiter
  // has counted the request (a wrong token counts against the caller's address) and before anything
  // reads the body.
  const agentOnly = [app.identifyAgent, app.rateLimit, requireAgent];
  // Gzipped as built: an agent takes gzip and asks again each pass and after each long poll.
  const sessionLists = new EncodedAnswers<AgentSession[]>(Infinity, {
    gzip: 'eager',
    encode: sessionsEncoding,
  });
  const sessionsView = (router: string) =>
    sessionLists.get(router, store.revision(topics.routerSessions(router)), () =>
      store
        .listSessions({ router })
        // a request in review, a REJECTED or PURGED record: nothing for the router (docs/api.md, Decisions)
        .flatMap((s) => agentSession(s) ?? [])
        .sort((a, b) => a.uuid.localeCompare(b.uuid)),
    );
  const peerLists = new PeerLists(store);
  plugin.addHook('onClose', async () => peerLists.close());
  /**
   * A peer-list answer with its ETag, or 304 Not Modified when If-None-Match names it: an agent asks for
   * its BIRD config and mesh list on every pass, and at 1,000 routers each is some 250 KiB that changes
   * far less often than it is asked for (docs/api.md, Agent API). The tag comes from the lists' blocks
   * (PeerLists): a 304 makes no answer.
   */
  const sendList = (
    reply: FastifyReply,
    etag: string,
    ifNoneMatch: string | undefined,
    answer: () => Buffer,
  ): FastifyReply => {
    reply.header('etag', etag).header('cache-control', 'no-cache');
    return etagMatches(ifNoneMatch, etag) ? reply.code(304).send() : sendJson(reply, answer());
  };

  const routerOf = (request: { params: { router: string } }): Router => {
    const router = store.getRouter(request.params.router);
    if (!router) throw problem('router.notFound', { name: request.params.router });
    return router;
  };

  app.get(
    '/agent/:router/sessions',
    {
      onRequest: agentOnly,
      schema: {
        operationId: 'agentSessions',
        summary:
          "The router's sessions (all but requests in review, REJECTED, PURGED; a modify in review: the approved spec); ETag, If-None-Match, ?wait=<s> long poll",
        params: RouterParams,
        querystring: Type.Object({
          wait: Type.Optional(
            Type.Integer({
              minimum: 0,
              maximum: config.maxLongPollSeconds,
              description:
                'Seconds to hold the request while the ETag in If-None-Match is still current (long poll)',
              examples: [60],
            }),
          ),
        }),
        response: {
          // sent as bytes encoded once per revision (and gzipped once): sessionLists
          200: Type.Unsafe<Buffer>(AgentSessionsResponse),
          304: NOT_MODIFIED,
        },
      },
    },
    async (request, reply) => {
      const router = request.params.router;
      const wait = request.query.wait ?? 0;
      const ifNoneMatch = request.headers['if-none-match'];
      let view = sessionsView(router);
      if (wait > 0 && etagMatches(ifNoneMatch, view.etag) && !shutdown.aborted) {
        const gone = new AbortController();
        const release = () => gone.abort();
        reply.raw.once('close', release);
        shutdown.addEventListener('abort', release, { once: true });
        try {
          const deadline = Date.now() + wait * 1000;
          const topic = topics.routerSessions(router);
          while (etagMatches(ifNoneMatch, view.etag) && !gone.signal.aborted && Date.now() < deadline) {
            const revision = await store.waitForChange(
              topic,
              view.revision,
              deadline - Date.now(),
              gone.signal,
            );
            const woken = revision > view.revision;
            view = sessionsView(router);
            if (woken)
              longPollWakeups.inc({ answer: etagMatches(ifNoneMatch, view.etag) ? 'unchanged' : 'changed' });
          }
        } finally {
          reply.raw.off('close', release);
          shutdown.removeEventListener('abort', release);
        }
        // Released by a controller that is stopping: the agent asks again (docs/agent.md), and on a new
        // connection, since this one is closed once idle, under whatever the agent would send on it next.
        if (shutdown.aborted) reply.header('connection', 'close');
      }
      return sendEncoded(reply, request.headers['accept-encoding'], view, ifNoneMatch);
    },
  );

  app.get(
    '/agent/:router/bird-config',
    {
      onRequest: agentOnly,
      schema: {
        operationId: 'agentBirdConfig',
        summary: 'Routing policy merged for the router',
        params: RouterParams,
        // sent as text: peerLists
        response: { 200: Type.Unsafe<Buffer>(BirdConfigResponse), 304: NOT_MODIFIED },
      },
    },
    async (request, reply) => {
      const router = routerOf(request);
      const policy = store.policyFor(router.name);
      const filter = await opts.filter.sent();
      const head = {
        dn42Asn: networkAsn(policy),
        rpkiServers: policy.rpkiServers?.length ? policy.rpkiServers : [{ ...FALLBACK_RPKI_SERVER }],
        ownPrefixes: { ipv4: policy.ownPrefixes?.ipv4 ?? [], ipv6: policy.ownPrefixes?.ipv6 ?? [] },
        importLimit: importLimitOf(policy),
        communities: { ...communitiesOf(policy), region: dn42RegionCode(router.spec.dn42Region) },
        routerId: routerId(router),
        loopback: { ...router.spec.loopback },
        ...(filter ? { filter } : {}),
        ...(policy.allowPrivateEndpoints ? { allowPrivateEndpoints: true } : {}),
      };
      const around = [upTo(head, 'ibgpPeers'), '}'] as const;
      return sendList(reply, peerLists.ibgpTag(router.name, around), request.headers['if-none-match'], () =>
        peerLists.ibgp(router.name, around),
      );
    },
  );

  app.get(
    '/agent/:router/mesh',
    {
      onRequest: agentOnly,
      schema: {
        operationId: 'agentMesh',
        summary: 'Mesh peers (routers with a known mesh key)',
        params: RouterParams,
        // sent as text: peerLists
        response: { 200: Type.Unsafe<Buffer>(MeshResponse), 304: NOT_MODIFIED },
      },
    },
    async (request, reply) => {
      const router = routerOf(request);
      const around = ['{"peers":', '}'] as const;
      return sendList(reply, peerLists.meshTag(router, around), request.headers['if-none-match'], () =>
        peerLists.mesh(router, around),
      );
    },
  );

  app.get(
    '/agent/:router/config',
    {
      onRequest: agentOnly,
      schema: {
        operationId: 'agentConfig',
        summary: 'Bootstrap configuration',
        params: RouterParams,
        // sent as text: peerLists
        response: { 200: Type.Unsafe<Buffer>(BootstrapConfigResponse) },
      },
    },
    async (request, reply) => {
      const router = routerOf(request);
      const policy = store.policyFor(router.name);
      const head = {
        node: {
          name: router.name,
          id: router.spec.nodeId,
          region: router.spec.region,
          location: router.spec.location ?? '',
          provider: router.spec.provider ?? '',
        },
        asn: networkAsn(policy),
        loopback: { ...router.spec.loopback },
        tunnel: {
          dn42Ipv4: router.spec.loopback.ipv4 ?? '',
          dn42Ipv6: router.spec.loopback.ipv6 ?? '',
          dn42Ipv6LinkLocal: router.spec.linkLocal,
        },
        controlPlane: {
          heartbeatInterval: DEFAULT_HEARTBEAT_INTERVAL_S,
          syncInterval: 60,
          metricInterval: 60,
        },
        metric: { pingTimeout: 5, pingCount: 4, pingWorkers: 32 },
        autoUpdate: {
          enabled: config.agentAutoUpdate && policy.autoUpdate?.enabled !== false,
          channel: policy.autoUpdate?.channel ?? 'stable',
        },
      };
      // once per agent start: the two lists' bytes joined
      return sendJson(
        reply,
        Buffer.concat([
          peerLists.mesh(router, [upTo(head, 'meshPeers'), ',"ibgpPeers":']),
          peerLists.ibgp(router.name, ['', '}']),
        ]),
      );
    },
  );

  app.post(
    '/agent/:router/heartbeat',
    {
      onRequest: agentOnly,
      schema: {
        operationId: 'agentHeartbeat',
        summary: "Agent health: version, uptime, the node's state",
        params: RouterParams,
        body: HeartbeatBody,
        response: { 200: HeartbeatAck },
      },
    },
    // Synchronous: fastify sends a returned value at once (a throw becomes the error answer), where an
    // async handler costs every heartbeat a promise.
    (request) => {
      // The token check found the router; recording it looks it up once more (it may have gone since).
      if (!store.recordHeartbeat(request.params.router, request.body))
        throw problem('router.notFound', { name: request.params.router });
      return { ok: true as const, conditionKeys: true };
    },
  );

  app.post(
    '/agent/:router/report',
    {
      onRequest: agentOnly,
      schema: {
        operationId: 'agentReport',
        summary:
          "Session metrics of the router's sessions (a batch naming another router's is refused whole)",
        params: RouterParams,
        body: ReportBody,
        response: { 200: Ack },
      },
    },
    async (request) => {
      const { body } = request;
      const router = routerOf(request);
      const foreign: FieldError[] = [];
      body.sessions.forEach((m, i) => {
        if (store.getSession(m.uuid)?.spec.router !== router.name)
          foreign.push(fieldError(`/sessions/${i}/uuid`, 'field.notThisRouter', { router: router.name }));
      });
      if (foreign.length) throw problem('agent.foreignSessions', { count: foreign.length }, foreign);
      const at = isoNow();
      for (const m of body.sessions) {
        // the counters of the report before: the history keeps the bytes moved since
        const previous = store.getSession(m.uuid)?.status.metrics;
        opts.history.record(m.uuid, m, previous);
        store.recordSessionMetrics(m.uuid, {
          rtt: m.rtt,
          rxBytes: m.rxBytes,
          txBytes: m.txBytes,
          routesImported: m.routesImported,
          ...(m.routesExported !== undefined ? { routesExported: m.routesExported } : {}),
          ...(m.lastHandshake !== undefined ? { lastHandshake: m.lastHandshake } : {}),
          at,
        });
      }
      return { ok: true as const, recorded: body.sessions.length };
    },
  );

  app.post(
    '/agent/:router/modify',
    {
      onRequest: agentOnly,
      schema: {
        operationId: 'agentModify',
        summary: 'Session status after the agent configured it',
        params: RouterParams,
        body: ModifyBody,
        response: { 200: ModifyAck },
      },
    },
    async (request) => {
      const { body } = request;
      const router = routerOf(request);
      const current = store.getSession(body.uuid);
      if (!current || current.spec.router !== router.name)
        throw problem('session.notFound', { uuid: body.uuid });
      const own = interfaceName(current.spec.listenPort);
      if (body.interface !== own)
        throw problem('agent.wrongInterface', { interface: own }, [
          fieldError('/interface', 'field.notThisInterface', { interface: own }),
        ]);
      const reported = body.status;
      const now = isoNow();
      const change = (s: typeof current) => {
        if (s.spec.router !== router.name) throw problem('session.notFound', { uuid: body.uuid });
        // a session whose modify waits for review reports against the status it has on the router
        const held = s.status.approved;
        const outcome = transition(held?.status ?? s.status.code, { kind: 'report', status: reported });
        if (outcome.result === 'removed') return { delete: true as const };
        let lastError: SessionStatusRecord['lastError'];
        if (outcome.to === SessionStatus.SETUP_FAILED)
          lastError = { code: 'SETUP_FAILED', ...reportedError(body, 'lastError.setupFailed') };
        else if (outcome.to === SessionStatus.ERROR)
          lastError = {
            code: 'ERROR',
            ...reportedError(body, 'lastError.error', s.status.lastError),
          };
        const status = statusRecord(held ? s.status.code : outcome.to, s.status, now, lastError);
        if (held) status.approved = { ...held, status: outcome.to };
        status.interface = body.interface;
        if (body.bgpState !== undefined) status.bgpState = body.bgpState;
        if (body.bgpSince !== undefined) status.bgpSince = body.bgpSince;
        const waiting = waitingAfterReport(outcome.to, status.bgpState, s.status.waiting, now);
        if (waiting) status.waiting = waiting;
        else delete status.waiting;
        return { status };
      };
      // A report that changes nothing (the agent confirming ACTIVE each pass) is no write.
      const preview = change(current);
      if (!('delete' in preview) && JSON.stringify(preview.status) === JSON.stringify(current.status))
        return ack(current.spec.uuid, current.status.approved?.status ?? current.status.code, false);
      const updated = await store.updateSession(
        body.uuid,
        change,
        { name: `agent ${router.name}`, role: 'agent' },
        `agent ${router.name}: session ${current.name} reports ${reported} (${statusName(reported)})`,
      );
      if (!updated) return ack(body.uuid, SessionStatus.DISABLED, true);
      return ack(updated.spec.uuid, updated.status.approved?.status ?? updated.status.code, false);
    },
  );

  app.post(
    '/agent/:router/mesh/status',
    {
      onRequest: agentOnly,
      schema: {
        operationId: 'agentMeshStatus',
        summary: 'Mesh peer states',
        params: RouterParams,
        body: MeshStatusBody,
        response: { 200: Ack },
      },
    },
    async (request) => {
      const { body } = request;
      const router = routerOf(request);
      // Only the network's other routers are mesh peers, each once: a made-up name would be stored in
      // the router's status and shown as a peer; the whole report is refused (nothing stored), as
      // reports naming another router's sessions are (docs/api.md, Agent API).
      const seen = new Set<string>();
      const errors = body.peers.flatMap((peer, i) => {
        const why: FieldMessageKey | undefined =
          peer.router === router.name
            ? 'field.meshSelf'
            : seen.has(peer.router)
              ? 'field.meshTwice'
              : store.getRouter(peer.router) === undefined
                ? 'field.meshUnknown'
                : undefined;
        seen.add(peer.router);
        return why ? [fieldError(`/peers/${i}/router`, why, { router: peer.router })] : [];
      });
      const [first] = errors;
      if (first) throw problem('agent.meshInvalid', fieldAtFault(errors), errors);
      store.recordRouterStatus(router.name, {
        meshPeers: body.peers,
        meshUpdatedAt: isoNow(),
      });
      return { ok: true as const };
    },
  );
};

function ack(uuid: string, status: SessionStatusCode, removed: boolean) {
  return { ok: true as const, uuid, status, statusName: statusName(status), removed };
}
