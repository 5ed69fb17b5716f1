/** Stored resources → the records clients see (docs/api.md). */
import type { AgentSession } from '../../common/agent-api.ts';
import { onRouter } from '../../common/approved-spec.ts';
import { formatEndpoint } from '../../common/net.ts';
import { interfaceName } from '../../common/naming.ts';
import { isTerminal, statusName, TERMINAL_RETENTION_MS } from '../../common/status.ts';
import { waitingView } from '../../common/waiting.ts';
import { autoApproves } from '../../common/rules/index.ts';
import { sessionOptions, type Adopted, type ForgeConflict } from '../../common/schema.ts';
import type { Router, Session } from '../store/store.ts';
import type { SessionRecord } from './responses.ts';

/** `host:port` of the router's side of a session tunnel. */
export function serverEndpoint(router: Router | undefined, listenPort: number): string {
  return router ? formatEndpoint({ host: router.spec.endpointHost, port: listenPort }) : '';
}

/**
 * `networkAsn`: the network's own ASN for this session's router (the merged policy's dn42Asn), which the
 * peer's side needs; null while no policy sets it. `conflict`: the session's change a forge edit replaced.
 */
export function sessionRecord(
  session: Session,
  router: Router | undefined,
  networkAsn: number | null,
  conflict: ForgeConflict | undefined,
): SessionRecord {
  const { spec, status } = session;
  return {
    uuid: spec.uuid,
    router: spec.router,
    routerName: router?.spec.displayName ?? spec.router,
    asn: spec.asn,
    status: status.code,
    statusName: statusName(status.code),
    ipv6: spec.ipv6 ?? '',
    ipv6LinkLocal: spec.linkLocal,
    ipv4: spec.ipv4 ?? null,
    endpoint: spec.endpoint ?? null,
    publicKey: spec.publicKey,
    ...sessionOptions(spec),
    listenPort: spec.listenPort,
    interface: status.interface ?? interfaceName(spec.listenPort),
    serverEndpoint: serverEndpoint(router, spec.listenPort),
    serverPublicKey: router?.spec.publicKey ?? null,
    serverLinkLocal: router?.spec.linkLocal ?? null,
    createdAt: spec.createdAt ?? null,
    lastTransitionTime: status.lastTransitionTime ?? null,
    lastError: status.lastError ?? null,
    decision: decisionView(status),
    metrics: status.metrics ?? null,
    bgpState: status.bgpState ?? null,
    bgpSince: status.bgpSince ?? null,
    lastHandshake: status.metrics?.lastHandshake ?? null,
    waiting: waitingView(status, router?.status),
    networkAsn,
    approved: approvedView(status.approved),
    forgeConflict: conflict ? forgeConflictNote(conflict) : null,
    adopted: spec.adopted ?? null,
  };
}

/** The approved values a session in review keeps on its router, named as the record names them. */
function approvedView(approved: Session['status']['approved']): SessionRecord['approved'] {
  if (!approved) return null;
  const { spec } = approved;
  return {
    ipv6: spec.ipv6 ?? '',
    ipv6LinkLocal: spec.linkLocal,
    ipv4: spec.ipv4 ?? null,
    endpoint: spec.endpoint ?? null,
    publicKey: spec.publicKey,
    mtu: spec.mtu,
    mpbgp: spec.mpbgp,
    extendedNextHop: spec.extendedNextHop,
    status: approved.status,
    statusName: statusName(approved.status),
  };
}

/** The note a session's record carries about its change a forge edit replaced (docs/gitops.md). */
function forgeConflictNote(c: ForgeConflict): NonNullable<SessionRecord['forgeConflict']> {
  return {
    id: c.id,
    at: c.at,
    commit: c.commit,
    forgeCommit: c.forgeCommit,
    branch: c.branch,
    message:
      `your change of ${c.at} was replaced by an edit on the forge (${c.forgeCommit.slice(0, 7)}); ` +
      `your version is kept on branch ${c.branch}`,
  };
}

/** The stored decision; for a terminal session also when the reconciler removes it (docs/api.md, Decisions). */
function decisionView(status: Session['status']): SessionRecord['decision'] {
  const { decision } = status;
  if (!decision) return null;
  if (!isTerminal(status.code)) return decision;
  const since = Date.parse(status.lastTransitionTime ?? decision.at);
  return { ...decision, until: new Date(since + TERMINAL_RETENTION_MS).toISOString() };
}

/**
 * The session as its router's agent is served it: what the router should run (common/approved-spec.ts,
 * the approved spec while a modify waits for review); undefined when nothing of it belongs there.
 */
export function agentSession(session: Session): AgentSession | undefined {
  const running = onRouter(session);
  if (!running) return undefined;
  const { spec, status } = running;
  return {
    uuid: spec.uuid,
    asn: spec.asn,
    status,
    statusName: statusName(status),
    interface: interfaceName(spec.listenPort),
    listenPort: spec.listenPort,
    endpoint: spec.endpoint ?? null,
    publicKey: spec.publicKey,
    ipv6: spec.ipv6 ?? null,
    linkLocal: spec.linkLocal,
    ipv4: spec.ipv4 ?? null,
    ...sessionOptions(spec),
    restartGeneration: spec.restartGeneration ?? 0,
    ...(spec.adopted ? { adopted: keptNames(spec.adopted) } : {}),
  };
}

/** What the agent keeps of an adoption: the names and files, not who adopted it. */
function keptNames({ by: _by, at: _at, ...names }: Adopted): NonNullable<AgentSession['adopted']> {
  return names;
}

/** The router as a user sees it in `GET /routers`; `sessions` is its current session count. */
export function publicRouter(router: Router, sessions: number, networkAsn: number | null) {
  const { spec } = router;
  return {
    name: router.name,
    uuid: spec.uuid,
    displayName: spec.displayName,
    region: spec.region,
    location: spec.location ?? null,
    endpointHost: spec.endpointHost,
    publicKey: spec.publicKey,
    linkLocal: spec.linkLocal,
    accepting: routerAccepting(router, sessions),
    // places left before maxSessions; null: no limit (the portal's router picker shows it)
    freeSlots: spec.maxSessions === undefined ? null : Math.max(0, spec.maxSessions - sessions),
    networkAsn,
  };
}

/**
 * The router's spec for admins: everything except the token hash; `autoApproveAllowed` says whether a
 * router's autoApprove may take effect here (autoApproves).
 */
export function adminRouter(router: Router, autoApproveAllowed: boolean) {
  const { agentTokenSha256, ...spec } = router.spec;
  return {
    name: router.name,
    spec,
    status: router.status,
    hasAgentToken: agentTokenSha256 !== undefined,
    autoApproveHolds: autoApproves(router.spec, autoApproveAllowed),
  };
}

export function routerAccepting(router: Router, sessions: number): boolean {
  if (router.spec.acceptingSessions === false) return false;
  const max = router.spec.maxSessions;
  return max === undefined || sessions < max;
}
