/**
 * Which of two observations of one thing is the newer (docs/store.md, Observations): an older one never
 * overwrites a newer one, whether it arrives from an agent or from storage (another replica's flush
 * through the watch). Each observation carries when the controller got it: a session's metrics their
 * `at`, a router's heartbeat fields `lastHeartbeat`, its mesh peers `meshUpdatedAt`, its conditions the
 * later of `lastHeartbeat` and Ready's `lastTransitionTime`; conditions recorded without a heartbeat are
 * the controller's own judgement (an agent gone silent), made now, and always kept.
 * An agent sends its reports one after another, so the times a replica stamps order them as the agent
 * sent them, as long as the replicas' clocks agree (NTP) to better than the time between two reports.
 */
import type { RouterStatus, SessionMetrics } from '../../../common/schema.ts';

/** Epoch ms of a stamp; undefined when there is none (nothing to order by). */
function msOf(iso: string | undefined): number | undefined {
  if (iso === undefined) return undefined;
  const ms = Date.parse(iso);
  return Number.isNaN(ms) ? undefined : ms;
}

/** Whether `candidate` was observed before `than`; unstamped on either side orders nothing. */
function before(candidate: number | undefined, than: number | undefined): boolean {
  return candidate !== undefined && than !== undefined && candidate < than;
}

/** Whether metrics `candidate` were observed before `than`. */
export function metricsBefore(candidate: SessionMetrics, than: SessionMetrics | undefined): boolean {
  return before(msOf(candidate.at), msOf(than?.at));
}

type Stamped = Partial<RouterStatus>;

/** A router status's observations: the fields each is made of and when it was observed. */
const ROUTER_OBSERVATIONS: { fields: (keyof RouterStatus)[]; at: (s: Stamped) => number | undefined }[] = [
  {
    fields: ['lastHeartbeat', 'agentVersion', 'uptime', 'meshPublicKey', 'heartbeatInterval'],
    at: (s) => msOf(s.lastHeartbeat),
  },
  { fields: ['meshPeers', 'meshUpdatedAt'], at: (s) => msOf(s.meshUpdatedAt) },
  {
    fields: ['conditions'],
    // without a heartbeat they are the controller's own judgement, made now: nothing orders them
    at: (s) => {
      const heartbeat = msOf(s.lastHeartbeat);
      if (heartbeat === undefined) return undefined;
      const ready = msOf(s.conditions?.find((c) => c.type === 'Ready')?.lastTransitionTime);
      return ready === undefined ? heartbeat : Math.max(heartbeat, ready);
    },
  },
];

/**
 * `patch` without the observations `status` holds newer ones of; `patch` itself when none is older.
 * A field of a patch that does not carry its observation's stamp is kept: nothing orders it.
 */
export function routerObservationsNotBefore(patch: Stamped, status: Stamped): Stamped {
  let kept: Stamped | undefined;
  for (const { fields, at } of ROUTER_OBSERVATIONS) {
    if (!fields.some((f) => f in patch) || !before(at(patch), at(status))) continue;
    kept ??= { ...patch };
    for (const f of fields) delete kept[f];
  }
  return kept ?? patch;
}
