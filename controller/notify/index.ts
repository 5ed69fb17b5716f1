/**
 * Notifications (docs/notifications.md): the webhook definitions, their delivery, and the events. The
 * events read from the store's state (a rejection's reason too: docs/api.md, Decisions) are the reconcile
 * leader's to send (start/stop with the reconciler), once per event.
 */
import type { Logger } from 'pino';
import type { Condition } from '../reconcile/index.ts';
import type { Store } from '../store/store.ts';
import { Dispatcher, type DispatcherOptions } from './deliver.ts';
import { agentOfflineEvent, type NotificationEvent } from './events.ts';
import type { WebhookRepository } from './hooks.ts';
import { parseRanges } from './target.ts';
import { SessionEventWatcher } from './watch.ts';

export { FileWebhooks, type Webhook, type WebhookRepository } from './hooks.ts';
export { signature, SIGNATURE_HEADER } from './deliver.ts';
export { EVENT_TYPES, type NotificationEvent } from './events.ts';

export interface NotifierOptions extends Omit<DispatcherOptions, 'hooks' | 'logger'> {
  store: Store;
  hooks: WebhookRepository;
  logger?: Pick<Logger, 'warn' | 'info' | 'error' | 'debug'>;
}

export class Notifier {
  readonly hooks: WebhookRepository;
  private readonly store: Store;
  private readonly dispatcher: Dispatcher;
  private readonly watcher: SessionEventWatcher;

  constructor(opts: NotifierOptions) {
    const { store, hooks, logger, ...delivery } = opts;
    this.hooks = hooks;
    this.store = store;
    this.dispatcher = new Dispatcher({ hooks, ...(logger ? { logger } : {}), ...delivery });
    this.watcher = new SessionEventWatcher({ store, publish: (e) => this.publish(e) });
  }

  publish(event: NotificationEvent): Promise<void> {
    return this.dispatcher.publish(event);
  }

  /** Why a peer's hook at `url` could never be delivered, known at its creation (target.ts). */
  targetProblem(url: URL): string | undefined {
    return this.dispatcher.targetProblem(url);
  }

  /** A condition the leader's reconciler raised: an agent offline is told to admins. */
  conditionRaised(condition: Condition): Promise<void> {
    const router = condition.type === 'AgentOffline' ? this.store.getRouter(condition.subject) : undefined;
    return router ? this.publish(agentOfflineEvent(router, condition.since)) : Promise.resolve();
  }

  /** The leader's part: start and stop with the reconciler. */
  start(): void {
    this.watcher.start();
  }

  async stop(): Promise<void> {
    await this.watcher.stop();
  }

  /** On shutdown: stop watching, drop waiting retries, finish attempts under way. */
  async close(): Promise<void> {
    await this.watcher.stop();
    await this.dispatcher.stop();
  }
}

/**
 * PEEROPS_NOTIFY_ALLOW_PRIVATE lets peers' hooks reach non-public addresses (a lab, a test): `true` every
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
