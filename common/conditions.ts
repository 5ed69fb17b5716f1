/**
 * Status conditions in the form Kubernetes tools read (kstatus, `kubectl wait --for=condition=Ready`,
 * Flux's and Argo CD's health checks): `Ready` says whether the object does its job now, `Reconciling`
 * that the controller or agent is working towards it, `Stalled` that it stopped and needs a person. Both
 * stores write the same conditions (docs/kubernetes.md, Conditions); the REST records do not show them.
 */
import type { Condition, RouterStatus, SessionStatusRecord } from './schema.ts';
import { SessionStatus, statusName } from './status.ts';

type Judged = Pick<Condition, 'status' | 'reason' | 'message'>;

/**
 * Each condition type's status when all is well, known here once for the portal and the CLI
 * (docs/kubernetes.md, Conditions). `Ready`, the agent's `ConfigApplied` and `BirdRunning` and the
 * store's `ManifestsApplied` are well when True; `Reconciling` and `Stalled` are kstatus'
 * abnormal-true types, well when False: reading every False as bad flagged each settled router twice.
 */
const HEALTHY_STATUS: ReadonlyMap<string, 'True' | 'False'> = new Map([
  ['Ready', 'True'],
  ['ConfigApplied', 'True'],
  ['BirdRunning', 'True'],
  ['ManifestsApplied', 'True'],
  ['Reconciling', 'False'],
  ['Stalled', 'False'],
  // the git store's: True while a change it acknowledged was replaced by a forge edit (docs/gitops.md)
  ['ForgeConflicts', 'False'],
]);

/** The status `type` has when all is well; a type not listed is read as Kubernetes reads Ready. */
export function healthyStatus(type: string): 'True' | 'False' {
  return HEALTHY_STATUS.get(type) ?? 'True';
}

/** Whether a condition is in its type's healthy state; `Unknown` never is. */
export function isHealthy(condition: Pick<Condition, 'type' | 'status'>): boolean {
  return condition.status === healthyStatus(condition.type);
}

/** Ready, Reconciling and Stalled of a session, from its status code (and its last error). */
function judgeSession(status: SessionStatusRecord): { ready: Judged; reconciling: Judged; stalled: Judged } {
  const code = status.code;
  const error = status.lastError ? `: ${status.lastError.message}` : '';
  const no = (reason: string, message: string): Judged => ({ status: 'False', reason, message });
  const yes = (reason: string, message: string): Judged => ({ status: 'True', reason, message });
  const notStalled = no('Progressing', 'nothing needs a person');
  const notReconciling = no('Settled', 'nothing to do until the session changes');
  switch (code) {
    case SessionStatus.ACTIVE:
      return {
        ready: yes('Established', "the router's agent reports the tunnel and BGP session up"),
        reconciling: notReconciling,
        stalled: notStalled,
      };
    case SessionStatus.PENDING_REVIEW:
      return {
        ready: no('PendingReview', 'an administrator has not approved the session yet'),
        reconciling: yes('PendingReview', 'waiting for an administrator to approve or reject it'),
        stalled: notStalled,
      };
    case SessionStatus.QUEUED_FOR_SETUP:
      // configured on the router, BIRD trying: the peer's side is missing (docs/api.md, Waiting)
      if (status.waiting)
        return {
          ready: no(
            'WaitingForPeer',
            `the router is ready and waits for the peer's side since ${status.waiting.since}`,
          ),
          reconciling: yes('WaitingForPeer', "BIRD tries to connect; the peer's side does not answer yet"),
          stalled: notStalled,
        };
      return {
        ready: no('Provisioning', "waiting for the router's agent to set up the tunnel and BGP session"),
        reconciling: yes('Provisioning', "the router's agent sets up the tunnel and BGP session"),
        stalled: notStalled,
      };
    case SessionStatus.QUEUED_FOR_DELETE:
      return {
        ready: no('Deleting', "waiting for the router's agent to tear the session down"),
        reconciling: yes('Deleting', "the router's agent tears the session down"),
        stalled: notStalled,
      };
    case SessionStatus.ERROR:
      return {
        ready: no('Error', `the session failed${error}`),
        reconciling: yes('Retrying', `the router's agent retries${error}`),
        stalled: notStalled,
      };
    case SessionStatus.SETUP_FAILED:
      return {
        ready: no('SetupFailed', `setting up the session failed${error}`),
        reconciling: no('SetupFailed', 'the agent stopped trying'),
        stalled: yes('SetupFailed', `setup failed${error}; fix the cause and restart the session`),
      };
    case SessionStatus.REJECTED:
    case SessionStatus.PURGED: {
      const why = status.decision?.reason ? `: ${status.decision.reason}` : '';
      const what = code === SessionStatus.REJECTED ? 'rejected the request' : 'purged the session';
      return {
        ready: no(code === SessionStatus.REJECTED ? 'Rejected' : 'Purged', `an administrator ${what}${why}`),
        reconciling: notReconciling,
        stalled: notStalled,
      };
    }
    default:
      return {
        ready: no(statusName(code) === 'DISABLED' ? 'Disabled' : 'Unknown', 'the session is disabled'),
        reconciling: notReconciling,
        stalled: notStalled,
      };
  }
}

