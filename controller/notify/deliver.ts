/**
 * Webhook delivery (docs/notifications.md): an event goes to every webhook that may receive it, as one POST
 * of JSON signed with the webhook's secret (`X-Peerops-Signature: sha256=<hex HMAC-SHA256 of the body>`),
 * retried with exponential backoff while the receiver fails (network error, timeout, 408, 429, 5xx).
 *
 * Each webhook has its own queue: its own requests at a time (`concurrency`) and its own bounded backlog,
 * the oldest delivery dropped (and counted) when full. A slow, dead or unresolvable receiver delays only
 * its own deliveries, never another webhook's, an admin's or a peer's. The queues are in memory; the events
 * wait in the store's outbox until every webhook's delivery of them has ended (dispatch), so deliveries
 * dropped when the dispatcher stops are made again by whoever leads next.
 */
import { createHmac, randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { counter, gauge } from '../metrics.ts';
import { visibleTo, type NotificationEvent } from '../store/core/events.ts';
import { OUTBOX_LIMIT } from '../store/core/outbox.ts';
import type { Webhook, WebhookRepository } from './webhooks.ts';
import {
  RefusedTarget,
  literalTargetProblem,
  parseRanges,
  post,
  resolveTarget,
  type TargetRules,
} from './target.ts';

export const SIGNATURE_HEADER = 'x-peerops-signature';

/** `sha256=<hex>`: the value of X-Peerops-Signature for a body. */
export function signature(secret: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

const deliveries = counter({
  name: 'peerops_webhook_deliveries_total',
  help: 'Webhook delivery attempts by event and outcome (delivered, retried, failed, refused, overflow, removed, dropped)',
  labelNames: ['event', 'outcome'] as const,
});
const pending = gauge({
  name: 'peerops_webhook_deliveries_pending',
  help: "Webhook deliveries waiting in their hook's queue: for a free slot or for their next attempt",
});

export interface DispatcherOptions {
  webhooks: WebhookRepository;
  logger?: Pick<Logger, 'warn' | 'info' | 'error' | 'debug'>;
  /** Attempts per delivery, the first included (default 8). */
  maxAttempts?: number;
  /** Wait before the second attempt; it doubles each time (default 2 s). */
  retryBaseMs?: number;
  /** The longest wait between attempts (default 5 min). */
  retryMaxMs?: number;
  /** Per attempt, from connecting to the answer's headers (default 10 s). */
  timeoutMs?: number;
  /** Per attempt, resolving the webhook's name (default 3 s). */
  dnsTimeoutMs?: number;
  /** The DNS servers peers' webhook names are resolved by (`host` or `host:port`); default the system's. */
  dnsServers?: string[];
  /** Requests under way per webhook (default 1: a receiver gets first attempts in the order of the events). */
  concurrency?: number;
  /**
   * Deliveries a webhook may hold waiting, retries included; beyond, the oldest is dropped. Default: as many
   * as the outbox holds, so that a start handing a full outbox to a webhook drops none of it.
   */
  backlog?: number;
  /**
   * Non-public addresses peers' webhooks may reach: none (false, the default: such a webhook is refused, so a
   * peer cannot make the controller call into its own network), every one (true), or these CIDR ranges.
   * Admins' webhooks always may.
   */
  allowPrivateTargets?: boolean | string[];
}

/** Whether a failed attempt is worth another (the receiver may recover). */
function retriable(status: number): boolean {
  return status === 408 || status === 429 || status >= 500;
}

/** One event for one webhook, through all its attempts (the delivery id is the same on each). */
interface Delivery {
  webhook: Webhook;
  event: NotificationEvent;
  body: string;
  id: string;
  /** Publication order across the dispatcher: the lowest a queue holds is its oldest. */
  seq: number;
  attempt: number;
  /**
   * Called once when the delivery ends: `forGood` when nothing more will come of it (delivered, refused,
   * attempts used up, dropped from a full backlog, webhook removed), false when the dispatcher stopped.
   */
  ended: (forGood: boolean) => void;
}

/** A webhook's queue: deliveries ready to go, those waiting to be retried, requests under way. */
interface HookQueue {
  ready: Delivery[];
  retrying: Map<Delivery, NodeJS.Timeout>;
  running: number;
  /** Deliveries dropped since the queue last emptied: the first of a burst is logged, all are counted. */
  overflowed: number;
}

export class Dispatcher {
  private readonly opts: Required<Omit<DispatcherOptions, 'logger' | 'dnsServers' | 'allowPrivateTargets'>> &
    Pick<DispatcherOptions, 'logger'>;
  private readonly rules: TargetRules;
  private readonly queues = new Map<string, HookQueue>();
  private readonly inFlight = new Set<Promise<void>>();
  private seq = 0;
  private stopped = false;

  constructor(opts: DispatcherOptions) {
    const { dnsServers, allowPrivateTargets = false, ...rest } = opts;
    this.opts = {
      maxAttempts: 8,
      retryBaseMs: 2000,
      retryMaxMs: 300_000,
      timeoutMs: 10_000,
      dnsTimeoutMs: 3000,
      concurrency: 1,
      backlog: OUTBOX_LIMIT,
      ...rest,
    };
    this.rules = {
      dnsTimeoutMs: this.opts.dnsTimeoutMs,
      dnsServers,
      allowPrivate:
        typeof allowPrivateTargets === 'boolean'
          ? allowPrivateTargets
          : parseRanges(allowPrivateTargets, 'allowed private webhook targets'),
    };
  }

  /** Why a peer's webhook at `url` could never be delivered (its host an address the rules refuse), if so. */
  targetProblem(url: URL): string | undefined {
    return literalTargetProblem(url, this.rules);
  }

  /**
   * Queues the event for each of `webhooks` that may receive it. Resolves true once every one of those
   * deliveries has ended for good (Delivery.ended), false when the dispatcher stopped before.
   */
  dispatch(event: NotificationEvent, webhooks: readonly Webhook[]): Promise<boolean> {
    if (this.stopped) return Promise.resolve(false);
    const targets = webhooks.filter(
      (webhook) =>
        visibleTo(webhook, event) && (webhook.events.length === 0 || webhook.events.includes(event.type)),
    );
    if (targets.length === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      let left = targets.length;
      let forGood = true;
      const ended = (done: boolean) => {
        forGood &&= done;
        if (--left === 0) resolve(forGood);
      };
      const body = JSON.stringify(event);
      for (const webhook of targets)
        this.enqueue({ webhook, event, body, id: randomUUID(), seq: this.seq++, attempt: 1, ended });
    });
  }

  /** Takes deliveries again after stop (a replica leading again). */
  start(): void {
    this.stopped = false;
  }

  private enqueue(delivery: Delivery): void {
    if (this.stopped) return delivery.ended(false);
    let queue = this.queues.get(delivery.webhook.id);
    if (!queue) {
      queue = { ready: [], retrying: new Map(), running: 0, overflowed: 0 };
      this.queues.set(delivery.webhook.id, queue);
    }
    while (queue.ready.length + queue.retrying.size >= this.opts.backlog) this.dropOldest(queue);
    queue.ready.push(delivery);
    pending.inc();
    this.pump(queue);
  }

  /** The backlog is full: the oldest delivery it holds (ready or waiting for a retry) makes room. */
  private dropOldest(queue: HookQueue): void {
    const held = [...queue.ready, ...queue.retrying.keys()];
    const oldest = held.reduce((a, b) => (b.seq < a.seq ? b : a));
    const timer = queue.retrying.get(oldest);
    if (timer) {
      clearTimeout(timer);
      queue.retrying.delete(oldest);
    } else queue.ready.splice(queue.ready.indexOf(oldest), 1);
    pending.dec();
    deliveries.inc({ event: oldest.event.type, outcome: 'overflow' });
    oldest.ended(true);
    if (queue.overflowed++ === 0)
      this.opts.logger?.warn(
        { webhook: oldest.webhook.id, host: new URL(oldest.webhook.url).host, backlog: this.opts.backlog },
        'webhook backlog full: dropping its oldest deliveries until it empties',
      );
  }

  /** Starts the queue's next deliveries while it has free slots. */
  private pump(queue: HookQueue): void {
    while (!this.stopped && queue.running < this.opts.concurrency && queue.ready.length > 0) {
      const delivery = queue.ready.shift() as Delivery;
      pending.dec();
      queue.running++;
      const run = this.send(delivery, queue).finally(() => {
        this.inFlight.delete(run);
        queue.running--;
        this.pump(queue);
        this.forgetIfIdle(delivery.webhook.id, queue);
      });
      this.inFlight.add(run);
    }
  }

  /** An empty queue is forgotten (webhooks come and go); its overflow burst ends with it. */
  private forgetIfIdle(id: string, queue: HookQueue): void {
    if (queue.running === 0 && queue.ready.length === 0 && queue.retrying.size === 0)
      if (this.queues.get(id) === queue) this.queues.delete(id);
  }

  private async send(delivery: Delivery, queue: HookQueue): Promise<void> {
    const { webhook, event, attempt } = delivery;
    const url = new URL(webhook.url);
    const log = { webhook: webhook.id, host: url.host, event: event.type, delivery: delivery.id, attempt };
    if (attempt > 1 && (await this.removed(webhook))) {
      deliveries.inc({ event: event.type, outcome: 'removed' });
      this.opts.logger?.info(log, 'webhook removed: its delivery ends');
      return delivery.ended(true);
    }
    const failure = await this.attempt(delivery, url, log);
    if (failure === undefined) return delivery.ended(true);
    if (attempt >= this.opts.maxAttempts || this.stopped) {
      deliveries.inc({ event: event.type, outcome: this.stopped ? 'dropped' : 'failed' });
      this.opts.logger?.warn({ ...log, failure }, 'webhook not delivered; giving up');
      return delivery.ended(!this.stopped);
    }
    deliveries.inc({ event: event.type, outcome: 'retried' });
    const wait = Math.min(this.opts.retryMaxMs, this.opts.retryBaseMs * 2 ** (attempt - 1));
    this.opts.logger?.info({ ...log, failure, retryInMs: wait }, 'webhook failed; retrying');
    const next = { ...delivery, attempt: attempt + 1 };
    pending.inc();
    queue.retrying.set(
      next,
      setTimeout(() => {
        queue.retrying.delete(next);
        queue.ready.push(next);
        this.pump(queue);
      }, wait),
    );
  }

  /** Is the webhook gone since its delivery was queued? (Unreadable webhooks: not known gone, so tried.) */
  private async removed(webhook: Webhook): Promise<boolean> {
    try {
      return !(await this.opts.webhooks.list()).some((h) => h.id === webhook.id);
    } catch {
      return false;
    }
  }

  /**
   * One attempt: undefined when it ended the delivery (delivered, or refused for good), else why it
   * failed (worth a retry).
   */
  private async attempt(
    delivery: Delivery,
    url: URL,
    log: Record<string, unknown>,
  ): Promise<string | undefined> {
    const { webhook, event, body, id } = delivery;
    try {
      const target = await resolveTarget(url, webhook.asn !== null, this.rules);
      const status = await post(
        url,
        target,
        {
          'content-type': 'application/json',
          'user-agent': 'peerops-webhook',
          'x-peerops-event': event.type,
          'x-peerops-event-id': event.id,
          'x-peerops-delivery': id,
          'x-peerops-timestamp': String(Math.floor(Date.now() / 1000)),
          [SIGNATURE_HEADER]: signature(webhook.secret, body),
        },
        body,
        this.opts.timeoutMs,
      );
      if (status >= 200 && status < 300) {
        deliveries.inc({ event: event.type, outcome: 'delivered' });
        this.opts.logger?.debug({ ...log, status }, 'webhook delivered');
        return undefined;
      }
      if (!retriable(status)) {
        deliveries.inc({ event: event.type, outcome: 'failed' });
        this.opts.logger?.warn({ ...log, status }, 'webhook refused by its receiver; not retried');
        return undefined;
      }
      return `HTTP ${status}`;
    } catch (err) {
      if (err instanceof RefusedTarget) {
        deliveries.inc({ event: event.type, outcome: 'refused' });
        this.opts.logger?.warn(
          { ...log, why: err.message },
          'webhook refused: a peer hook may not reach this address',
        );
        return undefined;
      }
      return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    }
  }

  /** Drops the queued deliveries and waiting retries (counted as dropped); waits for the requests under way. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const queue of this.queues.values()) {
      for (const [delivery, timer] of queue.retrying) {
        clearTimeout(timer);
        this.dropped(delivery);
      }
      queue.retrying.clear();
      for (const delivery of queue.ready.splice(0)) this.dropped(delivery);
    }
    this.queues.clear();
    await Promise.all(this.inFlight);
  }

  private dropped(delivery: Delivery): void {
    pending.dec();
    deliveries.inc({ event: delivery.event.type, outcome: 'dropped' });
    delivery.ended(false);
  }
}
