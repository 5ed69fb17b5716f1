/**
 * The controller-side reconcile loop: level-triggered (a full pass over the store on every change and
 * every interval), idempotent. It computes findings (stuck sessions, offline agents, sessions whose
 * router is gone) and acts on what it can settle alone: a PENDING_REVIEW session of a removed router
 * is rejected, an adopted one the DN42 registry refuses is DISABLED with the reason, a REJECTED or
 * PURGED one is removed once shown for TERMINAL_RETENTION_MS (docs/api.md, Decisions). Everything else is surfaced as metrics and a log line when a finding first appears.
 * Apart from the passes, a check every second makes a router whose agent went silent not Ready.
 */
import type { Logger } from 'pino';
import { silentAfterSeconds, silentRouterConditions } from '../../common/conditions.ts';
import { isProblem } from '../../common/errors.ts';
import { isTerminal, SessionStatus, TERMINAL_RETENTION_MS } from '../../common/status.ts';
import { applyTrigger, statusRecord } from '../api/actions.ts';
import { adoptionRefusal } from '../registry/adoption.ts';
import type { RouteSource } from '../registry/routes.ts';
import { isStuck } from '../metrics.ts';
import type { Session, Store } from '../store/store.ts';

export interface Finding {
  type: 'SessionStuck' | 'AgentOffline' | 'RouterMissing';
  /** Session uuid or router name. */
  subject: string;
  message: string;
  since: string;
}

export interface ReconcilerOptions {
  store: Store;
  logger?: Pick<Logger, 'warn' | 'info' | 'error'>;
  stuckAfterSeconds: number;
  offlineAfterSeconds: number;
  intervalMs?: number;
  /** Told of a finding when it first appears (notifications: an agent offline). */
  onFindingRaised?: (finding: Finding) => void;
  /** The DN42 registry logins read: an adopted session awaiting review that it refuses is DISABLED. */
  registry?: RouteSource | undefined;
}

const CONTROLLER = { name: 'controller', role: 'controller' as const };

/** How long a change waits for others to share its reconcile pass. */
const COALESCE_MS = 100;
/** How often routers are checked for silent agents: Ready False within 2 heartbeat intervals. */
const SILENCE_CHECK_MS = 1000;

export class SessionReconciler {
  private readonly opts: ReconcilerOptions;
  private current = new Map<string, Finding>();
  private timer: NodeJS.Timeout | undefined;
  private silenceTimer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  /** Adopted sessions (uuid and addresses) the registry was asked about: once each per process. */
  private readonly judgedAdoptions = new Set<string>();

  constructor(opts: ReconcilerOptions) {
    this.opts = opts;
  }

  start(): void {
    this.stopped = false;
    this.unsubscribe = this.opts.store.onChange(() => void this.trigger());
    this.timer = setInterval(() => void this.trigger(), this.opts.intervalMs ?? 30_000);
    this.timer.unref();
    this.silenceTimer = setInterval(() => this.markSilent(), SILENCE_CHECK_MS);
    this.silenceTimer.unref();
    // a pass's failure is logged inside trigger(): nothing to wait for here
    void this.trigger();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    if (this.timer) clearInterval(this.timer);
    if (this.silenceTimer) clearInterval(this.silenceTimer);
    this.again = false;
    await this.running;
  }

  findings(): Finding[] {
    return [...this.current.values()];
  }

