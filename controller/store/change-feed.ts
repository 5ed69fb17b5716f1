/**
 * Revisions and waiters by topic, shared by every back end. A topic is one answer clients fetch (a
 * router's sessions for its agent, an ASN's sessions for its user) or a part of many (the routers, the
 * policies); a change publishes to the topics whose answers it changes, and wakes only the waiters of those
 * (docs/api.md, long polls). Listeners of `subscribe` (the reconciler, notifications) get every change.
 *
 * Revisions come from one counter: a topic's revision is the counter's value at its last change, so the
 * largest of several topics' revisions grows whenever any of them changes (an answer made of several).
 * Revisions are per process: ETags must not be built on them across replicas.
 */
import { EventEmitter } from 'node:events';
import type { StoreEvent } from './store.ts';

export type Topic = string;

/** The topics; each name says which answer it is. */
export const topics = {
  /** A router's sessions as its agent fetches them: `GET /agent/:router/sessions` and its long poll. */
  routerSessions: (router: string): Topic => `router-sessions ${router}`,
  /** An ASN's sessions as its user lists them, with their live fields (status, BGP state, metrics). */
  asnSessions: (asn: number): Topic => `asn-sessions ${asn}`,
  /** Every session, live fields included (the admin's lists). */
  allSessions: 'sessions' as Topic,
  /**
   * The routers and their specs (names and endpoints in users' answers); of their statuses only Ready,
   * when it changes (whether the agent reports, in users' session records).
   */
  routers: 'routers' as Topic,
  /** The routing policies. */
  policies: 'policies' as Topic,
  /** The outbox of notification events (core/outbox.ts): the leader's notifier waits on it. */
  outbox: 'outbox' as Topic,
};

export class ChangeFeed {
  private counter = 0;
  private readonly revisions = new Map<Topic, number>();
  private readonly waiters = new Map<Topic, Set<() => void>>();
  private readonly events = new EventEmitter();

  constructor() {
    this.events.setMaxListeners(0);
  }

  revision(topic: Topic): number {
    return this.revisions.get(topic) ?? 0;
  }

  /** Record a change to `changed` (wakes their waiters), then tell every subscriber of `event`. */
  publish(event: StoreEvent | undefined, changed: Iterable<Topic>): void {
    const next = ++this.counter;
    for (const topic of changed) {
      this.revisions.set(topic, next);
      const waiting = this.waiters.get(topic);
      if (!waiting) continue;
      this.waiters.delete(topic);
      for (const wake of waiting) wake();
    }
    if (event) this.events.emit('change', event);
  }

  subscribe(listener: (event: StoreEvent) => void): () => void {
    this.events.on('change', listener);
    return () => this.events.off('change', listener);
  }

  /** Resolves with the topic's revision once it exceeds `since`, or with the current one on timeout or abort. */
  wait(topic: Topic, since: number, timeoutMs: number, signal?: AbortSignal): Promise<number> {
    const current = this.revision(topic);
    if (current > since || signal?.aborted) return Promise.resolve(current);
    return new Promise((resolve) => {
      const finish = () => {
        clearTimeout(timer);
        const waiting = this.waiters.get(topic);
        if (waiting?.delete(finish) && waiting.size === 0) this.waiters.delete(topic);
        signal?.removeEventListener('abort', finish);
        resolve(this.revision(topic));
      };
      let waiting = this.waiters.get(topic);
      if (!waiting) this.waiters.set(topic, (waiting = new Set()));
      waiting.add(finish);
      const timer = setTimeout(finish, timeoutMs);
      signal?.addEventListener('abort', finish, { once: true });
    });
  }
}
