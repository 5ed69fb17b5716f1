/**
 * Status conditions in the form Kubernetes tools read (kstatus, `kubectl wait --for=condition=Ready`,
 * Flux's and Argo CD's health checks): `Ready` says whether the object does its job now, `Reconciling`
 * that the controller or agent is working towards it, `Stalled` that it stopped and needs a person. Both
 * stores write the same conditions (docs/kubernetes.md, Conditions); the REST records do not show them.
 */
import type { Condition, RouterStatus, SessionStatusRecord } from './schema.ts';
import { SessionStatus, statusName } from './status.ts';
import { conditionMessage } from './messages.ts';

type Judged = Pick<Condition, 'status' | 'reason' | 'message' | 'key' | 'params'>;

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

/**
 * What a router's Ready says, as the portal's badges and the network page show it: `ready`, `notReady`
 * (the controller took it back from a silent agent or a BIRD that is down: its reason says which), or
 * `neverReported` (no Ready yet: the agent never reported).
 */
export function routerReadiness(
  conditions: readonly Pick<Condition, 'type' | 'status' | 'reason'>[] | undefined,
): {
  state: 'ready' | 'notReady' | 'neverReported';
  reason: string | null;
} {
  const ready = conditions?.find((c) => c.type === 'Ready');
  if (!ready) return { state: 'neverReported', reason: null };
  return { state: isHealthy(ready) ? 'ready' : 'notReady', reason: ready.reason };
}

