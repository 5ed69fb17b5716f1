/**
 * Webhook delivery (docs/notifications.md): an event goes to every hook that may receive it, as one POST
 * of JSON signed with the hook's secret (`X-Peerops-Signature: sha256=<hex HMAC-SHA256 of the body>`),
 * retried with exponential backoff while the receiver fails (network error, timeout, 408, 429, 5xx). The
 * queue is in memory: deliveries still waiting when the controller stops are dropped (and counted).
 */
import { createHmac, randomUUID } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import ipaddr from 'ipaddr.js';
import type { Logger } from 'pino';
import { counter, gauge } from '../metrics.ts';
import { visibleTo, type NotificationEvent } from './events.ts';
import type { Webhook, WebhookRepository } from './hooks.ts';

export const SIGNATURE_HEADER = 'x-peerops-signature';

/** `sha256=<hex>`: the value of X-Peerops-Signature for a body. */
export function signature(secret: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

const deliveries = counter({
  name: 'peerops_webhook_deliveries_total',
  help: 'Webhook delivery attempts by event and outcome (delivered, retried, failed, refused, dropped)',
  labelNames: ['event', 'outcome'] as const,
});
const pending = gauge({
  name: 'peerops_webhook_deliveries_pending',
  help: 'Webhook deliveries waiting for their next attempt',
});

export interface DispatcherOptions {
  hooks: WebhookRepository;
  logger?: Pick<Logger, 'warn' | 'info' | 'error' | 'debug'>;
  /** Attempts per delivery, the first included (default 8). */
  maxAttempts?: number;
  /** Wait before the second attempt; it doubles each time (default 2 s). */
  retryBaseMs?: number;
  /** The longest wait between attempts (default 5 min). */
  retryMaxMs?: number;
  /** Per attempt (default 10 s). */
  timeoutMs?: number;
  /**
   * Peers' hooks may reach loopback, private and link-local addresses (default false: such a hook is
   * refused, so a peer cannot make the controller call into its own network). Admins' hooks always may.
   */
  allowPrivateTargets?: boolean;
}

/** Is `host` (a name or an address) one a peer's hook must not reach? */
async function privateTarget(host: string): Promise<string | undefined> {
  const bare = host.replace(/^\[|\]$/g, '');
  const addresses = ipaddr.isValid(bare)
    ? [bare]
    : (await lookup(bare, { all: true, verbatim: true })).map((a) => a.address);
  for (const address of addresses) {
    const parsed = ipaddr.process(address);
    if (parsed.range() !== 'unicast') return `${host} is ${address} (${parsed.range()})`;
  }
  return undefined;
}

/** Whether a failed attempt is worth another (the receiver may recover). */
function retriable(status: number): boolean {
  return status === 408 || status === 429 || status >= 500;
}

export class Dispatcher {
  private readonly opts: Required<Omit<DispatcherOptions, 'logger'>> & Pick<DispatcherOptions, 'logger'>;
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly inFlight = new Set<Promise<void>>();
  private stopped = false;

  constructor(opts: DispatcherOptions) {
    this.opts = {
      maxAttempts: 8,
      retryBaseMs: 2000,
      retryMaxMs: 300_000,
      timeoutMs: 10_000,
      allowPrivateTargets: false,
      ...opts,
    };
  }

  /** Sends the event to every hook that may receive it; resolves once each first attempt is made. */
  async publish(event: NotificationEvent): Promise<void> {
    if (this.stopped) return;
    let hooks: Webhook[];
    try {
      hooks = await this.opts.hooks.list();
    } catch (err) {
      this.opts.logger?.error({ err, event: event.type }, 'webhooks not read: event not sent');
      return;
    }
    const body = JSON.stringify(event);
    await Promise.all(
      hooks
        .filter((h) => visibleTo(h, event) && (h.events.length === 0 || h.events.includes(event.type)))
        .map((hook) => this.attempt(hook, event, body, randomUUID(), 1)),
    );
  }

  private attempt(
    hook: Webhook,
    event: NotificationEvent,
    body: string,
    delivery: string,
    n: number,
  ): Promise<void> {
    const run = this.send(hook, event, body, delivery, n).finally(() => this.inFlight.delete(run));
    this.inFlight.add(run);
    return run;
  }

  private async send(
    hook: Webhook,
    event: NotificationEvent,
    body: string,
    delivery: string,
    n: number,
  ): Promise<void> {
    const log = { webhook: hook.id, host: new URL(hook.url).host, event: event.type, delivery, attempt: n };
    if (hook.asn !== null && !this.opts.allowPrivateTargets) {
      const why = await privateTarget(new URL(hook.url).hostname).catch((err: unknown) => String(err));
      if (why) {
        deliveries.inc({ event: event.type, outcome: 'refused' });
        this.opts.logger?.warn({ ...log, why }, 'webhook refused: a peer hook may not reach this address');
        return;
      }
    }
    let failure: string;
    try {
      const res = await fetch(hook.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'peerops-webhook',
          'x-peerops-event': event.type,
          'x-peerops-delivery': delivery,
          'x-peerops-timestamp': String(Math.floor(Date.now() / 1000)),
          [SIGNATURE_HEADER]: signature(hook.secret, body),
        },
        body,
        redirect: 'manual',
        signal: AbortSignal.timeout(this.opts.timeoutMs),
      });
      await res.body?.cancel();
      if (res.ok) {
        deliveries.inc({ event: event.type, outcome: 'delivered' });
        this.opts.logger?.debug({ ...log, status: res.status }, 'webhook delivered');
        return;
      }
      if (!retriable(res.status)) {
        deliveries.inc({ event: event.type, outcome: 'failed' });
        this.opts.logger?.warn(
          { ...log, status: res.status },
          'webhook refused by its receiver; not retried',
        );
        return;
      }
      failure = `HTTP ${res.status}`;
    } catch (err) {
      failure = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    }
    if (n >= this.opts.maxAttempts || this.stopped) {
      deliveries.inc({ event: event.type, outcome: this.stopped ? 'dropped' : 'failed' });
      this.opts.logger?.warn({ ...log, failure }, 'webhook not delivered; giving up');
      return;
    }
    deliveries.inc({ event: event.type, outcome: 'retried' });
    const wait = Math.min(this.opts.retryMaxMs, this.opts.retryBaseMs * 2 ** (n - 1));
    this.opts.logger?.info({ ...log, failure, retryInMs: wait }, 'webhook failed; retrying');
    pending.inc();
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      pending.dec();
      void this.attempt(hook, event, body, delivery, n + 1);
    }, wait);
    this.timers.add(timer);
  }

  /** Drops the waiting retries (counted as dropped) and waits for the attempts under way. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers) {
      clearTimeout(timer);
      pending.dec();
      deliveries.inc({ event: 'any', outcome: 'dropped' });
    }
    this.timers.clear();
    await Promise.all(this.inFlight);
  }
}
