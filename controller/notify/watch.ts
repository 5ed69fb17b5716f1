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
  /** Each session as last seen, by name (the name a store event carries). */
  private seen = new Map<string, Session>();
  private unsubscribe: (() => void) | undefined;
  /** Sessions changed since the last comparison, by name, with their router (undefined: unknown). */
  private changed = new Map<string, string | undefined>();
  /** Publishing one event after the other keeps a hook's first attempts in the order of the changes. */
  private publishing: Promise<void> = Promise.resolve();

  constructor(opts: EventWatcherOptions) {
    this.opts = opts;
  }

  start(): void {
    if (this.unsubscribe) return;
    this.seen = new Map(this.opts.store.listSessions().map((s) => [s.name, s]));
    this.unsubscribe = this.opts.store.onChange((event) => {
      if (event.kind !== 'PeeringSession') return;
      // several changes of one write arrive together: compare once after them
      if (this.changed.size === 0)
        queueMicrotask(() => {
          if (this.unsubscribe) this.compare();
        });
      this.changed.set(event.name, event.router);
    });
  }

  async stop(): Promise<void> {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    this.changed.clear();
  }

  /**
   * Publishes how the sessions changed since the last comparison differ from how they were last seen.
   * Only those are looked at (in their router's list), so a change costs the same with 100 sessions or
   * 100,000.
   */
  compare(now = new Date().toISOString()): void {
    const { store } = this.opts;
    const changed = this.changed;
    this.changed = new Map();
    const events: NotificationEvent[] = [];
    for (const [name, router] of changed) {
      const candidates = router === undefined ? store.listSessions() : store.listSessions({ router });
      const current = candidates.find((s) => s.name === name);
      const before = this.seen.get(name);
      if (before === current) continue;
      if (before && current && before.status === current.status && before.spec === current.spec) continue;
      if (before && current && before.spec.uuid !== current.spec.uuid) {
        // another session under the same name: the old one went, a new one came
        events.push(...sessionEvents(before, undefined, now));
        events.push(...sessionEvents(undefined, current, now));
      } else events.push(...sessionEvents(before, current, now));
      if (current) this.seen.set(name, current);
      else this.seen.delete(name);
    }
    for (const event of events) this.publishing = this.publishing.then(() => this.opts.publish(event));
  }
}
