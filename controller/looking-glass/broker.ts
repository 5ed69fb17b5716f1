/**
 * Looking-glass queries waiting for their router's agent (docs/api.md, Looking glass): a caller's
 * request waits in a broker until the agent's long poll (GET /agent/:router/lg) takes it and the agent
 * posts the answer back, so no router opens an inbound port. The broker here keeps them in memory, for
 * the one controller of the git store; several replicas share theirs through the Kubernetes store
 * (kubernetes-broker.ts). A query lives as long as its caller waits, and a controller that restarts
 * forgets the ones under way (their callers get an error and ask again).
 */
import { randomBytes } from 'node:crypto';
import type { ProblemError } from '../../common/errors.ts';
import {
  LG_QUERIES_PER_ROUTER,
  LG_TIME_LIMIT_MS,
  type LgAnswer,
  type LgQuery,
} from '../../common/looking-glass.ts';
import { problem } from '../../common/messages.ts';

/** Queries of one router waiting or running at once (common/looking-glass.ts). */
export const LG_PENDING_PER_ROUTER = LG_QUERIES_PER_ROUTER;
/**
 * How long a caller waits for the agent: the agent's own bound, plus the time to take the query (its
 * long poll is there at once when the agent is connected) and to post the answer.
 */
export const LG_ANSWER_WAIT_MS = LG_TIME_LIMIT_MS + 5_000;

/** Where the looking-glass routes hand queries to agents and take their answers. */
export interface LookingGlassBroker {
  /** Hands `query` to the router's agent; resolves with its answer, or rejects when none comes in time. */
  ask(router: string, query: Omit<LgQuery, 'id'>, waitMs?: number): Promise<LgAnswer>;
  /**
   * The router's queries not yet taken, marked taken; when there are none, waits up to `waitMs` for one
   * (or until `signal` aborts) and answers what came.
   */
  take(router: string, waitMs: number, signal: AbortSignal): Promise<LgQuery[]>;
  /** The agent's answer to query `id`; false when no caller waits for it any more (or never did). */
  answer(router: string, id: string, answer: LgAnswer): Promise<boolean>;
  /** Refuses every query under way: the controller is stopping. */
  close(): Promise<void>;
}

/** The refusal of a query past the per-router limit. */
export function tooManyQueries(router: string): ProblemError {
  return problem('lg.busy', { router, max: LG_PENDING_PER_ROUTER });
}

/** The refusal of a query no agent answered within `waitMs`. */
export function notAnswered(router: string, waitMs: number, taken: boolean): ProblemError {
  return problem(taken ? 'lg.notAnswered' : 'lg.notTaken', { router, seconds: waitMs / 1000 });
}

/** The refusal of the queries under way when the controller stops. */
export function stopped(router: string): ProblemError {
  return problem('lg.stopped', { router });
}

interface Pending {
  query: LgQuery;
  taken: boolean;
  resolve(answer: LgAnswer): void;
  reject(err: Error): void;
}

interface RouterQueries {
  pending: Map<string, Pending>;
  /** Agent long polls waiting for a query. */
  waiters: Set<() => void>;
}

export class MemoryLookingGlassBroker implements LookingGlassBroker {
  private readonly routers = new Map<string, RouterQueries>();

  private of(router: string): RouterQueries {
    let r = this.routers.get(router);
    if (!r) this.routers.set(router, (r = { pending: new Map(), waiters: new Set() }));
    return r;
  }

  ask(router: string, query: Omit<LgQuery, 'id'>, waitMs = LG_ANSWER_WAIT_MS): Promise<LgAnswer> {
    const r = this.of(router);
    if (r.pending.size >= LG_PENDING_PER_ROUTER) return Promise.reject(tooManyQueries(router));
    const id = randomBytes(12).toString('base64url');
    return new Promise<LgAnswer>((resolve, reject) => {
      const timer = setTimeout(() => {
        const p = r.pending.get(id);
        r.pending.delete(id);
        reject(notAnswered(router, waitMs, p?.taken ?? false));
      }, waitMs);
      r.pending.set(id, {
        query: { id, ...query },
        taken: false,
        resolve: (answer) => {
          clearTimeout(timer);
          resolve(answer);
        },
        reject: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      });
      for (const wake of r.waiters) wake();
    });
  }

  async take(router: string, waitMs: number, signal: AbortSignal): Promise<LgQuery[]> {
    const r = this.of(router);
    const untaken = () => [...r.pending.values()].filter((p) => !p.taken);
    if (untaken().length === 0 && waitMs > 0 && !signal.aborted)
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          r.waiters.delete(done);
          signal.removeEventListener('abort', done);
          resolve();
        };
        const timer = setTimeout(done, waitMs);
        r.waiters.add(done);
        signal.addEventListener('abort', done, { once: true });
      });
    return untaken().map((p) => {
      p.taken = true;
      return p.query;
    });
  }

  answer(router: string, id: string, answer: LgAnswer): Promise<boolean> {
    const r = this.routers.get(router);
    const p = r?.pending.get(id);
    if (!r || !p) return Promise.resolve(false);
    r.pending.delete(id);
    p.resolve(answer);
    return Promise.resolve(true);
  }

  close(): Promise<void> {
    for (const [router, r] of this.routers) {
      for (const p of r.pending.values()) p.reject(stopped(router));
      r.pending.clear();
      for (const wake of r.waiters) wake();
    }
    return Promise.resolve();
  }
}
