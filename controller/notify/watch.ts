/**
 * Reads events from the store's state while this replica leads (it starts and stops with the reconciler,
 * so with several replicas exactly one sends them): on every store change it compares each session with
 * how it last saw it and publishes what changed (events.ts, sessionEvents). It begins from the state it
 * finds when it starts, so a new leader does not send again what the old one sent; a change made while no
 * replica led (a hand-over, at most a lease duration) and undone before the next leader starts is not seen.
 */
import type { Store, Session } from '../store/store.ts';
import { sessionEvents, type NotificationEvent } from './events.ts';

export interface EventWatcherOptions {
  store: Store;
  publish: (event: NotificationEvent) => Promise<void> | void;
}

export class SessionEventWatcher {
  private readonly opts: EventWatcherOptions;
  private seen = new Map<string, Session>();
  private unsubscribe: (() => void) | undefined;
  private queued = false;
  /** Publishing one event after the other keeps a hook's first attempts in the order of the changes. */
  private publishing: Promise<void> = Promise.resolve();

  constructor(opts: EventWatcherOptions) {
    this.opts = opts;
  }

  start(): void {
    if (this.unsubscribe) return;
    this.seen = new Map(this.opts.store.listSessions().map((s) => [s.spec.uuid, s]));
    this.unsubscribe = this.opts.store.onChange((event) => {
      if (event.kind !== 'PeeringSession' || this.queued) return;
      // several changes of one write arrive together: compare once after them
      this.queued = true;
      queueMicrotask(() => {
        this.queued = false;
        if (this.unsubscribe) this.compare();
      });
    });
  }

  async stop(): Promise<void> {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
  }

  /** Publishes the difference between the sessions as last seen and as they are now. */
  compare(now = new Date().toISOString()): void {
    const { store } = this.opts;
    const current = new Map(store.listSessions().map((s) => [s.spec.uuid, s]));
    const routerExists = (name: string) => store.getRouter(name) !== undefined;
    const events: NotificationEvent[] = [];
    for (const [uuid, session] of current) {
      const before = this.seen.get(uuid);
      if (before?.status === session.status && before.spec === session.spec) continue;
      events.push(...sessionEvents(before, session, now, routerExists));
    }
    for (const [uuid, before] of this.seen)
      if (!current.has(uuid)) events.push(...sessionEvents(before, undefined, now, routerExists));
    this.seen = current;
    for (const event of events) this.publishing = this.publishing.then(() => this.opts.publish(event));
  }
}
