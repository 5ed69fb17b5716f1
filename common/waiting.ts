/**
 * Who a session that is not up yet waits for (docs/api.md, "Waiting"; docs/user-guide.md): the router
 * (its agent sets the session up), the router's agent (silent for longer than it may be), or the peer
 * (the router has the tunnel and BGP session configured and BIRD tries to connect, but nobody answers).
 * One rule for the controller, the portal and the CLI.
 */
import type { RouterStatus, SessionStatusRecord } from './schema.ts';
import { SessionStatus } from './status.ts';

/**
 * BIRD's states of a session it tries to bring up and that nobody answers: Connect and Active retry the
 * TCP connection, Idle waits between tries. OpenSent and OpenConfirm mean the peer's BGP answered.
 */
const TRYING: ReadonlySet<string | null> = new Set(['Idle', 'Connect', 'Active']);

export type Waiting = NonNullable<SessionStatusRecord['waiting']>;

/**
 * The stored `waiting` after an agent's report: set while a queued session is configured on the router
 * and BIRD tries without an answer (kept with its first `since`), absent otherwise.
 */
export function waitingAfterReport(
  code: number,
  bgpState: SessionStatusRecord['bgpState'],
  previous: Waiting | undefined,
  now: string,
): Waiting | undefined {
  if (code !== SessionStatus.QUEUED_FOR_SETUP || bgpState === undefined || !TRYING.has(bgpState))
    return undefined;
  return { for: 'peer', since: previous?.since ?? now };
}

/** What a client shows of a session that is not up: who it waits for, and since when. */
export interface WaitingView {
  for: 'peer' | 'router' | 'agent';
  /** null only for a hand-written manifest without lastTransitionTime, of an agent that never reported */
  since: string | null;
}

/**
 * The `waiting` of a session record: the stored wait for the peer; for a queued session not configured
 * yet, the router, or its agent when the router's Ready says the agent stopped reporting (the controller
 * judges that once, common/conditions.ts silentAfterSeconds) or it never reported. Only stored state: the
 * answer changes when the store does (lists are cached by the store's revisions).
 */
export function waitingView(
  status: Pick<SessionStatusRecord, 'code' | 'waiting' | 'lastTransitionTime'>,
  router: Pick<RouterStatus, 'lastHeartbeat' | 'conditions'> | undefined,
): WaitingView | null {
  if (status.code !== SessionStatus.QUEUED_FOR_SETUP) return null;
  if (status.waiting) return { for: 'peer', since: status.waiting.since };
  const queued = status.lastTransitionTime ?? null;
  const last = router?.lastHeartbeat;
  if (last === undefined) return { for: 'agent', since: queued };
  const ready = router?.conditions?.find((c) => c.type === 'Ready');
  if (ready?.status === 'False' && ready.reason === 'AgentNotReporting') return { for: 'agent', since: last };
  return { for: 'router', since: queued };
}