/** Ready, Reconciling and Stalled of a session, from its status code (and its last error). */
function judgeSession(status: SessionStatusRecord): { ready: Judged; reconciling: Judged; stalled: Judged } {
  const code = status.code;
  const error = { error: status.lastError ? `: ${status.lastError.message}` : '' };
  type Said = ReturnType<typeof conditionMessage>;
  const no = (reason: string, said: Said): Judged => ({ status: 'False', reason, ...said });
  const yes = (reason: string, said: Said): Judged => ({ status: 'True', reason, ...said });
  const notStalled = no('Progressing', conditionMessage('condition.nothingNeedsPerson'));
  const notReconciling = no('Settled', conditionMessage('condition.nothingUntilChange'));
  switch (code) {
    case SessionStatus.ACTIVE:
      return {
        ready: yes('Established', conditionMessage('condition.established')),
        reconciling: notReconciling,
        stalled: notStalled,
      };
    case SessionStatus.PENDING_REVIEW:
      return {
        ready: no('PendingReview', conditionMessage('condition.notApproved')),
        reconciling: yes('PendingReview', conditionMessage('condition.awaitingReview')),
        stalled: notStalled,
      };
    case SessionStatus.QUEUED_FOR_SETUP:
      // configured on the router, BIRD trying: the peer's side is missing (docs/api.md, Waiting)
      if (status.waiting)
        return {
          ready: no(
            'WaitingForPeer',
            conditionMessage('condition.waitingForPeer', { since: status.waiting.since }),
          ),
          reconciling: yes('WaitingForPeer', conditionMessage('condition.peerSilent')),
          stalled: notStalled,
        };
      return {
        ready: no('Provisioning', conditionMessage('condition.awaitingSetup')),
        reconciling: yes('Provisioning', conditionMessage('condition.settingUp')),
        stalled: notStalled,
      };
    case SessionStatus.QUEUED_FOR_DELETE:
      return {
        ready: no('Deleting', conditionMessage('condition.awaitingTeardown')),
        reconciling: yes('Deleting', conditionMessage('condition.tearingDown')),
        stalled: notStalled,
      };
    case SessionStatus.ERROR:
      return {
        ready: no('Error', conditionMessage('condition.failed', error)),
        reconciling: yes('Retrying', conditionMessage('condition.retrying', error)),
        stalled: notStalled,
      };
    case SessionStatus.SETUP_FAILED:
      return {
        ready: no('SetupFailed', conditionMessage('condition.setupFailed', error)),
        reconciling: no('SetupFailed', conditionMessage('condition.agentStopped')),
        stalled: yes('SetupFailed', conditionMessage('condition.setupFailedStalled', error)),
      };
    case SessionStatus.REJECTED:
    case SessionStatus.PURGED: {
      const why = { why: status.decision?.reason ? `: ${status.decision.reason}` : '' };
      const rejected = code === SessionStatus.REJECTED;
      return {
        ready: no(
          rejected ? 'Rejected' : 'Purged',
          conditionMessage(rejected ? 'condition.rejected' : 'condition.purged', why),
        ),
        reconciling: notReconciling,
        stalled: notStalled,
      };
    }
    default:
      return {
        ready: no(
          statusName(code) === 'DISABLED' ? 'Disabled' : 'Unknown',
          conditionMessage('condition.disabled'),
        ),
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
  return setConditions(previous, reportingJudged(previous), now);
}

/**
 * `reportingRouterConditions`, or undefined when `previous` says that already: the heartbeat's hot path
 * (a settled router's every heartbeat) compares fields instead of building and serialising the list
 * (docs/benchmarks.md, API).
 */
export function reportingRouterConditionsChange(
  previous: readonly Condition[] | undefined,
  now: string,
): Condition[] | undefined {
  const judged = reportingJudged(previous);
  return previous !== undefined && holdsSorted(previous, judged)
    ? undefined
    : setConditions(previous, judged, now);
}

/** Reconciling and Stalled of a reporting router, and Ready while its BIRD runs: the same each time. */
let reportingWell: { ready: Judged; reconciling: Judged; stalled: Judged } | undefined;

function reportingJudged(previous: readonly Condition[] | undefined): Record<string, Judged> {
  reportingWell ??= {
    ready: { status: 'True', reason: 'AgentReporting', ...conditionMessage('condition.agentReports') },
    reconciling: { status: 'False', reason: 'Settled', ...conditionMessage('condition.agentApplies') },
    stalled: { status: 'False', reason: 'Progressing', ...conditionMessage('condition.nothingNeedsPerson') },
  };
  const bird = previous?.find((c) => c.type === 'BirdRunning');
  // BIRD down: Ready says what the agent's BirdRunning says, in its words and with its key
  const ready: Judged =
    bird?.status === 'False'
      ? {
          status: 'False',
          reason: 'BirdDown',
          message: bird.message,
          ...(bird.key !== undefined && { key: bird.key }),
          ...(bird.params !== undefined && { params: bird.params }),
        }
      : reportingWell.ready;
  return { Ready: ready, Reconciling: reportingWell.reconciling, Stalled: reportingWell.stalled };
}

/**
 * Whether `setConditions(conditions, judged, …)` would give `conditions` back unchanged: sorted by type
 * (as it sorts), and each judged type present with the judged fields and nothing more.
 */
function holdsSorted(conditions: readonly Condition[], judged: Record<string, Judged>): boolean {
  for (let i = 1; i < conditions.length; i++)
    if ((conditions[i - 1] as Condition).type >= (conditions[i] as Condition).type) return false;
  for (const [type, j] of Object.entries(judged)) {
    const c = conditions.find((x) => x.type === type);
    if (
      c === undefined ||
      c.status !== j.status ||
      c.reason !== j.reason ||
      c.message !== j.message ||
      c.key !== j.key ||
      c.observedGeneration !== undefined ||
      !sameParams(c.params, j.params)
    )
      return false;
  }
  return true;
}

function sameParams(a: Record<string, string> | undefined, b: Record<string, string> | undefined): boolean {
  if (a === b) return true;
  if (a === undefined || b === undefined) return false;
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => a[k] === b[k]);
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
        ...conditionMessage('condition.noHeartbeat', { since: lastHeartbeat }),
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
      Ready: { status: 'True', reason: 'Accepted', ...conditionMessage('condition.policyAccepted') },
      Reconciling: { status: 'False', reason: 'Settled', ...conditionMessage('condition.nothingToDo') },
      Stalled: {
        status: 'False',
        reason: 'Progressing',
        ...conditionMessage('condition.nothingNeedsPerson'),
      },
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
