/**
 * Per-router revisions and waiters, shared by every back end. A revision grows when anything a router's
 * agent fetches changes; long polls wait on it. Revisions are per process: ETags must not be built on them
 * across replicas.
 */
import { EventEmitter } from 'node:events';
import type { StoreEvent } from './store.ts';

export class ChangeFeed {
  private global = 0;
  private readonly perRouter = new Map<string, number>();
  private readonly events = new EventEmitter();

  constructor() {
    this.events.setMaxListeners(0);
  }

  revision(router: string): number {
    return Math.max(this.global, this.perRouter.get(router) ?? 0);
  }

  /** Record a change; event.router undefined concerns every router. */
  publish(event: StoreEvent): void {
    const next = Math.max(this.global, ...this.perRouter.values()) + 1;
    if (event.router === undefined) this.global = next;
    else this.perRouter.set(event.router, next);
    this.events.emit('change', event);
  }

  subscribe(listener: (event: StoreEvent) => void): () => void {
    this.events.on('change', listener);
    return () => this.events.off('change', listener);
  }

  wait(router: string, since: number, timeoutMs: number, signal?: AbortSignal): Promise<number> {
    const current = this.revision(router);
    if (current > since || signal?.aborted) return Promise.resolve(current);
    return new Promise((resolve) => {
      const finish = () => {
        clearTimeout(timer);
        unsubscribe();
        signal?.removeEventListener('abort', finish);
        resolve(this.revision(router));
      };
      const unsubscribe = this.subscribe((event) => {
        if (event.router === undefined || event.router === router) finish();
      });
      const timer = setTimeout(finish, timeoutMs);
      signal?.addEventListener('abort', finish, { once: true });
    });
  }
}