/**
 * `conditions` with each of `judged` set: a condition whose status stays keeps its lastTransitionTime,
 * other types (the agent's ConfigApplied on a router) stay as they are.
 */
export function setConditions(
  conditions: readonly Condition[] | undefined,
  judged: Record<string, Judged>,
  now: string,
): Condition[] {
  const out = (conditions ?? []).filter((c) => !(c.type in judged));
  for (const [type, j] of Object.entries(judged)) {
    const before = conditions?.find((c) => c.type === type);
    out.push({
      type,
      ...j,
      lastTransitionTime: before && before.status === j.status ? before.lastTransitionTime : now,
    });
  }
  return out.sort((a, b) => (a.type < b.type ? -1 : a.type > b.type ? 1 : 0));
}

/** The session's status with its conditions judged from its code; `previous` keeps transition times. */
export function withSessionConditions(
  status: SessionStatusRecord,
  previous: readonly Condition[] | undefined,
): SessionStatusRecord {
  const now = status.lastTransitionTime ?? new Date().toISOString();
  const { ready, reconciling, stalled } = judgeSession(status);
  return {
    ...status,
    conditions: setConditions(previous, { Ready: ready, Reconciling: reconciling, Stalled: stalled }, now),
  };
}

/**
 * A router is Ready while its agent reports and its BIRD runs: the agent's `BirdRunning` condition False
 * (the control socket refuses or does not answer) makes Ready False with reason `BirdDown` and the
 * agent's words (docs/agent.md, "When something is wrong"). Each heartbeat sets these conditions.
 */
export function reportingRouterConditions(
  previous: readonly Condition[] | undefined,
  now: string,
): Condition[] {
  const bird = previous?.find((c) => c.type === 'BirdRunning');
  const ready: Judged =
    bird?.status === 'False'
      ? { status: 'False', reason: 'BirdDown', message: bird.message }
      : { status: 'True', reason: 'AgentReporting', message: "the router's agent reports" };
  return setConditions(
    previous,
    {
      Ready: ready,
      Reconciling: { status: 'False', reason: 'Settled', message: 'the agent applies changes as they come' },
      Stalled: { status: 'False', reason: 'Progressing', message: 'nothing needs a person' },
    },
    now,
  );
}

/** The heartbeat interval the controller hands out, and assumes of an agent that does not say its own. */
export const DEFAULT_HEARTBEAT_INTERVAL_S = 30;

/**
 * Seconds without a heartbeat after which a router is not Ready: 1.5 intervals, so the agent's jitter
 * (±10 %) and a slow answer never trip it, and the controller's check (every second) still says so
 * within 2 intervals (docs/agent.md).
 */
export function silentAfterSeconds(heartbeatInterval: number | undefined): number {
  return (heartbeatInterval ?? DEFAULT_HEARTBEAT_INTERVAL_S) * 1.5;
}

/** A router whose agent stopped reporting: Ready False, `AgentNotReporting`, since its last heartbeat. */
export function silentRouterConditions(
  previous: readonly Condition[] | undefined,
  lastHeartbeat: string,
  now: string,
): Condition[] {
  return setConditions(
    previous,
    {
      Ready: {
        status: 'False',
        reason: 'AgentNotReporting',
        message: `no heartbeat from the router's agent since ${lastHeartbeat}`,
      },
    },
    now,
  );
}

/** An object the controller accepted as it is (a policy): Ready at once. */
export function acceptedConditions(previous: readonly Condition[] | undefined, now: string): Condition[] {
  return setConditions(
    previous,
    {
      Ready: { status: 'True', reason: 'Accepted', message: 'the controller applies this policy' },
      Reconciling: { status: 'False', reason: 'Settled', message: 'nothing to do' },
      Stalled: { status: 'False', reason: 'Progressing', message: 'nothing needs a person' },
    },
    now,
  );
}

/** A status as written for a Kubernetes object of `generation`: it and each condition say so. */
export function atGeneration<S extends { conditions?: Condition[] | undefined }>(
  status: S,
  generation: number | undefined,
): S & { observedGeneration?: number } {
  if (generation === undefined) return status;
  return {
    ...status,
    observedGeneration: generation,
    ...(status.conditions
      ? { conditions: status.conditions.map((c) => ({ ...c, observedGeneration: generation })) }
      : {}),
  };
}

/** The router status fields a heartbeat sets besides its own: the conditions saying the agent reports. */
export function heartbeatConditions(current: RouterStatus, now: string): Pick<RouterStatus, 'conditions'> {
  return { conditions: reportingRouterConditions(current.conditions, now) };
}