  /**
   * Runs a pass shortly, or once more after the running one (changes during a pass are not lost). The
   * changes of the next COALESCE_MS share one pass: a pass reads every session, and 1,000 agents
   * connecting at once each change their router (a new mesh key) within a second.
   */
  trigger(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      do {
        await new Promise((resolve) => setTimeout(resolve, COALESCE_MS));
        if (this.stopped) break;
        this.again = false;
        await this.pass().catch((err: unknown) => this.opts.logger?.error({ err }, 'reconcile pass failed'));
      } while (this.again);
      this.running = undefined;
    })();
    return this.running;
  }

  async pass(now = Date.now()): Promise<void> {
    const { store } = this.opts;
    const found = new Map<string, Finding>();
    const at = new Date(now).toISOString();
    const note = (c: Omit<Finding, 'since'>) => {
      const key = `${c.type}/${c.subject}`;
      found.set(key, { ...c, since: this.current.get(key)?.since ?? at });
      if (!this.current.has(key)) {
        this.opts.logger?.warn({ finding: c.type, subject: c.subject }, c.message);
        this.opts.onFindingRaised?.({ ...c, since: at });
      }
    };
    for (const router of store.listRouters()) {
      const last = router.status.lastHeartbeat ? Date.parse(router.status.lastHeartbeat) : undefined;
      if (last === undefined || now - last > this.opts.offlineAfterSeconds * 1000)
        note({
          type: 'AgentOffline',
          subject: router.name,
          message: `router ${router.name}: no agent heartbeat ${last === undefined ? 'yet' : `since ${router.status.lastHeartbeat}`}`,
        });
    }
    for (const session of store.listSessions()) {
      if (isTerminal(session.status.code)) {
        await this.expire(session, now);
        continue;
      }
      if (isStuck(session.status, now, this.opts.stuckAfterSeconds))
        note({
          type: 'SessionStuck',
          subject: session.spec.uuid,
          message: `session ${session.name} has waited for its agent since ${session.status.lastTransitionTime}`,
        });
      if (session.spec.adopted && session.status.code === SessionStatus.PENDING_REVIEW)
        await this.judgeAdoption(session);
      if (store.getRouter(session.spec.router)) continue;
      if (session.status.code === SessionStatus.PENDING_REVIEW) {
        await this.rejectOrphan(session.spec.uuid, session.spec.router);
        continue;
      }
      note({
        type: 'RouterMissing',
        subject: session.spec.uuid,
        message: `session ${session.name} names router ${session.spec.router}, which no longer exists`,
      });
    }
    for (const key of this.current.keys())
      if (!found.has(key)) this.opts.logger?.info({ finding: key }, 'finding cleared');
    this.current = found;
  }

  /**
   * Routers whose agent has sent no heartbeat for 1.5 of its intervals (common/conditions.ts) become
   * Ready False, AgentNotReporting; their next heartbeat makes them Ready again. A router that never
   * reported has no Ready to take back.
   */
  markSilent(now = Date.now()): void {
    for (const router of this.opts.store.listRouters()) {
      const { lastHeartbeat, heartbeatInterval, conditions } = router.status;
      if (!lastHeartbeat) continue;
      if (now - Date.parse(lastHeartbeat) <= silentAfterSeconds(heartbeatInterval) * 1000) continue;
      if (conditions?.some((c) => c.type === 'Ready' && c.reason === 'AgentNotReporting')) continue;
      this.opts.store.recordRouterStatus(router.name, {
        conditions: silentRouterConditions(conditions, lastHeartbeat, new Date(now).toISOString()),
      });
      this.opts.logger?.warn({ router: router.name, lastHeartbeat }, 'router agent silent: not Ready');
    }
  }

  private async rejectOrphan(uuid: string, router: string): Promise<void> {
    const reason = `router ${router} was removed`;
    const at = new Date().toISOString();
    const decision = { action: 'reject' as const, reason, by: CONTROLLER.name, at };
    await this.quietly(() =>
      this.opts.store.updateSession(
        uuid,
        (s) => applyTrigger(s, { kind: 'reject' }, at, undefined, decision),
        CONTROLLER,
        `reject session ${uuid}: ${reason}`,
      ),
    );
  }

  /**
   * An adopted session awaiting review whose addresses the DN42 registry refuses becomes DISABLED with
   * the reason, as `POST /admin/adoptions` creates it: one merged into the GitOps repository arrives
   * unjudged (docs/gitops.md, "Adopted sessions by pull request"). Each session's addresses are judged
   * once per process; approving judges them again in any case.
   */
  private async judgeAdoption(session: Session): Promise<void> {
    const { registry, store } = this.opts;
    const { uuid, ipv6, ipv4, router } = session.spec;
    const key = `${uuid} ${ipv6 ?? ''} ${ipv4 ?? ''}`;
    if (!registry?.files || this.judgedAdoptions.has(key)) return;
    this.judgedAdoptions.add(key);
    const refusal = await adoptionRefusal(registry, session.spec, store.policyFor(router));
    if (!refusal) return;
    const at = new Date().toISOString();
    await this.quietly(() =>
      store.updateSession(
        uuid,
        // reviewed meanwhile (approved, rejected) or its addresses changed: the admin's call stands
        (s) =>
          s.status.code === SessionStatus.PENDING_REVIEW && s.spec.ipv6 === ipv6 && s.spec.ipv4 === ipv4
            ? { status: statusRecord(SessionStatus.DISABLED, s.status, at, refusal) }
            : {},
        CONTROLLER,
        `disable adopted session ${session.name}: ${refusal.message}`,
      ),
    );
  }

  /** A REJECTED or PURGED record goes TERMINAL_RETENTION_MS after its decision (docs/api.md, Decisions). */
  private async expire(session: Session, now: number): Promise<void> {
    const since = Date.parse(session.status.lastTransitionTime ?? session.status.decision?.at ?? '');
    if (!(now - since >= TERMINAL_RETENTION_MS)) return;
    await this.quietly(() =>
      this.opts.store.updateSession(
        session.spec.uuid,
        (s) => applyTrigger(s, { kind: 'delete' }, new Date(now).toISOString()),
        CONTROLLER,
        `remove session ${session.name}: ${session.status.name} since ${session.status.lastTransitionTime}, shown for ${TERMINAL_RETENTION_MS / 86_400_000} days`,
      ),
    );
  }

  private async quietly(write: () => Promise<unknown>): Promise<void> {
    try {
      await write();
    } catch (err) {
      // Gone already or moved on meanwhile: the next pass sees the new state.
      if (!isProblem(err)) throw err;
    }
  }
}
