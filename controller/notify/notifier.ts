/**
 * Notifications (docs/notifications.md): the webhook definitions and the delivery of the events the store
 * keeps in its outbox (store.ts, outbox). The reconcile leader delivers (start/stop with the reconciler):
 * it reads the outbox when it starts, so a restart or a hand-over resumes where the last leader stopped,
 * and again at each change of it; an event leaves the outbox once every webhook's delivery of it has ended
 * (deliver.ts, dispatch). At least once: an event delivered and not yet confirmed when the leader stops
 * is delivered again, with the same id.
 */
import type { Logger } from 'pino';
import type { Finding } from '../reconcile/session-reconciler.ts';
import { topics } from '../store/change-feed.ts';
import { agentOfflineEvent, type NotificationEvent } from '../store/core/events.ts';
import type { Store } from '../store/store.ts';
import { Dispatcher, type DispatcherOptions } from './deliver.ts';
import type { Webhook, WebhookRepository } from './webhooks.ts';
import { parseRanges } from './target.ts';

/** How often the outbox is read again without a change to it (events whose dispatch could not start). */
const RESCAN_MS = 5000;
/** Wait after a confirmation that could not be written (a full disk) before the next try. */
const CONFIRM_RETRY_MS = 1000;

export interface NotifierOptions extends Omit<DispatcherOptions, 'webhooks' | 'logger'> {
  store: Store;
  webhooks: WebhookRepository;
  logger?: Pick<Logger, 'warn' | 'info' | 'error' | 'debug'>;
}

export class Notifier {
  readonly webhooks: WebhookRepository;
  private readonly store: Store;
  private readonly dispatcher: Dispatcher;
  private readonly logger: NotifierOptions['logger'];
  /** Events given to the dispatcher and not yet confirmed, by id: not given again meanwhile. */
  private readonly handed = new Set<string>();
  /** Events every webhook's delivery of which has ended, waiting for their confirmation's write. */
  private readonly ended = new Set<string>();
  private confirming: Promise<void> | undefined;
  private leading: AbortController | undefined;
  private delivering: Promise<void> | undefined;

  constructor(opts: NotifierOptions) {
    const { store, webhooks, logger, ...delivery } = opts;
    this.webhooks = webhooks;
    this.store = store;
    this.logger = logger;
    this.dispatcher = new Dispatcher({ webhooks, ...(logger ? { logger } : {}), ...delivery });
  }

  /** Why a peer's webhook at `url` could never be delivered, known at its creation (target.ts). */
  targetProblem(url: URL): string | undefined {
    return this.dispatcher.targetProblem(url);
  }

  /** A finding the leader's reconciler raised: an agent offline is told to admins, through the outbox. */
  async findingRaised(finding: Finding): Promise<void> {
    const router = finding.type === 'AgentOffline' ? this.store.getRouter(finding.subject) : undefined;
    if (!router) return;
    try {
      await this.store.appendEvents([agentOfflineEvent(router, finding.since)]);
    } catch (err) {
      // the reconciler raises it again after a restart or a hand-over (docs/notifications.md)
      this.logger?.error({ err, router: router.name }, 'router.agent_offline not recorded');
    }
  }

  /** The leader's part: start and stop with the reconciler. */
  start(): void {
    if (this.leading) return;
    this.leading = new AbortController();
    this.dispatcher.start();
    this.delivering = this.deliverOutbox(this.leading.signal);
  }

  /**
   * Stop delivering: deliveries queued or waiting for a retry are dropped (their events stay in the
   * outbox for the next leader), those under way finish, confirmations ended are written.
   */
  async stop(): Promise<void> {
    this.leading?.abort();
    this.leading = undefined;
    await this.delivering;
    await this.dispatcher.stop();
    this.handed.clear();
    await this.confirming;
  }

  /** On shutdown: as stop. */
  close(): Promise<void> {
    return this.stop();
  }

  /** Give each event of the outbox not given yet to the dispatcher; again at each change of the outbox. */
  private async deliverOutbox(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const revision = this.store.revision(topics.outbox);
      const waiting = this.store.outbox().filter((e) => !this.handed.has(e.id));
      if (waiting.length > 0) {
        let webhooks: Webhook[] | undefined;
        try {
          webhooks = await this.webhooks.list();
        } catch (err) {
          this.logger?.error({ err, events: waiting.length }, 'webhooks not read: events wait in the outbox');
        }
        if (webhooks && !signal.aborted) for (const event of waiting) this.hand(event, webhooks);
      }
      await this.store.waitForChange(topics.outbox, revision, RESCAN_MS, signal);
    }
  }

  private hand(event: NotificationEvent, webhooks: readonly Webhook[]): void {
    this.handed.add(event.id);
    void this.dispatcher.dispatch(event, webhooks).then((forGood) => {
      if (!forGood) this.handed.delete(event.id);
      else {
        this.ended.add(event.id);
        this.confirming ??= this.confirm();
      }
    });
  }

  /** Writes the confirmations of ended events, many in one write, until none waits. */
  private async confirm(): Promise<void> {
    while (this.ended.size > 0) {
      const ids = [...this.ended];
      this.ended.clear();
      try {
        await this.store.confirmDelivered(ids);
        for (const id of ids) this.handed.delete(id);
      } catch (err) {
        for (const id of ids) this.ended.add(id);
        if (!this.leading) {
          // shutting down: they stay in the outbox and are delivered again (at least once)
          this.logger?.warn({ err, events: ids.length }, 'delivered events not confirmed; sent again later');
          this.ended.clear();
          break;
        }
        this.logger?.warn({ err, events: ids.length }, 'confirming delivered events failed; retrying');
        await new Promise((r) => setTimeout(r, CONFIRM_RETRY_MS));
      }
    }
    this.confirming = undefined;
  }
}

/**
 * PEEROPS_NOTIFY_ALLOW_PRIVATE lets peers' webhooks reach non-public addresses (a lab, a test): `true` every
 * one, or a comma-separated list of CIDR ranges (`10.1.0.0/16,fd00:1::/48`) only those.
 */
export function notifierEnv(
  env: NodeJS.ProcessEnv = process.env,
): Pick<NotifierOptions, 'allowPrivateTargets'> {
  const value = env['PEEROPS_NOTIFY_ALLOW_PRIVATE']?.trim() ?? '';
  if (value === '' || value === 'false') return { allowPrivateTargets: false };
  if (value === 'true') return { allowPrivateTargets: true };
  const ranges = value.split(',').map((r) => r.trim());
  parseRanges(ranges, 'PEEROPS_NOTIFY_ALLOW_PRIVATE');
  return { allowPrivateTargets: ranges };
}
